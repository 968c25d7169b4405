// SPDX-License-Identifier: Apache-2.0
// The dispatch log's format (v2; v1 is still read), parser, sink and summaries (see
// dispatch_log.hpp).
#include "dispatch/log/dispatch_log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::dispatch {

const char* source_tier_name(source_tier t) noexcept {
  switch (t) {
    case source_tier::env:
      return "env";
    case source_tier::routes:
      return "routes";
    case source_tier::db_exact:
      return "db-exact";
    case source_tier::db_nearest:
      return "db-nearest";
    case source_tier::vendor:
      return "vendor";
    case source_tier::default_order:
      return "default";
    case source_tier::fallback:
      return "fallback";
  }
  return "?";
}

namespace {

// The standard field order of each version; a file's header may order them otherwise.
const std::vector<std::string> fields_v1 = {"event",  "op",   "dtypes", "shape",   "device", "backend",
                                            "config", "tier", "reason", "time_us", "attrs"};
const std::vector<std::string> fields_v2 = {"event",  "time",    "pid",        "op",
                                            "dtypes", "shape",   "device",     "backend",
                                            "impl",   "config",  "tier",       "borrowed_shape",
                                            "reason", "time_us", "compile_us", "attrs"};

const std::vector<std::string>* fields_of(const std::string& version) {
  if (version == "v1") return &fields_v1;
  if (version == "v2") return &fields_v2;
  return nullptr;
}

void append_field(std::string& out, const std::string& v) {
  out += ',';
  if (v.find_first_of(",\"\n\r") == std::string::npos) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"') out += '"';
    out += c == '\n' || c == '\r' ? ' ' : c;
  }
  out += '"';
}

// A finite number >= 0 (times, process ids), or the line is refused naming the field.
std::optional<double> number_field(const std::string& column, const std::string& v) {
  if (v.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() + v.size() && errno != ERANGE && std::isfinite(x) && x >= 0) return x;
  throw error(errc::config_error, "dispatch log",
              "field " + column + " is '" + v + "'; expected a finite number >= 0");
}

// A process id: a whole number in [0, 2^63).
std::int64_t pid_field(const std::string& column, const std::string& v) {
  std::int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec == std::errc() && end == v.data() + v.size() && x >= 0) return x;
  throw error(errc::config_error, "dispatch log",
              "field " + column + " is '" + v + "'; expected a whole number >= 0 (a process id)");
}

void set_field(log_record& r, const std::string& c, const std::string& v) {
  if (c == "event")
    r.event = v;
  else if (c == "time")
    r.timestamp = v;
  else if (c == "pid")
    r.pid = v.empty() ? 0 : pid_field(c, v);
  else if (c == "op")
    r.op = v;
  else if (c == "dtypes")
    r.dtypes = v;
  else if (c == "shape")
    r.shape = v;
  else if (c == "device")
    r.device = v;
  else if (c == "backend")
    r.backend = v;
  else if (c == "impl")
    r.implementation = v;
  else if (c == "config")
    r.config = v;
  else if (c == "tier")
    r.tier = v;
  else if (c == "borrowed_shape")
    r.borrowed_shape = v;
  else if (c == "reason")
    r.reason = v;
  else if (c == "time_us")
    r.time_us = number_field(c, v);
  else if (c == "compile_us")
    r.compile_us = number_field(c, v);
  else if (c == "attrs")
    r.attrs = v;
}

log_record record_of(const std::vector<std::string>& columns, const std::vector<std::string>& cells,
                     const std::string& version) {
  log_record r;
  r.version = version;
  for (std::size_t i = 0; i < columns.size() && i + 2 < cells.size(); ++i)
    set_field(r, columns[i], cells[i + 2]);
  return r;
}

std::optional<source_tier> tier_of(const std::string& name) {
  for (auto t : {source_tier::env, source_tier::routes, source_tier::db_exact, source_tier::db_nearest,
                 source_tier::vendor, source_tier::default_order, source_tier::fallback})
    if (name == source_tier_name(t)) return t;
  return std::nullopt;
}

}  // namespace

std::string log_header(const std::string& version) {
  const auto* f = fields_of(version);
  if (!f)
    throw error(errc::invalid_argument, "dispatch log", "unknown version '" + version + "'; known: v1, v2");
  std::string out = std::string(log_prefix) + "_header," + version;
  for (const auto& name : *f) out += "," + name;
  return out;
}

