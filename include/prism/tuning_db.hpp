// SPDX-License-Identifier: Apache-2.0
// prism's tuning database: per-device, per-shape measured-best backend + config, in an SQLite
// file or on a PostgreSQL server shared by a fleet.
// Knows nothing of kernels or dispatch: rows are keyed by (device, op, dtype, shape key).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prism/shape_key.hpp"

namespace prism {
class device;

namespace tuning {

/// Keys and the nearness rule are prism's one shape_key (prism/shape_key.hpp).
using prism::shape_distance;
using prism::shape_key;

/// A device as the database knows it.
struct device_record {
  std::string fingerprint;     ///< prism::device_fingerprint::hash (16 hex digits)
  std::string name;            ///< human readable device name
  std::string driver_version;  ///< the driver that produced the rows
  std::string info_json;       ///< everything else worth keeping, as a JSON object
};
/// The record of a live device (fingerprint, name, driver, platform, compute units, ...).
device_record describe(const prism::device& dev);

/// The measured-best choice for one key.
struct result_row {
  std::string device;  ///< fingerprint
  std::string op;
  std::string dtype;
  std::string shape;    ///< shape key text
  std::string backend;  ///< e.g. "opencl", "clblast", "host"
  std::string config;   ///< backend-specific config string ("" = the backend's default)
  double p20_ns = 0;
  double p50_ns = 0;
  double p80_ns = 0;
  double default_ns = 0;       ///< p50 of the untuned default route (0 = not measured)
  std::string kernel_hash;     ///< hash of the kernel source + build options that won
  std::string driver_version;  ///< driver the measurement ran on
  std::string prism_version;   ///< prism that measured it
  std::int64_t tuned_at = 0;   ///< unix seconds
  /// default_ns / p50_ns, or 0 when either is unknown.
  double speedup() const { return (default_ns > 0 && p50_ns > 0) ? default_ns / p50_ns : 0.0; }
};

/// Outcome of one candidate measurement during pretune.
enum class candidate_status { ok, build_error, out_of_resources, wrong_result, runtime_error, unsupported };
const char* candidate_status_name(candidate_status s) noexcept;
/// Inverse of candidate_status_name; throws prism::error(invalid_argument) listing valid names.
candidate_status parse_candidate_status(std::string_view name);

/// One measured (or failed) candidate, kept so an interrupted pretune resumes where it stopped.
struct candidate_row {
  std::string device;
  std::string op;
  std::string dtype;
  std::string shape;
  std::string backend;
  std::string config;
  candidate_status status = candidate_status::ok;
  std::string reason;  ///< why it failed (build log excerpt, CL error name, max error, ...)
  double p20_ns = 0;
  double p50_ns = 0;
  double p80_ns = 0;
  std::string kernel_hash;
  std::int64_t measured_at = 0;
};

/// Which tier of the database answered a lookup.
enum class match_tier { exact, nearest };
/// "db-exact" / "db-nearest": the names the dispatch log prints.
const char* match_tier_name(match_tier t) noexcept;

/// A lookup's answer.
struct match {
  match_tier tier = match_tier::exact;
  result_row row;
  double distance = 0;  ///< shape_distance to the tuned row (0 for exact)
};

/// Decides whether a stored row may still be used: returns "" when it may, else the reason
/// (e.g. "kernel hash changed: 1a2b.. -> 3c4d.."). The dispatcher installs one that recomputes
/// the kernel hash of the row's backend + config.
using row_validator = std::function<std::string(const result_row&)>;

/// What a lookup asks for. `driver_version` empty = do not check it.
struct lookup_query {
  std::string device;  ///< fingerprint
  std::string op;
  std::string dtype;
  shape_key shape;
  std::string driver_version;
  /// Nearest-shape answers farther than this (see shape_distance) are not used.
  double max_distance = 8.0;
  /// Nearest-shape answers must lie on the query's side of each (component, value) split:
  /// both <= value or both > value (GEMMs: m <= 16 runs other kernels than larger m, so a row
  /// tuned at m = 128 must not serve m = 1). Exact answers are not affected.
  std::vector<std::pair<std::string, std::int64_t>> splits;
  /// Checked for this query's rows after the driver check (and instead of set_validator's):
  /// the caller's own staleness rule, which must not call back into the database.
  row_validator validator;
};

/// Selects rows; empty fields match anything.
struct row_filter {
  std::string device;  ///< fingerprint or a prefix of it
  std::string op;
  std::string dtype;
  std::string shape;
};

struct stale_row {
  result_row row;
  std::string reason;
};

/// Rows and speedups for one (device, op).
struct op_stats {
  std::string device;
  std::string device_name;
  std::string op;
  std::size_t rows = 0;
  std::size_t rows_with_default = 0;  ///< rows whose default time is known
  double geomean_speedup = 0;         ///< over rows_with_default (0 when none)
  double min_speedup = 0;
  double max_speedup = 0;
};

/// What an import or merge did.
struct merge_report {
  std::size_t devices = 0;   ///< device records added or refreshed
  std::size_t inserted = 0;  ///< keys that were new
  std::size_t replaced = 0;  ///< keys where the incoming row was faster
  std::size_t kept = 0;      ///< keys where the existing row was as fast or faster
};

/// Counters for tests and diagnostics.
struct database_counters {
  std::uint64_t sql_queries = 0;  ///< SELECTs run by lookups (a warm memoized hit adds none)
  std::uint64_t lookups = 0;
  std::uint64_t memo_hits = 0;
  std::uint64_t writes = 0;        ///< committed write transactions
  std::uint64_t busy_retries = 0;  ///< times SQLITE_BUSY was retried
};

/// The tuning database: an SQLite file, or a PostgreSQL server (a postgresql:// or postgres://
/// URL) that a fleet shares. Both keep the same rows and rules; the faster row wins per key.
///
/// SQLite file:
/// - Opening only reads and never throws for a bad file. A missing file is created (with its
///   directory) by the first write, never by a lookup. A file that is not a usable prism
///   database (not SQLite, damaged, or another program's database: prism databases carry
///   `PRAGMA application_id` 0x50525a4d) is refused and left byte-identical: refusal() says
///   why, lookups find nothing and writes throw. Only repair() moves a damaged file aside.
///   An unwritable location is opened read-only and writable() says why results cannot be
///   saved.
/// - WAL mode, a busy timeout and short BEGIN IMMEDIATE transactions make many processes safe
///   on one file; each put_* call is one committed transaction. checkpoint() (run after
///   imports and merges) and close() (run at exit for process_default()) fold the WAL into
///   the .db file, so that the file alone is complete.
///
/// PostgreSQL server (docs/tuning.md, "A fleet"):
/// - Lookups never touch the network: the first lookup for a device takes a snapshot of all
///   its rows, refreshed in the background every PRISM_TUNING_DB_REFRESH seconds (default
///   300; 0 = never). Connecting waits at most PRISM_TUNING_DB_TIMEOUT seconds (default 5).
/// - The schema is created by init() (`prism db init URL`), never implicitly; a server
///   without it, or with a newer one, is refused: nothing is written there.
/// - A server that is down, unreachable, refuses the login or times out is reported once;
///   lookups then use the local file (PRISM_TUNING_DB_LOCAL, default the usual tuning.db) and
///   writes go there (queued_to()), to be sent later with `prism db push URL`.
///
/// Lookups are memoized in-process: the first lookup for (device, op, dtype) loads its rows
/// once; any later lookup for them runs no query. Writes through this object refresh the memo.
///
/// Thread safety: safe; calls are serialized by an internal mutex.
class database {
 public:
  enum class access { read_write, read_only };

