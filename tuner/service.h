// tunerd's gRPC service: one method per RPC of tuner.proto, each validating its request, calling
// the JobManager or the db::RecordStore, and mapping the result to a response or a status.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/library_request.h"
#include "common/wire/credentials.h"
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
  // Any of these tokens, checked before a call's request is read (serving_credentials).
  CallGate gate() const;
};

// What an RPC does to the service, which decides the tokens that may call it.
enum class Access { kQuery, kChange };

// Every RPC of tuner.proto with what it does: the one place that says which token may call what
// (tests check that no RPC is missing). A method missing here is refused to every token.
const std::map<std::string, Access, std::less<>>& tuner_access();

class TunerService final : public v1::Tuner::Service {
 public:
  // The most bytes of records one ListRecords answer holds: half of gRPC's default 4 MiB receive
  // limit, so that any client reads any page; more records are paged (next_offset).
  static constexpr size_t kMaxListRecordsBytes = size_t{2} << 20;

  TunerService(JobManager& jobs, db::RecordStore& store, AccessTokens tokens = {})
      : jobs_(jobs), store_(store), tokens_(std::move(tokens)) {}

  // Ends open WatchJob streams (for shutdown).
  void stop_watches() { stopping_.store(true); }

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request, v1::Job* response) override;
  grpc::Status ResumeJob(grpc::ServerContext* context, const v1::ResumeJobRequest* request, v1::Job* response) override;
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
  grpc::Status ExtractTasks(grpc::ServerContext* context, grpc::ServerReader<v1::ModelChunk>* reader,
                            v1::ExtractTasksResponse* response) override;
  grpc::Status BuildLibrary(grpc::ServerContext* context, const v1::BuildLibraryRequest* request,
                            grpc::ServerWriter<v1::LibraryChunk>* writer) override;
  grpc::Status BuildModel(grpc::ServerContext* context,
                          grpc::ServerReaderWriter<v1::LibraryChunk, v1::ModelChunk>* stream) override;

 private:
  // Applies tuner_access() to a call of `rpc`: UNAUTHENTICATED without a known token,
  // PERMISSION_DENIED for a read-only token on a call that changes something.
  grpc::Status authorize(const grpc::ServerContext* context, std::string_view rpc) const;
  // Who submits, for the per-client queue limit: the client token presented, named by its place
  // among the client tokens ("client token 2"), never by the secret. Empty with tokens off: peers
  // share loopback and NAT addresses, so clients cannot be told apart and only the service-wide
  // limit applies.
  std::string client_of(const grpc::ServerContext* context) const;
  // Whose request ids a submit's are (db::JobRequest): the SHA-256 of the token presented, so that
  // every tunerd sharing a history names a client alike whatever the order of its token list, and
  // the history holds no token. Empty with tokens off, where every client is the same one.
  std::string submitter_of(const grpc::ServerContext* context) const;
  // The best record of each workload for the library's target and device key, as JSON lines.
  StatusOr<std::string> best_records(const LibraryRequest& library, const std::vector<Workload>& workloads);
  // Runs the library builder on `records` and streams its files through `write`.
  grpc::Status build_and_send(const LibraryRequest& library, const std::string& records, const grpc::ServerContext* context,
                              const std::function<bool(const v1::LibraryChunk&)>& write);

  JobManager& jobs_;
  db::RecordStore& store_;
  AccessTokens tokens_;
  std::atomic<bool> stopping_{false};
  // Open WatchJob streams by the token they came with ("" with tokens off).
  static constexpr int kMaxWatchesPerToken = 64;
  std::mutex watch_mu_;
  std::map<std::string, int> watches_;
  std::mutex library_mu_;
};

}  // namespace tunefarm
