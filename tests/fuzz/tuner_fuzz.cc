// libFuzzer target for tunerd's request handling, in process and without a network: bytes parsed
// as the request of one unary RPC (SubmitJob, GetJob, CancelJob, ListJobs, QueryBest, ListRecords)
// and handed to TunerService, backed by a real JobManager and history database. The task factory
// refuses every workload after JobManager::validate has passed it, so no job ever compiles or
// measures: what is fuzzed is the checking of requests, not tuning.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "tuner/service.h"

namespace tunefarm {
namespace {

class RefusingTasks : public TaskFactory {
 public:
  StatusOr<std::unique_ptr<TuningTask>> make_task(const Workload& workload, const Target&,
                                                  const std::string&) override {
    return invalid_argument("the fuzzer builds no task for " + workload.to_string());
  }
};

struct Service {
  std::string dir;
  std::unique_ptr<db::RecordStore> store;
  RefusingTasks tasks;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<TunerService> service;
};

Service* service = nullptr;

}  // namespace
}  // namespace tunefarm

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace tunefarm;
  spdlog::set_level(spdlog::level::off);
  google::protobuf::SetLogHandler(nullptr);
  service = new Service;
  service->dir = (std::filesystem::temp_directory_path() / ("tunefarm-tuner-fuzz-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(service->dir);
  auto store = db::RecordStore::open(service->dir + "/history.db");
  if (!store.ok()) std::abort();
  service->store = std::move(*store);
  service->jobs = std::make_unique<JobManager>(
      *service->store, service->tasks,
      [](const v1::Job&) -> StatusOr<std::unique_ptr<MeasureBackend>> { return unavailable("no backend"); },
      [](const std::string& key) -> StatusOr<std::vector<AgentPlatform>> {
        if (key == "local-cpu") return std::vector<AgentPlatform>{{.arch = host_arch()}};
        return invalid_argument("unknown key " + key);
      });
  if (!service->jobs->start().ok()) std::abort();
  service->service = std::make_unique<TunerService>(*service->jobs, *service->store);
  std::atexit([] { std::filesystem::remove_all(service->dir); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  if (size == 0) return 0;
  const auto* body = reinterpret_cast<const char*>(data + 1);
  int length = static_cast<int>(size - 1);
  grpc::ServerContext context;
  TunerService& s = *service->service;
  switch (data[0] % 6) {
    case 0: {
      v1::SubmitJobRequest request;
      v1::SubmitJobResponse response;
      if (request.ParseFromArray(body, length)) (void)s.SubmitJob(&context, &request, &response);
      break;
    }
    case 1: {
      v1::GetJobRequest request;
      v1::Job response;
      if (request.ParseFromArray(body, length)) (void)s.GetJob(&context, &request, &response);
      break;
    }
    case 2: {
      v1::CancelJobRequest request;
      v1::Job response;
      if (request.ParseFromArray(body, length)) (void)s.CancelJob(&context, &request, &response);
      break;
    }
    case 3: {
      v1::ListJobsRequest request;
      v1::ListJobsResponse response;
      if (request.ParseFromArray(body, length)) (void)s.ListJobs(&context, &request, &response);
      break;
    }
    case 4: {
      v1::QueryBestRequest request;
      v1::QueryBestResponse response;
      if (request.ParseFromArray(body, length)) (void)s.QueryBest(&context, &request, &response);
      break;
    }
    default: {
      v1::ListRecordsRequest request;
      v1::ListRecordsResponse response;
      if (request.ParseFromArray(body, length)) (void)s.ListRecords(&context, &request, &response);
    }
  }
  return 0;
}
