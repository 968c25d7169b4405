// SPDX-License-Identifier: Apache-2.0
// prism::tuning::database: the store-independent half of the tuning database (memoized
// exact/nearest lookups, validators, check, stats) over a store (SQLite file or PostgreSQL).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "prism/tuning_db.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/database_impl.hpp"
#include "tuning_db/postgres.hpp"
#include "tuning_db/postgres_store.hpp"
#include "tuning_db/schema.hpp"
#include "tuning_db/sqlite_store.hpp"

namespace prism::tuning {

namespace fs = std::filesystem;
using detail::db_error;
using detail::log;

const char* candidate_status_name(candidate_status s) noexcept {
  switch (s) {
    case candidate_status::ok:
      return "ok";
    case candidate_status::build_error:
      return "build_error";
    case candidate_status::out_of_resources:
      return "out_of_resources";
    case candidate_status::wrong_result:
      return "wrong_result";
    case candidate_status::runtime_error:
      return "runtime_error";
    case candidate_status::unsupported:
      return "unsupported";
  }
  return "unknown";
}

candidate_status parse_candidate_status(std::string_view name) {
  for (auto s :
       {candidate_status::ok, candidate_status::build_error, candidate_status::out_of_resources,
        candidate_status::wrong_result, candidate_status::runtime_error, candidate_status::unsupported})
    if (name == candidate_status_name(s)) return s;
  throw prism::error(
      errc::invalid_argument, "tuning::parse_candidate_status",
      "unknown candidate status '" + std::string(name) +
          "'; valid: ok, build_error, out_of_resources, wrong_result, runtime_error, unsupported");
}

const char* match_tier_name(match_tier t) noexcept {
  return t == match_tier::exact ? "db-exact" : "db-nearest";
}

// ---------------------------------------------------------------------------------------------
// Locations

bool database::is_server_location(const std::string& location) {
  return pg::is_url(location);
}

std::string database::redact(const std::string& location) {
  return location.find("://") == std::string::npos ? location : pg::redact(location);
}

std::string database::location_error(const std::string& location) {
  static const std::string valid =
      "valid: an SQLite file path, or a postgresql:// or postgres:// URL (e.g. "
      "postgresql://user:password@host:5432/dbname)";
  if (location.empty()) return "the tuning database location is empty; " + valid;
  if (pg::is_url(location)) {
    std::string why = pg::check_url(location);
    if (!why.empty()) return "malformed PostgreSQL URL '" + pg::redact(location) + "': " + why + "; " + valid;
    return {};
  }
  auto scheme = location.find("://");
  if (scheme != std::string::npos && scheme > 0 &&
      location.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") >=
          scheme)
    return "unknown tuning database scheme '" + location.substr(0, scheme + 3) + "' in '" +
           pg::redact(location) + "'; " + valid;
  return {};
}

std::unique_ptr<store> open_store(const std::string& location, database::access mode) {
  // Anything that names a scheme is a server URL (a bad one is refused with its reason).
  if (database::is_server_location(location) ||
      (!location.empty() && !database::location_error(location).empty()))
    return std::make_unique<postgres_store>(location, mode);
  return std::make_unique<sqlite_store>(location, mode);
}

// ---------------------------------------------------------------------------------------------
// database

database::impl::impl(std::string loc, database::access m) : location(std::move(loc)), mode(m) {
  st = open_store(location, mode);
}

database::database(std::string path, access mode) : impl_(std::make_unique<impl>(std::move(path), mode)) {}
database::~database() = default;

std::string database::default_path() {
  if (auto p = detail::env("PRISM_TUNING_DB")) return *p;
  return local_path();
}

std::string database::local_path() {
  if (auto p = detail::env("PRISM_TUNING_DB_LOCAL")) return *p;
  if (auto xdg = detail::env("XDG_CACHE_HOME")) return (fs::path(*xdg) / "prism" / "tuning.db").string();
  if (auto home = detail::env("HOME")) return (fs::path(*home) / ".cache" / "prism" / "tuning.db").string();
  return (fs::current_path() / "prism-tuning.db").string();
}

namespace {
struct default_state {
  std::mutex mu;
  std::string path;
  database* db = nullptr;
  std::vector<database*> all;  // every database process_default() ever returned
  bool exit_hook = false;
};
// Never destroyed: the database may be used until the very end of the process.
default_state& defaults() {
  static auto* s = new default_state;
  return *s;
}
// At exit the default databases are closed, which folds their WAL into the .db file. One
// used afterwards (by another exit handler) reopens itself.
void close_defaults() {
  auto& s = defaults();
  std::lock_guard lock(s.mu);
  for (auto* db : s.all) db->close();
}
database* make_default(default_state& s, const std::string& path) {
  auto* db = new database(path);
  s.all.push_back(db);
  if (!s.exit_hook) {
    s.exit_hook = true;
    std::atexit(close_defaults);
  }
  return db;
}
}  // namespace

namespace {
std::atomic<std::uint64_t>& rows_changed() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}
}  // namespace

