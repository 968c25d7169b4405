// SPDX-License-Identifier: Apache-2.0
// tuning_db_helper: a child process for the tuning_db tests. Modes:
//   write DB ID N        commit N finished shapes (winner + candidates) for writer ID
//   read DB N            N rounds of open + lookups + listing while writers run
//   crash-loop DB        commit shapes forever, printing "committed I" after each commit
//   readonly DB          open a database the process cannot write; report what works
//   record OP DTYPE KEY...  call record_untuned for each key (PRISM_RECORD_UNTUNED set by parent)
//   count OP DTYPE KEY...   the same, counting one dispatch per key (appended as calls: at exit)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "prism/error.hpp"
#include "prism/tuning_db.hpp"

using namespace prism::tuning;

namespace {

constexpr const char* device_fp = "00000000c0ffee00";

result_row row_for(int writer, int i) {
  result_row r;
  r.device = device_fp;
  r.op = "matmul";
  r.dtype = "f32";
  r.shape = "m=" + std::to_string(writer + 1) + ",n=" + std::to_string(64 * (i + 1)) + ",k=256";
  r.backend = "opencl";
  r.config = "tile=" + std::to_string(8 << (i % 3));
  r.p20_ns = 900 + i;
  r.p50_ns = 1000 + i;
  r.p80_ns = 1100 + i;
  r.default_ns = 2000 + i;
  r.kernel_hash = "hash";
  r.driver_version = "drv";
  return r;
}

std::vector<candidate_row> candidates_for(const result_row& r) {
  std::vector<candidate_row> out;
  for (int c = 0; c < 3; ++c) {
    candidate_row cand;
    cand.device = r.device;
    cand.op = r.op;
    cand.dtype = r.dtype;
    cand.shape = r.shape;
    cand.backend = "opencl";
    cand.config = "tile=" + std::to_string(8 << c);
    cand.status = c == 2 ? candidate_status::build_error : candidate_status::ok;
    cand.reason = c == 2 ? "ptxas: too many registers" : "";
    cand.p50_ns = r.p50_ns + c;
    out.push_back(cand);
  }
  return out;
}

int write_mode(const std::string& path, int writer, int n) {
  database db(path);
  if (!db.writable()) {
    std::printf("FAIL not writable: %s\n", db.read_only_reason().c_str());
    return 2;
  }
  db.put_device(device_record{device_fp, "test device", "drv", "{}"});
  for (int i = 0; i < n; ++i) {
    auto r = row_for(writer, i);
    db.put_shape(r, candidates_for(r));
  }
  std::printf("writer %d done, busy retries %llu\n", writer,
              static_cast<unsigned long long>(db.counters().busy_retries));
  return 0;
}

int read_mode(const std::string& path, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    database db(path);
    if (!db.is_open()) {
      std::printf("FAIL not open: %s\n", db.read_only_reason().c_str());
      return 2;
    }
    for (int w = 0; w < 8; ++w) {
      lookup_query q{device_fp, "matmul", "f32",
                     shape_key::parse("m=" + std::to_string(w + 1) + ",n=640,k=256"), ""};
      (void)db.lookup(q);
    }
    (void)db.results();
    (void)db.stats();
  }
  std::printf("reader done\n");
  return 0;
}

int crash_loop(const std::string& path) {
  database db(path);
  db.put_device(device_record{device_fp, "test device", "drv", "{}"});
  for (int i = 0;; ++i) {
    auto r = row_for(0, i);
    db.put_shape(r, candidates_for(r));
    std::printf("committed %d\n", i);
    std::fflush(stdout);
  }
}

int readonly_mode(const std::string& path) {
  database db(path);
  std::printf("open=%d writable=%d reason=%s\n", db.is_open(), db.writable(), db.read_only_reason().c_str());
  lookup_query q{device_fp, "matmul", "f32", shape_key::parse("m=1,n=64,k=256"), ""};
  auto m = db.lookup(q);
  std::printf("lookup=%s\n", m ? match_tier_name(m->tier) : "none");
  try {
    db.put_result(row_for(5, 5));
    std::printf("put=stored\n");
  } catch (const prism::error& e) {
    std::printf("put=refused %s\n", e.what());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "write" && argc == 5) return write_mode(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
    if (mode == "read" && argc == 4) return read_mode(argv[2], std::atoi(argv[3]));
    if (mode == "crash-loop" && argc == 3) return crash_loop(argv[2]);
    if (mode == "readonly" && argc == 3) return readonly_mode(argv[2]);
    if (mode == "record" && argc >= 4) {
      for (int i = 4; i < argc; ++i) record_untuned(argv[2], argv[3], shape_key::parse(argv[i]));
      return 0;
    }
    if (mode == "count" && argc >= 4) {  // each key dispatched once: its counter counts it
      for (int i = 4; i < argc; ++i)
        if (auto* calls = record_untuned(argv[2], argv[3], shape_key::parse(argv[i]))) calls->fetch_add(1);
      return 0;  // the counts are appended at exit
    }
    std::fprintf(stderr,
                 "usage: tuning_db_helper write DB ID N | read DB N | crash-loop DB | readonly DB | "
                 "record OP DTYPE KEY... | count OP DTYPE KEY...\n");
    return 64;
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
}
