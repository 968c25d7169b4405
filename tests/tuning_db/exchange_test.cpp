// SPDX-License-Identifier: Apache-2.0
// Fleet sharing: export -> import round trip, merge keeps the faster row, bad JSON is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "prism/error.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;

TEST(TuningExchange, ExportImportRoundTrip) {
  auto dir = make_temp_dir("export");
  database a(dir + "/a.db");
  a.put_device(device_record{dev_a, "GPU A", "drv1", R"({"vendor":"X"})"});
  a.put_result(make_row(dev_a, "m=1,n=64,k=64", 100, 300));
  a.put_result(make_row(dev_a, "m=2,n=64,k=64", 200, 300));
  auto text = a.export_json();
  auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["format"], "prism-tuning");
  EXPECT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["devices"][0]["info"]["vendor"], "X");

  database b(dir + "/b.db");
  auto rep = b.import_json(text);
  EXPECT_EQ(rep.inserted, 2u);
  EXPECT_EQ(rep.devices, 1u);
  auto rows = b.results();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].default_ns, 300);
  EXPECT_EQ(rows[0].kernel_hash, "k1");
  ASSERT_TRUE(b.find_device(dev_a));
  EXPECT_EQ(b.find_device(dev_a)->name, "GPU A");
  auto again = b.import_json(text);  // same times: existing rows kept
  EXPECT_EQ(again.kept, 2u);
}

TEST(TuningExchange, MergeKeepsTheFasterRow) {
  auto dir = make_temp_dir("merge");
  {
    database other(dir + "/other.db");
    other.put_result(make_row(dev_a, "m=1,n=64,k=64", 50, 0, "other-fast"));
    other.put_result(make_row(dev_a, "m=2,n=64,k=64", 500, 0, "other-slow"));
    other.put_result(make_row(dev_a, "m=4,n=64,k=64", 500, 0, "other-new"));
  }
  database mine(dir + "/mine.db");
  mine.put_result(make_row(dev_a, "m=1,n=64,k=64", 100, 0, "mine-slow"));
  mine.put_result(make_row(dev_a, "m=2,n=64,k=64", 100, 0, "mine-fast"));
  auto rep = mine.merge_from(dir + "/other.db");
  EXPECT_EQ(rep.replaced, 1u);
  EXPECT_EQ(rep.kept, 1u);
  EXPECT_EQ(rep.inserted, 1u);
  EXPECT_EQ(mine.lookup(query(dev_a, "m=1,n=64,k=64"))->row.config, "other-fast");
  EXPECT_EQ(mine.lookup(query(dev_a, "m=2,n=64,k=64"))->row.config, "mine-fast");
  EXPECT_EQ(mine.lookup(query(dev_a, "m=4,n=64,k=64"))->row.config, "other-new");
  EXPECT_THROW(mine.merge_from(dir + "/missing.db"), prism::error);
}

TEST(TuningExchange, RejectsMalformedDocuments) {
  database db(make_temp_dir("badjson") + "/t.db");
  auto expect_config_error = [&](const std::string& text, const std::string& needle) {
    try {
      db.import_json(text);
      FAIL() << "accepted " << text;
    } catch (const prism::error& e) {
      EXPECT_EQ(e.code(), prism::errc::config_error);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_config_error("not json", "not a JSON object");
  expect_config_error(R"({"format":"other","version":1,"results":[]})", "format");
  expect_config_error(R"({"format":"prism-tuning","version":1,"results":[{"device":"a"}]})", "results[0]");
  expect_config_error(
      R"({"format":"prism-tuning","version":1,"results":[{"device":"a","op":"matmul","dtype":"f32","shape":"m=x","backend":"opencl","p50_ns":1}]})",
      "not an integer");
  EXPECT_TRUE(db.results().empty());
}
