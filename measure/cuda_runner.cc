#include "measure/cuda_runner.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include <fmt/format.h>

namespace tunefarm {
namespace {

// The few driver-API types used here, declared locally so that no CUDA header is needed to build.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUevent = struct CUevent_st*;
using CUstream = struct CUstream_st*;
constexpr int kAttrL2CacheSize = 38;                 // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
constexpr int kFuncAttrMaxDynamicSharedBytes = 8;    // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char**);

  CUdevice device = 0;
  CUcontext context = nullptr;
  std::string name;
  int l2_bytes = 0;
};

std::string describe(const Driver& d, CUresult rc) {
  const char* name = nullptr;
  if (d.cuGetErrorName && d.cuGetErrorName(rc, &name) == 0 && name) return fmt::format("{} ({})", name, rc);
  return fmt::format("CUDA error {}", rc);
}

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  return fn != nullptr;
}

// Opens the driver once per process; the outcome (a driver or the reason there is none) is kept.
StatusOr<Driver*> open_driver() {
  static std::once_flag once;
  static Driver driver;
  static Status failure;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      failure = unavailable("no CUDA device: the driver library libcuda.so.1 is not installed");
      return;
    }
    Driver& d = driver;
    bool ok = resolve(lib, "cuInit", d.cuInit) && resolve(lib, "cuDeviceGetCount", d.cuDeviceGetCount) &&
              resolve(lib, "cuDeviceGet", d.cuDeviceGet) && resolve(lib, "cuDeviceGetName", d.cuDeviceGetName) &&
              resolve(lib, "cuDeviceGetAttribute", d.cuDeviceGetAttribute) &&
              resolve(lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain) &&
              resolve(lib, "cuCtxSetCurrent", d.cuCtxSetCurrent) && resolve(lib, "cuCtxSynchronize", d.cuCtxSynchronize) &&
              resolve(lib, "cuModuleLoadData", d.cuModuleLoadData) && resolve(lib, "cuModuleUnload", d.cuModuleUnload) &&
              resolve(lib, "cuModuleGetFunction", d.cuModuleGetFunction) &&
              resolve(lib, "cuFuncSetAttribute", d.cuFuncSetAttribute) && resolve(lib, "cuMemAlloc_v2", d.cuMemAlloc) &&
              resolve(lib, "cuMemFree_v2", d.cuMemFree) && resolve(lib, "cuMemcpyHtoD_v2", d.cuMemcpyHtoD) &&
              resolve(lib, "cuMemcpyDtoH_v2", d.cuMemcpyDtoH) &&
              resolve(lib, "cuMemsetD8Async", d.cuMemsetD8Async) &&
              resolve(lib, "cuLaunchKernel", d.cuLaunchKernel) && resolve(lib, "cuEventCreate", d.cuEventCreate) &&
              resolve(lib, "cuEventRecord", d.cuEventRecord) && resolve(lib, "cuEventSynchronize", d.cuEventSynchronize) &&
              resolve(lib, "cuEventElapsedTime", d.cuEventElapsedTime) &&
              resolve(lib, "cuEventDestroy_v2", d.cuEventDestroy) && resolve(lib, "cuGetErrorName", d.cuGetErrorName);
    if (!ok) {
      failure = unavailable("no CUDA device: libcuda.so.1 lacks driver-API functions this agent needs (driver too old?)");
      return;
    }
    if (CUresult rc = d.cuInit(0); rc != 0) {
      failure = unavailable(fmt::format("no CUDA device: cuInit failed with {}", describe(d, rc)));
      return;
    }
    int count = 0;
    if (CUresult rc = d.cuDeviceGetCount(&count); rc != 0 || count == 0) {
      failure = unavailable("no CUDA device: the driver reports no device");
      return;
    }
    char name[256] = {};
    if (d.cuDeviceGet(&d.device, 0) != 0 || d.cuDeviceGetName(name, sizeof name, d.device) != 0 ||
        d.cuDevicePrimaryCtxRetain(&d.context, d.device) != 0) {
      failure = unavailable("no CUDA device: device 0 cannot be opened");
      return;
    }
    d.name = name;
    d.cuDeviceGetAttribute(&d.l2_bytes, kAttrL2CacheSize, d.device);
  });
  if (!failure.ok()) return failure;
  driver.cuCtxSetCurrent(driver.context);
  return &driver;
}

// The L2 clearing between timed runs, as a kernel. Cleared with cuMemsetD8Async, every kernel
// timed on an H200 carried some 15-27 us more than the same kernel timed behind a clearing kernel
// (PyTorch's way): 32 us for a 5 us depthwise convolution. The likely cause: the memset runs on a
// copy engine, and the kernel behind it waits for that engine inside the run's events. One word
// per thread per step, in a grid-stride loop.
constexpr const char kClearL2Ptx[] = R"(.version 7.8
.target sm_75
.address_size 64

