// SPDX-License-Identifier: Apache-2.0
// Database basics: schema version, writes, exact / nearest / none selection, memoization,
// validation (kernel hash, driver) and per-device isolation.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "prism/error.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;

namespace {
std::string fresh_db(const std::string& tag) {
  return make_temp_dir(tag) + "/sub/dir/tuning.db";
}
}  // namespace

TEST(TuningDatabase, CreatesVersionedSchemaInWalMode) {
  auto path = fresh_db("schema");
  database db(path);
  ASSERT_TRUE(db.is_open());
  db.put_device(device_record{dev_a, "A", "1", "{}"});  // the first write creates the file
  EXPECT_TRUE(db.writable()) << db.read_only_reason();
  EXPECT_EQ(db.schema_version(), database::current_schema_version());
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(raw);
}

TEST(TuningDatabase, MigratesAnOlderFile) {
  auto path = make_temp_dir("migrate") + "/tuning.db";
  {
    // A v1 file: the results table only, as the first schema wrote it.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(
                  raw,
                  "CREATE TABLE devices (fingerprint TEXT PRIMARY KEY, name TEXT NOT NULL, driver_version "
                  "TEXT NOT NULL, info TEXT NOT NULL DEFAULT '{}', first_seen INTEGER NOT NULL, last_seen "
                  "INTEGER NOT NULL);"
                  "CREATE TABLE results (device TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL, shape "
                  "TEXT NOT NULL, backend TEXT NOT NULL, config TEXT NOT NULL, p20_ns REAL NOT NULL, p50_ns "
                  "REAL NOT NULL, p80_ns REAL NOT NULL, default_ns REAL NOT NULL DEFAULT 0, kernel_hash TEXT "
                  "NOT NULL DEFAULT '', driver_version TEXT NOT NULL DEFAULT '', prism_version TEXT NOT NULL "
                  "DEFAULT '', tuned_at INTEGER NOT NULL, PRIMARY KEY (device, op, dtype, shape));"
                  "INSERT INTO results VALUES ('aaaaaaaaaaaaaaaa','matmul','f32','m=1,n=2,k=3','opencl','',"
                  "1,2,3,4,'k1','drv1','0.0.1',1);"
                  "PRAGMA user_version=1;",
                  nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  database db(path);
  EXPECT_TRUE(db.writable());
  EXPECT_EQ(db.schema_version(), 1);  // opening reads only; the first write migrates
  EXPECT_EQ(db.results().size(), 1u);
  candidate_row c;
  c.device = dev_a;
  c.op = "matmul";
  c.dtype = "f32";
  c.shape = "m=1,n=2,k=3";
  c.status = candidate_status::wrong_result;
  c.reason = "max error 3.2 > 1e-3";
  db.put_candidate(c);  // the v2 table exists now
  EXPECT_EQ(db.schema_version(), database::current_schema_version());
  auto cands = db.candidates(dev_a, "matmul", "f32", shape_key::parse("m=1,n=2,k=3"));
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].status, candidate_status::wrong_result);
  EXPECT_EQ(cands[0].reason, "max error 3.2 > 1e-3");
}

