// A job's mark that its candidates are being compiled. LLVM aborts the whole process on some
// inputs; a job whose candidates do that would take tunerd down again at every restart if it were
// resumed blindly. While any candidate of a job builds, its mark holds how many times in a row
// tunerd has died during this job's builds (this one included); it is removed when the builds
// finish. A job whose mark says it happened twice is not resumed (after a restart, or taken over
// by another tunerd) but FAILED with the reason: once may be a kill that happened to land
// mid-build, twice in a row is the job.
//
// The marks are files in tunerd's data directory, or, where several tunerds share a history, in
// the history's jobs: the tunerd that takes a job over must see the marks of the one that died,
// or a job that kills every tunerd it reaches would go round all of them.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "db/record_store.h"
#include "search/tuning_loop.h"

namespace tunefarm {

inline constexpr int kBuildCrashesBeforeFailing = 2;

// Where the marks are kept.
class BuildMarks {
 public:
  virtual ~BuildMarks() = default;
  // Times tunerd died during this job's builds, in a row, as its mark says (0 without a mark).
  virtual int crashes(const std::string& job_id) = 0;
  // Marks the job's builds as under way, `crashes` counting this one; 0 removes the mark.
  virtual void set(const std::string& job_id, int crashes) = 0;
};

// Marks as files in `directory`; empty disables them (tests and tools that run no daemon).
std::unique_ptr<BuildMarks> file_build_marks(std::string directory);
// Marks in the jobs of a history that several tunerds share, written under the job's lease.
std::unique_ptr<BuildMarks> history_build_marks(db::RecordStore& store);

class BuildGuard {
 public:
  BuildGuard(BuildMarks& marks, std::string job_id);

  void enter();
  void leave();

 private:
  BuildMarks& marks_;
  std::string job_id_;
  int prior_crashes_ = 0;
  std::mutex mu_;
  int active_ = 0;  // Builds in progress; guarded by mu_.
};

// A task whose builds are bracketed by a BuildGuard; everything else goes to `inner`.
std::unique_ptr<TuningTask> guard_builds(std::unique_ptr<TuningTask> inner, BuildGuard& guard);

}  // namespace tunefarm
