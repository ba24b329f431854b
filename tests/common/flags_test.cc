#include "common/flags.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tunefarm {
namespace {

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    app_.add_option("--listen", listen_);
    app_.add_option("--data-dir", data_dir_);
    path_ = ::testing::TempDir() + "/flags_test_" + std::to_string(getpid()) + ".toml";
  }
  void TearDown() override { std::remove(path_.c_str()); }
  Status check(const std::string& text) {
    std::ofstream(path_) << text;
    return check_config_file(app_, path_);
  }

  CLI::App app_{"test"};
  std::string listen_, data_dir_, path_;
};

TEST_F(ConfigFile, AcceptsTheFlagsLongNames) {
  EXPECT_TRUE(check("listen = \"127.0.0.1:1\"\ndata-dir = \"d\"\n").ok());
}

TEST_F(ConfigFile, NamesAnUnderscoreSpellingOfAFlag) {
  Status s = check("listen = \"127.0.0.1:1\"\ndata_dir = \"d\"\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(":2: unknown key \"data_dir\" (did you mean \"data-dir\"?)"), std::string::npos)
      << s.message();
}

TEST_F(ConfigFile, RefusesAnUnknownKeyWithItsLine) {
  Status s = check("\n\nbogus-key = 1\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_ + ":3: unknown key \"bogus-key\""), std::string::npos) << s.message();
}

TEST_F(ConfigFile, RefusesASection) {
  Status s = check("[tracker]\nlisten = \"x\"\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("[tracker]: sections are not read"), std::string::npos) << s.message();
}

TEST_F(ConfigFile, RefusesAnUnterminatedString) {
  Status s = check("listen = \"127.0.0.1:9190\ndata-dir = \"d\"\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_ + ":1:"), std::string::npos) << s.message();
}

TEST_F(ConfigFile, AMissingFileIsNamedWithTheReason) {
  Status s = check_config_file(app_, path_ + ".missing");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read the --config file " + path_ + ".missing: No such file or directory"),
            std::string::npos)
      << s.message();
}

TEST_F(ConfigFile, ParseCommandLineStopsOnABadFile) {
  std::ofstream(path_) << "bogus = 1\n";
  std::string prog = "prog", flag = "--config", file = path_;
  app_.set_config("--config");
  char* argv[] = {prog.data(), flag.data(), file.data()};
  int exit_code = 0;
  EXPECT_FALSE(parse_command_line(app_, 3, argv, exit_code));
  EXPECT_EQ(exit_code, 2);
}

// The daemons' --check-config: a valid file and command line exit 0 without running, a bad value
// exits 2, and the flag cannot be set from the file (it would stop the daemon at every start).
class CheckConfig : public ConfigFile {
 protected:
  void SetUp() override {
    ConfigFile::SetUp();
    app_.add_option("--max-jobs", max_jobs_)->check(CLI::Range(1, 64));
    add_common_flags(app_, common_, true);
  }
  bool parse(const std::string& text, int& exit_code) {
    std::ofstream(path_) << text;
    std::string prog = "prog", flag = "--config", file = path_, check = "--check-config";
    char* argv[] = {prog.data(), flag.data(), file.data(), check.data()};
    return parse_command_line(app_, 4, argv, exit_code);
  }

  CommonFlags common_;
  int max_jobs_ = 1;
};

TEST_F(CheckConfig, AValidFileExitsZeroWithoutRunning) {
  int exit_code = -1;
  EXPECT_FALSE(parse("listen = \"127.0.0.1:1\"\nmax-jobs = 4\n", exit_code));
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(max_jobs_, 4);
}

TEST_F(CheckConfig, AnOutOfRangeValueExitsTwo) {
  int exit_code = -1;
  EXPECT_FALSE(parse("max-jobs = 65\n", exit_code));
  EXPECT_EQ(exit_code, 2);
}

TEST_F(CheckConfig, IsNotAKeyOfTheFile) {
  std::ofstream(path_) << "check-config = true\n";
  Status s = check_config_file(app_, path_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown key \"check-config\""), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tunefarm