TEST(TuningDatabase, NewerSchemaIsOpenedForLookupsOnly) {
  auto path = make_temp_dir("newer") + "/tuning.db";
  {
    database db(path);
    db.put_result(make_row(dev_a, "m=1,n=64,k=64", 100));
  }
  {
    sqlite3* raw = nullptr;
    sqlite3_open(path.c_str(), &raw);
    sqlite3_exec(raw, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  database db(path);
  EXPECT_FALSE(db.writable());
  EXPECT_NE(db.read_only_reason().find("newer prism"), std::string::npos) << db.read_only_reason();
  EXPECT_TRUE(db.lookup(query(dev_a, "m=1,n=64,k=64")));
  EXPECT_THROW(db.put_result(make_row(dev_a, "m=2,n=64,k=64", 100)), prism::error);
}

TEST(TuningDatabase, ExactThenNearestThenNothing) {
  database db(fresh_db("select"));
  db.put_result(make_row(dev_a, "m=1,n=4096,k=4096", 100, 200, "small"));
  db.put_result(make_row(dev_a, "m=128,n=4096,k=4096", 1000, 3000, "big"));

  auto exact = db.lookup(query(dev_a, "k=4096,n=4096,m=128"));  // any component order
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->tier, match_tier::exact);
  EXPECT_EQ(exact->row.config, "big");
  EXPECT_STREQ(match_tier_name(exact->tier), "db-exact");

  auto near = db.lookup(query(dev_a, "m=64,n=4096,k=4096"));  // 1 from 128, 6 from 1
  ASSERT_TRUE(near);
  EXPECT_EQ(near->tier, match_tier::nearest);
  EXPECT_EQ(near->row.config, "big");
  EXPECT_DOUBLE_EQ(near->distance, 1.0);
  EXPECT_STREQ(match_tier_name(near->tier), "db-nearest");

  auto near_small = db.lookup(query(dev_a, "m=2,n=4096,k=4096"));
  ASSERT_TRUE(near_small);
  EXPECT_EQ(near_small->row.config, "small");

  EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=4096")));  // not comparable
  auto far = query(dev_a, "m=1,n=4096,k=4096");
  far.shape = shape_key::parse("m=1,n=16,k=16");  // distance 16 > max 8
  EXPECT_FALSE(db.lookup(far));
  auto other_dtype = query(dev_a, "m=1,n=4096,k=4096");
  other_dtype.dtype = "f16";
  EXPECT_FALSE(db.lookup(other_dtype));
}

TEST(TuningDatabase, NearestAnswersStayOnTheQuerysSideOfSplits) {
  database db(fresh_db("splits"));
  db.put_result(make_row(dev_a, "m=128,n=4096,k=4096", 1000, 3000, "big"));
  auto q = query(dev_a, "m=1,n=4096,k=4096");
  ASSERT_TRUE(db.lookup(q));  // distance 7: near enough without splits
  q.splits = {{"m", 16}};
  EXPECT_FALSE(db.lookup(q));
  q.shape = shape_key::parse("m=16,n=4096,k=4096");
  EXPECT_FALSE(db.lookup(q));  // 16 is on the small side
  q.shape = shape_key::parse("m=32,n=4096,k=4096");
  auto near = db.lookup(q);
  ASSERT_TRUE(near);
  EXPECT_EQ(near->row.config, "big");
  q.shape = shape_key::parse("m=128,n=4096,k=4096");
  EXPECT_EQ(db.lookup(q)->tier, match_tier::exact);
}

TEST(TuningDatabase, OtherDevicesRowsAreNeverUsed) {
  database db(fresh_db("otherdev"));
  db.put_device(device_record{dev_b, "Other GPU", "drv9", "{}"});
  db.put_result(make_row(dev_b, "m=16,n=4096,k=4096", 10, 100));
  EXPECT_FALSE(db.lookup(query(dev_a, "m=16,n=4096,k=4096")));  // not exact
  EXPECT_FALSE(db.lookup(query(dev_a, "m=32,n=4096,k=4096")));  // nor nearest
  EXPECT_TRUE(db.lookup(query(dev_b, "m=16,n=4096,k=4096", "drv1")));
}

TEST(TuningDatabase, WarmHitsRunNoSql) {
  database db(fresh_db("memo"));
  db.put_result(make_row(dev_a, "m=16,n=64,k=64", 10));
  auto before = db.counters();
  ASSERT_TRUE(db.lookup(query(dev_a, "m=16,n=64,k=64")));
  auto first = db.counters();
  EXPECT_EQ(first.sql_queries, before.sql_queries + 1);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(db.lookup(query(dev_a, "m=16,n=64,k=64")));
  ASSERT_TRUE(db.lookup(query(dev_a, "m=8,n=64,k=64")));  // same group: rows already loaded
  auto warm = db.counters();
  EXPECT_EQ(warm.sql_queries, first.sql_queries);
  EXPECT_EQ(warm.memo_hits, first.memo_hits + 100);
  // A write through this object refreshes the memo.
  db.put_result(make_row(dev_a, "m=8,n=64,k=64", 5, 0, "exact8"));
  auto m = db.lookup(query(dev_a, "m=8,n=64,k=64"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->tier, match_tier::exact);
  EXPECT_EQ(m->row.config, "exact8");
}

TEST(TuningDatabase, StaleRowsAreSkippedAndChecked) {
  database db(fresh_db("stale"));
  auto good = make_row(dev_a, "m=16,n=64,k=64", 10, 0, "good");
  auto stale_hash = make_row(dev_a, "m=32,n=64,k=64", 10, 0, "stale");
  stale_hash.kernel_hash = "old";
  auto old_driver = make_row(dev_a, "m=64,n=64,k=64", 10, 0, "olddrv");
  old_driver.driver_version = "drv0";
  db.put_result(good);
  db.put_result(stale_hash);
  db.put_result(old_driver);
  db.set_validator([](const result_row& r) -> std::string {
    return r.kernel_hash == "k1" ? "" : "kernel hash changed: " + r.kernel_hash + " -> k1";
  });
  // The exact row is stale: lookups fall to the nearest usable one.
  auto m = db.lookup(query(dev_a, "m=32,n=64,k=64"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->tier, match_tier::nearest);
  EXPECT_EQ(m->row.config, "good");
  auto d = db.lookup(query(dev_a, "m=64,n=64,k=64"));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->row.config, "good");

  auto stale = db.check({device_record{dev_a, "dev", "drv1", "{}"}});
  ASSERT_EQ(stale.size(), 2u);
  std::string reasons = stale[0].reason + "|" + stale[1].reason;
  EXPECT_NE(reasons.find("kernel hash changed"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("driver version changed"), std::string::npos) << reasons;
}

TEST(TuningDatabase, FasterRowWinsAndClearRemoves) {
  database db(fresh_db("faster"));
  db.put_result(make_row(dev_a, "m=1,n=64,k=64", 100, 0, "first"));
  EXPECT_FALSE(db.put_result_if_faster(make_row(dev_a, "m=1,n=64,k=64", 150, 0, "slower")));
  EXPECT_TRUE(db.put_result_if_faster(make_row(dev_a, "m=1,n=64,k=64", 50, 0, "faster")));
  auto r = db.find_result(dev_a, "matmul", "f32", shape_key::parse("m=1,n=64,k=64"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->config, "faster");
  db.put_result(make_row(dev_b, "m=1,n=64,k=64", 100));
  EXPECT_EQ(db.clear(row_filter{dev_a, "", "", ""}), 1u);
  EXPECT_EQ(db.results().size(), 1u);
  EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=64,k=64")));
  db.vacuum();
  EXPECT_EQ(db.integrity_check(), "ok");
}

TEST(TuningDatabase, StatsReportSpeedups) {
  database db(fresh_db("stats"));
  db.put_device(device_record{dev_a, "PoCL CPU", "drv1", "{}"});
  db.put_result(make_row(dev_a, "m=1,n=64,k=64", 100, 200));
  db.put_result(make_row(dev_a, "m=2,n=64,k=64", 100, 800));
  db.put_result(make_row(dev_a, "m=4,n=64,k=64", 100, 0));  // default not measured
  auto s = db.stats();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].device_name, "PoCL CPU");
  EXPECT_EQ(s[0].rows, 3u);
  EXPECT_EQ(s[0].rows_with_default, 2u);
  EXPECT_NEAR(s[0].geomean_speedup, 4.0, 1e-9);
  EXPECT_NEAR(s[0].min_speedup, 2.0, 1e-9);
  EXPECT_NEAR(s[0].max_speedup, 8.0, 1e-9);
}