  /// Opens the database at `path` (a file path or a PostgreSQL URL, see location_error()) for
  /// lookups; with read_write the first write creates a file. read_only never writes, creates
  /// or renames anything.
  explicit database(std::string path, access mode = access::read_write);
  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  /// PRISM_TUNING_DB, else local_path().
  static std::string default_path();
  /// The local file: PRISM_TUNING_DB_LOCAL, else ${XDG_CACHE_HOME:-$HOME/.cache}/prism/tuning.db.
  /// A PostgreSQL database falls back to it; `prism db push/pull` copy between it and a server.
  static std::string local_path();
  /// "" when `location` names a store this prism can open, else what is wrong with it and
  /// what is valid (an SQLite file path, or a postgresql:// or postgres:// URL).
  static std::string location_error(const std::string& location);
  /// True for a postgresql:// or postgres:// URL.
  static bool is_server_location(const std::string& location);
  /// `location` as messages show it: a URL's password replaced by "***".
  static std::string redact(const std::string& location);
  /// The process-wide database at the path given to set_default_path(), else default_path().
  /// Opened on first use, never destroyed; closed (WAL folded in) at process exit, reopened
  /// if used after that.
  static database& process_default();
  /// Sets the path process_default() opens (the CLI's --db). Calling it after process_default()
  /// was opened with another path reopens it there.
  static void set_default_path(std::string path);
  /// A process-wide count that changes whenever rows behind earlier answers may have changed
  /// without this process writing them: a PostgreSQL snapshot refresh, or set_default_path()
  /// switching databases. The dispatcher drops its remembered decisions when it moves (and
  /// so bumps dispatch::routing_generation()). One atomic load.
  static std::uint64_t changes() noexcept;

