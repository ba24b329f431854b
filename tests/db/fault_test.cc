// The history under damage: cut-off and scribbled-over files, rows edited behind tunefarm's back,
// garbage import files, and a writer process killed in the middle of its transactions. Each gives
// a clear error or a consistent database — never a crash, never half a transaction.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "db/record_store.h"
#include "db/salvage.h"
#include "db/sqlite.h"
#include "db_test_util.h"

namespace tunefarm {
namespace {

using testing::make_record;
using testing::TempDir;

std::vector<v1::Record> batch(int first, int count, const std::string& job) {
  std::vector<v1::Record> records;
  for (int i = first; i < first + count; ++i) records.push_back(make_record({.config = i, .job_id = job}));
  return records;
}

// A closed history of a few hundred KiB, fully checkpointed into its main file.
std::string make_history(const TempDir& dir) {
  std::string path = dir.file("history.db");
  auto store = db::RecordStore::open(path).value();
  for (int b = 0; b < 10; ++b) EXPECT_TRUE(store->insert(batch(b * 200, 200, "job-1")).ok());
  return path;
}

bool mentions(const Status& status, std::string_view text) {
  return status.message().find(text) != std::string::npos;
}

// A damaged file must be reported by open() or, at the latest, by the first query that reads
// the damage — as kDataLoss naming the file.
void expect_damage_reported(const std::string& path) {
  auto store = db::RecordStore::open(path);
  if (!store.ok()) {
    EXPECT_EQ(store.status().code(), StatusCode::kDataLoss) << store.status().to_string();
    EXPECT_TRUE(mentions(store.status(), path)) << store.status().message();
    return;
  }
  auto page = (*store)->list_records({}, 100000);
  ASSERT_FALSE(page.ok()) << "reading a damaged history gave " << page->records.size() << " records";
  EXPECT_EQ(page.status().code(), StatusCode::kDataLoss) << page.status().to_string();
  EXPECT_TRUE(mentions(page.status(), path)) << page.status().message();
}

TEST(Fault, TruncatedFileIsAClearErrorAtOpen) {
  TempDir dir;
  std::string path = make_history(dir);
  auto size = std::filesystem::file_size(path);
  for (auto keep : {size / 2, uintmax_t{4096}, uintmax_t{50}}) {
    std::filesystem::resize_file(path, keep);
    auto store = db::RecordStore::open(path);
    ASSERT_FALSE(store.ok()) << "kept " << keep << " bytes";
    EXPECT_EQ(store.status().code(), StatusCode::kDataLoss);
    EXPECT_TRUE(mentions(store.status(), "truncated")) << store.status().message();
    EXPECT_TRUE(mentions(store.status(), path));
  }
}

// Another program cutting the file short while tunerd has it open: queries fail with an error
// naming the file, the process lives on.
TEST(Fault, FileTruncatedWhileOpenIsAnErrorNotACrash) {
  TempDir dir;
  std::string path = make_history(dir);
  auto store = db::RecordStore::open(path).value();
  ASSERT_TRUE(store->list_records({}, 10).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 3);
  auto page = store->list_records({}, 100000);
  ASSERT_FALSE(page.ok());
  EXPECT_TRUE(mentions(page.status(), path)) << page.status().to_string();
  auto best = store->query_best(testing::workload("matmul:M=64,N=64,K=64"), testing::target("llvm"), "", 1000);
  if (!best.ok()) {
    EXPECT_TRUE(mentions(best.status(), path)) << best.status().to_string();
  }
}

TEST(Fault, FileThatIsNotADatabaseIsAClearError) {
  TempDir dir;
  std::string path = dir.file("notes.db");
  std::ofstream(path) << std::string(8192, 'x');
  auto store = db::RecordStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(mentions(store.status(), "not a SQLite database")) << store.status().message();
}

TEST(Fault, ScribbledPagesAreReportedNotCrashedOn) {
  std::mt19937 random(42);
  for (int round = 0; round < 4; ++round) {
    TempDir dir;
    std::string path = make_history(dir);
    auto size = std::filesystem::file_size(path);
    {
      // Garbage over everything after the first page (which holds the schema), in random runs.
      std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
      for (uintmax_t at = 4096; at + 512 < size; at += 512) {
        if (random() % 3 == 0 && round > 0) continue;
        std::string junk(512, '\0');
        for (char& c : junk) c = static_cast<char>(random());
        file.seekp(static_cast<std::streamoff>(at));
        file.write(junk.data(), junk.size());
      }
    }
    SCOPED_TRACE("round " + std::to_string(round));
    expect_damage_reported(path);
  }
}

// 4 KB of random bytes over the middle one of the pages that hold record rows (SQLite's dbstat
// says which they are), wherever the schema's tables and indexes put them.
void overwrite_middle_page(const std::string& path) {
  int64_t page_size = 0, page = 0;
  {
    auto connection = db::Connection::open(path, db::Connection::Mode::kReadOnly, std::chrono::seconds(1)).value();
    page_size = connection->query_int("PRAGMA page_size").value();
    int64_t leaves = connection->query_int("SELECT count(*) FROM dbstat WHERE name = 'records' AND pagetype = 'leaf'").value();
    page = connection
               ->query_int(fmt::format("SELECT pageno FROM dbstat WHERE name = 'records' AND pagetype = 'leaf' "
                                       "ORDER BY pageno LIMIT 1 OFFSET {}",
                                       leaves / 2))
               .value();
  }
  std::mt19937 random(7);
  std::string junk(static_cast<size_t>(page_size), '\0');
  for (char& c : junk) c = static_cast<char>(random());
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>((page - 1) * page_size));
  file.write(junk.data(), junk.size());
}

// 4 KB of random bytes in the middle of a real history: open() refuses it (quick check and full
// check alike), so tunerd never accepts a job whose measurements it could not store.
TEST(Fault, ARandomBlockInTheMiddleIsRefusedAtOpen) {
  for (auto check : {db::RecordStoreOptions::Check::kQuick, db::RecordStoreOptions::Check::kFull}) {
    TempDir dir;
    std::string path = make_history(dir);
    overwrite_middle_page(path);
    db::RecordStoreOptions options;
    options.check = check;
    auto store = db::RecordStore::open(path, options);
    ASSERT_FALSE(store.ok()) << "a damaged history opened";
    EXPECT_EQ(store.status().code(), StatusCode::kDataLoss) << store.status().to_string();
    EXPECT_TRUE(mentions(store.status(), path)) << store.status().message();
  }
}

// The same damage, salvaged: every row on an intact page goes into a new history that opens clean,
// the rows on the damaged pages are counted, and the damaged file is left as it was.
TEST(Fault, ADamagedHistoryIsSalvagedIntoANewOne) {
  TempDir dir;
  std::string path = make_history(dir);
  auto size = std::filesystem::file_size(path);
  overwrite_middle_page(path);
  ASSERT_FALSE(db::RecordStore::open(path).ok());
  auto report = db::salvage_history(path, dir.file("salvaged.db"));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_GT(report->records, 1500) << "most of the 2000 records sit on intact pages";
  EXPECT_LT(report->records, 2000);
  db::RecordStoreOptions full;
  full.check = db::RecordStoreOptions::Check::kFull;
  auto salvaged = db::RecordStore::open(dir.file("salvaged.db"), full);
  ASSERT_TRUE(salvaged.ok()) << salvaged.status().to_string();
  auto page = (*salvaged)->list_records({}, 100000);
  ASSERT_TRUE(page.ok()) << page.status().to_string();
  EXPECT_EQ(page->total, report->records);
  EXPECT_EQ(std::filesystem::file_size(path), size) << "the damaged file is only read";
  // A salvage never writes over a history.
  auto again = db::salvage_history(path, dir.file("salvaged.db"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition) << again.status().to_string();
}

// A job keeps the request it was submitted under: a client retrying that submit against the
// salvaged history finds its job rather than making a second one.
TEST(Fault, ASalvagedJobKeepsItsRequest) {
  TempDir dir;
  std::string path = dir.file("history.db");
  v1::JobSpec spec;
  spec.set_name("gemm");
  auto* task = spec.add_tasks();
  *task->mutable_workload() = to_proto(testing::workload("matmul:M=64,N=64,K=64"));
  task->set_weight(1);
  *spec.mutable_target() = to_proto(testing::target("llvm"));
  spec.set_device_key("local-cpu");
  spec.set_trials(8);
  std::string id;
  {
    auto store = db::RecordStore::open(path).value();
    auto made = store->create_job(spec, db::JobRequest{"alice", "request-1"});
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    id = made->job.id();
  }
  auto report = db::salvage_history(path, dir.file("salvaged.db"));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->jobs, 1);
  auto salvaged = db::RecordStore::open(dir.file("salvaged.db")).value();
  auto again = salvaged->create_job(spec, db::JobRequest{"alice", "request-1"});
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_FALSE(again->created) << "the retried submit made a second job";
  EXPECT_EQ(again->job.id(), id);
}

TEST(Fault, ScribbledHeaderIsAClearError) {
  TempDir dir;
  std::string path = make_history(dir);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.write("garbage garbage garbage", 23);
  }
  auto store = db::RecordStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kDataLoss);
}

