#include "db/writer.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tunefarm::db {

Writer::Writer(std::unique_ptr<Connection> connection, std::chrono::milliseconds busy_budget,
               int64_t max_batch_weight, CommitObserver on_commit)
    : connection_(std::move(connection)),
      busy_budget_(busy_budget),
      max_batch_weight_(max_batch_weight),
      on_commit_(std::move(on_commit)) {
  thread_ = std::thread([this] { run(); });
}

Writer::~Writer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
}

std::future<StatusOr<int64_t>> Writer::submit(Operation op, int64_t weight) {
  auto promise = std::make_unique<std::promise<StatusOr<int64_t>>>();
  auto future = promise->get_future();
  enqueue({std::move(op), weight, std::move(promise)});
  return future;
}

Status Writer::outage() const {
  std::lock_guard lock(mutex_);
  return outage_;
}

void Writer::submit_detached(Operation op, int64_t weight) { enqueue({std::move(op), weight, nullptr}); }

void Writer::enqueue(Item item) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(item));
    ++submitted_;
  }
  work_ready_.notify_one();
}

Status Writer::flush() {
  std::unique_lock lock(mutex_);
  uint64_t target = submitted_;
  work_done_.wait(lock, [&] { return completed_ >= target; });
  return std::exchange(detached_error_, Status());
}

namespace {

// The pause before retrying after a failed write, doubling up to the last.
constexpr std::chrono::milliseconds kFirstRetry(250);
constexpr std::chrono::milliseconds kLastRetry(5000);

// Failures of the disk rather than of an operation: the same write may succeed later.
bool is_outage(const Status& status) {
  return status.code() == StatusCode::kResourceExhausted || status.code() == StatusCode::kUnavailable;
}

}  // namespace

void Writer::run() {
  auto pause = kFirstRetry;
  for (;;) {
    std::vector<Item> batch;
    {
      std::unique_lock lock(mutex_);
      if (!outage_.ok()) {
        work_ready_.wait_for(lock, pause, [&] { return stopping_; });
        pause = std::min(pause * 2, kLastRetry);
      }
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      int64_t weight = 0;
      while (!queue_.empty() && (batch.empty() || weight + queue_.front().weight <= max_batch_weight_)) {
        weight += queue_.front().weight;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    Status failure;
    auto started = std::chrono::steady_clock::now();
    std::vector<StatusOr<int64_t>> results = commit(batch, failure);
    if (on_commit_)
      on_commit_(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), batch.size(),
                 failure.ok());
    bool held = false;
    {
      std::lock_guard lock(mutex_);
      // At shutdown there is no later: what cannot be written now is reported below as lost.
      if (is_outage(failure) && !stopping_) {
        hold_for_retry(batch, failure);
        held = true;
      }
    }
    if (held) {
      // Every failed try leaves its frames in the WAL, and readers' snapshots keep the automatic
      // checkpoint from reusing it: folding it into the database and truncating it while paused
      // keeps the pause from filling the disk again (it fails harmlessly while the disk is full).
      if (connection_->dialect() == Dialect::kSqlite) (void)connection_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
      continue;
    }
    std::lock_guard lock(mutex_);
    if (!outage_.ok() && failure.ok()) {
      spdlog::info("history writes succeed again after {:.0f} s; the measurements held meanwhile are written",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - outage_since_).count());
      outage_ = Status();
      pause = kFirstRetry;
    }
    int lost = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].promise) {
        batch[i].promise->set_value(std::move(results[i]));
      } else if (!results[i].ok()) {
        if (lost++ == 0) spdlog::warn("history write failed: {}", results[i].status().to_string());
        if (detached_error_.ok()) detached_error_ = results[i].status();
      }
    }
    if (lost > 1) spdlog::warn("{} history writes failed in all", lost);
    completed_ += batch.size();
    work_done_.notify_all();
  }
}

void Writer::hold_for_retry(std::vector<Item>& batch, const Status& failure) {
  if (outage_.ok()) {
    outage_since_ = std::chrono::steady_clock::now();
    outage_since_text_ = fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(std::time(nullptr)));
    spdlog::error("history writes are failing: {}; measurements are held in memory and written when the "
                  "history can be written again",
                  failure.message());
  }
  outage_ = Status(failure.code(), fmt::format("the history cannot be written since {}: {}", outage_since_text_,
                                               failure.message()));
  for (size_t i = batch.size(); i-- > 0;) {
    if (batch[i].promise) {
      batch[i].promise->set_value(outage_);
      ++completed_;
    } else {
      queue_.push_front(std::move(batch[i]));
    }
  }
  work_done_.notify_all();
}

std::vector<StatusOr<int64_t>> Writer::commit(std::vector<Item>& batch, Status& failure) {
  std::vector<StatusOr<int64_t>> results;
  failure = retry_while_busy([&] { return try_commit(batch, results); }, busy_budget_, connection_->path());
  if (!failure.ok()) results.assign(batch.size(), failure);
  return results;
}

Status Writer::try_commit(std::vector<Item>& batch, std::vector<StatusOr<int64_t>>& results) {
  results.clear();
  // IMMEDIATE takes SQLite's write lock up front, so a busy database shows here and not half-way
  // (PostgreSQL's writers lock rows, not the database).
  TF_RETURN_IF_ERROR(connection_->exec(connection_->dialect() == Dialect::kSqlite ? "BEGIN IMMEDIATE" : "BEGIN"));
  auto fail = [&](Status status) {
    (void)connection_->exec("ROLLBACK");
    return status;
  };
  for (Item& item : batch) {
    if (Status s = connection_->exec("SAVEPOINT op"); !s.ok()) return fail(s);
    StatusOr<int64_t> result = item.op(*connection_);
    // A busy or failing disk aborts the whole batch (and a busy one is retried); anything else
    // is the operation's own failure.
    if (!result.ok() && (result.status().code() == StatusCode::kAborted ||
                         result.status().code() == StatusCode::kDataLoss ||
                         result.status().code() == StatusCode::kResourceExhausted ||
                         result.status().code() == StatusCode::kUnavailable)) {
      return fail(result.status());
    }
    Status end = result.ok() ? Status() : connection_->exec("ROLLBACK TO op");
    if (end.ok()) end = connection_->exec("RELEASE op");
    if (!end.ok()) return fail(end);
    results.push_back(std::move(result));
  }
  if (Status s = connection_->exec("COMMIT"); !s.ok()) return fail(s);
  return Status();
}

}  // namespace tunefarm::db