  /// The file path, or the URL with its password hidden.
  const std::string& path() const noexcept;
  /// True for a PostgreSQL server.
  bool is_server() const noexcept;
  /// Where results are written instead of the server when it cannot take them (the local
  /// file), or "" when they go to path().
  std::string queued_to() const;
  /// Creates (or upgrades) the schema on a PostgreSQL server; returns the version found before
  /// (0 = none). A file needs no init (its first write creates it). Throws database_error.
  int init();
  /// False when the file is refused or cannot be read or created (lookups then find nothing).
  bool is_open() const noexcept;
  bool writable() const noexcept;
  /// Why results cannot be saved ("" when writable()).
  const std::string& read_only_reason() const noexcept;
  /// Why the existing file is not used at all ("" when it is, or when there is no file yet):
  /// it is not SQLite, it is damaged, or it belongs to another program; for a server: it
  /// cannot be reached, refused the login, lacks prism's schema or has a newer one.
  const std::string& refusal() const noexcept;
  /// Moves a damaged database at `path` (with its -wal; its -shm is removed) to
  /// `path.corrupt-<UTC time>-<pid>` and returns that name; returns "" when the file is a sound
  /// prism database. Refuses (prism::error invalid_argument) a sound database of another
  /// program, and, unless `force`, a file whose header does not carry prism's application_id.
  static std::string repair(const std::string& path, bool force = false);
  /// Folds the WAL into the .db file (PRAGMA wal_checkpoint(TRUNCATE)); no-op before writes.
  void checkpoint();
  /// Checkpoints and closes the connection; a later call reopens it.
  void close();
  /// The schema version of the open file (PRAGMA user_version) or server.
  int schema_version() const;
  static int current_schema_version() noexcept;

  /// Installs the validator lookups and check() apply (replaces any earlier one; clears memo).
  void set_validator(row_validator validator);

  // ---- writes (each one short BEGIN IMMEDIATE transaction; throw database_error when not
  // writable(), naming the path and the reason) ----
  void put_device(const device_record& dev);
  /// Inserts or replaces the row for its key.
  void put_result(const result_row& row);
  /// Inserts or replaces the row only if it is faster (smaller p50) than the stored one.
  /// Returns true when it was stored.
  bool put_result_if_faster(const result_row& row);
  void put_candidate(const candidate_row& row);
  /// Stores the shape's winner and its candidates in one transaction (a finished shape).
  void put_shape(const result_row& winner, const std::vector<candidate_row>& candidates);
  /// Removes matching results and candidates; returns the number of result rows removed.
  std::size_t clear(const row_filter& filter);
  void vacuum();

  // ---- reads ----
  /// Exact key, else the nearest comparable tuned shape of the same device, op and dtype,
  /// else nothing. Rows failing the driver check or the validator are skipped (logged once).
  std::optional<match> lookup(const lookup_query& query);
  /// Only the exact key (no validation): what pretune uses to see whether a shape is done.
  std::optional<result_row> find_result(const std::string& device, const std::string& op,
                                        const std::string& dtype, const shape_key& shape);
  std::vector<candidate_row> candidates(const std::string& device, const std::string& op,
                                        const std::string& dtype, const shape_key& shape);
  std::vector<result_row> results(const row_filter& filter = {});
  std::vector<device_record> devices();
  std::optional<device_record> find_device(const std::string& fingerprint);
  /// Rows that lookups would skip: wrong driver version for their device (`current` devices
  /// give today's driver per fingerprint/name) or rejected by the validator.
  std::vector<stale_row> check(const std::vector<device_record>& current = {});
  std::vector<op_stats> stats(const row_filter& filter = {});
  /// PRAGMA integrity_check: "ok" or the problems it lists.
  std::string integrity_check();

