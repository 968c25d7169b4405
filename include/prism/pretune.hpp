// Pretune from a program: what `prism pretune` does (measure each backend/config candidate for
// every shape of a shape set and store the fastest per shape in the tuning database), with
// progress reported to a callback. For embedders and the Python module's prism.tuning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prism/runtime/device.hpp"
#include "prism/tuning_db.hpp"

namespace prism::dispatch {

/// One progress report: either a finished shape (`line` set, as `prism pretune` prints it) or
/// the state of the shape being measured (`line` empty, `label` the shape, `detail` e.g.
/// "cand 3/12  elapsed 4.1 s  ETA 20 s").
struct pretune_progress {
  std::size_t done = 0;
  std::size_t total = 0;
  std::string label;
  std::string detail;
  std::string line;
};

/// What to tune: a shape set (`shapes` loaded by tuning::load_shape_set / parse_shape_set /
/// load_model_shape_set) and the choices of `prism pretune`'s options of the same names.
struct pretune_request {
  tuning::shape_set shapes;
  std::vector<std::string> ops;       ///< only these ops (empty = all in the set)
  std::vector<std::string> dtypes;    ///< only these dtypes (empty = all)
  std::vector<std::string> backends;  ///< candidate backends (empty = all but host)
  double budget_s = 0;                ///< stop cleanly after this many seconds (0 = none)
  std::size_t max_candidates = 12;    ///< generated candidates per backend and shape
  int min_runs = 3;
  int max_runs = 25;
  /// Calls back to back in one timed run, at most, for shapes whose default route is short
  /// (docs/tuning.md, "How a candidate is timed"); 1 = one finished call a run.
  int pipeline_calls = 20;
  bool force = false;  ///< re-tune shapes that already have a valid row
  /// Tune the largest default time x recorded calls first (each default route is timed first);
  /// false: the set's order.
  bool payoff_order = true;
  /// Threads building a shape's candidate kernels before the serial measurement; 0 = the
  /// hardware's concurrency.
  unsigned compile_threads = 0;
  std::uint64_t seed = 1;
  /// Called on the calling thread; nullptr = print nothing.
  std::function<void(const pretune_progress&)> on_progress;
};

/// The outcome for one shape of the set.
struct pretuned_shape {
  std::string op;
  std::string dtype;
  std::string shape;  ///< the op's canonical shape key
  std::string
      status;  ///< "tuned", "already_tuned", "failed", "not_reached", "covered" (as `prism pretune --json`)
  std::string detail;  ///< why it failed, or which shape covers it
  std::string backend;
  std::string config;
  double p50_ns = 0;
  double default_ns = 0;
  std::uint64_t calls = 0;  ///< recorded calls it stands for (0 = not counted)
  double payoff_ns = 0;     ///< default time x calls that set its place in the order (0 = unknown)
  int calls_per_sample = 0;  ///< calls back to back in each of its timed runs (0 = not timed)
};

struct pretune_summary {
  std::vector<pretuned_shape> shapes;
  double seconds = 0;
  bool budget_exhausted = false;
  std::string table;  ///< the summary table `prism pretune` prints
};

/// Runs pretune on `dev` into `db` (which must be writable), then makes the dispatcher use the
/// new rows (use_tuning_database). Throws errc::invalid_argument when the request selects no
/// entry of the set (naming the set's ops and dtypes), errc::database_error when `db` cannot be
/// written. Thread safety: one pretune per database at a time.
pretune_summary pretune(const device& dev, tuning::database& db, const pretune_request& request);

}  // namespace prism::dispatch