std::string log_header() {
  return log_header(log_version);
}

std::string log_timestamp() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const auto us = duration_cast<microseconds>(now.time_since_epoch()).count() % 1000000;
  const std::time_t t = system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
}

std::string format_log_line(const log_record& r) {
  std::string out = std::string(log_prefix) + "," + log_version;
  out.reserve(220);
  append_field(out, r.event);
  append_field(out, r.timestamp);
  append_field(out, r.pid ? std::to_string(r.pid) : std::string());
  append_field(out, r.op);
  append_field(out, r.dtypes);
  append_field(out, r.shape);
  append_field(out, r.device);
  append_field(out, r.backend);
  append_field(out, r.implementation);
  append_field(out, r.config);
  append_field(out, r.tier);
  append_field(out, r.borrowed_shape);
  append_field(out, r.reason);
  append_field(out, r.time_us ? fmt::format("{:.3f}", *r.time_us) : std::string());
  append_field(out, r.compile_us ? fmt::format("{:.3f}", *r.compile_us) : std::string());
  append_field(out, r.attrs);
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<log_record> parse_log(std::istream& in) {
  std::vector<log_record> out;
  std::vector<std::string> columns;
  std::string version;
  const std::string header_tag = std::string(log_prefix) + "_header";
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto cells = split_csv(line);
    if (cells.size() < 2) continue;
    if (cells[0] == header_tag) {
      if (!fields_of(cells[1]))
        throw error(
            errc::config_error, "dispatch log",
            fmt::format("line {}: header has version '{}'; this prism reads v1 and v2", number, cells[1]));
      version = cells[1];
      columns.assign(cells.begin() + 2, cells.end());
      continue;
    }
    if (cells[0] != log_prefix) continue;
    if (columns.empty())
      throw error(errc::config_error, "dispatch log",
                  fmt::format("line {} comes before the header line ({}_header,...)", number, log_prefix));
    if (cells[1] != version)
      throw error(errc::config_error, "dispatch log",
                  fmt::format("line {} has version '{}' under a {} header", number, cells[1], version));
    out.push_back(record_of(columns, cells, version));
  }
  return out;
}

log_record parse_log_line(const std::string& text) {
  std::string line = text;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  auto cells = split_csv(line);
  const auto* columns = cells.size() >= 2 && cells[0] == log_prefix ? fields_of(cells[1]) : nullptr;
  if (!columns)
    throw error(errc::invalid_argument, "dispatch log line",
                "'" + line.substr(0, 60) + (line.size() > 60 ? "...'" : "'") +
                    " is not a dispatch log line; expected 'prism_dispatch,v2,<event>,...' (or a v1 line, "
                    "'prism_dispatch,v1,<event>,...')");
  if (cells.size() != columns->size() + 2)
    throw error(errc::invalid_argument, "dispatch log line",
                fmt::format("a {} line has {} fields; this one has {} (quote fields holding commas)",
                            cells[1], columns->size() + 2, cells.size()));
  return record_of(*columns, cells, cells[1]);
}

log_sink::log_sink(const log_settings& s) : settings_(s) {
  if (!s.filter.empty()) filter_.emplace(s.filter);
  if (!s.enabled) return;
  const std::string header = log_header();
  if (s.file.empty()) {
    fd_ = 2;
    write_all(header + "\n");
    return;
  }
  fd_ = ::open(s.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw error(errc::io_error, "PRISM_LOG_DISPATCH_FILE",
                "cannot open '" + s.file + "' for appending: " + std::strerror(errno));
  own_file_ = true;
  // The header goes in once per file, whichever of several processes starting together comes
  // first: check and write under an exclusive lock.
  ::flock(fd_, LOCK_EX);
  struct stat st {};
  std::string first;
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    std::ifstream in(s.file);
    std::getline(in, first);
  }
  if (first.empty() && st.st_size == 0) write_all(header + "\n");
  ::flock(fd_, LOCK_UN);
  if (st.st_size > 0 && first != header) {
    ::close(fd_);
    fd_ = -1;
    own_file_ = false;
    throw error(errc::config_error, "PRISM_LOG_DISPATCH_FILE",
                "'" + s.file + "' holds something other than a " + log_version +
                    " dispatch log (its first line is '" + first.substr(0, 60) +
                    "'); appending would mix formats: remove it or choose another file");
  }
}