TEST(Fault, RowEditedOutsideTunefarmIsDataLossNamingTheRow) {
  TempDir dir;
  std::string path = make_history(dir);
  {
    auto raw = db::Connection::open(path, db::Connection::Mode::kReadWrite, std::chrono::milliseconds(100)).value();
    ASSERT_TRUE(raw->exec("UPDATE records SET config = 'not json' WHERE id = 17").ok());
    ASSERT_TRUE(raw->exec("INSERT INTO workloads (text) VALUES ('matmul:M=banana')").ok());
  }
  auto store = db::RecordStore::open(path).value();
  auto page = store->list_records({});
  ASSERT_FALSE(page.ok());
  EXPECT_EQ(page.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(mentions(page.status(), "record 17")) << page.status().message();
  // Rows that are intact still answer.
  auto fine = store->list_records({}, 10);
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine->records.size(), 10u);
  auto best = store->query_best(testing::workload("matmul:M=64,N=64,K=64"), testing::target("llvm"));
  EXPECT_TRUE(best.ok()) << best.status().to_string();
}

TEST(Fault, MissingDirectoryIsAClearError) {
  TempDir dir;
  std::string path = dir.file("no/such/dir/history.db");
  auto store = db::RecordStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(mentions(store.status(), "cannot open")) << store.status().message();
  EXPECT_TRUE(mentions(store.status(), path));
}

