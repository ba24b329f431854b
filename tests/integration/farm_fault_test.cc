// The farm under faults: kernels that crash or hang, an agent killed mid-batch, and bad input from
// agents and tuners, all while the tracker keeps serving everyone else.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include "tests/integration/farm_harness.h"

namespace tunefarm::testing {
namespace {

class FarmFaultTest : public ::testing::Test {
 protected:
  explicit FarmFaultTest(std::vector<std::string> tracker_args = {}) : farm_(std::move(tracker_args)) {}
  void TearDown() override {
    if (HasFailure()) std::cout << farm_.logs();
  }
  void expect_batch_completes(int n = 4) {
    MeasureOutcome out = farm_.measure(kernel_request("matmul", n));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    ASSERT_EQ(out.results.size(), static_cast<size_t>(n));
    for (const auto& r : out.results) EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
  }
  Farm farm_;
};

TEST_F(FarmFaultTest, KillingAnAgentMidBatchLosesAndDuplicatesNothing) {
  farm_.start_agent("victim");
  farm_.start_agent("survivor");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(10)));
  v1::MeasureRequest request = kernel_request("matmul", 32);
  request.mutable_options()->set_number(0);
  request.mutable_options()->set_min_repeat_ms(25);
  bool killed = false;
  MeasureOutcome out = farm_.measure_killing(request, "victim", killed);
  ASSERT_TRUE(killed);
  EXPECT_EQ(out.results.size(), 32u);
  int retried = expect_each_candidate_once(out, 32);
  EXPECT_GT(retried, 0);
  std::cout << retried << " candidates were requeued to the survivor\n";
}

TEST_F(FarmFaultTest, SegfaultIsRuntimeErrorAndTheSameAgentServesTheNextBatch) {
  Process& agent = farm_.start_agent("a1");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  MeasureOutcome crashed = farm_.measure(kernel_request("crash", 2));
  ASSERT_TRUE(crashed.status.ok()) << crashed.status.error_message();
  ASSERT_EQ(crashed.results.size(), 2u);
  for (const auto& r : crashed.results) {
    EXPECT_EQ(r.result().error(), v1::RUNTIME_ERROR);
    EXPECT_NE(r.result().error_msg().find("signal 11"), std::string::npos) << r.result().error_msg();
    EXPECT_EQ(r.result().agent_id(), "a1");
  }
  EXPECT_TRUE(agent.running());
  MeasureOutcome next = farm_.measure(kernel_request("matmul", 2));
  ASSERT_TRUE(next.status.ok());
  for (const auto& r : next.results) {
    EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
    EXPECT_EQ(r.result().agent_id(), "a1");
  }
  auto status = farm_.queue_status();
  EXPECT_NE(status.keys(0).agents(0).last_error().find("signal 11"), std::string::npos);
}

TEST_F(FarmFaultTest, HangIsRunTimeoutWithinItsTimeoutPlusTwoSeconds) {
  farm_.start_agent("a1");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  MeasureOutcome out = farm_.measure(kernel_request("hang", 1, "local-cpu", 1.0));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].result().error(), v1::RUN_TIMEOUT) << out.results[0].result().error_msg();
  std::cout << "hang answered after " << out.seconds << " s (timeout 1 s)\n";
  EXPECT_LT(out.seconds, 1.0 + 2.0);
  expect_batch_completes(2);
}

TEST_F(FarmFaultTest, MalformedHelloIsRefusedAndTheAgentExitsWithTheReason) {
  farm_.start_agent("good");
  Process& bad = farm_.start_agent("bad", "no spaces allowed");
  int status = bad.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_NE(bad.log().find("device_key"), std::string::npos) << bad.log();
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  expect_batch_completes();
}

