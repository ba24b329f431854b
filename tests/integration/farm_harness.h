// Real farm processes on 127.0.0.1 for integration tests: a tracker on a free port, agents that
// dial it, and a tuner's Measure call. Every process started here is stopped when its handle goes
// away (SIGTERM, then SIGKILL after 2 s; and with the test process through PR_SET_PDEATHSIG), so a
// failing test leaves none.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tunefarm/v1/tracker.grpc.pb.h"
#include "tests/support/scratch.h"

namespace tunefarm::testing {

// build/bin/<name>: $TUNEFARM_BIN_DIR, else beside the test's own directory.
std::string bin_path(const std::string& name);

// A port on 127.0.0.1 that was free a moment ago.
int free_port();

// A file holding `token`, for the --*-token-file flags (secrets never go on a command line).
std::string secret_file(const std::string& token);

class Process {
 public:
  // Starts `binary` with `args`; stdout and stderr go to `log_path`. Its metrics endpoint is off
  // unless `args` give --metrics-listen (or `extra_env` TUNEFARM_METRICS_LISTEN).
  Process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
          const std::vector<std::string>& extra_env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void signal(int sig);
  // Waits for the exit and returns the wait status (-1 when not started).
  int wait();
  std::string log() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int wait_status_ = -1;
  std::string log_path_;
};

struct MeasureOutcome {
  grpc::Status status;
  std::vector<v1::MeasureResponse> results;
  double seconds = 0;
};

class Farm {
 public:
  explicit Farm(std::vector<std::string> tracker_args = {});
  ~Farm();

  const std::string& address() const { return address_; }
  // (Re)starts trackerd on the same port.
  void start_tracker();
  void kill_tracker(int sig);
  Process& tracker() { return *tracker_; }
  Process& start_agent(const std::string& id, const std::string& key = "local-cpu",
                       const std::vector<std::string>& extra_args = {});
  // An agent built for another architecture, run by `emulator` (its program and arguments, e.g.
  // qemu-aarch64 -L /usr/aarch64-linux-gnu) with `env` added to the environment.
  Process& start_emulated_agent(const std::string& id, const std::string& key, const std::vector<std::string>& emulator,
                                const std::string& agent_binary, const std::vector<std::string>& extra_args,
                                const std::vector<std::string>& env);
  Process& agent(const std::string& id) { return *agents_.at(id); }

  std::unique_ptr<v1::Tracker::Stub> stub() const;
  v1::QueueStatusResponse queue_status() const;
  // Waits until `key` has `n` agents registered; false after `timeout`.
  bool wait_for_agents(const std::string& key, int n, std::chrono::milliseconds timeout) const;
  // One Measure call; `on_result` sees each result as it arrives (e.g. to kill an agent midway).
  MeasureOutcome measure(const v1::MeasureRequest& request,
                         const std::function<void(const v1::MeasureResponse&, int count)>& on_result = nullptr) const;
  // One Measure call during which agent `victim` is killed outright as soon as it has delivered a
  // result; `killed` says whether it was.
  MeasureOutcome measure_killing(const v1::MeasureRequest& request, const std::string& victim, bool& killed);
  // Everything the farm's processes logged, for a failing test's output.
  std::string logs() const;
  std::string log_dir() const { return dir_; }
  // Adds the token the tracker asks for to list its farm, when its tokens are on.
  void authorize(grpc::ClientContext& context) const;

 private:
  std::string listing_token_;
  std::vector<std::string> tracker_args_;
  std::string dir_;
  int port_;
  std::string address_;
  std::unique_ptr<Process> tracker_;
  int tracker_starts_ = 0;
  std::map<std::string, std::unique_ptr<Process>> agents_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Checks that `outcome` holds exactly one OK result for each of candidates 0..n-1 (nothing lost,
// nothing duplicated); returns how many of them were requeued (measured on a second agent).
int expect_each_candidate_once(const MeasureOutcome& outcome, size_t n);

// A request of `n` candidates of one test kernel (see tests/measure/test_kernels.h), ids 0..n-1,
// with the reference attached and correctness checked.
v1::MeasureRequest kernel_request(const std::string& kernel, int n, const std::string& key = "local-cpu",
                                  double timeout_s = 5);

}  // namespace tunefarm::testing
