#include "db/writer.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace tunefarm::db {

Writer::Writer(std::unique_ptr<Connection> connection, std::chrono::milliseconds busy_budget,
               int64_t max_batch_weight)
    : connection_(std::move(connection)), busy_budget_(busy_budget), max_batch_weight_(max_batch_weight) {
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

void Writer::run() {
  for (;;) {
    std::vector<Item> batch;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      int64_t weight = 0;
      while (!queue_.empty() && (batch.empty() || weight + queue_.front().weight <= max_batch_weight_)) {
        weight += queue_.front().weight;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<StatusOr<int64_t>> results = commit(batch);
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].promise) {
        batch[i].promise->set_value(std::move(results[i]));
      } else if (!results[i].ok()) {
        spdlog::warn("history write failed: {}", results[i].status().to_string());
        if (detached_error_.ok()) detached_error_ = results[i].status();
      }
    }
    completed_ += batch.size();
    work_done_.notify_all();
  }
}

std::vector<StatusOr<int64_t>> Writer::commit(std::vector<Item>& batch) {
  std::vector<StatusOr<int64_t>> results;
  Status status = retry_while_busy([&] { return try_commit(batch, results); }, busy_budget_, connection_->path());
  if (!status.ok()) results.assign(batch.size(), status);
  return results;
}

Status Writer::try_commit(std::vector<Item>& batch, std::vector<StatusOr<int64_t>>& results) {
  results.clear();
  // IMMEDIATE takes the write lock up front, so a busy database shows here and not half-way.
  TF_RETURN_IF_ERROR(connection_->exec("BEGIN IMMEDIATE"));
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
