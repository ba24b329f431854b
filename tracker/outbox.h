// A queue between the broker (which must never block) and the one thread that writes a gRPC
// stream: push never waits; pop waits for an item, for close, or for a time limit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace tunefarm {

template <typename T>
class Outbox {
 public:
  enum class Pop { kItem, kClosed, kTimeout };

  void push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
  }

  // Items already queued are still handed out; later pushes are dropped.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
  }

  // Takes everything queued at once, so that a writer can coalesce a burst into one flush.
  Pop pop_all(std::deque<T>& items, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!ready_.wait_for(lock, wait, [this] { return !items_.empty() || closed_; })) return Pop::kTimeout;
    if (items_.empty()) return Pop::kClosed;
    items.swap(items_);
    return Pop::kItem;
  }

  Pop pop(T& item, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!ready_.wait_for(lock, wait, [this] { return !items_.empty() || closed_; })) return Pop::kTimeout;
    if (items_.empty()) return Pop::kClosed;
    item = std::move(items_.front());
    items_.pop_front();
    return Pop::kItem;
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace tunefarm