  // ---- fleet sharing ----
  /// JSON {"format":"prism-tuning","version":1,"devices":[...],"results":[...]}.
  std::string export_json(const row_filter& filter = {});
  /// Imports an export_json() document; per key the faster row wins unless `replace`.
  /// Validates every field (types, ranges) first and names the bad one; checkpoints after.
  merge_report import_json(std::string_view json_text, bool replace = false);
  /// Merges another database (a file or a server URL): devices, candidates and results
  /// (those `filter` selects), the faster row per key. `prism db push` and `pull` are merges.
  merge_report merge_from(const std::string& other_location, const row_filter& filter = {});

  database_counters counters() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// One result row as a JSON object (the fields export_json writes per row, plus "speedup").
std::string to_json(const result_row& row);

/// PRISM_RECORD_UNTUNED: appends each (op, dtype, shape) that missed the database, once per
/// process, to the shapes file named by the variable (or set_untuned_record_path), in a form
/// `prism pretune --shapes` reads; `act` is a block-quantized dtype's 16-bit activations
/// (shape_entry::act; empty = f32). Returns the shape's dispatch counter (never freed) for the
/// dispatcher to add each later dispatch of the shape to, or nullptr when nothing is recorded.
/// flush_untuned_record (also run at exit) appends the counts as `calls:`. Cheap no-op when no
/// file is set. Thread safety: safe.
std::atomic<std::uint64_t>* record_untuned(std::string_view op, std::string_view dtype,
                                           const shape_key& shape, std::string_view act = {});
/// Appends, for each recorded shape dispatched since the last flush, a line with the new calls
/// (`calls: N`; a shape set sums the calls of an entry listed several times). Runs at exit too.
/// Thread safety: safe.
void flush_untuned_record();
/// The file record_untuned writes to ("" when none: PRISM_RECORD_UNTUNED unset).
std::string untuned_record_path();
/// Records into `path` from now on, instead of PRISM_RECORD_UNTUNED's file ("" stops recording):
/// for embedders that turn recording on at run time (the Python module's record=PATH). Entries
/// already in the file are not written again. Calls of dispatch::use_tuning_database() make the
/// dispatcher look shapes up (and so record them) afresh. Counts not yet flushed are flushed to
/// the previous file first. `exact` overrides PRISM_RECORD_UNTUNED_EXACT (true: every distinct
/// shape; false: one per log2 bucket). Thread safety: safe.
void set_untuned_record_path(std::string path, std::optional<bool> exact = std::nullopt);

/// One entry of a shape set: an op, a dtype and a concrete shape.
struct shape_entry {
  std::string op;
  std::string dtype;
  shape_key shape;
  std::string note;  ///< where it comes from (e.g. "q_proj"); may be empty
  /// Dispatches counted by PRISM_RECORD_UNTUNED (`calls:`; an entry listed several times sums
  /// them); 0 = not counted, which pretune's payoff order takes as 1.
  std::uint64_t calls = 0;
  /// `act:` the activations' dtype of an entry whose dtype is block-quantized (q8_0, q4_0,
  /// q4_1): "f16" or "bf16" (a 16-bit model's decode); empty = f32.
  std::string act;
};

/// A shape set: the shapes a model dispatches (tuning_db/shapes/*.yaml, see docs/tuning.md).
struct shape_set {
  std::string name;
  std::string source;  ///< where the model dimensions come from
  std::vector<shape_entry> entries;
};

/// Parses a shape set file; list-valued components expand as a cartesian product; duplicate
/// (op, dtype, shape) entries are dropped. Throws prism::error(config_error) naming the file,
/// the entry and what is wrong, or io_error when it cannot be read.
shape_set load_shape_set(const std::string& path);
shape_set parse_shape_set(std::string_view yaml_text, const std::string& origin = "<string>");
/// The shipped set for a model name (case-insensitive, e.g. "llama-2-7b"); throws
/// prism::error(not_found) listing the shipped names.
shape_set load_model_shape_set(std::string_view model);
/// Names of the shipped shape sets (file stems of tuning_db/shapes/*.yaml).
std::vector<std::string> shipped_models();

}  // namespace tuning
}  // namespace prism
