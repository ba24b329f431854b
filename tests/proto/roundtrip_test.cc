// Every message of the wire contracts survives binary and JSON round trips with every field set.
// Messages are filled through reflection so that a field added later is covered without editing
// this file.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "tunefarm/v1/common.pb.h"
#include "tunefarm/v1/tracker.pb.h"
#include "tunefarm/v1/tuner.pb.h"

namespace tunefarm {
namespace {

namespace pb = google::protobuf;

// Sets every field (one element for repeated and map fields, the first member of each oneof
// left to the last one written) to a value distinct from its default.
void fill(pb::Message* msg, int depth, int& counter) {
  const pb::Descriptor* d = msg->GetDescriptor();
  const pb::Reflection* r = msg->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    ++counter;
    if (f->is_map()) {
      pb::Message* entry = r->AddMessage(msg, f);
      fill(entry, depth + 1, counter);
      continue;
    }
    bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: rep ? r->AddInt32(msg, f, counter) : r->SetInt32(msg, f, counter); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: rep ? r->AddInt64(msg, f, -counter * 1000003LL) : r->SetInt64(msg, f, -counter * 1000003LL); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32: rep ? r->AddUInt32(msg, f, counter) : r->SetUInt32(msg, f, counter); break;
      case pb::FieldDescriptor::CPPTYPE_UINT64: rep ? r->AddUInt64(msg, f, counter * 7919ULL) : r->SetUInt64(msg, f, counter * 7919ULL); break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: rep ? r->AddDouble(msg, f, counter + 0.25) : r->SetDouble(msg, f, counter + 0.25); break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: rep ? r->AddFloat(msg, f, counter + 0.5f) : r->SetFloat(msg, f, counter + 0.5f); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: rep ? r->AddBool(msg, f, true) : r->SetBool(msg, f, true); break;
      case pb::FieldDescriptor::CPPTYPE_STRING: {
        std::string v = f->type() == pb::FieldDescriptor::TYPE_BYTES ? std::string("\x00\xff\x7f", 3) + "bytes"
                                                                      : "value-" + std::to_string(counter);
        rep ? r->AddString(msg, f, v) : r->SetString(msg, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* e = f->enum_type();
        const pb::EnumValueDescriptor* v = e->value(e->value_count() - 1);
        rep ? r->AddEnum(msg, f, v) : r->SetEnum(msg, f, v);
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        if (depth < 4) fill(rep ? r->AddMessage(msg, f) : r->MutableMessage(msg, f), depth + 1, counter);
        break;
    }
  }
}

std::vector<const pb::Descriptor*> all_messages() {
  std::vector<const pb::Descriptor*> out;
  const pb::FileDescriptor* files[] = {v1::Workload::descriptor()->file(), v1::AgentMessage::descriptor()->file(),
                                       v1::Job::descriptor()->file()};
  for (const auto* file : files) {
    for (int i = 0; i < file->message_type_count(); ++i) out.push_back(file->message_type(i));
  }
  return out;
}

TEST(ProtoRoundTrip, EveryMessageTypeSurvivesBinaryAndJson) {
  auto messages = all_messages();
  ASSERT_GE(messages.size(), 40u) << "the contracts lost message types";
  pb::DynamicMessageFactory factory;
  for (const pb::Descriptor* d : messages) {
    SCOPED_TRACE(d->full_name());
    std::unique_ptr<pb::Message> original(factory.GetPrototype(d)->New());
    int counter = 0;
    fill(original.get(), 0, counter);
    if (d->field_count() > 0) {
      ASSERT_GT(original->ByteSizeLong(), 0u);
    }

    std::string wire;
    ASSERT_TRUE(original->SerializeToString(&wire));
    std::unique_ptr<pb::Message> decoded(original->New());
    ASSERT_TRUE(decoded->ParseFromString(wire));
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(*original, *decoded));

    std::string json;
    ASSERT_TRUE(pb::util::MessageToJsonString(*original, &json).ok());
    std::unique_ptr<pb::Message> from_json(original->New());
    ASSERT_TRUE(pb::util::JsonStringToMessage(json, from_json.get()).ok()) << json;
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(*original, *from_json)) << json;
  }
}

TEST(ProtoRoundTrip, GarbageIsRejectedOrHarmless) {
  // Truncated length-delimited field: must fail to parse rather than produce a half message.
  std::string truncated("\x12\x10\x0a\x03", 4);
  v1::Workload w;
  EXPECT_FALSE(w.ParseFromString(truncated));
  v1::AgentMessage m;
  EXPECT_FALSE(m.ParseFromString(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11)));
}

TEST(ProtoContracts, ErrorCodesFollowTheDesignList) {
  const char* expected[] = {"OK", "INVALID_CONFIG", "COMPILE_ERROR", "BUILD_TIMEOUT", "LOAD_ERROR",
                            "RUNTIME_ERROR", "WRONG_ANSWER", "RUN_TIMEOUT", "DEVICE_LOST", "UNKNOWN"};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(v1::ErrorCode_Name(static_cast<v1::ErrorCode>(i)), expected[i]);
}

TEST(ProtoContracts, ServicesExposeTheirRpcs) {
  const pb::FileDescriptor* tracker = v1::AgentMessage::descriptor()->file();
  const pb::ServiceDescriptor* t = tracker->FindServiceByName("Tracker");
  ASSERT_NE(t, nullptr);
  for (const char* rpc : {"AgentSession", "Measure", "ListDevices", "QueueStatus"}) EXPECT_NE(t->FindMethodByName(rpc), nullptr) << rpc;
  EXPECT_TRUE(t->FindMethodByName("AgentSession")->client_streaming());
  EXPECT_TRUE(t->FindMethodByName("AgentSession")->server_streaming());

  const pb::ServiceDescriptor* s = v1::Job::descriptor()->file()->FindServiceByName("Tuner");
  ASSERT_NE(s, nullptr);
  for (const char* rpc : {"SubmitJob", "GetJob", "WatchJob", "CancelJob", "ListJobs", "QueryBest", "ListRecords",
                          "ExportRecords", "ImportRecords"})
    EXPECT_NE(s->FindMethodByName(rpc), nullptr) << rpc;
  EXPECT_TRUE(s->FindMethodByName("WatchJob")->server_streaming());
}

}  // namespace
}  // namespace tunefarm
