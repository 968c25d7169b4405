// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL tuning store against a real server (started by the pg_server fixture, see
// tests/tuning_db/CMakeLists.txt): schema refusals, the faster row per key under concurrent
// writers, lookups from the snapshot, the refresh, faults and the queue in the local file.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "prism/error.hpp"
#include "prism/tuning_db.hpp"
#include "runtime/env.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;
namespace fs = std::filesystem;

namespace {

std::string server_dir() {
  const char* d = std::getenv("PRISM_TEST_PG_DIR");
  return d ? d : "";
}

std::string url_of(const std::string& db, const std::string& password = "prism-test") {
  return "postgresql://prism:" + password + "@/" + db + "?host=" + server_dir();
}

// Runs `sql` on database `db` as the superuser; returns the first value ("" when none).
std::string sql(const std::string& db, const std::string& statement) {
  PGconn* c = PQconnectdb(url_of(db).c_str());
  EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PGresult* r = PQexec(c, statement.c_str());
  auto st = PQresultStatus(r);
  EXPECT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
      << statement << ": " << PQresultErrorMessage(r);
  std::string out = (st == PGRES_TUPLES_OK && PQntuples(r) > 0) ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(c);
  return out;
}

// A new database on the test server for one test; `init` creates prism's schema in it.
std::string fresh_database(const std::string& name, bool init = true) {
  std::string db = "t_" + name + "_" + std::to_string(::getpid());
  sql("postgres", "DROP DATABASE IF EXISTS " + db);
  sql("postgres", "CREATE DATABASE " + db);
  if (init) database(url_of(db)).init();
  return db;
}

class PgStore : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(server_dir().empty()) << "PRISM_TEST_PG_DIR is not set (the pg_server fixture sets it)";
    dir_ = fs::temp_directory_path() / ("prism-pg-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    local_ = (dir_ / "local.db").string();
    prism::env::override_for_testing("PRISM_TUNING_DB_LOCAL", local_);
    prism::env::override_for_testing("PRISM_TUNING_DB_REFRESH", std::string("0"));
    prism::env::override_for_testing("PRISM_TUNING_DB_TIMEOUT", std::string("5"));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string local_;
};

std::size_t count_rows(const std::string& db) {
  return static_cast<std::size_t>(std::stoul(sql(db, "SELECT count(*) FROM prism.results")));
}

}  // namespace

TEST_F(PgStore, BadLocationsAreRefusedNamingWhatIsValid) {
  auto bad_scheme = database::location_error("mysql://host/db");
  EXPECT_NE(bad_scheme.find("unknown tuning database scheme 'mysql://'"), std::string::npos) << bad_scheme;
  EXPECT_NE(bad_scheme.find("an SQLite file path, or a postgresql:// or postgres:// URL"), std::string::npos);
  auto malformed = database::location_error("postgresql://u:secret@[::1/db");
  EXPECT_NE(malformed.find("malformed PostgreSQL URL"), std::string::npos) << malformed;
  EXPECT_EQ(malformed.find("secret"), std::string::npos) << "the password must not be shown: " << malformed;
  EXPECT_EQ(database::location_error("/tmp/x.db"), "");
  EXPECT_EQ(database::location_error("postgres://u@h/db"), "");

  database db("mysql://host/db");
  EXPECT_NE(db.refusal().find("unknown tuning database scheme"), std::string::npos);
  EXPECT_FALSE(db.writable());
  EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=2,k=3")).has_value());
  EXPECT_THROW(db.put_result(make_row(dev_a, "m=1,n=2,k=3", 10)), prism::error);
  EXPECT_EQ(db.queued_to(), "") << "a mistyped URL is not a fault to queue through";
  EXPECT_FALSE(fs::exists(local_));
}

TEST_F(PgStore, ServerWithoutSchemaIsRefusedAndGetsNoWrites) {
  auto name = fresh_database("noschema", false);
  database ro(url_of(name), database::access::read_only);
  EXPECT_NE(ro.refusal().find("no prism schema"), std::string::npos) << ro.refusal();
  EXPECT_NE(ro.refusal().find("prism db init"), std::string::npos) << ro.refusal();
  database db(url_of(name));
  db.put_device(device_record{dev_a, "dev", "drv1", "{}"});
  db.put_shape(make_row(dev_a, "m=1,n=2,k=3", 10), {});
  EXPECT_EQ(sql(name, "SELECT to_regnamespace('prism') IS NULL"), "t")
      << "prism created its schema implicitly";
  EXPECT_EQ(db.queued_to(), local_);
  EXPECT_EQ(database(local_, database::access::read_only).results().size(), 1u);
  // Once created, the schema takes the queued row.
  EXPECT_EQ(database(url_of(name)).init(), 0);
  auto rep = database(url_of(name)).merge_from(local_);
  EXPECT_EQ(rep.inserted, 1u);
  EXPECT_EQ(count_rows(name), 1u);
}