TEST(Fault, GarbageImportLinesAreNamedAndNothingIsImported) {
  TempDir dir;
  auto store = db::RecordStore::open(dir.file("history.db")).value();
  std::string good = [&] {
    std::ostringstream out;
    auto source = db::RecordStore::open(dir.file("source.db")).value();
    EXPECT_TRUE(source->insert(batch(0, 3, "job-1")).ok());
    EXPECT_TRUE(source->export_jsonl({}, out).ok());
    return out.str();
  }();
  v1::Record bad_workload = make_record({});
  bad_workload.mutable_workload()->mutable_params(1)->set_value(0);
  struct Case {
    std::string garbage;
    std::string says;
  };
  std::vector<Case> cases = {
      {"this is not json", "not a JSON Record"},
      {"{\"device_key\":\"x\",\"workload\":", "not a JSON Record"},
      {"{\"colour\":\"blue\"}", "colour"},
      {"[1,2,3]", "not a JSON Record"},
      {"{}", "no workload"},
      {std::string("\x00\xff\xfe", 3), "not a JSON Record"},
      {"{\"workload\":{\"op\":\"matmul\"},\"target\":{\"kind\":\"llvm\"}}", "record workload"},
  };
  for (const auto& c : cases) {
    std::istringstream in(good + c.garbage + "\n" + good);
    auto stats = store->import_jsonl(in, "upload.jsonl");
    ASSERT_FALSE(stats.ok()) << c.garbage;
    EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(mentions(stats.status(), "upload.jsonl line 4")) << stats.status().message();
    EXPECT_TRUE(mentions(stats.status(), c.says)) << stats.status().message();
  }
  EXPECT_EQ(store->list_records({})->total, 0);
  // A last line cut off in the middle is just as clearly refused.
  std::istringstream cut(good.substr(0, good.size() - 20));
  auto stats = store->import_jsonl(cut, "cut.jsonl");
  EXPECT_TRUE(mentions(stats.status(), "cut.jsonl line 3")) << stats.status().message();
}

// A child process writes batches as fast as it can and is killed with SIGKILL at a random moment,
// often in the middle of a transaction. The database must open afterwards, pass SQLite's
// integrity check, and hold every batch the child saw committed — each whole or not at all.
TEST(Fault, WriterKilledMidBatchLeavesOnlyWholeTransactions) {
  TempDir dir;
  std::string path = dir.file("history.db");
  constexpr int kBatchSize = 400;
  std::mt19937 random(7);
  int committed_before_kill = 0;
  for (int round = 0; round < 4; ++round) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      auto store = db::RecordStore::open(path);
      if (!store.ok()) ::_exit(3);
      for (int b = 0;; ++b) {
        std::string job = fmt::format("round{}-batch{}", round, b);
        if (!(*store)->insert(batch(0, kBatchSize, job)).ok()) ::_exit(4);
        // Tell the parent this batch is committed.
        if (::write(pipe_fds[1], &b, sizeof b) != sizeof b) ::_exit(5);
      }
    }
    ::close(pipe_fds[1]);
    int last = -1;
    // Let a few batches commit, then kill at a random point within the next ones.
    for (int got = 0; got < 3;) {
      int b;
      ASSERT_EQ(::read(pipe_fds[0], &b, sizeof b), static_cast<ssize_t>(sizeof b)) << "child died early";
      last = b;
      ++got;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 30000));
    ::kill(child, SIGKILL);
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
    int b;
    while (::read(pipe_fds[0], &b, sizeof b) == sizeof b) last = b;
    ::close(pipe_fds[0]);
    committed_before_kill += last + 1;

    auto store = db::RecordStore::open(path);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    {
      auto raw = db::Connection::open(path, db::Connection::Mode::kReadOnly, std::chrono::milliseconds(1000)).value();
      auto check = raw->prepare("PRAGMA integrity_check").value();
      ASSERT_TRUE(check.step().value());
      EXPECT_EQ(check.column_text(0), "ok");
    }
    auto total = (*store)->list_records({}, 1)->total;
    EXPECT_EQ(total % kBatchSize, 0) << "a transaction was torn: " << total << " records";
    EXPECT_GE(total, int64_t{committed_before_kill} * kBatchSize);
    for (int i = 0; i <= last; ++i) {
      db::RecordFilter filter{.job_id = fmt::format("round{}-batch{}", round, i)};
      EXPECT_EQ((*store)->list_records(filter, 1)->total, kBatchSize) << filter.job_id;
    }
  }
}

}  // namespace
}  // namespace tunefarm
