// The dispatch log: one versioned CSV line per dispatch (and per rejected candidate in
// "dispatch" mode) after a header line naming the fields; a filter regex; stderr or a file;
// and the exit summary of per-(op, backend) counts.
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

namespace prism::dispatch {

inline constexpr const char* log_version = "v1";
inline constexpr const char* log_prefix = "prism_dispatch";

/// One line of the log. `event` is "exec" (the implementation that served the call),
/// "reject" (a candidate that refused, with its reason) or "error" (strict mode refusal).
struct log_record {
  std::string event = "exec";
  std::string op;
  std::string dtypes;  ///< input dtypes, '|'-separated ("f32|f32")
  std::string shape;   ///< the descriptor's shape key
  std::string device;  ///< device fingerprint hash
  std::string backend;
  std::string config;             ///< canonical config string ("" = default)
  std::string tier;               ///< env|routes|db-exact|db-nearest|vendor|default|fallback
  std::string reason;             ///< why this backend (origin) or why it was rejected
  std::optional<double> time_us;  ///< device time when profiling
  std::string attrs;              ///< the call's attributes, for replay with `prism run`
};

/// The header line (without newline): "prism_dispatch_header,v1,event,op,...".
std::string log_header();
/// One record as a line (without newline); fields with ',' or '"' are CSV-quoted.
std::string format_log_line(const log_record& r);
/// Parses a log: header first (any order of known fields), then lines. Lines of other programs
/// are skipped. Throws errc::config_error for a missing header or another version.
std::vector<log_record> parse_log(std::istream& in);
/// Splits one CSV line (RFC 4180 quoting).
std::vector<std::string> split_csv(const std::string& line);

/// Where log lines go. Thread safety: safe (one mutex around formatting and writing).
class log_sink {
 public:
  explicit log_sink(const log_settings& s);
  ~log_sink();
  log_sink(const log_sink&) = delete;
  log_sink& operator=(const log_sink&) = delete;

  bool enabled() const noexcept { return settings_.enabled; }
  bool profile() const noexcept { return settings_.profile; }
  bool candidates() const noexcept { return settings_.candidates; }
  /// Writes the record when it passes the filter (the header goes out before the first line).
  void write(const log_record& r);
  /// Writes free text (the exit summary) unfiltered.
  void write_text(const std::string& text);

 private:
  void ensure_open();
  log_settings settings_;
  std::optional<std::regex> filter_;
  std::mutex mutex_;
  std::FILE* out_ = nullptr;
  bool own_file_ = false;
  bool header_written_ = false;
};

/// The exit summary: a table of calls, fallbacks (and, when `with_time`, the summed wall time of
/// each call's whole routine on a drained queue, "time_ms") per op,
/// backend and routing tier, sorted by op, backend, tier; then a line with the tuning database's
/// hits (db-exact + db-nearest calls) out of all calls.
std::string format_summary(const std::vector<dispatch_stat>& stats, bool with_time);

}  // namespace prism::dispatch