TEST_F(PgStore, NewerSchemaIsRefusedAndGetsNoWrites) {
  auto name = fresh_database("newer");
  database(url_of(name)).put_result(make_row(dev_a, "m=1,n=2,k=3", 10));
  sql(name, "UPDATE prism.meta SET value = '99' WHERE key = 'schema_version'");
  database ro(url_of(name), database::access::read_only);
  EXPECT_NE(ro.refusal().find("newer prism (schema v99"), std::string::npos) << ro.refusal();
  database db(url_of(name));
  db.put_shape(make_row(dev_a, "m=1,n=2,k=3", 1), {});
  db.put_shape(make_row(dev_a, "m=4,n=5,k=6", 1), {});
  EXPECT_EQ(count_rows(name), 1u);
  EXPECT_EQ(sql(name, "SELECT p50_ns FROM prism.results"), "10");
  try {
    database(url_of(name)).init();
    FAIL() << "init downgraded a newer schema";
  } catch (const prism::error& e) {
    EXPECT_NE(e.message().find("newer prism"), std::string::npos) << e.message();
  }
  EXPECT_EQ(sql(name, "SELECT value FROM prism.meta WHERE key = 'schema_version'"), "99");
}

TEST_F(PgStore, WrongPasswordIsRefusedAndGetsNoWrites) {
  auto name = fresh_database("password");
  database ro(url_of(name, "wrong"), database::access::read_only);
  EXPECT_NE(ro.refusal().find("refused the login"), std::string::npos) << ro.refusal();
  EXPECT_NE(ro.refusal().find("password authentication failed"), std::string::npos) << ro.refusal();
  EXPECT_EQ(ro.path().find("wrong"), std::string::npos) << "the password must not be shown: " << ro.path();
  database db(url_of(name, "wrong"));
  EXPECT_TRUE(db.writable()) << "results go to the local file";
  db.put_shape(make_row(dev_a, "m=1,n=2,k=3", 10), {});
  EXPECT_EQ(count_rows(name), 0u);
  EXPECT_EQ(database(local_, database::access::read_only).results().size(), 1u);
}

TEST_F(PgStore, FasterRowWinsAndAnotherPrismsRowIsReplaced) {
  auto name = fresh_database("faster");
  database db(url_of(name));
  auto row = make_row(dev_a, "m=1,n=2,k=3", 100);
  row.prism_version = "1.0";
  db.put_shape(row, {});
  auto slower = make_row(dev_a, "m=1,n=2,k=3", 150, 0, "slower");
  slower.prism_version = "1.0";
  slower.kernel_hash = "k9";  // another config builds another kernel: still the slower row
  db.put_shape(slower, {});
  EXPECT_EQ(db.results()[0].p50_ns, 100);
  auto faster = make_row(dev_a, "m=1,n=2,k=3", 80, 0, "faster");
  faster.prism_version = "1.0";
  db.put_shape(faster, {});
  EXPECT_EQ(db.results()[0].config, "faster");
  auto upgraded = make_row(dev_a, "m=1,n=2,k=3", 120, 0, "upgraded");
  upgraded.prism_version = "1.1";
  db.put_shape(upgraded, {});
  EXPECT_EQ(db.results()[0].config, "upgraded") << "another prism's row may be stale: replaced";
  EXPECT_FALSE(db.put_result_if_faster(make_row(dev_a, "m=1,n=2,k=3", 130)));
  EXPECT_TRUE(db.put_result_if_faster(make_row(dev_a, "m=1,n=2,k=3", 60)));
  candidate_row c;
  c.device = dev_a;
  c.op = "matmul";
  c.dtype = "f32";
  c.shape = "m=1,n=2,k=3";
  c.backend = "opencl";
  c.config = "tile=8";
  c.status = candidate_status::build_error;
  c.reason = "too many registers";
  db.put_candidate(c);
  auto cands = db.candidates(dev_a, "matmul", "f32", shape_key::parse("m=1,n=2,k=3"));
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].status, candidate_status::build_error);
  EXPECT_EQ(cands[0].reason, "too many registers");
  EXPECT_EQ(db.integrity_check(), "ok");
  EXPECT_EQ(db.schema_version(), database::current_schema_version());
  EXPECT_EQ(db.clear(row_filter{dev_a, "", "", ""}), 1u);
  EXPECT_EQ(count_rows(name), 0u);
}

