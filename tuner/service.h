// tunerd's gRPC service: one method per RPC of tuner.proto, each validating its request, calling
// the JobManager or the RecordStore, and mapping the result to a response or a status.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "db/record_store.h"
#include "tuner/job_manager.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm {

// Who may call what. Calls present "authorization: Bearer <token>" metadata. With no tokens at all
// the service is open (the embedded default on loopback); otherwise a client token may do
// everything and a read-only token may only query (jobs, records, best configs, export).
struct AccessTokens {
  std::vector<std::string> client;
  std::vector<std::string> read_only;
  bool open() const { return client.empty() && read_only.empty(); }
};

class TunerService final : public v1::Tuner::Service {
 public:
  // The most bytes of records one ListRecords answer holds: half of gRPC's default 4 MiB receive
  // limit, so that any client reads any page; more records are paged (next_offset).
  static constexpr size_t kMaxListRecordsBytes = size_t{2} << 20;

  TunerService(JobManager& jobs, RecordStore& store, AccessTokens tokens = {})
      : jobs_(jobs), store_(store), tokens_(std::move(tokens)) {}

  // Ends open WatchJob streams (for shutdown).
  void stop_watches() { stopping_.store(true); }

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request, v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status QueryBest(grpc::ServerContext* context, const v1::QueryBestRequest* request,
                         v1::QueryBestResponse* response) override;
  grpc::Status ListRecords(grpc::ServerContext* context, const v1::ListRecordsRequest* request,
                           v1::ListRecordsResponse* response) override;
  grpc::Status ExportRecords(grpc::ServerContext* context, const v1::ExportRecordsRequest* request,
                             grpc::ServerWriter<v1::RecordChunk>* writer) override;
  grpc::Status ImportRecords(grpc::ServerContext* context, grpc::ServerReader<v1::RecordChunk>* reader,
                             v1::ImportRecordsResponse* response) override;

 private:
  // UNAUTHENTICATED without a known token, PERMISSION_DENIED for a read-only token on a call that
  // changes something. `rpc` names the call in the message.
  grpc::Status authorize(const grpc::ServerContext* context, bool changes, const char* rpc) const;

  JobManager& jobs_;
  RecordStore& store_;
  AccessTokens tokens_;
  std::atomic<bool> stopping_{false};
};

}  // namespace tunefarm
