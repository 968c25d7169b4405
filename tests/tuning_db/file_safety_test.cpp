// SPDX-License-Identifier: Apache-2.0
// The user's files: a prism database is complete on its own once closed or checkpointed; a
// lookup or a read-only open creates nothing; a file that is not a prism database (text,
// another program's SQLite file, a damaged file) is refused and left byte-identical, and only
// database::repair moves a damaged one aside. Every case hashes the files before and after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "prism/error.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;
namespace fs = std::filesystem;

namespace {

// FNV-1a of a file's bytes; "absent" when there is none.
std::string hash_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "absent";
  std::uint64_t h = 1469598103934665603ULL;
  char c;
  while (in.get(c)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return std::to_string(h);
}

// Every file of a directory with its hash: the whole state a test compares.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = hash_of(e.path().string());
  return out;
}

void run_sql(const std::string& path, const char* sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(raw, sql, nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(raw);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

std::int64_t pragma_of(const std::string& path, const char* pragma) {
  sqlite3* raw = nullptr;
  sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw, pragma, -1, &st, nullptr);
  std::int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(raw);
  return v;
}

// Everything a user can do through the API to a file: each must leave it untouched.
void use_every_way(const std::string& path) {
  {
    database db(path);
    EXPECT_FALSE(db.refusal().empty());
    EXPECT_FALSE(db.is_open());
    EXPECT_FALSE(db.writable());
    EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=64,k=64")));
    EXPECT_TRUE(db.results().empty());
    EXPECT_THROW(db.put_result(make_row(dev_a, "m=1,n=64,k=64", 10)), prism::error);
    EXPECT_THROW(db.clear({}), prism::error);
    EXPECT_THROW(db.import_json(R"({"format":"prism-tuning","version":1,"results":[]})"), prism::error);
    EXPECT_THROW(db.vacuum(), prism::error);
    db.checkpoint();
    db.close();
  }
  database ro(path, database::access::read_only);
  EXPECT_FALSE(ro.refusal().empty());
  EXPECT_TRUE(ro.results().empty());
}

}  // namespace

TEST(TuningFileSafety, CopyOfAClosedOrCheckpointedDatabaseIsComplete) {
  auto dir = make_temp_dir("copy");
  auto path = dir + "/tuning.db";
  database db(path);
  for (int i = 1; i <= 50; ++i) db.put_result(make_row(dev_a, "m=" + std::to_string(i) + ",n=64,k=64", 10));
  db.checkpoint();
  fs::copy_file(path, dir + "/copy1.db");
  {
    database copy(dir + "/copy1.db", database::access::read_only);
    EXPECT_EQ(copy.results().size(), 50u) << "checkpoint() left rows in the -wal only";
  }
  db.put_result(make_row(dev_a, "m=51,n=64,k=64", 10));
  db.close();
  EXPECT_FALSE(fs::exists(path + "-wal"));
  fs::copy_file(path, dir + "/copy2.db");
  database copy(dir + "/copy2.db", database::access::read_only);
  EXPECT_EQ(copy.results().size(), 51u) << "close() left rows in the -wal only";
  // The object reopens after close().
  EXPECT_TRUE(db.lookup(query(dev_a, "m=51,n=64,k=64")));
}

TEST(TuningFileSafety, PrismDatabasesCarryTheApplicationId) {
  auto path = make_temp_dir("appid") + "/tuning.db";
  {
    database db(path);
    db.put_device(device_record{dev_a, "A", "1", "{}"});
  }
  EXPECT_EQ(pragma_of(path, "PRAGMA application_id"), 0x50525a4d);
  EXPECT_EQ(pragma_of(path, "PRAGMA user_version"), database::current_schema_version());
}

TEST(TuningFileSafety, LookupsAndReadOnlyOpensCreateNothing) {
  auto dir = make_temp_dir("nocreate");
  {
    database db(dir + "/sub/tuning.db");  // read_write, as apps and `prism run` open it
    EXPECT_TRUE(db.is_open());
    EXPECT_TRUE(db.writable());
    EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=64,k=64")));
    EXPECT_TRUE(db.results().empty());
    EXPECT_TRUE(db.check().empty());
    db.close();
  }
  EXPECT_FALSE(fs::exists(dir + "/sub")) << "a lookup created the database or its directory";
  {
    database ro(dir + "/tuning.db", database::access::read_only);
    EXPECT_FALSE(ro.is_open());
    EXPECT_TRUE(ro.results().empty());
  }
  EXPECT_TRUE(snapshot(dir).empty());

  // An existing, closed prism database: reading it leaves every file as it was.
  auto path = dir + "/tuning.db";
  {
    database db(path);
    db.put_result(make_row(dev_a, "m=1,n=64,k=64", 10));
  }
  auto before = snapshot(dir);
  ASSERT_EQ(before.size(), 1u);
  {
    database ro(path, database::access::read_only);
    EXPECT_EQ(ro.results().size(), 1u);
    EXPECT_EQ(ro.integrity_check(), "ok");
  }
  {
    database rw(path);
    EXPECT_TRUE(rw.lookup(query(dev_a, "m=1,n=64,k=64")));
  }
  EXPECT_EQ(snapshot(dir), before);
}

TEST(TuningFileSafety, NonSqliteFileIsRefusedAndLeftAlone) {
  auto dir = make_temp_dir("notadb");
  auto path = dir + "/oops.json";
  {
    std::ofstream(path) << R"({"format":"prism-tuning","version":1,"results":[]})" << std::string(5000, ' ');
  }
  auto before = snapshot(dir);
  database db(path);
  EXPECT_NE(db.refusal().find("not an SQLite database"), std::string::npos) << db.refusal();
  use_every_way(path);
  EXPECT_EQ(snapshot(dir), before);
}

