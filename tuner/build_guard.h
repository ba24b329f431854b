// A job's mark, on disk, that its candidates are being compiled. LLVM aborts the whole process on
// some inputs; a job whose candidates do that would take tunerd down again at every restart if it
// were resumed blindly. While any candidate of a job builds, a file in the marker directory holds
// how many times in a row tunerd has died during this job's builds (this one included); it is
// removed when the builds finish. At the next start a job whose mark says it happened twice is not
// resumed but FAILED with the reason: once may be a kill that happened to land mid-build, twice in
// a row is the job.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "search/tuning_loop.h"

namespace tunefarm {

inline constexpr int kBuildCrashesBeforeFailing = 2;

class BuildGuard {
 public:
  // `directory` empty disables the marks (tests and tools that run no daemon).
  BuildGuard(std::string directory, std::string job_id);
  // Times tunerd died during this job's builds, in a row, as its mark says (0 without a mark).
  static int crashes(const std::string& directory, const std::string& job_id);
  // Forgets the mark of a job that ended.
  static void clear(const std::string& directory, const std::string& job_id);

  void enter();
  void leave();

 private:
  std::string path_;
  int prior_crashes_ = 0;
  std::mutex mu_;
  int active_ = 0;  // Builds in progress; guarded by mu_.
};

// A task whose builds are bracketed by a BuildGuard; everything else goes to `inner`.
std::unique_ptr<TuningTask> guard_builds(std::unique_ptr<TuningTask> inner, BuildGuard& guard);

}  // namespace tunefarm