// 8 connections race on the same 40 keys with random times: each key ends with the smallest.
TEST_F(PgStore, ConcurrentWritersNeverLoseTheFasterRow) {
  auto name = fresh_database("race");
  constexpr int writers = 8, keys = 40, rounds = 3;
  std::vector<std::vector<double>> times(writers, std::vector<double>(keys * rounds));
  std::mt19937 rng(7);
  for (auto& w : times)
    for (auto& t : w) t = 1000 + static_cast<double>(rng() % 100000);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      try {
        database db(url_of(name));
        for (int i = 0; i < keys * rounds; ++i)
          db.put_shape(make_row(dev_a, "m=" + std::to_string(i % keys + 1) + ",n=8,k=8", times[w][i]), {});
        if (!db.queued_to().empty()) ++errors;
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++errors;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  database db(url_of(name), database::access::read_only);
  auto rows = db.results();
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(keys));
  for (auto& r : rows) {
    int k = std::stoi(r.shape.substr(2)) - 1;
    double best = 1e30;
    for (int w = 0; w < writers; ++w)
      for (int i = k; i < keys * rounds; i += keys) best = std::min(best, times[w][i]);
    EXPECT_EQ(r.p50_ns, best) << r.shape;
  }
}

// After the first lookup of a device, lookups are answered from its snapshot: with the
// connection cut they still find every row, and writes then go to the local file, from which
// merge_from (prism db push) brings them to the server.
TEST_F(PgStore, LookupsUseTheSnapshotAndWritesQueueWhenTheConnectionIsLost) {
  auto name = fresh_database("snapshot");
  {
    database w(url_of(name));
    w.put_device(device_record{dev_a, "dev", "drv1", "{}"});
    w.put_shape(make_row(dev_a, "m=16,n=64,k=64", 100), {});
    auto other = make_row(dev_a, "rows=4,d=512", 50);
    other.op = "rms_norm";
    w.put_shape(other, {});
  }
  database db(url_of(name));
  ASSERT_TRUE(db.lookup(query(dev_a, "m=16,n=64,k=64")).has_value());
  // Cut every connection of this database from the server side.
  sql("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + name + "'");
  auto q = query(dev_a, "rows=4,d=512");
  q.op = "rms_norm";
  auto m = db.lookup(q);  // another (op, dtype) group: no query, the snapshot has it
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->row.p50_ns, 50);
  EXPECT_EQ(db.queued_to(), "") << "a lookup touched the network";
  db.put_shape(make_row(dev_a, "m=32,n=64,k=64", 70), {});
  EXPECT_EQ(db.queued_to(), local_);
  EXPECT_EQ(count_rows(name), 2u);
  // The queued row is found by lookups of this process too.
  ASSERT_TRUE(db.lookup(query(dev_a, "m=32,n=64,k=64")).has_value());
  EXPECT_EQ(db.lookup(query(dev_a, "m=32,n=64,k=64"))->tier, match_tier::exact);
  auto rep = database(url_of(name)).merge_from(local_);
  EXPECT_EQ(rep.inserted, 1u);
  EXPECT_EQ(count_rows(name), 3u);
}

TEST_F(PgStore, RefreshBringsOtherWritersRows) {
  auto name = fresh_database("refresh");
  prism::env::override_for_testing("PRISM_TUNING_DB_REFRESH", std::string("1"));
  database reader(url_of(name));
  EXPECT_FALSE(reader.lookup(query(dev_a, "m=1,n=64,k=64")).has_value());
  database(url_of(name)).put_shape(make_row(dev_a, "m=1,n=64,k=64", 100), {});
  EXPECT_FALSE(reader.lookup(query(dev_a, "m=1,n=64,k=64")).has_value()) << "a lookup went to the server";
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seen = reader.lookup(query(dev_a, "m=1,n=64,k=64")).has_value();
  }
  EXPECT_TRUE(seen) << "the refresh (every second) did not bring the new row within 10 s";
}

