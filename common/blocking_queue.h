// A queue between threads where push never waits and pop waits for an item, for close, or for a
// time limit. Two ways to close: drain (items already queued are still handed out, as the tracker
// wants for the last messages of a stream) and discard (pop stops at once, as the agent wants for
// batches the tracker takes back anyway). Pushes after either close are dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace tunefarm {

template <typename T>
class BlockingQueue {
 public:
  enum class Pop { kItem, kClosed, kTimeout };
  enum class Close { kDrain, kDiscard };

  void push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
  }

  void close(Close how = Close::kDrain) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      if (how == Close::kDiscard) items_.clear();
    }
    ready_.notify_all();
  }

  // Takes everything queued at once, so that a writer can coalesce a burst into one flush.
  Pop pop_all(std::deque<T>& items, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!wait_locked(lock, wait)) return Pop::kTimeout;
    if (items_.empty()) return Pop::kClosed;
    items.swap(items_);
    return Pop::kItem;
  }

  // Waits without a time limit when `wait` is empty.
  Pop pop(T& item, std::optional<std::chrono::milliseconds> wait = std::nullopt) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!wait_locked(lock, wait)) return Pop::kTimeout;
    if (items_.empty()) return Pop::kClosed;
    item = std::move(items_.front());
    items_.pop_front();
    return Pop::kItem;
  }

 private:
  bool wait_locked(std::unique_lock<std::mutex>& lock, std::optional<std::chrono::milliseconds> wait) {
    auto ready = [this] { return !items_.empty() || closed_; };
    if (!wait) {
      ready_.wait(lock, ready);
      return true;
    }
    return ready_.wait_for(lock, *wait, ready);
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace tunefarm
