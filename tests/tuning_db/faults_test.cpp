// SPDX-License-Identifier: Apache-2.0
// Faults: a read-only location still serves lookups and refuses saves with a reason, kill -9
// mid-write leaves a sound file. (Foreign, damaged and non-SQLite files: file_safety_test.cpp.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "prism/error.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;
namespace fs = std::filesystem;

TEST(TuningFaults, UncreatableLocationServesDefaults) {
  database db("/proc/prism-no-such-dir/tuning.db");
  // Opening creates nothing, so only a permission check can tell early; root passes it and
  // learns at the first write.
  if (::geteuid() != 0) {
    EXPECT_FALSE(db.is_open());
    EXPECT_FALSE(db.writable());
    EXPECT_NE(db.read_only_reason().find("cannot create directory"), std::string::npos)
        << db.read_only_reason();
  }
  EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=64,k=64")));
  try {
    db.put_result(make_row(dev_a, "m=1,n=64,k=64", 10));
    FAIL() << "put_result on an unwritable location did not throw";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), prism::errc::database_error);
    EXPECT_NE(std::string(e.what()).find("cannot save tuning results"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot create directory"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists("/proc/prism-no-such-dir"));
}

TEST(TuningFaults, ReadOnlyLocationServesLookupsAndRefusesSaves) {
  auto dir = make_temp_dir("readonly");
  auto path = dir + "/tuning.db";
  {
    database db(path);
    db.put_result(make_row("00000000c0ffee00", "m=1,n=64,k=256", 10));
  }
  bool root = ::geteuid() == 0;
  // As root, permissions do not bind: the child drops to nobody. Otherwise lock the directory.
  ::chmod(path.c_str(), 0644);
  if (!root) ::chmod(dir.c_str(), 0555);
  auto c = spawn_helper({"readonly", path}, make_temp_dir("readonly-out") + "/helper.out", {}, root);
  int rc = wait_child(c);
  if (!root) ::chmod(dir.c_str(), 0755);
  std::string out = read_file(c.output_path);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("open=1 writable=0"), std::string::npos) << out;
  EXPECT_NE(out.find("lookup=db-exact"), std::string::npos) << out;
  EXPECT_NE(out.find("put=refused"), std::string::npos) << out;
  EXPECT_NE(out.find("cannot be saved"), std::string::npos) << out;  // the warning
  EXPECT_EQ(out.find("malformed"), std::string::npos) << out;
}

TEST(TuningFaults, KillDashNineMidWriteKeepsFinishedRows) {
  auto dir = make_temp_dir("kill9");
  auto path = dir + "/tuning.db";
  auto c = spawn_helper({"crash-loop", path}, dir + "/crash.out");
  // Let it commit for a while, then kill it mid-loop.
  int last = -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto out = read_file(c.output_path);
    auto pos = out.rfind("committed ");
    if (pos != std::string::npos) last = std::stoi(out.substr(pos + 10));
    if (last >= 60) break;
  }
  ::kill(c.pid, SIGKILL);
  EXPECT_EQ(wait_child(c), 128 + SIGKILL);
  auto out = read_file(c.output_path);
  // The output may have gained lines after we read it; the last whole line is what counts.
  std::smatch m;
  std::regex line("committed (\\d+)\n");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    last = std::stoi((*it)[1]);
  ASSERT_GE(last, 10) << out;

  database db(path);
  EXPECT_TRUE(db.refusal().empty()) << db.refusal();
  EXPECT_EQ(db.integrity_check(), "ok");
  auto rows = db.results();
  EXPECT_GE(rows.size(), static_cast<std::size_t>(last + 1));
  for (int i = 0; i <= last; ++i) {
    auto key = shape_key::parse("m=1,n=" + std::to_string(64 * (i + 1)) + ",k=256");
    EXPECT_TRUE(db.find_result("00000000c0ffee00", "matmul", "f32", key)) << "row " << i << " lost";
    EXPECT_EQ(db.candidates("00000000c0ffee00", "matmul", "f32", key).size(), 3u);
  }
}