// A server that accepts the TCP connection and never answers: connect_timeout ends the wait.
TEST_F(PgStore, AServerThatNeverAnswersTimesOut) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  prism::env::override_for_testing("PRISM_TUNING_DB_TIMEOUT", std::string("2"));
  auto start = std::chrono::steady_clock::now();
  database db("postgresql://prism:x@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/db");
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  EXPECT_NE(db.refusal().find("cannot reach the server"), std::string::npos) << db.refusal();
  EXPECT_NE(db.refusal().find("timeout"), std::string::npos) << db.refusal();
  EXPECT_LT(waited, 10.0);
  EXPECT_FALSE(db.lookup(query(dev_a, "m=1,n=2,k=3")).has_value());
  db.put_shape(make_row(dev_a, "m=1,n=2,k=3", 10), {});
  EXPECT_EQ(db.queued_to(), local_);
}

// Files and servers exchange rows both ways, candidates included; the faster row wins.
TEST_F(PgStore, PushAndPullBetweenAFileAndAServer) {
  auto name = fresh_database("pushpull");
  std::string file = (dir_ / "node.db").string();
  {
    database f(file);
    f.put_device(device_record{dev_a, "dev a", "drv1", "{}"});
    f.put_device(device_record{dev_b, "dev b", "drv1", "{}"});
    candidate_row c;
    c.device = dev_a;
    c.op = "matmul";
    c.dtype = "f32";
    c.shape = "m=1,n=2,k=3";
    c.backend = "opencl";
    c.config = "tile=16";
    c.p50_ns = 100;
    f.put_shape(make_row(dev_a, "m=1,n=2,k=3", 100), {c});
    f.put_shape(make_row(dev_b, "m=1,n=2,k=3", 200), {});
  }
  database server(url_of(name));
  server.put_shape(make_row(dev_a, "m=1,n=2,k=3", 90), {});
  auto pushed = server.merge_from(file);
  EXPECT_EQ(pushed.inserted, 1u);
  EXPECT_EQ(pushed.kept, 1u);
  EXPECT_EQ(pushed.devices, 2u);
  EXPECT_EQ(server.candidates(dev_a, "matmul", "f32", shape_key::parse("m=1,n=2,k=3")).size(), 1u);
  std::string pulled_file = (dir_ / "other.db").string();
  database pulled(pulled_file);
  auto rep = pulled.merge_from(url_of(name), row_filter{dev_a, "", "", ""});
  EXPECT_EQ(rep.inserted, 1u);
  auto rows = pulled.results();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].p50_ns, 90);
  // The JSON exchange is the same for both stores.
  auto json_text = server.export_json();
  EXPECT_NE(json_text.find("\"speedup\""), std::string::npos);
  database copy(url_of(fresh_database("pushpull_copy")));
  auto imported = copy.import_json(json_text);
  EXPECT_EQ(imported.inserted, 2u);
  EXPECT_EQ(copy.stats().size(), 2u);
}

// A document that names a key twice: the server settles it as the file does (the faster row),
// with the same report, also across the batches a large import is sent in.
TEST_F(PgStore, ImportGivesTheSameAnswerAsAFile) {
  std::string doc = R"({"format":"prism-tuning","version":1,"results":[)";
  for (int i = 0; i < 2500; ++i)
    doc += R"({"device":"aaaaaaaaaaaaaaaa","op":"matmul","dtype":"f32","shape":"m=)" +
           std::to_string(1 + i % 1200) + R"(,n=8,k=8","backend":"opencl","p50_ns":)" +
           std::to_string(5000 - i) + "},";
  doc +=
      R"({"device":"aaaaaaaaaaaaaaaa","op":"matmul","dtype":"f32","shape":"m=1,n=8,k=8","backend":"opencl",)"
      R"("p50_ns":99999}]})";
  database file((dir_ / "f.db").string());
  database server(url_of(fresh_database("import")));
  auto a = file.import_json(doc);
  auto b = server.import_json(doc);
  EXPECT_EQ(a.inserted, 1200u);
  EXPECT_EQ(b.inserted, a.inserted);
  EXPECT_EQ(b.replaced, a.replaced);
  EXPECT_EQ(b.kept, a.kept);
  auto fr = file.results(), sr = server.results();
  ASSERT_EQ(fr.size(), sr.size());
  for (std::size_t i = 0; i < fr.size(); ++i) {
    EXPECT_EQ(fr[i].shape, sr[i].shape);
    EXPECT_EQ(fr[i].p50_ns, sr[i].p50_ns) << fr[i].shape;
  }
  // Again: everything is kept.
  auto again = server.import_json(doc);
  EXPECT_EQ(again.inserted + again.replaced, 0u);
}
