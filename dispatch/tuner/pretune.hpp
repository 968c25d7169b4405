// SPDX-License-Identifier: Apache-2.0
// `prism pretune`: for every shape of a shape set, measure each candidate (backend + config),
// check it against the host reference, and store the fastest in the tuning database. Each
// candidate and each finished shape is committed at once, so an interrupted run resumes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dispatch/tuner/candidates.hpp"
#include "prism/runtime/device.hpp"
#include "prism/tuning_db.hpp"

namespace prism::dispatch::tuner {

struct pretune_options {
  tuning::shape_set shapes;
  std::vector<std::string> ops;     ///< only these ops (empty = all in the set)
  std::vector<std::string> dtypes;  ///< only these dtypes (empty = all)
  /// Candidate backends (empty = every one that can serve except host: host only when listed).
  std::vector<std::string> backends;
  strategy pick = strategy::random;
  std::size_t max_per_backend = 12;  ///< random strategy: generated candidates per backend and shape
  double budget_s = 0;               ///< stop cleanly after this many seconds (0 = no limit)
  int min_runs = 3;                  ///< timed runs per candidate (after one warm-up)
  /// Timed runs per candidate at most; past min_runs also the calls they hold at most.
  int max_runs = 25;
  double target_s_per_candidate = 0.3;  ///< timed runs stop once they sum to this
  /// At most this many calls back to back in one timed run, with one wait after them, for a
  /// shape whose default route is short (calls_per_sample); 1 = one finished call a run. A
  /// model's graph runs its kernels back to back, so that is the time that ranks its routes;
  /// one finished call a run also times the device's wake-up (tens of µs on PoCL).
  int pipeline_calls = 20;
  bool force = false;                   ///< re-tune shapes that already have a valid row
  bool progress_bar = false;            ///< redraw one line (terminal) instead of printing lines
  /// When set, progress goes here instead of stderr (the CLI draws it to fit the terminal): a
  /// finished shape's `line`, or (empty `line`) the bar's state: shapes done of total, the shape
  /// being measured and "cand i/n  elapsed  ETA".
  std::function<void(std::string_view line, std::size_t done, std::size_t total, std::string_view label,
                     std::string_view detail)>
      on_progress;
  /// Shapes of an op whose key has `lk` (attention) that differ only in KV length are tuned
  /// as one bucket: one representative, the others left to the nearest-shape lookup.
  bool fold_kv_lengths = true;
  /// Tune in payoff order (default time x recorded calls, largest first; docs/tuning.md) rather
  /// than in the set's order: each shape's default route is timed first, so a budget-limited run
  /// spends its time where it pays.
  bool payoff_order = true;
  /// Threads that build a shape's candidate programs before they are measured (serially);
  /// 0 = std::thread::hardware_concurrency(). Capped at the candidates to build and at 64.
  unsigned compile_threads = 0;
  std::uint64_t seed = 1;
};

/// The outcome for one shape.
struct shape_outcome {
  tuning::shape_entry entry;
  std::string shape;  ///< the descriptor's canonical key (what dispatch looks up)
  /// covered: folded into another shape's KV-length bucket (detail names it); not measured.
  enum class state { tuned, already_tuned, failed, not_reached, covered } status = state::not_reached;
  std::string detail;  ///< failure reason
  tuning::result_row row;
  std::size_t candidates = 0, failed_candidates = 0, resumed_candidates = 0;
  /// Payoff order: the recorded calls (those of the KV-length bucket it stands for, summed; 0 =
  /// not counted), the default route's p50 timed before ordering (0 = not timed) and their
  /// product with the calls taken as at least 1 (0 = unknown, ordered last).
  std::uint64_t calls = 0;
  double rank_default_ns = 0;
  double payoff_ns = 0;
  /// The default route's p50 the candidate policy read (make_candidates' default_ns; 0 = none).
  double candidates_default_ns = 0;
  /// Calls back to back in each timed run of this shape (calls_per_sample; 0 = none timed).
  int calls_per_sample = 0;
  /// Where the shape's wall time went: the host reference, building the candidates' programs
  /// (the parallel prebuild), checking and timing candidates, and the whole shape.
  double reference_s = 0, build_s = 0, measure_s = 0, total_s = 0;
};

struct pretune_report {
  std::vector<shape_outcome> shapes;
  double seconds = 0;
  /// Of `seconds`, the payoff order's pass: sampling each shape and timing its default route.
  double ordering_seconds = 0;
  bool budget_exhausted = false;
};

/// Runs pretune on `dev`, storing into `db` (which must be writable). Progress goes to stderr.
/// Throws prism::error(database_error) when `db` cannot be written.
pretune_report pretune(const device& dev, tuning::database& db, const pretune_options& options);

/// Pretune's final choice from the interleaved rounds (docs/tuning.md, step 5): the index of the
/// finalist with the smallest median time, if that median is at most `margin` times the default
/// route's median (always, when `default_ns` is empty: the default failed); nullopt keeps the
/// default route.
std::optional<std::size_t> pick_final(const std::vector<double>& default_ns,
                                      const std::vector<std::vector<double>>& finalists_ns,
                                      double margin = 0.97);

/// The calls a timed run of a shape holds: as many back to back as fill about
/// `sample_target_ns` (10 ms) at the default route's time for one finished call, `single_ns`,
/// clamped to [1, max_calls]. Every candidate of the shape, and the final rounds, run that
/// many; a time is then the run's wall time divided by its calls. (On the 2-core PoCL machine
/// one finished call of the 135M model's [49152, 576] q4_0 GEMV took 0.6-1.6 ms, median 1.33,
/// and the same call 0.68 ms back to back: a short target would time it alone.)
constexpr double sample_target_ns = 10e6;
int calls_per_sample(double single_ns, int max_calls);

/// The KV-length buckets of `entries` (fold_kv_lengths): for each entry, the index of the
/// entry that represents it (itself when it is tuned). Entries of an op whose key has `lk`
/// and that agree on every other component, dtype included, share a bucket while their KV
/// lengths span at most 2^16 (so the representative, at the geometric middle, is within the
/// nearest-shape lookup's distance of each).
std::vector<std::size_t> kv_length_buckets(const std::vector<tuning::shape_entry>& entries);

/// An entry's dtype as pretune's lines print it: "q4_0", or with 16-bit activations
/// (shape_entry::act) "q4_0 act=bf16".
std::string entry_dtype(const tuning::shape_entry& e);

/// The summary table (shape, winner, time, default, speedup) printed at the end.
std::string summary_table(const pretune_report& report);

/// A tuning time for people: "-" for none, else ns / us / ms / s with 3-4 significant digits.
/// Shared by pretune's tables and `prism db`, so the two print the same rows alike.
std::string human_ns(double ns);

}  // namespace prism::dispatch::tuner
