// SPDX-License-Identifier: Apache-2.0
// 8 writer processes and 8 reader processes on one new database file: nobody sees "database is
// locked" or "malformed", and every written row is there afterwards.
#include <gtest/gtest.h>

#include <vector>

#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;

TEST(TuningConcurrency, EightWritersEightReadersOnANewFile) {
  auto dir = make_temp_dir("concurrent");
  auto path = dir + "/nested/tuning.db";  // neither the file nor its directory exists yet
  constexpr int writers = 8, readers = 8, rows_per_writer = 40;
  std::vector<child> kids;
  for (int i = 0; i < writers + readers; ++i) {
    bool writer = i % 2 == 0;  // interleave so that both kinds race to create the file
    int id = i / 2;
    auto out = dir + "/" + (writer ? "writer" : "reader") + std::to_string(id) + ".out";
    kids.push_back(
        writer ? spawn_helper({"write", path, std::to_string(id), std::to_string(rows_per_writer)}, out)
               : spawn_helper({"read", path, "30"}, out));
  }
  for (auto& k : kids) {
    int rc = wait_child(k);
    std::string out = read_file(k.output_path);
    EXPECT_EQ(rc, 0) << k.output_path << ":\n" << out;
    EXPECT_EQ(out.find("locked"), std::string::npos) << out;
    EXPECT_EQ(out.find("malformed"), std::string::npos) << out;
    EXPECT_EQ(out.find("moved it to"), std::string::npos) << out;
  }
  database db(path);
  EXPECT_EQ(db.integrity_check(), "ok");
  EXPECT_EQ(db.results().size(), static_cast<std::size_t>(writers * rows_per_writer));
  for (int w = 0; w < writers; ++w)
    for (int i = 0; i < rows_per_writer; ++i) {
      auto key =
          shape_key::parse("m=" + std::to_string(w + 1) + ",n=" + std::to_string(64 * (i + 1)) + ",k=256");
      ASSERT_TRUE(db.find_result("00000000c0ffee00", "matmul", "f32", key)) << "writer " << w << " row " << i;
    }
}