.visible .entry tunefarm_clear_l2(.param .u64 buffer, .param .u64 words, .param .u32 value)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [buffer];
	ld.param.u64 %rd2, [words];
	ld.param.u32 %r1, [value];
	cvta.to.global.u64 %rd3, %rd1;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mul.wide.u32 %rd4, %r2, %r3;
	cvt.u64.u32 %rd5, %r4;
	add.u64 %rd4, %rd4, %rd5;
	mov.u32 %r5, %nctaid.x;
	mul.wide.u32 %rd6, %r5, %r3;
$L_loop:
	setp.ge.u64 %p1, %rd4, %rd2;
	@%p1 bra $L_done;
	shl.b64 %rd7, %rd4, 2;
	add.u64 %rd7, %rd3, %rd7;
	st.global.u32 [%rd7], %r1;
	add.u64 %rd4, %rd4, %rd6;
	bra.uni $L_loop;
$L_done:
	ret;
}
)";

class CudaKernel : public BoundKernel {
 public:
  CudaKernel(Driver& d, const v1::Artifact& artifact) : d_(d), launch_(artifact.launch()) {}

  ~CudaKernel() override {
    for (CUdeviceptr p : buffers_) d_.cuMemFree(p);
    if (flush_buffer_) d_.cuMemFree(flush_buffer_);
    for (CUevent e : events_) d_.cuEventDestroy(e);
    if (module_) d_.cuModuleUnload(module_);
    if (clear_module_) d_.cuModuleUnload(clear_module_);
  }

  Status load(const v1::Artifact& artifact, std::vector<HostTensor>& tensors) {
    // The driver wants NUL-terminated PTX text.
    std::string ptx = artifact.data();
    if (CUresult rc = d_.cuModuleLoadData(&module_, ptx.c_str()); rc != 0)
      return invalid_argument(fmt::format("cannot load the PTX: {}", describe(d_, rc)));
    if (CUresult rc = d_.cuModuleGetFunction(&function_, module_, artifact.entry_symbol().c_str()); rc != 0)
      return not_found(fmt::format("the PTX has no kernel '{}': {}", artifact.entry_symbol(), describe(d_, rc)));
    if (launch_.shared_mem_bytes() > 48 * 1024)
      d_.cuFuncSetAttribute(function_, kFuncAttrMaxDynamicSharedBytes, launch_.shared_mem_bytes());
    for (auto& t : tensors) {
      CUdeviceptr p = 0;
      if (CUresult rc = d_.cuMemAlloc(&p, static_cast<size_t>(t.bytes)); rc != 0)
        return resource_exhausted(fmt::format("cannot allocate '{}' on the device: {}", t.arg.name(), describe(d_, rc)));
      buffers_.push_back(p);
      if (CUresult rc = d_.cuMemcpyHtoD(p, t.data.get(), static_cast<size_t>(t.bytes)); rc != 0)
        return internal_error(fmt::format("cannot copy '{}' to the device: {}", t.arg.name(), describe(d_, rc)));
    }
    for (auto& p : buffers_) params_.push_back(&p);
    return Status();
  }

  Status run_once() override {
    TF_RETURN_IF_ERROR(launch());
    if (CUresult rc = d_.cuCtxSynchronize(); rc != 0)
      return internal_error(fmt::format("the kernel failed: {}", describe(d_, rc)));
    return Status();
  }

  Status copy_outputs(std::vector<HostTensor>& host) override {
    for (size_t i = 0; i < host.size(); ++i) {
      if (!host[i].arg.is_output()) continue;
      if (CUresult rc = d_.cuMemcpyDtoH(host[i].data.get(), buffers_[i], static_cast<size_t>(host[i].bytes)); rc != 0)
        return internal_error(fmt::format("cannot copy '{}' back: {}", host[i].arg.name(), describe(d_, rc)));
    }
    return Status();
  }

