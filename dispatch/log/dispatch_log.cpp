// The dispatch log's format, parser, sink and exit summary (see dispatch_log.hpp).
#include "dispatch/log/dispatch_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

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

const std::vector<std::string> fields = {"event",  "op",   "dtypes", "shape",   "device", "backend",
                                         "config", "tier", "reason", "time_us", "attrs"};

void append_field(std::string& out, const std::string& v) {
  out += ',';
  if (v.find_first_of(",\"\n") == std::string::npos) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  out += '"';
}

}  // namespace

std::string log_header() {
  std::string out = std::string(log_prefix) + "_header," + log_version;
  for (const auto& f : fields) out += "," + f;
  return out;
}

std::string format_log_line(const log_record& r) {
  std::string out = std::string(log_prefix) + "," + log_version;
  out.reserve(160);
  append_field(out, r.event);
  append_field(out, r.op);
  append_field(out, r.dtypes);
  append_field(out, r.shape);
  append_field(out, r.device);
  append_field(out, r.backend);
  append_field(out, r.config);
  append_field(out, r.tier);
  append_field(out, r.reason);
  append_field(out, r.time_us ? fmt::format("{:.3f}", *r.time_us) : std::string());
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
  const std::string header_tag = std::string(log_prefix) + "_header";
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto cells = split_csv(line);
    if (cells.size() < 2) continue;
    if (cells[0] == header_tag) {
      if (cells[1] != log_version)
        throw error(errc::config_error, "dispatch log",
                    "header has version '" + cells[1] + "'; this prism reads " + log_version);
      columns.assign(cells.begin() + 2, cells.end());
      continue;
    }
    if (cells[0] != log_prefix) continue;
    if (columns.empty())
      throw error(errc::config_error, "dispatch log", "a line comes before the header line");
    if (cells[1] != log_version)
      throw error(errc::config_error, "dispatch log",
                  "line has version '" + cells[1] + "'; expected " + log_version);
    log_record r;
    for (std::size_t i = 0; i < columns.size() && i + 2 < cells.size(); ++i) {
      const auto& c = columns[i];
      const auto& v = cells[i + 2];
      if (c == "event")
        r.event = v;
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
      else if (c == "config")
        r.config = v;
      else if (c == "tier")
        r.tier = v;
      else if (c == "reason")
        r.reason = v;
      else if (c == "time_us" && !v.empty()) {
        // A number, or the line is refused naming it (std::stod said only "stod").
        char* end = nullptr;
        errno = 0;
        double t = std::strtod(v.c_str(), &end);
        if (end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(t) || t < 0)
          throw error(errc::config_error, "dispatch log",
                      "line " + std::to_string(line_no) +
                          ": field 'time_us' must be a number of microseconds >= 0, got '" + v + "'");
        r.time_us = t;
      } else if (c == "attrs")
        r.attrs = v;
    }
    out.push_back(std::move(r));
  }
  return out;
}

log_sink::log_sink(const log_settings& s) : settings_(s) {
  if (!s.filter.empty()) filter_.emplace(s.filter);
}

log_sink::~log_sink() {
  if (own_file_ && out_) std::fclose(out_);
}

void log_sink::ensure_open() {
  if (out_) return;
  if (settings_.file.empty()) {
    out_ = stderr;
  } else {
    out_ = std::fopen(settings_.file.c_str(), "w");
    if (!out_) {
      out_ = stderr;
      throw error(errc::io_error, "PRISM_LOG_DISPATCH_FILE",
                  "cannot open '" + settings_.file + "' for writing");
    }
    own_file_ = true;
  }
}

void log_sink::write(const log_record& r) {
  auto line = format_log_line(r);
  if (filter_ && !std::regex_search(line, *filter_)) return;
  std::lock_guard lock(mutex_);
  ensure_open();
  if (!header_written_) {
    std::fprintf(out_, "%s\n", log_header().c_str());
    header_written_ = true;
  }
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void log_sink::write_text(const std::string& text) {
  std::lock_guard lock(mutex_);
  ensure_open();
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
}

std::string format_summary(const std::vector<dispatch_stat>& stats, bool with_time) {
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
  return out;
}

}  // namespace prism::dispatch
