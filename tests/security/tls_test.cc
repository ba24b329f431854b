// TLS on every channel, with real processes and certificates from deploy/make-certs.sh: trackerd
// serves TLS and requires client certificates (mutual TLS), an agent with a certificate joins and
// measures, plaintext and certificate-less connections to the TLS ports fail, tunerd serves TLS
// and dials the tracker over TLS, tune-client speaks TLS with --tls-ca, and daemons asked to
// listen beyond loopback without TLS and tokens refuse to start.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "common/wire/credentials.h"
#include "common/wire/wire.h"
#include "tests/integration/farm_harness.h"
#include "tunefarm/v1/tuner.grpc.pb.h"

namespace tunefarm::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class SecurityTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((std::filesystem::temp_directory_path() /
                            fmt::format("tunefarm-tls-test-{}", getpid())).string());
    std::string command = fmt::format("bash {}/deploy/make-certs.sh {} localhost 127.0.0.1 --agent board "
                                      "--agent tunerd >/dev/null",
                                      TUNEFARM_SOURCE_DIR, *dir_);
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string pem(const std::string& name) { return *dir_ + "/" + name; }

  void SetUp() override {
    tracker_address_ = fmt::format("127.0.0.1:{}", free_port());
    tracker_ = std::make_unique<Process>(
        bin_path("trackerd"),
        std::vector<std::string>{"--listen", tracker_address_, "--tls-cert", pem("server.pem"), "--tls-key",
                                 pem("server.key"), "--tls-client-ca", pem("ca.pem"), "--agent-token-file", secret_file("a-secret"),
                                 "--tuner-token-file", secret_file("t-secret")},
        *dir_ + "/trackerd.log");
  }
  void TearDown() override {
    if (HasFailure()) std::cout << tracker_->log();
  }

  static std::shared_ptr<grpc::ChannelCredentials> tls(bool with_cert) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = read_file(pem("ca.pem"));
    if (with_cert) {
      options.pem_cert_chain = read_file(pem("agent-tunerd.pem"));
      options.pem_private_key = read_file(pem("agent-tunerd.key"));
    }
    return grpc::SslCredentials(options);
  }
  // QueueStatus through `credentials`; waits up to `seconds` for the tracker to come up.
  grpc::Status queue_status(const std::shared_ptr<grpc::ChannelCredentials>& credentials, double seconds,
                            v1::QueueStatusResponse* response = nullptr) {
    auto stub = v1::Tracker::NewStub(grpc::CreateChannel(tracker_address_, credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(int(seconds * 1000)));
    context.set_wait_for_ready(true);
    // The tracker runs with tokens: listing the farm takes the tuner token.
    context.AddMetadata("authorization", "Bearer t-secret");
    v1::QueueStatusResponse ignored;
    return stub->QueueStatus(&context, v1::QueueStatusRequest(), response ? response : &ignored);
  }
  int agents(const std::string& key) {
    v1::QueueStatusResponse response;
    if (!queue_status(tls(true), 5, &response).ok()) return -1;
    for (const auto& k : response.keys())
      if (k.device_key() == key) return k.agents_total();
    return 0;
  }
  bool wait_for_agents(const std::string& key, int n) {
    for (int i = 0; i < 100; ++i) {
      if (agents(key) == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::unique_ptr<Process> start_agent(const std::string& id, bool with_cert) {
    std::vector<std::string> args = {"--tracker", tracker_address_, "--key", "tls-cpu", "--id", id,
                                     "--token-file", secret_file("a-secret"), "--tls-ca", pem("ca.pem")};
    if (with_cert) args.insert(args.end(), {"--tls-cert", pem("agent-board.pem"), "--tls-key", pem("agent-board.key")});
    return std::make_unique<Process>(bin_path("device-agent"), args, *dir_ + "/" + id + ".log");
  }

  static std::string* dir_;
  std::string tracker_address_;
  std::unique_ptr<Process> tracker_;
};

std::string* SecurityTlsTest::dir_ = nullptr;

TEST_F(SecurityTlsTest, TlsWorksAndPlaintextOrCertificateLessConnectionsFail) {
  ASSERT_TRUE(queue_status(tls(true), 20).ok()) << tracker_->log();
  grpc::Status plain = queue_status(grpc::InsecureChannelCredentials(), 2);
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << plain.error_message();
  EXPECT_FALSE(queue_status(tls(false), 2).ok()) << "mutual TLS lets a client without a certificate in";
  EXPECT_TRUE(tracker_->running());
}

TEST_F(SecurityTlsTest, AnAgentWithACertificateJoinsAndMeasuresOneWithoutDoesNot) {
  ASSERT_TRUE(queue_status(tls(true), 20).ok()) << tracker_->log();
  auto outsider = start_agent("outsider", false);
  auto board = start_agent("board", true);
  ASSERT_TRUE(wait_for_agents("tls-cpu", 1)) << board->log();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(agents("tls-cpu"), 1) << "the agent without a client certificate joined";

  v1::MeasureRequest request = kernel_request("matmul", 2, "tls-cpu");
  request.set_token("t-secret");
  auto stub = v1::Tracker::NewStub(grpc::CreateChannel(tracker_address_, tls(true)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  add_bearer(context, request.token());
  auto reader = stub->Measure(&context, request);
  v1::MeasureResponse response;
  int ok = 0;
  while (reader->Read(&response)) ok += response.result().error() == v1::OK;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(ok, 2);
}

TEST_F(SecurityTlsTest, TunerdServesTlsDialsTheTrackerOverTlsAndTuneClientFollows) {
  ASSERT_TRUE(queue_status(tls(true), 20).ok()) << tracker_->log();
  auto board = start_agent("board", true);
  ASSERT_TRUE(wait_for_agents("tls-cpu", 1)) << board->log();
  std::string address = fmt::format("127.0.0.1:{}", free_port());
  Process tunerd(bin_path("tunerd"),
                 {"--listen", address, "--tracker", tracker_address_, "--data-dir", *dir_ + "/tunerd-data",
                  "--tls-cert", pem("server.pem"), "--tls-key", pem("server.key"), "--client-token-file", secret_file("c-secret"),
                  "--tracker-ca", pem("ca.pem"), "--tracker-cert", pem("agent-tunerd.pem"), "--tracker-key",
                  pem("agent-tunerd.key"), "--tracker-token-file", secret_file("t-secret"), "--build-threads", "1"},
                 *dir_ + "/tunerd.log");
  auto client = [&](const std::string& extra) {
    std::string command = fmt::format("{} --server {} --tracker {} --token-file {} {} 2>&1", bin_path("tune-client"),
                                      address, tracker_address_, secret_file("c-secret"), extra);
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[512];
    while (pipe && fgets(buffer, sizeof buffer, pipe)) out += buffer;
    int status = pipe ? pclose(pipe) : -1;
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  std::string ca = "--tls-ca " + pem("ca.pem");
  // tunerd needs a moment to listen; the first successful call tells.
  std::pair<int, std::string> jobs;
  for (int i = 0; i < 100 && (jobs = client(ca + " jobs")).first != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(jobs.first, 0) << jobs.second << tunerd.log();
  auto plain = client("jobs");
  EXPECT_NE(plain.first, 0) << plain.second;
  // A job submitted over TLS is measured through the TLS tracker.
  auto submit = client(ca + " submit --workload matmul:M=32,N=32,K=32 --target llvm --device tls-cpu --trials 4 "
                            "--watch --json");
  EXPECT_EQ(submit.first, 0) << submit.second << tunerd.log();
}

// Dialing a TLS tracker in plaintext: the agent and tunerd say which flag is missing, and
// tune-client, whose tunerd answered, does not say that it cannot reach tunerd.
TEST_F(SecurityTlsTest, ATrackerDialedWithoutItsCaIsNamedWithTheFlagThatIsMissing) {
  ASSERT_TRUE(queue_status(tls(true), 20).ok()) << tracker_->log();
  Process agent(bin_path("device-agent"),
                {"--tracker", tracker_address_, "--key", "tls-cpu", "--token-file", secret_file("a-secret")},
                *dir_ + "/plain-agent.log");
  std::string address = fmt::format("127.0.0.1:{}", free_port());
  Process tunerd(bin_path("tunerd"),
                 {"--listen", address, "--tracker", tracker_address_, "--data-dir", *dir_ + "/plain-tunerd-data",
                  "--tracker-token-file", secret_file("t-secret"), "--build-threads", "1"},
                 *dir_ + "/plain-tunerd.log");
  std::string out;
  for (int i = 0; i < 100; ++i) {
    std::string command = fmt::format("{} --server {} submit --workload matmul:M=32,N=32,K=32 --device tls-cpu "
                                      "--trials 4 2>&1", bin_path("tune-client"), address);
    FILE* pipe = popen(command.c_str(), "r");
    out.clear();
    char buffer[512];
    while (pipe && fgets(buffer, sizeof buffer, pipe)) out += buffer;
    if (pipe) pclose(pipe);
    if (out.find("tracker") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Earlier lines may be submit's own retries while tunerd was still starting; the last is its answer.
  std::string answer = out.substr(out.rfind("tune-client: submit: ") == std::string::npos ? 0 : out.rfind("tune-client: submit: "));
  EXPECT_NE(answer.find("give tunerd --tracker-ca"), std::string::npos) << out;
  EXPECT_EQ(answer.find("cannot reach " + address), std::string::npos) << out;
  for (int i = 0; i < 100 && agent.log().find("session ended") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(agent.log().find("one that serves TLS needs --tls-ca"), std::string::npos) << agent.log();
}

// Metrics beyond loopback: served over TLS with the daemon's certificate, and only to a token.
TEST_F(SecurityTlsTest, MetricsBeyondLoopbackAreServedOverTlsToATokenOnly) {
  int port = free_port();
  Process tracker(bin_path("trackerd"),
                  {"--listen", fmt::format("127.0.0.1:{}", free_port()), "--tls-cert", pem("server.pem"), "--tls-key",
                   pem("server.key"), "--tuner-token-file", secret_file("t-secret"), "--agent-token-file",
                   secret_file("a-secret"), "--metrics-listen", fmt::format("0.0.0.0:{}", port)},
                  *dir_ + "/trackerd-metrics.log");
  httplib::SSLClient client("127.0.0.1", port);
  client.set_ca_cert_path(pem("ca.pem").c_str());
  client.enable_server_certificate_verification(true);
  client.set_connection_timeout(std::chrono::seconds(2));
  int refused = 0;
  for (int i = 0; i < 100 && refused == 0; ++i) {
    if (auto r = client.Get("/metrics")) refused = r->status;
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(refused, 401) << tracker.log();
  auto scraped = client.Get("/metrics", {{"Authorization", "Bearer t-secret"}});
  ASSERT_TRUE(scraped);
  EXPECT_EQ(scraped->status, 200);
  EXPECT_EQ(scraped->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  // Plaintext to the TLS port gets no metrics.
  httplib::Client plain("127.0.0.1", port);
  plain.set_connection_timeout(std::chrono::seconds(2));
  plain.set_read_timeout(std::chrono::seconds(2));
  auto answer = plain.Get("/metrics", {{"Authorization", "Bearer t-secret"}});
  EXPECT_TRUE(!answer || answer->status != 200);
  EXPECT_TRUE(tracker.running());
}

TEST(SecurityListen, DaemonsRefuseToListenBeyondLoopbackWithoutTlsAndTokens) {
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string wide = "0.0.0.0:" + std::to_string(free_port());
  Process tracker(bin_path("trackerd"), {"--listen", wide, "--agent-token-file", secret_file("a"), "--tuner-token-file", secret_file("t")},
                  dir + "/tunefarm-tls-refusal-trackerd.log");
  int status = tracker.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_NE(tracker.log().find("without TLS"), std::string::npos) << tracker.log();
  Process tunerd(bin_path("tunerd"), {"--listen", wide, "--client-token-file", secret_file("c"), "--data-dir", dir + "/tunefarm-tls-x"},
                 dir + "/tunefarm-tls-refusal-tunerd.log");
  status = tunerd.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_NE(tunerd.log().find("without TLS"), std::string::npos) << tunerd.log();
  std::filesystem::remove(dir + "/tunefarm-tls-refusal-trackerd.log");
  std::filesystem::remove(dir + "/tunefarm-tls-refusal-tunerd.log");
  std::filesystem::remove_all(dir + "/tunefarm-tls-x");
}

}  // namespace
}  // namespace tunefarm::testing
