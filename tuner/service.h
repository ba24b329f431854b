// tunerd's gRPC service: one method per RPC of tuner.proto, each validating its request, calling
// the JobManager or the RecordStore, and mapping the result to a response or a status.
#pragma once

#include <atomic>

#include "db/record_store.h"
#include "tuner/job_manager.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm {

class TunerService final : public v1::Tuner::Service {
 public:
  TunerService(JobManager& jobs, RecordStore& store) : jobs_(jobs), store_(store) {}

  // Ends open WatchJob streams (for shutdown).
  void stop_watches() { stopping_.store(true); }

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request, v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status QueryBest(grpc::ServerContext*, const v1::QueryBestRequest* request,
                         v1::QueryBestResponse* response) override;
  grpc::Status ListRecords(grpc::ServerContext*, const v1::ListRecordsRequest* request,
                           v1::ListRecordsResponse* response) override;
  grpc::Status ExportRecords(grpc::ServerContext* context, const v1::ExportRecordsRequest* request,
                             grpc::ServerWriter<v1::RecordChunk>* writer) override;
  grpc::Status ImportRecords(grpc::ServerContext* context, grpc::ServerReader<v1::RecordChunk>* reader,
                             v1::ImportRecordsResponse* response) override;

 private:
  JobManager& jobs_;
  RecordStore& store_;
  std::atomic<bool> stopping_{false};
};

}  // namespace tunefarm
