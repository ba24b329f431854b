#include "common/blocking_queue.h"

#include <thread>

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

using Queue = BlockingQueue<int>;
using namespace std::chrono_literals;

TEST(BlockingQueue, HandsOutItemsInOrderAndTimesOutWhenEmpty) {
  Queue q;
  q.push(1);
  q.push(2);
  int item = 0;
  ASSERT_EQ(q.pop(item, 0ms), Queue::Pop::kItem);
  EXPECT_EQ(item, 1);
  ASSERT_EQ(q.pop(item, 0ms), Queue::Pop::kItem);
  EXPECT_EQ(item, 2);
  EXPECT_EQ(q.pop(item, 10ms), Queue::Pop::kTimeout);
}

TEST(BlockingQueue, PopAllTakesABurst) {
  Queue q;
  for (int i = 0; i < 3; ++i) q.push(i);
  std::deque<int> burst;
  ASSERT_EQ(q.pop_all(burst, 0ms), Queue::Pop::kItem);
  EXPECT_EQ(burst, (std::deque<int>{0, 1, 2}));
  EXPECT_EQ(q.pop_all(burst, 0ms), Queue::Pop::kTimeout);
}

TEST(BlockingQueue, ADrainingCloseStillHandsOutWhatWasQueuedAndDropsLaterPushes) {
  Queue q;
  q.push(7);
  q.close(Queue::Close::kDrain);
  q.push(8);
  int item = 0;
  ASSERT_EQ(q.pop(item), Queue::Pop::kItem);
  EXPECT_EQ(item, 7);
  EXPECT_EQ(q.pop(item), Queue::Pop::kClosed);
}

TEST(BlockingQueue, ADiscardingCloseStopsPopAtOnce) {
  Queue q;
  q.push(7);
  q.close(Queue::Close::kDiscard);
  int item = 0;
  EXPECT_EQ(q.pop(item), Queue::Pop::kClosed);
  std::deque<int> burst;
  EXPECT_EQ(q.pop_all(burst, 0ms), Queue::Pop::kClosed);
}

TEST(BlockingQueue, CloseWakesAWaitingPop) {
  Queue q;
  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    q.close(Queue::Close::kDiscard);
  });
  int item = 0;
  EXPECT_EQ(q.pop(item), Queue::Pop::kClosed);
  closer.join();
}

TEST(BlockingQueue, APushWakesAWaitingPop) {
  Queue q;
  std::thread pusher([&] {
    std::this_thread::sleep_for(20ms);
    q.push(5);
  });
  int item = 0;
  ASSERT_EQ(q.pop(item, 5000ms), Queue::Pop::kItem);
  EXPECT_EQ(item, 5);
  pusher.join();
}

}  // namespace
}  // namespace tunefarm