TEST_F(FarmFaultTest, StreamsThatBreakTheProtocolAreEndedWithAClearStatus) {
  farm_.start_agent("good");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  auto stub = farm_.stub();
  {
    // Not a hello first.
    grpc::ClientContext context;
    auto stream = stub->AgentSession(&context);
    v1::AgentMessage beat;
    beat.mutable_heartbeat();
    stream->Write(beat);
    v1::TrackerMessage reply;
    ASSERT_TRUE(stream->Read(&reply));
    EXPECT_TRUE(reply.has_goodbye());
    while (stream->Read(&reply)) {
    }
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("hello"), std::string::npos) << s.error_message();
  }
  {
    // A proper hello, then an empty message.
    grpc::ClientContext context;
    auto stream = stub->AgentSession(&context);
    v1::AgentMessage hello;
    hello.mutable_hello()->set_agent_id("rogue");
    hello.mutable_hello()->set_device_key("local-cpu");
    stream->Write(hello);
    v1::TrackerMessage reply;
    ASSERT_TRUE(stream->Read(&reply));
    ASSERT_TRUE(reply.has_hello_ack());
    stream->Write(v1::AgentMessage());
    while (stream->Read(&reply)) {
    }
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {
    // Bytes that are no protobuf message at all, through a generic call.
    grpc::GenericStub generic(grpc::CreateChannel(farm_.address(), grpc::InsecureChannelCredentials()));
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    auto call = generic.PrepareCall(&context, "/tunefarm.v1.Tracker/AgentSession", &cq);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    cq.Next(&tag, &ok);
    grpc::Slice junk(std::string("\xff\xff\xff\xff garbage \x01\x02", 16));
    grpc::ByteBuffer buffer(&junk, 1);
    call->Write(buffer, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
    call->WritesDone(reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    grpc::Status s;
    call->Finish(&s, reinterpret_cast<void*>(4));
    while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(4)) {
    }
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error_message().find("AgentMessage"), std::string::npos) << s.error_message();
    std::cout << "garbage message: " << s.error_code() << " " << s.error_message() << "\n";
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  {
    // Raw bytes that are not even HTTP/2.
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(farm_.address().substr(farm_.address().find(':') + 1))));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string junk(4096, '\x5a');
    EXPECT_GT(write(fd, junk.data(), junk.size()), 0);
    close(fd);
  }
  EXPECT_TRUE(farm_.tracker().running());
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(5)));
  expect_batch_completes();
}

class FarmLimitsTest : public FarmFaultTest {
 protected:
  FarmLimitsTest() : FarmFaultTest({"--max-artifact-bytes", "100000"}) {}
};

TEST_F(FarmLimitsTest, UnknownKeysAndOversizedArtifactsAreRefused) {
  farm_.start_agent("good");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  MeasureOutcome unknown = farm_.measure(kernel_request("matmul", 1, "rk3399"));
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.status.error_message().find("known keys: local-cpu"), std::string::npos)
      << unknown.status.error_message();
  v1::MeasureRequest big = kernel_request("matmul", 2);
  big.mutable_candidates(1)->mutable_artifact()->mutable_data()->append(200000, '\0');
  MeasureOutcome oversized = farm_.measure(big);
  EXPECT_EQ(oversized.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(oversized.status.error_message().find("over the tracker's limit of 100000"), std::string::npos)
      << oversized.status.error_message();
  EXPECT_TRUE(oversized.results.empty());
  expect_batch_completes();
}

}  // namespace
}  // namespace tunefarm::testing

