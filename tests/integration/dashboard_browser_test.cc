// tunerd's dashboard in a real browser: Debian's headless Chromium loads the page of a finished
// job, and the curve it drew (one point per trial, the best so far) is read back from the page's
// DOM and checked against the job's records; a screenshot of it is written under the build folder.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/integration/farm_harness.h"
#include "tests/integration/http_harness.h"
#include "tests/integration/tunerd_harness.h"

namespace tunefarm::testing {
namespace {

// The first headless Chromium on PATH (or $TUNEFARM_CHROMIUM); empty when there is none.
std::string find_browser() {
  if (const char* given = std::getenv("TUNEFARM_CHROMIUM"); given && *given) return given;
  const char* path = std::getenv("PATH");
  for (const char* name : {"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"}) {
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      size_t colon = dirs.find(':', start);
      std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      std::string candidate = (std::filesystem::path(dir.empty() ? "." : dir) / name).string();
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  return {};
}

class Browser {
 public:
  explicit Browser(std::string binary) : binary_(std::move(binary)) {
    std::string pattern = (std::filesystem::temp_directory_path() / "tunefarm-chromium-XXXXXX").string();
    profile_ = mkdtemp(pattern.data()) ? pattern : std::string();
  }
  ~Browser() {
    std::error_code ec;
    if (!profile_.empty()) std::filesystem::remove_all(profile_, ec);
  }

  // Runs the browser on `url` with `action` (--dump-dom, --screenshot=FILE) after the page had up
  // to `budget_ms` of virtual time to fetch its data and draw; its stdout.
  std::string run(const std::string& url, const std::string& action, int budget_ms = 10000) const {
    // --no-sandbox: the browser's own sandbox cannot start as root or in most containers; the page
    // is this test's own.
    std::string cmd = fmt::format(
        "timeout 60 '{}' --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir='{}' "
        "--window-size=1280,900 --virtual-time-budget={} {} '{}' 2>>'{}/stderr.log'",
        binary_, profile_, budget_ms, action, url, profile_);
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (p) pclose(p);
    return out;
  }

  std::string stderr_log() const {
    std::ifstream in(profile_ + "/stderr.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  std::string binary_;
  std::string profile_;
};

// The data-* attributes of the page's #curve-summary element, as the page wrote them.
std::map<std::string, std::string> curve_summary(const std::string& dom) {
  std::map<std::string, std::string> out;
  std::smatch element;
  if (!std::regex_search(dom, element, std::regex(R"(<div id="curve-summary"[^>]*>)"))) return out;
  std::string tag = element.str();
  std::regex attribute(R"re(data-([a-z-]+)="([^"]*)")re");
  for (auto it = std::sregex_iterator(tag.begin(), tag.end(), attribute); it != std::sregex_iterator(); ++it)
    out[(*it)[1]] = (*it)[2];
  return out;
}

TEST(DashboardBrowser, AFinishedJobsCurveHasOnePointPerTrialAndTheRightBest) {
  std::string browser_binary = find_browser();
  if (browser_binary.empty())
    GTEST_SKIP() << "no headless Chromium on PATH (chromium-headless-shell, chromium): bash deploy/install-deps.sh "
                    "installs Debian's chromium-headless-shell, or set TUNEFARM_CHROMIUM";
  Browser browser(browser_binary);

  Farm farm;
  farm.start_agent("cpu-0");
  ASSERT_TRUE(farm.wait_for_agents("local-cpu", 1, std::chrono::seconds(20))) << farm.logs();
  int http_port = free_port();
  Tunerd tunerd(farm, farm.log_dir() + "/data", {"--http-listen", fmt::format("127.0.0.1:{}", http_port)});
  constexpr int kTrials = 16;
  auto job = tunerd.submit("matmul:M=64,N=64,K=64", kTrials, 8);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  std::string url = fmt::format("http://127.0.0.1:{}/jobs/{}", http_port, job->id());

  // While it runs the page follows it (it polls until the job ends).
  auto live = curve_summary(browser.run(url, "--dump-dom", 3000));
  v1::Job done = tunerd.watch(job->id());
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.error() << tunerd.log();
  if (!live.empty()) {
    EXPECT_LE(std::stoi(live["points"]), kTrials);
  }

  int trials = 0;
  double best_trial = 0;
  for (const auto& r : tunerd.records(job->id())) {
    if (r.remeasure_round() > 0) continue;
    ++trials;
    best_trial = std::max(best_trial, r.gflops());
  }
  ASSERT_EQ(trials, kTrials);

  std::string dom = browser.run(url, "--dump-dom");
  auto page = curve_summary(dom);
  ASSERT_EQ(page["ready"], "final") << "the page did not finish drawing:\n" << dom.substr(0, 4000) << "\n"
                                    << browser.stderr_log().substr(0, 4000);
  EXPECT_EQ(page["job"], job->id());
  EXPECT_EQ(page["state"], "SUCCEEDED");
  EXPECT_EQ(page["tasks"], "1");
  EXPECT_EQ(page["charts"], "2");  // By trial and by time.
  EXPECT_EQ(std::stoi(page["points"]), kTrials);
  EXPECT_EQ(std::stoi(page["plotted-points"]), kTrials);  // As the chart holds them.
  EXPECT_NEAR(std::stod(page["best-trial-gflops"]), best_trial, 0.0005);
  EXPECT_NEAR(std::stod(page["job-best-gflops"]), done.progress().best_gflops(), 0.0005);
  EXPECT_NE(dom.find(fmt::format("{:.2f} GFLOP/s", done.progress().best_gflops())), std::string::npos)
      << "the job's best is not shown as text";

  std::filesystem::create_directories(TUNEFARM_SCREENSHOT_DIR);
  std::string shot = std::string(TUNEFARM_SCREENSHOT_DIR) + "/dashboard-job.png";
  std::filesystem::remove(shot);
  browser.run(url, "--screenshot=" + shot);
  ASSERT_TRUE(std::filesystem::exists(shot)) << browser.stderr_log().substr(0, 4000);
  std::ifstream png(shot, std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  std::cout << "screenshot: " << shot << "\n";

  // The index lists the job and the farm.
  std::string index = browser.run(fmt::format("http://127.0.0.1:{}/", http_port), "--dump-dom", 3000);
  EXPECT_NE(index.find(fmt::format("data-job=\"{}\"", job->id())), std::string::npos) << index.substr(0, 4000);
  EXPECT_NE(index.find("data-key=\"local-cpu\""), std::string::npos);
}

}  // namespace
}  // namespace tunefarm::testing
