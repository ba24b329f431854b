// The access table of trackerd names every RPC of tracker.proto, so that a new RPC cannot be
// served without someone deciding who may call it.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "tracker/service.h"

namespace tunefarm {
namespace {

TEST(TrackerAccess, EveryRpcOfTheServiceHasARule) {
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(v1::Tracker::service_full_name());
  ASSERT_NE(service, nullptr);
  ASSERT_GT(service->method_count(), 0);
  for (int i = 0; i < service->method_count(); ++i)
    EXPECT_EQ(tracker_access().count(service->method(i)->name()), 1u) << service->method(i)->name() << " has no rule";
  EXPECT_EQ(tracker_access().size(), static_cast<size_t>(service->method_count())) << "a rule names no RPC";
}

TEST(TrackerAccess, ListingsNeedAReaderAndMeasuringATuner) {
  EXPECT_EQ(tracker_access().at("ListDevices"), TrackerCaller::kReader);
  EXPECT_EQ(tracker_access().at("QueueStatus"), TrackerCaller::kReader);
  EXPECT_EQ(tracker_access().at("Measure"), TrackerCaller::kTuner);
  EXPECT_EQ(tracker_access().at("AgentSession"), TrackerCaller::kAgent);
}

// The gate before any request is read lets in every token of the farm, and only those; while
// agents or tuners need no token it lets in every call, since it cannot tell them apart.
TEST(TrackerAccess, TheGateTakesEveryTokenOfTheFarmOrNone) {
  auto gate = [](const char* agent, const char* tuner) {
    BrokerOptions options;
    options.agent_token = agent;
    options.tuner_token = tuner;
    options.reader_tokens = {"r1", "r2"};
    return tracker_gate(options).tokens;
  };
  EXPECT_EQ(gate("a", "t"), (std::vector<std::string>{"a", "t", "r1", "r2"}));
  EXPECT_TRUE(gate("", "t").empty());
  EXPECT_TRUE(gate("a", "").empty());
}

}  // namespace
}  // namespace tunefarm