namespace tunefarm::testing {
namespace {

class FarmHeartbeatTest : public FarmFaultTest {
 protected:
  FarmHeartbeatTest() : FarmFaultTest({"--heartbeat-timeout-ms", "1000"}) {}
};

TEST_F(FarmHeartbeatTest, FrozenAgentIsDroppedItsWorkRequeuedAndItComesBackWhenThawed) {
  Process& frozen = farm_.start_agent("frozen");
  farm_.start_agent("alive");
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(10)));
  v1::MeasureRequest request = kernel_request("matmul", 16);
  request.mutable_options()->set_number(0);
  request.mutable_options()->set_min_repeat_ms(25);
  bool stopped = false;
  MeasureOutcome out = farm_.measure(request, [&](const v1::MeasureResponse& r, int) {
    if (!stopped && r.result().agent_id() == "frozen") {
      stopped = true;
      frozen.signal(SIGSTOP);
    }
  });
  ASSERT_TRUE(stopped);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  std::set<uint64_t> ids;
  for (const auto& r : out.results) {
    ids.insert(r.candidate_id());
    EXPECT_EQ(r.result().error(), v1::OK) << r.result().error_msg();
  }
  EXPECT_EQ(out.results.size(), 16u);
  EXPECT_EQ(ids.size(), 16u);
  EXPECT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(5)));
  frozen.signal(SIGCONT);
  EXPECT_TRUE(farm_.wait_for_agents("local-cpu", 2, std::chrono::seconds(5)));
  expect_batch_completes();
}

}  // namespace
}  // namespace tunefarm::testing

namespace tunefarm::testing {
namespace {

class FarmTokenTest : public FarmFaultTest {
 protected:
  FarmTokenTest() : FarmFaultTest({"--agent-token-file", secret_file("agent-secret"), "--tuner-token-file", secret_file("tuner-secret")}) {}
};

TEST_F(FarmTokenTest, AgentsAndTunersWithoutTheTokenAreRefused) {
  Process& stranger = farm_.start_agent("stranger");
  int status = stranger.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_NE(stranger.log().find("UNAUTHENTICATED"), std::string::npos) << stranger.log();

  farm_.start_agent("member", "local-cpu", {"--token-file", secret_file("agent-secret")});
  ASSERT_TRUE(farm_.wait_for_agents("local-cpu", 1, std::chrono::seconds(10)));
  MeasureOutcome refused = farm_.measure(kernel_request("matmul", 1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.status.error_message();
  v1::MeasureRequest request = kernel_request("matmul", 2);
  request.set_token("tuner-secret");
  MeasureOutcome out = farm_.measure(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.results.size(), 2u);
}

// With tokens on, the farm's inventory is not for anyone with a certificate: listing takes the
// tuner token or a reader token, which tune-client sends with --tracker-token-file.
TEST_F(FarmTokenTest, ListingTheFarmTakesAToken) {
  auto stub = farm_.stub();
  {
    grpc::ClientContext context;
    v1::ListDevicesResponse response;
    EXPECT_EQ(stub->ListDevices(&context, v1::ListDevicesRequest(), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    v1::QueueStatusResponse response;
    EXPECT_EQ(stub->QueueStatus(&context, v1::QueueStatusRequest(), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    farm_.authorize(context);
    v1::ListDevicesResponse response;
    EXPECT_TRUE(stub->ListDevices(&context, v1::ListDevicesRequest(), &response).ok());
  }
  auto client = [&](const std::string& extra) {
    std::string command = bin_path("tune-client") + " --tracker " + farm_.address() + " " + extra + " devices 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[512];
    std::string out;
    while (pipe && fgets(buffer, sizeof buffer, pipe)) out += buffer;
    int status = pipe ? pclose(pipe) : -1;
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  auto [refused, refused_out] = client("");
  EXPECT_NE(refused, 0) << refused_out;
  auto [listed, listed_out] = client("--tracker-token-file " + secret_file("tuner-secret"));
  EXPECT_EQ(listed, 0) << listed_out;
}

TEST(Trackerd, RefusesANonLoopbackAddressWithoutTokens) {
  std::string log = (std::filesystem::temp_directory_path() / "tunefarm-trackerd-refusal.log").string();
  Process tracker(bin_path("trackerd"), {"--listen", "0.0.0.0:" + std::to_string(free_port())}, log);
  int status = tracker.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_NE(tracker.log().find("--agent-token"), std::string::npos) << tracker.log();
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace tunefarm::testing