TEST(TuningFileSafety, ForeignSqliteFileIsRefusedAndLeftAlone) {
  auto dir = make_temp_dir("foreign");
  auto path = dir + "/other.db";
  // Another program's database, with a table that happens to be called `results`.
  run_sql(path,
          "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');"
          "CREATE TABLE results (device TEXT, op TEXT, dtype TEXT, shape TEXT, score REAL);"
          "INSERT INTO results VALUES ('aaaaaaaaaaaaaaaa','matmul','f32','m=1,n=64,k=64', 1);");
  auto before = snapshot(dir);
  database db(path);
  EXPECT_NE(db.refusal().find("another program"), std::string::npos) << db.refusal();
  EXPECT_NE(db.refusal().find("people"), std::string::npos) << db.refusal();
  use_every_way(path);
  EXPECT_EQ(snapshot(dir), before);
  EXPECT_EQ(pragma_of(path, "PRAGMA user_version"), 0);
  EXPECT_THROW(database::repair(path, true), prism::error);  // a sound file is never moved
  EXPECT_EQ(snapshot(dir), before);

  // One that says so with its own application_id, in WAL mode.
  auto path2 = dir + "/other2.db";
  run_sql(path2, "PRAGMA application_id=1234; PRAGMA journal_mode=WAL; CREATE TABLE t (x);");
  before = snapshot(dir);
  database db2(path2);
  EXPECT_NE(db2.refusal().find("application_id 0x000004d2"), std::string::npos) << db2.refusal();
  use_every_way(path2);
  EXPECT_EQ(snapshot(dir), before);
}

TEST(TuningFileSafety, DamagedDatabaseIsRefusedUntilRepaired) {
  auto dir = make_temp_dir("damaged");
  auto path = dir + "/tuning.db";
  {
    database db(path);
    for (int i = 1; i <= 400; ++i)
      db.put_result(make_row(dev_a, "m=" + std::to_string(i) + ",n=64,k=64", 10));
    db.vacuum();  // everything in the main file, WAL truncated
  }
  ASSERT_GT(fs::file_size(path), 3u * 4096u);
  {
    // Scribble over the second page (a b-tree page of the results table).
    int fd = ::open(path.c_str(), O_WRONLY);
    std::string junk(4096, '\x5a');
    ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), 4096), 4096);
    ::close(fd);
  }
  auto before = snapshot(dir);
  {
    database db(path);
    EXPECT_NE(db.refusal().find("damaged"), std::string::npos) << db.refusal();
    EXPECT_NE(db.refusal().find("prism db repair"), std::string::npos) << db.refusal();
  }
  use_every_way(path);
  EXPECT_EQ(snapshot(dir), before);

  std::string aside = database::repair(path);
  ASSERT_FALSE(aside.empty());
  EXPECT_EQ(hash_of(aside), before["tuning.db"]);
  EXPECT_FALSE(fs::exists(path));
  database db(path);
  EXPECT_TRUE(db.refusal().empty()) << db.refusal();
  db.put_result(make_row(dev_a, "m=1,n=64,k=64", 10));
  EXPECT_TRUE(db.lookup(query(dev_a, "m=1,n=64,k=64")));
  EXPECT_EQ(db.integrity_check(), "ok");
  EXPECT_EQ(database::repair(path), "");  // a sound prism database is left alone
}

TEST(TuningFileSafety, RepairMovesAFileWithoutPrismHeaderOnlyWithForce) {
  auto dir = make_temp_dir("repairforce");
  auto path = dir + "/tuning.db";
  { std::ofstream(path) << "not a database at all"; }
  auto before = snapshot(dir);
  try {
    database::repair(path);
    FAIL() << "repair moved a file without prism's header";
  } catch (const prism::error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_EQ(snapshot(dir), before);
  auto aside = database::repair(path, true);
  EXPECT_EQ(hash_of(aside), before["tuning.db"]);
}

TEST(TuningFileSafety, DirectoryOrDeviceIsNotADatabase) {
  auto dir = make_temp_dir("notregular");
  database d(dir);
  EXPECT_NE(d.refusal().find("not a regular file"), std::string::npos) << d.refusal();
  database z("/dev/zero");
  EXPECT_NE(z.refusal().find("not a regular file"), std::string::npos) << z.refusal();
  EXPECT_THROW(z.put_result(make_row(dev_a, "m=1,n=64,k=64", 10)), prism::error);
}

TEST(TuningFileSafety, FingerprintFilterIsAPrefixNotAPattern) {
  database db(make_temp_dir("like") + "/tuning.db");
  db.put_result(make_row(dev_a, "m=1,n=64,k=64", 10));
  db.put_result(make_row(dev_b, "m=1,n=64,k=64", 10));
  EXPECT_EQ(db.results(row_filter{"%"}).size(), 0u);
  EXPECT_EQ(db.results(row_filter{"_"}).size(), 0u);
  EXPECT_EQ(db.clear(row_filter{"%"}), 0u);
  EXPECT_EQ(db.clear(row_filter{"a%"}), 0u);
  EXPECT_EQ(db.results().size(), 2u);
  EXPECT_EQ(db.results(row_filter{"aaaa"}).size(), 1u);
  EXPECT_EQ(db.clear(row_filter{"bbbb"}), 1u);
  EXPECT_EQ(db.results().size(), 1u);
}
