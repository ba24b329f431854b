/* The public functions of liblibname: argument checks around the generated kernels (CPU), or the
 * kernels' PTX loaded and launched through the CUDA driver (CUDA). */
#include <stddef.h>
#include <stdint.h>

#include "libname.h"

/* The library's tables: KERNELS_ON_CUDA (0 or 1); for CUDA, NUM_KERNELS, MAX_KERNEL_ARGS and each
 * kernel's PTX module (kModules), entry symbol (kEntries) and launch dimensions (kGrid, kBlock). */
/* {{TABLES}} */

const char* libname_error_string(int code) {
  switch (code) {
    case LIBNAME_OK: return "ok";
    case LIBNAME_ERROR_NULL_ARGUMENT: return "a tensor pointer is NULL";
    case LIBNAME_ERROR_OUT_OF_MEMORY: return "out of memory for the kernel's scratch buffers";
    case LIBNAME_ERROR_INVALID_ARGUMENT: return "invalid argument";
#if KERNELS_ON_CUDA
    case LIBNAME_ERROR_NO_CUDA: return "no CUDA driver (libcuda.so.1) or no CUDA device";
    case LIBNAME_ERROR_CUDA: return "a CUDA driver call failed";
#endif
  }
  return "unknown error code";
}

#if KERNELS_ON_CUDA
/* The driver is loaded with dlopen when a kernel is first called (a program that links the library
 * needs no CUDA toolkit and starts without a GPU); the PTX modules are loaded then, once. */
#include <dlfcn.h>
#include <pthread.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;
typedef unsigned long long CUdeviceptr;

static struct {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
} cu;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static int load_state = -1; /* -1: not tried; otherwise LIBNAME_OK or the error it ended with */
static CUcontext context;
static CUfunction functions[NUM_KERNELS];

static int resolve(void* lib, const char* symbol, void* slot) {
  void* f = dlsym(lib, symbol);
  *(void**)slot = f;
  return f != NULL;
}

static int load_locked(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return LIBNAME_ERROR_NO_CUDA;
  if (!resolve(lib, "cuInit", &cu.cuInit) || !resolve(lib, "cuCtxGetCurrent", &cu.cuCtxGetCurrent) ||
      !resolve(lib, "cuCtxSetCurrent", &cu.cuCtxSetCurrent) || !resolve(lib, "cuDeviceGet", &cu.cuDeviceGet) ||
      !resolve(lib, "cuDevicePrimaryCtxRetain", &cu.cuDevicePrimaryCtxRetain) ||
      !resolve(lib, "cuModuleLoadData", &cu.cuModuleLoadData) ||
      !resolve(lib, "cuModuleGetFunction", &cu.cuModuleGetFunction) || !resolve(lib, "cuLaunchKernel", &cu.cuLaunchKernel))
    return LIBNAME_ERROR_NO_CUDA;
  if (cu.cuInit(0) != 0) return LIBNAME_ERROR_NO_CUDA;
  if (cu.cuCtxGetCurrent(&context) != 0 || context == NULL) {
    CUdevice device;
    if (cu.cuDeviceGet(&device, 0) != 0 || cu.cuDevicePrimaryCtxRetain(&context, device) != 0) return LIBNAME_ERROR_NO_CUDA;
    if (cu.cuCtxSetCurrent(context) != 0) return LIBNAME_ERROR_CUDA;
  }
  for (int i = 0; i < NUM_KERNELS; ++i) {
    CUmodule module;
    if (cu.cuModuleLoadData(&module, kModules[i]) != 0 || cu.cuModuleGetFunction(&functions[i], module, kEntries[i]) != 0)
      return LIBNAME_ERROR_CUDA;
  }
  return LIBNAME_OK;
}

/* Loads everything once; a thread with no current context gets the library's. */
static int prepare(void) {
  pthread_mutex_lock(&load_mu);
  if (load_state < 0) load_state = load_locked();
  int state = load_state;
  pthread_mutex_unlock(&load_mu);
  if (state != LIBNAME_OK) return state;
  CUcontext current = NULL;
  if (cu.cuCtxGetCurrent(&current) != 0) return LIBNAME_ERROR_CUDA;
  if (current == NULL && cu.cuCtxSetCurrent(context) != 0) return LIBNAME_ERROR_CUDA;
  return LIBNAME_OK;
}

/* Queues kernel `k` on `stream` with its tensors `values`. */
static int launch(int k, CUdeviceptr* values, int count, void* stream) {
  int rc = prepare();
  if (rc != LIBNAME_OK) return rc;
  void* params[MAX_KERNEL_ARGS];
  for (int a = 0; a < count; ++a) params[a] = &values[a];
  return cu.cuLaunchKernel(functions[k], kGrid[k][0], kGrid[k][1], kGrid[k][2], kBlock[k][0], kBlock[k][1], kBlock[k][2], 0,
                           (CUstream)stream, params, NULL) == 0
             ? LIBNAME_OK
             : LIBNAME_ERROR_CUDA;
}

#else
/* The kernels run on the kernel runtime's threads, inside the library with its symbols private. */
#include "compiler/runtime/kernel_runtime.h"

int libname_set_num_threads(int num_threads) {
  if (num_threads < 0) return LIBNAME_ERROR_INVALID_ARGUMENT;
  tunefarm_runtime_set_num_threads(num_threads);
  return LIBNAME_OK;
}

int libname_num_threads(void) { return tunefarm_runtime_num_threads(); }
#endif

/* One public function per kernel: its tensors checked, then the kernel called (CPU) or launched
 * (CUDA). */
/* {{FUNCTIONS}} */
