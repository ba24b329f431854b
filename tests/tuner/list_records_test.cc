// ListRecords answers are bounded in bytes, not only in records: a history of records near every
// per-record limit comes back in pages that each fit a client's default receive limit, and paging
// by next_offset returns every record exactly once, in order.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "common/wire/wire.h"
#include "db/record_codec.h"
#include "tests/search/fakes.h"
#include "tuner/service.h"

namespace tunefarm {
namespace {

constexpr int kRecords = 120;

class NoTasks : public TaskFactory {
 public:
  StatusOr<std::unique_ptr<TuningTask>> make_task(const Workload& workload, const Target&, const std::string&) override {
    return invalid_argument("no task for " + workload.to_string());
  }
};

class ListRecordsPaging : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("list-records-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    store_ = std::move(db::RecordStore::open((dir_ / "history.db").string()).value());
    jobs_ = std::make_unique<JobManager>(
        *store_, tasks_, [](const v1::Job&) -> StatusOr<std::unique_ptr<MeasureBackend>> { return unavailable("none"); },
        [](const std::string& key) -> StatusOr<std::vector<AgentPlatform>> { return invalid_argument(key); });
    service_ = std::make_unique<TunerService>(*jobs_, *store_);
  }
  void TearDown() override {
    service_.reset();
    jobs_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Record `i`, as large as the history lets a record be: every knob, every cost, the longest
  // error message. Its first cost is i, so that a listing says which record it holds.
  static v1::Record large(int i) {
    v1::Record r;
    *r.mutable_workload() = to_proto(*parse_workload("matmul:M=64,N=64,K=64"));
    *r.mutable_target() = to_proto(*parse_target("llvm"));
    r.set_device_key("local-cpu");
    r.set_job_id("job-1");
    v1::Config* config = r.mutable_config();
    config->set_template_name("matmul.cpu.blocked");
    config->set_index(-1);
    for (int k = 0; k < db::kMaxKnobs; ++k) {
      v1::Knob* knob = config->add_knobs();
      knob->set_name(fmt::format("knob_{}", k));
      for (int v = 0; v < db::kMaxKnobs; ++v) knob->mutable_value()->mutable_ints()->add_values(int64_t{1} << 40 | i);
    }
    v1::MeasureResult* result = r.mutable_result();
    result->add_costs(i + 1);
    for (int c = 1; c < db::kMaxCosts; ++c) result->add_costs(1e-3 + c * 1e-9);
    result->set_error_msg(std::string(db::kMaxErrorMessage, 'e'));
    result->set_started_at_us(i + 1);
    result->set_finished_at_us(i + 2);
    result->set_agent_id("agent-1");
    return r;
  }
  void fill() {
    std::vector<v1::Record> batch;
    for (int i = 0; i < kRecords; ++i) batch.push_back(large(i));
    ASSERT_TRUE(store_->add(batch).ok());
    ASSERT_TRUE(store_->flush().ok());
  }

  v1::ListRecordsResponse list(int limit, int64_t offset) {
    v1::ListRecordsRequest request;
    request.set_limit(limit);
    request.set_offset(offset);
    v1::ListRecordsResponse response;
    grpc::ServerContext context;
    grpc::Status status = service_->ListRecords(&context, &request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::filesystem::path dir_;
  std::unique_ptr<db::RecordStore> store_;
  NoTasks tasks_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<TunerService> service_;
};

// The records of one answer, as the first cost of each names them.
std::vector<int> which(const v1::ListRecordsResponse& response) {
  std::vector<int> out;
  for (const auto& r : response.records()) out.push_back(static_cast<int>(r.result().costs(0)) - 1);
  return out;
}

TEST_F(ListRecordsPaging, AnAnswerStaysUnderTheByteBoundAndSaysWhereTheRestBegins) {
  fill();
  ASSERT_GT(large(0).ByteSizeLong() * kRecords, 4 * TunerService::kMaxListRecordsBytes) << "the test needs several pages";
  v1::ListRecordsResponse first = list(10000, 0);
  EXPECT_LE(first.ByteSizeLong(), TunerService::kMaxListRecordsBytes + 64);
  EXPECT_EQ(first.total(), kRecords);
  ASSERT_GT(first.records_size(), 0);
  ASSERT_LT(first.records_size(), kRecords);
  EXPECT_EQ(first.next_offset(), first.records_size());
  // A page is full: one more record would not have fitted.
  EXPECT_GT(first.ByteSizeLong() + large(0).ByteSizeLong(), TunerService::kMaxListRecordsBytes);
}

TEST_F(ListRecordsPaging, PagingReturnsEveryRecordOnceInOrder) {
  fill();
  std::vector<int> seen;
  int64_t offset = 0;
  int pages = 0;
  for (;;) {
    v1::ListRecordsResponse page = list(10000 - static_cast<int>(seen.size()), offset);
    EXPECT_LE(page.ByteSizeLong(), TunerService::kMaxListRecordsBytes + 64);
    for (int i : which(page)) seen.push_back(i);
    ++pages;
    if (page.next_offset() == 0) break;
    ASSERT_EQ(page.next_offset(), offset + page.records_size());
    offset = page.next_offset();
    ASSERT_LT(pages, kRecords) << "paging does not move on";
  }
  EXPECT_GT(pages, 4);
  std::vector<int> all(kRecords);
  for (int i = 0; i < kRecords; ++i) all[i] = i;
  EXPECT_EQ(seen, all);
}

TEST_F(ListRecordsPaging, AnAnswerThatFitsHasNoNextOffset) {
  fill();
  v1::ListRecordsResponse some = list(3, 10);
  EXPECT_EQ(which(some), (std::vector<int>{10, 11, 12}));
  EXPECT_EQ(some.next_offset(), 0);
  v1::ListRecordsResponse last = list(10000, kRecords - 2);
  EXPECT_EQ(which(last), (std::vector<int>{kRecords - 2, kRecords - 1}));
  EXPECT_EQ(last.next_offset(), 0);
}

}  // namespace
}  // namespace tunefarm
