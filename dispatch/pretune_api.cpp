// The public pretune entry point (prism/pretune.hpp): a request in plain public types, handed to
// the tuner (dispatch/tuner) as `prism pretune` hands it its options.
#include "prism/pretune.hpp"

#include <algorithm>
#include <set>

#include "dispatch/tuner/pretune.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"

namespace prism::dispatch {
namespace {

const char* status_name(tuner::shape_outcome::state s) {
  using state = tuner::shape_outcome::state;
  switch (s) {
    case state::tuned:
      return "tuned";
    case state::already_tuned:
      return "already_tuned";
    case state::failed:
      return "failed";
    case state::covered:
      return "covered";
    case state::not_reached:
      return "not_reached";
  }
  return "not_reached";
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

pretune_summary pretune(const device& dev, tuning::database& db, const pretune_request& r) {
  if (r.min_runs < 1 || r.max_runs < r.min_runs)
    throw error(errc::invalid_argument, "pretune",
                "min_runs " + std::to_string(r.min_runs) + ", max_runs " + std::to_string(r.max_runs) +
                    "; valid: 1 <= min_runs <= max_runs");
  if (r.pipeline_calls < 1 || r.pipeline_calls > 1000)
    throw error(errc::invalid_argument, "pretune",
                "pipeline_calls " + std::to_string(r.pipeline_calls) + "; valid: 1 to 1000");
  // A choice of ops or dtypes that selects nothing is a mistake, not a successful no-op.
  std::set<std::string> ops, dtypes;
  std::size_t selected = 0;
  for (auto& e : r.shapes.entries) {
    ops.insert(e.op);
    dtypes.insert(e.dtype);
    bool op_ok = r.ops.empty() || std::find(r.ops.begin(), r.ops.end(), e.op) != r.ops.end();
    bool dt_ok = r.dtypes.empty() || std::find(r.dtypes.begin(), r.dtypes.end(), e.dtype) != r.dtypes.end();
    selected += op_ok && dt_ok;
  }
  if (selected == 0)
    throw error(errc::invalid_argument, "pretune",
                "nothing to tune: shape set '" + r.shapes.name + "' has " +
                    std::to_string(r.shapes.entries.size()) +
                    " entries (ops: " + (ops.empty() ? "none" : joined(ops)) + "; dtypes: " +
                    (dtypes.empty() ? "none" : joined(dtypes)) + "), none of the chosen ops and dtypes");
  tuner::pretune_options o;
  o.shapes = r.shapes;
  o.ops = r.ops;
  o.dtypes = r.dtypes;
  o.backends = r.backends;
  o.budget_s = r.budget_s;
  o.max_per_backend = r.max_candidates;
  o.min_runs = r.min_runs;
  o.max_runs = r.max_runs;
  o.pipeline_calls = r.pipeline_calls;
  o.force = r.force;
  o.seed = r.seed;
  o.payoff_order = r.payoff_order;
  o.compile_threads = r.compile_threads;
  // Without a callback nothing is printed: the sink swallows the progress.
  auto sink = r.on_progress;
  o.on_progress = [sink](std::string_view line, std::size_t done, std::size_t total, std::string_view label,
                         std::string_view detail) {
    if (sink) sink(pretune_progress{done, total, std::string(label), std::string(detail), std::string(line)});
  };
  auto report = tuner::pretune(dev, db, o);
  use_tuning_database();  // the new rows are what the next dispatch looks up
  pretune_summary s;
  s.seconds = report.seconds;
  s.budget_exhausted = report.budget_exhausted;
  s.table = tuner::summary_table(report);
  for (const auto& sh : report.shapes) {
    pretuned_shape p;
    p.op = sh.entry.op;
    p.dtype = sh.entry.dtype;
    p.shape = sh.shape;
    p.status = status_name(sh.status);
    p.detail = sh.detail;
    p.calls = sh.calls;
    p.payoff_ns = sh.payoff_ns;
    p.calls_per_sample = sh.calls_per_sample;
    if (sh.status == tuner::shape_outcome::state::tuned ||
        sh.status == tuner::shape_outcome::state::already_tuned) {
      p.backend = sh.row.backend;
      p.config = sh.row.config;
      p.p50_ns = sh.row.p50_ns;
      p.default_ns = sh.row.default_ns;
    }
    s.shapes.push_back(std::move(p));
  }
  return s;
}

}  // namespace prism::dispatch