void note_rows_changed() noexcept {
  rows_changed().fetch_add(1, std::memory_order_acq_rel);
}
std::uint64_t database::changes() noexcept {
  return rows_changed().load(std::memory_order_acquire);
}

database& database::process_default() {
  auto& s = defaults();
  std::lock_guard lock(s.mu);
  if (!s.db) s.db = make_default(s, s.path.empty() ? default_path() : s.path);
  return *s.db;
}

void database::set_default_path(std::string path) {
  auto& s = defaults();
  std::lock_guard lock(s.mu);
  s.path = std::move(path);
  // The old object stays alive (deliberately leaked): callers may still hold a reference.
  if (s.db && !s.path.empty() && s.db->impl_->location != s.path) {
    s.db = make_default(s, s.path);
    note_rows_changed();
  }
}

const std::string& database::path() const noexcept {
  return impl_->st->location();
}
bool database::is_open() const noexcept {
  return impl_->st->is_open();
}
bool database::writable() const noexcept {
  return impl_->st->writable();
}
const std::string& database::read_only_reason() const noexcept {
  return impl_->st->read_only_reason();
}
const std::string& database::refusal() const noexcept {
  return impl_->st->refusal();
}
std::string database::queued_to() const {
  std::lock_guard lock(impl_->mu);
  return impl_->st->queued_to();
}
bool database::is_server() const noexcept {
  return is_server_location(impl_->location);
}
int database::current_schema_version() noexcept {
  return schema::current_version;
}

int database::init() {
  std::lock_guard lock(impl_->mu);
  int before = impl_->st->init_schema();
  impl_->forget_all();
  return before;
}

int database::schema_version() const {
  std::lock_guard lock(impl_->mu);
  return impl_->st->schema_version();
}

void database::close() {
  std::lock_guard lock(impl_->mu);
  impl_->st->close();
}

void database::checkpoint() {
  std::lock_guard lock(impl_->mu);
  impl_->st->checkpoint();
}

void database::set_validator(row_validator validator) {
  std::lock_guard lock(impl_->mu);
  impl_->validator = std::move(validator);
  impl_->memo.clear();
  impl_->logged_skips.clear();
}

void database::impl::forget(const std::string& device, const std::string& op, const std::string& dtype) {
  groups.erase(group_id(device, op, dtype));
  memo.clear();
}

void database::impl::forget_all() {
  groups.clear();
  memo.clear();
}

void database::put_device(const device_record& dev) {
  std::lock_guard lock(impl_->mu);
  impl_->st->put_device(dev);
  ++impl_->writes;
}

void database::put_result(const result_row& row) {
  std::lock_guard lock(impl_->mu);
  impl_->st->put_result(row);
  ++impl_->writes;
  impl_->forget(row.device, row.op, row.dtype);
}

bool database::put_result_if_faster(const result_row& row) {
  std::lock_guard lock(impl_->mu);
  bool stored = impl_->st->put_result_if_faster(row);
  ++impl_->writes;
  impl_->forget(row.device, row.op, row.dtype);
  return stored;
}

void database::put_candidate(const candidate_row& row) {
  std::lock_guard lock(impl_->mu);
  impl_->st->put_candidate(row);
  ++impl_->writes;
}

void database::put_shape(const result_row& winner, const std::vector<candidate_row>& cands) {
  std::lock_guard lock(impl_->mu);
  impl_->st->put_shape(winner, cands);
  ++impl_->writes;
  impl_->forget(winner.device, winner.op, winner.dtype);
}