  // Each run is timed on its own, by events around its launch, and starts with the L2 cache
  // cleared (a kernel writing twice its size between the launches, outside the events): in a model or
  // an application the kernel finds its operands in memory, not left in L2 by its previous run,
  // and a 1024x1024 GEMM's 12 MB would otherwise stay in the 50 MB L2. The launches are queued in
  // chunks and waited for once a chunk, so the host's waiting does not gap the GPU's work.
  StatusOr<double> time_runs(int number) override {
    TF_RETURN_IF_ERROR(prepare_flush());
    double seconds = 0;
    for (int done = 0; done < number;) {
      int chunk = std::min(number - done, kChunk);
      TF_RETURN_IF_ERROR(grow_events(chunk));
      for (int i = 0; i < chunk; ++i) {
        TF_RETURN_IF_ERROR(clear_l2());
        d_.cuEventRecord(events_[2 * i], nullptr);
        TF_RETURN_IF_ERROR(launch());
        d_.cuEventRecord(events_[2 * i + 1], nullptr);
      }
      if (CUresult rc = d_.cuEventSynchronize(events_[2 * chunk - 1]); rc != 0)
        return internal_error(fmt::format("the kernel failed during timing: {}", describe(d_, rc)));
      for (int i = 0; i < chunk; ++i) {
        float ms = 0;
        if (CUresult rc = d_.cuEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]); rc != 0)
          return internal_error(fmt::format("cannot read the kernel's timing events: {}", describe(d_, rc)));
        seconds += ms / 1000.0;
      }
      done += chunk;
    }
    return seconds;
  }

  // Every timed run already starts with the L2 cleared (time_runs).
  void flush_cache() override {}

 private:
  static constexpr int kChunk = 256;
  static constexpr unsigned kClearBlocks = 4096;

  Status prepare_flush() {
    if (flush_buffer_) return Status();
    flush_bytes_ = static_cast<size_t>(d_.l2_bytes > 0 ? d_.l2_bytes : 64 << 20) * 2;
    if (CUresult rc = d_.cuMemAlloc(&flush_buffer_, flush_bytes_); rc != 0)
      return resource_exhausted(fmt::format("cannot allocate the L2-clearing buffer: {}", describe(d_, rc)));
    // Where the clearing kernel does not load, the memset clears instead (timings then carry the
    // wait described at kClearL2Ptx).
    if (d_.cuModuleLoadData(&clear_module_, kClearL2Ptx) != 0 ||
        d_.cuModuleGetFunction(&clear_function_, clear_module_, "tunefarm_clear_l2") != 0)
      clear_function_ = nullptr;
    return Status();
  }

  Status clear_l2() {
    unsigned value = ++flush_value_;
    if (!clear_function_) {
      d_.cuMemsetD8Async(flush_buffer_, static_cast<unsigned char>(value), flush_bytes_, nullptr);
      return Status();
    }
    unsigned long long words = flush_bytes_ / 4;
    void* params[] = {&flush_buffer_, &words, &value};
    if (CUresult rc = d_.cuLaunchKernel(clear_function_, kClearBlocks, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr);
        rc != 0)
      return internal_error(fmt::format("cannot launch the L2-clearing kernel: {}", describe(d_, rc)));
    return Status();
  }

  Status grow_events(int pairs) {
    while (events_.size() < static_cast<size_t>(2 * pairs)) {
      CUevent e = nullptr;
      if (d_.cuEventCreate(&e, 0) != 0) return internal_error("cannot create CUDA events");
      events_.push_back(e);
    }
    return Status();
  }

  Status launch() {
    auto dim = [](int v) { return static_cast<unsigned>(v > 0 ? v : 1); };
    CUresult rc = d_.cuLaunchKernel(function_, dim(launch_.grid_x()), dim(launch_.grid_y()), dim(launch_.grid_z()),
                                    dim(launch_.block_x()), dim(launch_.block_y()), dim(launch_.block_z()),
                                    static_cast<unsigned>(launch_.shared_mem_bytes()), nullptr, params_.data(), nullptr);
    if (rc != 0) return internal_error(fmt::format("cannot launch the kernel: {}", describe(d_, rc)));
    return Status();
  }

  Driver& d_;
  v1::LaunchDims launch_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  std::vector<CUdeviceptr> buffers_;
  std::vector<void*> params_;
  std::vector<CUevent> events_;  // Start and stop of each run of a chunk, in pairs.
  CUdeviceptr flush_buffer_ = 0;
  size_t flush_bytes_ = 0;
  unsigned flush_value_ = 0;
  CUmodule clear_module_ = nullptr;
  CUfunction clear_function_ = nullptr;
};

}  // namespace

const char* l2_clearing_ptx() { return kClearL2Ptx; }

StatusOr<std::string> cuda_device_name() {
  TF_ASSIGN_OR_RETURN(Driver * d, open_driver());
  return d->name;
}

StatusOr<std::unique_ptr<BoundKernel>> bind_cuda_kernel(const v1::Artifact& artifact, std::vector<HostTensor>& tensors) {
  TF_ASSIGN_OR_RETURN(Driver * d, open_driver());
  if (artifact.entry_symbol().empty()) return invalid_argument("the artifact names no entry symbol");
  auto kernel = std::make_unique<CudaKernel>(*d, artifact);
  TF_RETURN_IF_ERROR(kernel->load(artifact, tensors));
  return std::unique_ptr<BoundKernel>(std::move(kernel));
}

}  // namespace tunefarm