log_sink::~log_sink() {
  if (own_file_ && fd_ >= 0) ::close(fd_);
}

void log_sink::write_all(const std::string& text) {
  // One write(2) per line: with O_APPEND, lines of concurrent processes never interleave.
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk or closed stderr: dispatch goes on without its log
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void log_sink::write(const log_record& r) {
  if (fd_ < 0) return;
  auto line = format_log_line(r);
  if (filter_ && !std::regex_search(line, *filter_)) return;
  line += '\n';
  std::lock_guard lock(mutex_);
  write_all(line);
}

void log_sink::write_summary(const std::string& text) {
  std::lock_guard lock(mutex_);
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(2, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

log_summary summarize_log(const std::vector<log_record>& records) {
  log_summary out;
  std::map<std::tuple<std::string, std::string, source_tier>, dispatch_stat> by_key;
  std::set<std::int64_t> pids;
  double compile_us = 0;
  for (const auto& r : records) {
    ++out.lines;
    if (r.pid) pids.insert(r.pid);
    if (r.event == "reject") {
      ++out.rejects;
      continue;
    }
    if (r.event == "error") {
      ++out.errors;
      continue;
    }
    if (r.event == "record") ++out.recorded;
    if (r.event != "exec" && r.event != "record") continue;
    ++out.exec;
    auto tier = tier_of(r.tier);
    if (!tier)
      throw error(errc::config_error, "dispatch log",
                  "an exec line of " + r.op + " has tier '" + r.tier +
                      "'; valid: env, routes, db-exact, db-nearest, vendor, default, fallback");
    auto& s = by_key[{r.op, r.backend, *tier}];
    s.op = r.op;
    s.backend = r.backend;
    s.tier = *tier;
    ++s.calls;
    if (*tier == source_tier::fallback) ++s.fallbacks;
    if (r.time_us) {
      out.with_time = true;
      s.time_ns += static_cast<std::uint64_t>(*r.time_us * 1e3 + 0.5);
    }
    if (r.compile_us) compile_us += *r.compile_us;
  }
  for (auto& [key, s] : by_key) out.stats.push_back(s);
  out.processes = pids.size();
  out.compile_ms = compile_us / 1e3;
  return out;
}

std::string format_summary(const std::vector<dispatch_stat>& stats, bool with_time,
                           const graph_totals& graphs) {
  auto sorted = stats;
  std::sort(sorted.begin(), sorted.end(), [](const dispatch_stat& a, const dispatch_stat& b) {
    return std::tie(a.op, a.backend, a.tier) < std::tie(b.op, b.backend, b.tier);
  });
  std::size_t op_w = 2, be_w = 7, tier_w = 10;  // "db-nearest"
  std::uint64_t calls = 0, exact = 0, nearest = 0;
  for (const auto& s : sorted) {
    op_w = std::max(op_w, s.op.size());
    be_w = std::max(be_w, s.backend.size());
    calls += s.calls;
    if (s.tier == source_tier::db_exact) exact += s.calls;
    if (s.tier == source_tier::db_nearest) nearest += s.calls;
  }
  std::string out = "prism dispatch summary\n";
  out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>10}  {:>9}", "op", op_w, "backend", be_w, "tier", tier_w,
                     "calls", "fallbacks");
  if (with_time) out += fmt::format("  {:>12}", "time_ms");
  out += "\n";
  for (const auto& s : sorted) {
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>10}  {:>9}", s.op, op_w, s.backend, be_w,
                       source_tier_name(s.tier), tier_w, s.calls, s.fallbacks);
    if (with_time) out += fmt::format("  {:>12.3f}", static_cast<double>(s.time_ns) / 1e6);
    out += "\n";
  }
  // The tuning database's share, the question the tier column answers most often.
  out += fmt::format("tuning database hits: {} of {} calls ({:.0f}%; db-exact {}, db-nearest {})\n",
                     exact + nearest, calls,
                     calls ? 100.0 * static_cast<double>(exact + nearest) / calls : 0.0, exact, nearest);
  if (graphs.graphs_recorded)
    out += fmt::format("graphs: {} recorded ({} commands), {} replays ({} commands replayed)\n",
                       graphs.graphs_recorded, graphs.commands_recorded, graphs.replays,
                       graphs.commands_replayed);
  return out;
}

}  // namespace prism::dispatch