std::size_t database::clear(const row_filter& filter) {
  std::lock_guard lock(impl_->mu);
  auto removed = impl_->st->clear(filter);
  ++impl_->writes;
  impl_->forget_all();
  return removed;
}

void database::vacuum() {
  std::lock_guard lock(impl_->mu);
  impl_->st->vacuum();
}

// ---- reads ----

std::string database::impl::group_id(const std::string& device, const std::string& op,
                                     const std::string& dtype) {
  return device + '\x1f' + op + '\x1f' + dtype;
}

std::string database::impl::skip_reason(const result_row& row, const std::string& driver_version,
                                        const row_validator* own) {
  if (!driver_version.empty() && !row.driver_version.empty() && row.driver_version != driver_version)
    return "driver version changed: tuned on '" + row.driver_version + "', device now reports '" +
           driver_version + "'";
  if (own) return (*own)(row);
  if (validator) return validator(row);
  return {};
}

namespace {
bool same_side_of_splits(const lookup_query& q, const shape_key& row) {
  for (const auto& [name, value] : q.splits) {
    const auto a = q.shape.find(name), b = row.find(name);
    if (a && b && ((*a <= value) != (*b <= value))) return false;
  }
  return true;
}
}  // namespace

std::optional<match> database::lookup(const lookup_query& q) {
  auto& d = *impl_;
  std::lock_guard lock(d.mu);
  ++d.lookups;
  // A snapshot refresh (PostgreSQL store) may have changed the rows behind the memo.
  if (auto gen = d.st->generation(); gen != d.seen_generation) {
    d.seen_generation = gen;
    d.forget_all();
  }
  std::string canon = q.shape.canonical();
  std::string gid = d.group_id(q.device, q.op, q.dtype);
  std::string memo_key =
      gid + '\x1f' + canon + '\x1f' + q.driver_version + '\x1f' + std::to_string(q.max_distance);
  for (const auto& [name, value] : q.splits) memo_key += std::string(1, '\x1f') + name + '<' + std::to_string(value);
  if (auto it = d.memo.find(memo_key); it != d.memo.end()) {
    ++d.memo_hits;
    return it->second;
  }
  auto git = d.groups.find(gid);
  if (git == d.groups.end()) {
    std::vector<impl::cached_row> rows;
    try {
      ++d.sql_queries;
      for (auto& r : d.st->group_rows(q.device, q.op, q.dtype)) {
        impl::cached_row c;
        try {
          c.key = shape_key::parse(r.shape);
        } catch (const prism::error& e) {
          log().warn("tuning database {}: skipping row {} {} '{}': {}", d.st->location(), r.op, r.dtype,
                     r.shape, e.message());
          continue;
        }
        c.row = std::move(r);
        rows.push_back(std::move(c));
      }
    } catch (const std::exception& f) {
      // A lookup never fails dispatch: log and answer from the defaults.
      log().warn("tuning database {}: lookup of {} {} failed ({}); using defaults", d.st->location(), q.op,
                 q.dtype, f.what());
      return std::nullopt;
    }
    git = d.groups.emplace(gid, std::move(rows)).first;
  }

  auto usable = [&](const impl::cached_row& c) {
    std::string why = d.skip_reason(c.row, q.driver_version, q.validator ? &q.validator : nullptr);
    if (why.empty()) return true;
    std::string once = gid + '\x1f' + c.row.shape + '\x1f' + why;
    if (d.logged_skips.insert(once).second)
      log().warn("tuning database: skipping {} {} [{}] (backend {}, config '{}'): {}", c.row.op, c.row.dtype,
                 c.row.shape, c.row.backend, c.row.config, why);
    return false;
  };

  std::optional<match> answer;
  for (auto& c : git->second) {
    if (c.key.canonical() == canon) {
      if (usable(c)) answer = match{match_tier::exact, c.row, 0.0};
      break;
    }
  }
  if (!answer) {
    const impl::cached_row* best = nullptr;
    double best_d = 0;
    for (auto& c : git->second) {
      double dist = shape_distance(q.shape, c.key);
      if (!(dist <= q.max_distance) || dist == 0) continue;
      if (!same_side_of_splits(q, c.key)) continue;
      // Ties go to the smaller shape key text so every process picks the same row.
      if (best && (dist > best_d || (dist == best_d && c.row.shape >= best->row.shape))) continue;
      if (!usable(c)) continue;
      best = &c;
      best_d = dist;
    }
    if (best) answer = match{match_tier::nearest, best->row, best_d};
  }
  d.memo.emplace(memo_key, answer);
  return answer;
}

