// The one path by which anything is written to the history. Writes are queued as operations and
// a background thread runs whatever has queued up as one transaction (each operation inside its
// own savepoint, so one failing operation does not undo the others). Batching is what makes
// inserting tens of thousands of records a second cheap; a single thread is what keeps writers
// from ever contending with each other. Locks held by other processes are waited out with
// retry_while_busy().
//
// A disk that is full (or failing) is an outage, not a loss: the writer keeps the detached
// operations (measurements) queued and retries them with a growing pause until a transaction
// commits again; an operation someone waits for gets one try and then the error, so that no
// caller hangs on the disk. outage() says what is wrong meanwhile.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "db/sqlite.h"

namespace tunefarm::db {

class Writer {
 public:
  // Runs inside the writer's transaction; answers a count (rows written) or an error, in which
  // case everything it wrote is rolled back. An operation may run more than once when the
  // transaction had to be retried, so it must not act outside the database.
  using Operation = std::function<StatusOr<int64_t>(Connection&)>;
  // Told after each transaction how long it took, how many operations it held and whether it
  // committed (for the service's metrics); called on the writer's thread, so it must not block.
  using CommitObserver = std::function<void(double seconds, size_t operations, bool committed)>;

  // `weight` of an operation: roughly how many rows it writes. A transaction takes queued
  // operations until their weight reaches `max_batch_weight`.
  Writer(std::unique_ptr<Connection> connection, std::chrono::milliseconds busy_budget,
         int64_t max_batch_weight = 50000, CommitObserver on_commit = nullptr);
  // Commits what is queued, then stops the thread.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Queues `op`; the future answers once its transaction has committed (or failed).
  std::future<StatusOr<int64_t>> submit(Operation op, int64_t weight = 1);
  // Queues `op` without waiting for it; its error, if any, is answered by the next flush().
  void submit_detached(Operation op, int64_t weight = 1);
  // Waits until everything queued so far is committed. Answers the first error of a detached
  // operation since the previous flush(). During an outage it waits for the outage to end.
  Status flush();
  // OK while writes succeed; during an outage, the error that started it, saying since when.
  Status outage() const;

 private:
  struct Item {
    Operation op;
    int64_t weight;
    std::unique_ptr<std::promise<StatusOr<int64_t>>> promise;  // Null when detached.
  };

  void enqueue(Item item);
  void run();
  // Runs `batch` as one transaction, retrying while another process holds the lock.
  // `failure` is the error that ended the whole transaction (every result is then that error).
  std::vector<StatusOr<int64_t>> commit(std::vector<Item>& batch, Status& failure);
  Status try_commit(std::vector<Item>& batch, std::vector<StatusOr<int64_t>>& results);
  // Starts or continues an outage after `failure`: the waiting callers get the error, the detached
  // operations go back to the front of the queue. Called with mutex_ held.
  void hold_for_retry(std::vector<Item>& batch, const Status& failure);

  std::unique_ptr<Connection> connection_;
  const std::chrono::milliseconds busy_budget_;
  const int64_t max_batch_weight_;
  const CommitObserver on_commit_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<Item> queue_;
  uint64_t submitted_ = 0;  // Operations queued since the start.
  uint64_t completed_ = 0;  // Operations whose transaction has ended.
  Status detached_error_;
  Status outage_;                                   // OK unless writes are failing.
  std::chrono::steady_clock::time_point outage_since_;
  std::string outage_since_text_;                   // Wall-clock start, for people.
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tunefarm::db
