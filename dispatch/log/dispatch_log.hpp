// SPDX-License-Identifier: Apache-2.0
// The dispatch log: one versioned CSV line per dispatch (and per rejected candidate in
// "dispatch" mode) after a header line naming the fields; a filter regex; stderr or a file that
// many processes may append to; the exit summary of per-(op, backend, tier) counts (on stderr,
// never in the CSV file) and the same summary recomputed from a log file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <istream>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "dispatch/config/env_settings.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime/graph.hpp"

namespace prism::dispatch {

/// The version this prism writes. parse_log reads "v1" (prism 0.1) and "v2" logs.
inline constexpr const char* log_version = "v2";
inline constexpr const char* log_prefix = "prism_dispatch";

/// One line of the log. `event` is "exec" (the implementation that served the call),
/// "reject" (a candidate that refused, with its reason) or "error" (strict mode refusal).
struct log_record {
  std::string event = "exec";
  std::string timestamp;  ///< UTC, ISO 8601 with microseconds ("2026-11-23T05:10:00.123456Z"); v2
  std::int64_t pid = 0;   ///< process id of the writer (0: unknown, a v1 line); v2
  std::string op;
  std::string dtypes;  ///< input dtypes, '|'-separated ("f32|f32")
  std::string shape;   ///< the descriptor's shape key
  std::string device;  ///< device fingerprint hash
  std::string backend;
  std::string implementation;         ///< e.g. "opencl.gemm.tiled" (v2)
  std::string config;                 ///< canonical config string ("" = default)
  std::string tier;                   ///< env|routes|db-exact|db-nearest|vendor|default|fallback
  std::string borrowed_shape;         ///< db-nearest: the tuned row's shape key it borrowed (v2)
  std::string reason;                 ///< why this backend (origin) or why it was rejected
  std::optional<double> time_us;      ///< profile mode: the routine's wall time, kernel builds excluded
  std::optional<double> compile_us;   ///< profile mode: kernel build time inside the call (v2)
  std::string attrs;                  ///< the call's attributes, for replay with `prism run`
  std::string version = log_version;  ///< the version of the line it was read from
};

/// The header line (without newline): "prism_dispatch_header,v2,event,time,pid,op,...".
std::string log_header();
/// The header of an older version this prism still reads ("v1"), for replaying old lines.
std::string log_header(const std::string& version);
/// One record as a line (without newline); fields with ',' or '"' are CSV-quoted.
std::string format_log_line(const log_record& r);
/// Parses a log: header first (any order of known fields), then lines. Lines of other programs
/// are skipped. Throws errc::config_error for a missing header or an unknown version.
std::vector<log_record> parse_log(std::istream& in);
/// Parses one line without a header (its version's standard field order): what
/// `prism run --replay` and `prism log replay` take. Throws errc::invalid_argument naming the
/// expected form for anything else.
log_record parse_log_line(const std::string& line);
/// Splits one CSV line (RFC 4180 quoting).
std::vector<std::string> split_csv(const std::string& line);
/// The current time as the log writes it.
std::string log_timestamp();

/// Where log lines go. A file is opened for appending (O_APPEND, one write(2) per line) at
/// construction: many processes may share one; the first to find it empty writes the header
/// (under flock), and a file holding another header is refused. Thread safety: safe.
class log_sink {
 public:
  /// Throws errc::io_error when the file cannot be opened, errc::config_error when it holds a
  /// log of another format.
  explicit log_sink(const log_settings& s);
  ~log_sink();
  log_sink(const log_sink&) = delete;
  log_sink& operator=(const log_sink&) = delete;

  bool enabled() const noexcept { return settings_.enabled; }
  bool profile() const noexcept { return settings_.profile; }
  bool candidates() const noexcept { return settings_.candidates; }
  /// Writes the record when it passes the filter (the header is already there).
  void write(const log_record& r);
  /// Writes the exit summary: to stderr, never into the CSV file.
  void write_summary(const std::string& text);

 private:
  void write_all(const std::string& text);
  log_settings settings_;
  std::optional<std::regex> filter_;
  std::mutex mutex_;
  int fd_ = -1;  ///< 2 (stderr) or the file, opened O_APPEND
  bool own_file_ = false;
};

/// The exit summary: a table of calls, fallbacks (and, when `with_time`, the summed wall time of
/// each call's whole routine on a drained queue, "time_ms") per op,
/// backend and routing tier, sorted by op, backend, tier; then a line with the tuning database's
/// hits (db-exact + db-nearest calls) out of all calls; and, when graphs were recorded, a line
/// with graphs recorded and replayed (replayed kernels do not pass through the dispatcher, so
/// the table counts each recorded call once).
std::string format_summary(const std::vector<dispatch_stat>& stats, bool with_time,
                           const graph_totals& graphs = {});

/// The summary of a parsed log: its exec lines counted per (op, backend, tier), with their
/// summed time_us (compile time excluded) when any line has one.
struct log_summary {
  std::vector<dispatch_stat> stats;
  bool with_time = false;
  std::uint64_t lines = 0, exec = 0, rejects = 0, errors = 0;
  std::uint64_t recorded = 0;   ///< of `exec`: calls made while a graph recorded (event "record")
  std::uint64_t processes = 0;  ///< distinct pids (v2 lines)
  double compile_ms = 0;        ///< summed compile_us, in ms
};
log_summary summarize_log(const std::vector<log_record>& records);

}  // namespace prism::dispatch