std::optional<result_row> database::find_result(const std::string& device, const std::string& op,
                                                const std::string& dtype, const shape_key& shape) {
  std::lock_guard lock(impl_->mu);
  std::string canon = shape.canonical();
  for (auto& r : impl_->st->results(row_filter{device, op, dtype, shape.str()}))
    if (r.device == device && shape_key::parse(r.shape).canonical() == canon) return r;
  return std::nullopt;
}

std::vector<candidate_row> database::candidates(const std::string& device, const std::string& op,
                                                const std::string& dtype, const shape_key& shape) {
  std::lock_guard lock(impl_->mu);
  return impl_->st->candidates(device, op, dtype, shape);
}

std::vector<result_row> database::results(const row_filter& filter) {
  std::lock_guard lock(impl_->mu);
  return impl_->st->results(filter);
}

std::vector<device_record> database::devices() {
  std::lock_guard lock(impl_->mu);
  return impl_->st->devices();
}

std::optional<device_record> database::find_device(const std::string& fingerprint) {
  for (auto& d : devices())
    if (d.fingerprint == fingerprint) return d;
  return std::nullopt;
}

std::vector<stale_row> database::check(const std::vector<device_record>& current) {
  auto rows = results();
  auto known = devices();
  std::lock_guard lock(impl_->mu);
  std::vector<stale_row> out;
  for (auto& r : rows) {
    std::string why;
    auto cur =
        std::find_if(current.begin(), current.end(), [&](auto& d) { return d.fingerprint == r.device; });
    if (cur != current.end()) {
      why = impl_->skip_reason(r, cur->driver_version);
    } else if (!current.empty()) {
      // Same device name under another fingerprint: the driver or platform changed since.
      auto rec = std::find_if(known.begin(), known.end(), [&](auto& d) { return d.fingerprint == r.device; });
      if (rec != known.end()) {
        auto same_name =
            std::find_if(current.begin(), current.end(), [&](auto& d) { return d.name == rec->name; });
        if (same_name != current.end())
          why = "tuned on another fingerprint of " + rec->name + " (" + r.device + ", driver '" +
                rec->driver_version + "'); the device is now " + same_name->fingerprint + " with driver '" +
                same_name->driver_version + "'";
      }
      if (why.empty() && impl_->validator) why = impl_->validator(r);
    } else if (impl_->validator) {
      why = impl_->validator(r);
    }
    if (!why.empty()) out.push_back(stale_row{r, why});
  }
  return out;
}

std::vector<op_stats> database::stats(const row_filter& filter) {
  auto rows = results(filter);
  auto devs = devices();
  std::map<std::pair<std::string, std::string>, std::vector<const result_row*>> groups;
  for (auto& r : rows) groups[{r.device, r.op}].push_back(&r);
  std::vector<op_stats> out;
  for (auto& [key, members] : groups) {
    op_stats s;
    s.device = key.first;
    s.op = key.second;
    for (auto& d : devs)
      if (d.fingerprint == s.device) s.device_name = d.name;
    s.rows = members.size();
    double log_sum = 0;
    for (auto* r : members) {
      double sp = r->speedup();
      if (sp <= 0) continue;
      log_sum += std::log(sp);
      s.min_speedup = s.rows_with_default == 0 ? sp : std::min(s.min_speedup, sp);
      s.max_speedup = std::max(s.max_speedup, sp);
      ++s.rows_with_default;
    }
    if (s.rows_with_default) s.geomean_speedup = std::exp(log_sum / static_cast<double>(s.rows_with_default));
    out.push_back(std::move(s));
  }
  return out;
}

std::string database::integrity_check() {
  std::lock_guard lock(impl_->mu);
  return impl_->st->integrity_check();
}

database_counters database::counters() const {
  std::lock_guard lock(impl_->mu);
  database_counters c;
  c.sql_queries = impl_->sql_queries;
  c.lookups = impl_->lookups;
  c.memo_hits = impl_->memo_hits;
  c.writes = impl_->writes;
  c.busy_retries = impl_->st->busy_retries();
  return c;
}

}  // namespace prism::tuning
