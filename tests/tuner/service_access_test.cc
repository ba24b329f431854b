// The access table of tunerd names every RPC of tuner.proto, so that a new RPC cannot be served
// without someone deciding which token may call it.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "tuner/service.h"

namespace tunefarm {
namespace {

TEST(TunerAccess, EveryRpcOfTheServiceHasARule) {
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(v1::Tuner::service_full_name());
  ASSERT_NE(service, nullptr);
  ASSERT_GT(service->method_count(), 0);
  for (int i = 0; i < service->method_count(); ++i)
    EXPECT_EQ(tuner_access().count(service->method(i)->name()), 1u) << service->method(i)->name() << " has no rule";
  EXPECT_EQ(tuner_access().size(), static_cast<size_t>(service->method_count())) << "a rule names no RPC";
}

TEST(TunerAccess, OnlyCallsThatChangeTheServiceNeedAClientToken) {
  for (const char* rpc : {"SubmitJob", "CancelJob", "ImportRecords"})
    EXPECT_EQ(tuner_access().at(rpc), Access::kChange) << rpc;
  for (const char* rpc : {"GetJob", "WatchJob", "ListJobs", "QueryBest", "ListRecords", "ExportRecords"})
    EXPECT_EQ(tuner_access().at(rpc), Access::kQuery) << rpc;
}

}  // namespace
}  // namespace tunefarm
