// SPDX-License-Identifier: Apache-2.0
// The pretune loop in stages (plan, measure, validate, commit, report): per shape, sample a call,
// compute the host reference, then for the untuned default route and every candidate: run once
// (compile + correctness check), warm up, time the whole routine N times (each timed run holds
// calls_per_sample calls back to back, as a model's graph runs them); the fastest few
// correct candidates are re-timed interleaved with the default, and the best of them must beat
// the default there.
#include "dispatch/tuner/pretune.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "dispatch/dispatcher.hpp"
#include "dispatch/tuning_tier.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/shape_limits.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/runtime/graph.hpp"
#include "prism/runtime/queue.hpp"
#include "prism/version.hpp"
#include "runtime/log.hpp"

namespace prism::dispatch::tuner {
namespace {

using clock_type = std::chrono::steady_clock;
using tuning::candidate_row;
using tuning::candidate_status;

// A tuned route must beat the default by this much in the A/B confirmation, so that noise can
// never make a tuned shape slower than its default.
constexpr double confirm_margin = 0.97;
constexpr int confirm_rounds = 5;
// Candidates re-timed in the final interleaved rounds (see step 3).
constexpr std::size_t finalists = 3;
constexpr double finalist_window = 1.2;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string human_s(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s) / 3600, (static_cast<int>(s) % 3600) / 60);
}

struct timing {
  double p20 = 0, p50 = 0, p80 = 0;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  double pos = p * static_cast<double>(v.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// One timed run: `calls` runs of the whole routine back to back, then one wait; the time per
// call. With one call: every kernel it enqueues, finished.
double run_once_ns(queue& q, op_call& call, const dispatch_options& route, int calls = 1) {
  auto t0 = clock_type::now();
  for (int i = 0; i < calls; ++i) dispatch_call(q, call, route);
  q.wait_and_throw();
  return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() / calls;
}

// A candidate whose warm run is this much slower than the best so far is timed once only:
// it cannot win, and full timing of slow candidates would dominate pretune's run time.
constexpr double hopeless_factor = 1.5;
// After two timed runs, a candidate whose median is this much slower than the best stops early.
constexpr double losing_factor = 1.2;

candidate_status classify(const prism::error& e) {
  const std::string what = e.what();
  if (e.code() == errc::build_failure || what.find("status -11") != std::string::npos ||
      what.find("CL_BUILD_PROGRAM_FAILURE") != std::string::npos)
    return candidate_status::build_error;
  if (e.cl_status() == -5 || e.cl_status() == -4 || e.code() == errc::out_of_memory ||
      what.find("CL_OUT_OF_RESOURCES") != std::string::npos || what.find("status -5") != std::string::npos ||
      what.find("status -4") != std::string::npos)
    return candidate_status::out_of_resources;
  if (e.code() == errc::unsupported) return candidate_status::unsupported;
  return candidate_status::runtime_error;
}

// First line of a message (build logs can be long), capped for the database.
std::string short_reason(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() > 400) line = line.substr(0, 400) + "...";
  return line;
}

struct progress {
  bool bar = false;
  std::size_t total = 0;
  std::size_t done = 0;
  clock_type::time_point start = clock_type::now();
  double tuned_seconds = 0;  // time spent on shapes that were actually measured
  std::size_t tuned = 0;

  std::string eta() const {
    if (tuned == 0) return "?";
    return human_s(tuned_seconds / static_cast<double>(tuned) * static_cast<double>(total - done));
  }
  decltype(pretune_options::on_progress) sink;
  void update(const std::string& what, std::size_t cand, std::size_t cands) const {
    if (sink) {
      sink("", done, total, what,
           fmt::format("cand {}/{}  elapsed {}  ETA {}", cand, cands, human_s(seconds_since(start)), eta()));
      return;
    }
    if (!bar) return;
    const int width = 24;
    int filled = total ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu  %s  cand %zu/%zu  elapsed %s  ETA %s",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done, total,
                 what.c_str(), cand, cands, human_s(seconds_since(start)).c_str(), eta().c_str());
    std::fflush(stderr);
  }
  void line(const std::string& text) const {
    if (sink) {
      sink(text, done, total, "", "");
      return;
    }
    if (bar) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }
};

}  // namespace

std::string human_ns(double ns) {
  if (ns <= 0) return "-";
  if (ns < 1e3) return fmt::format("{:.0f} ns", ns);
  if (ns < 1e6) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.2f} ms", ns / 1e6);
  return fmt::format("{:.2f} s", ns / 1e9);
}

std::optional<std::size_t> pick_final(const std::vector<double>& default_ns,
                                      const std::vector<std::vector<double>>& finalists_ns, double margin) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < finalists_ns.size(); ++i)
    if (!finalists_ns[i].empty() &&
        (!best || percentile(finalists_ns[i], 0.5) < percentile(finalists_ns[*best], 0.5)))
      best = i;
  if (!best || default_ns.empty()) return best;
  return percentile(finalists_ns[*best], 0.5) <= margin * percentile(default_ns, 0.5) ? best : std::nullopt;
}

namespace {

// One pretune run, in named stages: plan (which shapes, checked names), then per shape measure
// (the untuned default and every candidate, each checked against the host reference),
// validate (the fastest candidates re-timed interleaved with the default; the winner must
// beat it), commit (the winner stored in one transaction) and report (a progress line).
class pretune_run {
 public:
  pretune_run(const device& dev, tuning::database& db, const pretune_options& o)
      : dev_(dev), db_(db), o_(o), q_(dev), fp_(dev.fingerprint().hash), vendor_(device_vendor(dev)) {}

  pretune_report run() {
    if (!db_.writable())
      throw prism::error(errc::database_error, "prism pretune",
                         "cannot save tuning results to " + db_.path() + ": " + db_.read_only_reason() +
                             " (choose a writable file with --db or PRISM_TUNING_DB)");
    const auto entries = plan();
    db_.put_device(tuning::describe(dev_));
    prog_.bar = o_.progress_bar;
    prog_.sink = o_.on_progress;
    prog_.total = entries.size();
    constexpr std::size_t none = std::size_t(-1);
    const auto reps =
        o_.fold_kv_lengths ? kv_length_buckets(entries) : std::vector<std::size_t>(entries.size(), none);
    // The shapes to tune (bucket representatives and unbucketed shapes), each with the calls of
    // the entries it stands for.
    std::vector<std::size_t> order;
    std::vector<std::uint64_t> calls(entries.size(), 0);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::size_t rep = reps[i] == none ? i : reps[i];
      calls[rep] = std::min(calls[rep] + entries[i].calls, std::uint64_t(1) << 62);
      if (rep == i) order.push_back(i);
    }
    std::vector<double> default_ns(entries.size(), 0);
    std::vector<char> already(entries.size(), 0);  // found tuned while timing the defaults
    auto payoff = [&](std::size_t i) {
      return default_ns[i] * static_cast<double>(std::max<std::uint64_t>(calls[i], 1));
    };
    if (o_.payoff_order && order.size() > 1) {
      const auto ordering_start = clock_type::now();
      std::size_t timed = 0;
      for (std::size_t i : order) {
        if (o_.budget_s > 0 && seconds_since(start_) >= o_.budget_s) break;  // the rest: unknown payoff
        const double ns = time_default(entries[i]);
        already[i] = ns < 0;
        default_ns[i] = std::max(ns, 0.0);
        ++timed;
      }
      report_.ordering_seconds = seconds_since(ordering_start);
      prog_.line(fmt::format("pretune: payoff order: {} of {} shapes sampled and their defaults timed in {:.1f} s",
                             timed, order.size(), report_.ordering_seconds));
      // Largest payoff first; shapes whose default was not timed follow, by calls; ties keep the
      // set's order.
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if ((payoff(a) > 0) != (payoff(b) > 0)) return payoff(a) > 0;
        if (payoff(a) != payoff(b)) return payoff(a) > payoff(b);
        return calls[a] > calls[b];
      });
      for (std::size_t r = 0; r < order.size(); ++r) {
        const auto& e = entries[order[r]];
        const std::size_t i = order[r];
        prog_.line(fmt::format("pretune: payoff order {}/{}: {} {} [{}]  default {} x {} calls = {}", r + 1,
                               order.size(), e.op, entry_dtype(e), e.shape.str(), human_ns(default_ns[i]),
                               calls[i] ? std::to_string(calls[i]) : "1 (not counted)",
                               payoff(i) > 0 ? human_ns(payoff(i))
                               : already[i]  ? "none (already tuned)"
                                             : "unknown"));
      }
    }
    for (std::size_t i : order) {
      const auto& entry = entries[i];
      shape_outcome out;
      if (o_.budget_s > 0 && seconds_since(start_) >= o_.budget_s) {
        report_.budget_exhausted = true;
        out.entry = entry;
        out.shape = entry.shape.str();
      } else {
        out = tune_shape(entry);
      }
      out.calls = calls[i];
      out.rank_default_ns = default_ns[i];
      out.payoff_ns = payoff(i);
      report(out);
      // A bucket's other shapes are covered only when its representative is in the database;
      // when the budget ran out before it, or it failed, they are left untuned with it.
      const bool served =
          out.status == shape_outcome::state::tuned || out.status == shape_outcome::state::already_tuned;
      for (std::size_t j = 0; j < entries.size(); ++j) {
        if (reps[j] != i || j == i) continue;
        shape_outcome member;
        member.entry = entries[j];
        member.shape = entries[j].shape.str();
        member.status = served ? shape_outcome::state::covered : shape_outcome::state::not_reached;
        member.detail = served ? "KV-length bucket of [" + entry.shape.str() + "] (nearest-shape lookup)"
                        : out.status == shape_outcome::state::failed
                            ? "its KV-length bucket's shape [" + entry.shape.str() + "] failed"
                            : out.detail;
        member.calls = entries[j].calls;
        report(member);
      }
    }
    if (prog_.bar) std::fprintf(stderr, "\r\033[K");
    report_.seconds = seconds_since(start_);
    return std::move(report_);
  }

 private:
  // The measurements of one shape, and what it needs to re-run its routes.
  struct shape_work {
    shape_outcome out;
    std::string label;
    const op_descriptor* desc = nullptr;
    sample_options so;
    op_call call;
    bool in_place = false;
    std::vector<host_tensor> expected;
    std::string dtype_col;
    tuning::shape_key key;
    double best_so_far = 0;  // fastest p50 measured for this shape
    candidate_row def;       // the untuned default route
    std::vector<candidate_row> rows;
  };

  // Stage 1: the entries to tune; unknown op and backend names are errors before anything runs.
  std::vector<tuning::shape_entry> plan() const {
    for (const auto& name : o_.ops) op_registry::instance().get(name);  // not_found listing the valid ones
    for (const auto& b : o_.backends) backend_named(b, "prism pretune");
    std::vector<tuning::shape_entry> entries;
    for (const auto& e : o_.shapes.entries) {
      if (!o_.ops.empty() && std::find(o_.ops.begin(), o_.ops.end(), e.op) == o_.ops.end()) continue;
      if (!o_.dtypes.empty() && std::find(o_.dtypes.begin(), o_.dtypes.end(), e.dtype) == o_.dtypes.end())
        continue;
      entries.push_back(e);
    }
    return entries;
  }

  // Payoff order: the default route's p50 for `entry` (one warm run, then min_runs timed
  // runs); -1 when the shape is already tuned, 0 when it cannot be timed (sampling or the route
  // fails: the tuning pass reports why). Its kernels stay in the program cache for that pass.
  double time_default(const tuning::shape_entry& entry) {
    const std::string label = fmt::format("{} {} [{}]", entry.op, entry_dtype(entry), entry.shape.str());
    try {
      const auto* desc = op_registry::instance().find(entry.op);
      if (!desc || !desc->sample) return 0;
      sample_options so;
      so.type = parse_dtype(entry.dtype);
      if (!entry.act.empty()) so.act = parse_dtype(entry.act);
      so.seed = o_.seed;
      check_shape_limits("prism pretune", entry.op, entry.shape, so.type, dev_);
      prog_.update("timing the default of " + label, 0, 0);
      op_call call = desc->sample(q_, entry.shape, so);
      q_.wait_and_throw();
      if (!o_.force) {
        const auto key = desc->key ? desc->key(call) : entry.shape;
        if (auto row = db_.find_result(fp_, entry.op, dtype_key(call_dtypes(call)), key))
          if (row->kernel_hash == route_hash(dev_, *desc, row->backend, row->config)) return -1;
      }
      dispatch_options untuned;
      untuned.skip_tuning_db = true;
      run_once_ns(q_, call, untuned);  // builds the default's kernels
      const int n = calls_per_sample(run_once_ns(q_, call, untuned), o_.pipeline_calls);
      std::vector<double> t;
      for (int r = 0; r < o_.min_runs; ++r) t.push_back(run_once_ns(q_, call, untuned, n));
      return percentile(t, 0.5);
    } catch (const prism::error& e) {
      log::get("dispatch")
          ->info("pretune: {}: default not timed for the payoff order: {}", label, e.message());
      drain();
      return 0;
    }
  }

  // Stage 2a: the candidates' programs, built on up to compile_threads threads before they are
  // measured one at a time. Each thread records the candidate's call into a throwaway graph on a
  // queue of its own: that builds its kernels through the process-wide program cache (shared
  // futures: one build per key) and runs nothing. Errors are left to the serial pass, which
  // meets them again (failed builds are cached too) and classifies them.
  void prebuild(shape_work& w, const std::vector<const candidate*>& todo) {
    unsigned threads = o_.compile_threads ? o_.compile_threads : std::thread::hardware_concurrency();
    threads = static_cast<unsigned>(std::min<std::size_t>({std::max(threads, 1u), todo.size(), 64}));
    if (threads <= 1) return;  // one thread: the serial pass builds each program as it meets it
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      queue wq(q_.get_context());
      for (std::size_t i; (i = next.fetch_add(1)) < todo.size();) {
        if (o_.budget_s > 0 && seconds_since(start_) >= o_.budget_s) break;  // measure() reports it
        forced_route route{todo[i]->backend, todo[i]->config};
        dispatch_options forced;
        forced.forced = &route;
        try {
          graph::record(wq, [&] { dispatch_call(wq, w.call, forced); });
        } catch (const std::exception& e) {
          log::get("dispatch")
              ->debug("pretune: {}: prebuild of {} '{}': {}", w.label, route.backend, todo[i]->config,
                      e.what());
        }
      }
    };
    std::vector<std::future<void>> jobs;
    for (unsigned t = 0; t < threads; ++t) jobs.push_back(std::async(std::launch::async, worker));
    for (auto& j : jobs) j.get();
  }

  shape_outcome tune_shape(const tuning::shape_entry& entry) {
    shape_work w;
    w.out.entry = entry;
    w.out.shape = entry.shape.str();
    w.label = fmt::format("{} {} [{}]", entry.op, entry_dtype(entry), entry.shape.str());
    const auto shape_start = clock_type::now();
    try {
      if (!prepare(w)) return w.out;  // already tuned
      const auto measure_start = clock_type::now();
      const bool finished = measure(w);
      w.out.measure_s = seconds_since(measure_start) - w.out.build_s;
      if (!finished) {  // budget spent mid-shape
        w.out.total_s = seconds_since(shape_start);
        return w.out;
      }
      commit(w, validate(w));
      ++prog_.tuned;
      prog_.tuned_seconds += seconds_since(shape_start);
    } catch (const prism::error& e) {
      w.out.status = shape_outcome::state::failed;
      w.out.detail = short_reason(e.what());
      drain();
    }
    w.out.total_s = seconds_since(shape_start);
    return w.out;
  }

  // Samples the call and its reference; false when a fresh row already answers the shape.
  bool prepare(shape_work& w) {
    const auto& entry = w.out.entry;
    w.desc = op_registry::instance().find(entry.op);
    if (!w.desc)
      throw prism::error(errc::not_found, "prism pretune", "op '" + entry.op + "' is not registered");
    if (!w.desc->sample)
      throw prism::error(errc::unsupported, "prism pretune", "op '" + entry.op + "' cannot be sampled");
    w.so.type = parse_dtype(entry.dtype);
    if (!entry.act.empty()) w.so.act = parse_dtype(entry.act);
    w.so.seed = o_.seed;
    // Components are checked against the device before the sample allocates anything.
    check_shape_limits("prism pretune", entry.op, entry.shape, w.so.type, dev_);
    w.call = w.desc->sample(q_, entry.shape, w.so);
    q_.wait_and_throw();
    // The descriptor's own key and dtypes are what the dispatcher will look up.
    w.key = w.desc->key ? w.desc->key(w.call) : entry.shape;
    w.out.shape = w.key.str();
    w.dtype_col = dtype_key(call_dtypes(w.call));
    if (!o_.force) {
      if (auto row = db_.find_result(fp_, entry.op, w.dtype_col, w.key)) {
        const bool fresh = row->kernel_hash == route_hash(dev_, *w.desc, row->backend, row->config) &&
                           (row->driver_version.empty() || row->driver_version == dev_.driver_version());
        if (fresh) {
          w.out.status = shape_outcome::state::already_tuned;
          w.out.row = *row;
          return false;
        }
      }
    }
    // Inputs that are also outputs (in-place ops) are re-sampled before each check.
    for (auto& in : w.call.inputs)
      for (auto& ou : w.call.outputs)
        if (in.defined() && ou.defined() && in.same_storage(ou)) w.in_place = true;
    const auto ref_start = clock_type::now();
    w.expected = compute_reference(q_, *w.desc, w.call);
    w.out.reference_s = seconds_since(ref_start);
    log::get("dispatch")->info("pretune: {}: host reference in {:.2f} s", w.label, w.out.reference_s);
    return true;
  }

  // Stage 2: the untuned default route (the dispatcher's choice with the database skipped for
  // this call only) and every candidate, each checked then timed; finished candidates are
  // committed one by one so that a killed run resumes. False when the budget ran out.
  bool measure(shape_work& w) {
    prog_.update(w.label, 0, 0);
    dispatch_options untuned;
    untuned.skip_tuning_db = true;
    const auto def_route = plan_call(q_, w.call, untuned);
    w.def = evaluate(w, def_route.backend, def_route.config, untuned, false);
    if (w.def.status != candidate_status::ok)
      log::get("dispatch")
          ->warn("pretune: the default route {} '{}' of {} fails: {}", w.def.backend, w.def.config, w.label,
                 w.def.reason);

    candidate_options copt;
    copt.backends = o_.backends;
    copt.pick = o_.pick;
    copt.max_per_backend = o_.max_per_backend;
    copt.seed = o_.seed;
    copt.default_ns = w.def.status == candidate_status::ok ? w.def.p50_ns : 0;
    w.out.candidates_default_ns = copt.default_ns;
    const auto cands = make_candidates(dev_, *w.desc, w.so.type, vendor_, copt);
    w.out.candidates = cands.size();
    std::map<std::string, candidate_row> previous;
    for (auto& c : db_.candidates(fp_, w.desc->name, w.dtype_col, w.key))
      previous[c.backend + '\x1f' + c.config] = c;
    {
      std::vector<const candidate*> todo;
      for (const auto& c : cands) {
        auto prev = previous.find(c.backend + '\x1f' + c.config);
        if (prev == previous.end() ||
            prev->second.kernel_hash != route_hash(dev_, *w.desc, c.backend, c.config))
          todo.push_back(&c);
      }
      prog_.update(w.label + " (building candidates)", 0, cands.size());
      const auto build_start = clock_type::now();
      prebuild(w, todo);
      w.out.build_s = seconds_since(build_start);
    }
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (o_.budget_s > 0 && seconds_since(start_) >= o_.budget_s) {
        report_.budget_exhausted = true;
        w.out.status = shape_outcome::state::not_reached;
        w.out.detail = "budget spent mid-shape (measured candidates are kept; run again to resume)";
        return false;
      }
      const auto& c = cands[i];
      prog_.update(w.label, i + 1, cands.size());
      auto prev = previous.find(c.backend + '\x1f' + c.config);
      if (prev != previous.end() &&
          prev->second.kernel_hash == route_hash(dev_, *w.desc, c.backend, c.config)) {
        w.rows.push_back(prev->second);
        if (prev->second.status == candidate_status::ok &&
            (w.best_so_far == 0 || prev->second.p50_ns < w.best_so_far))
          w.best_so_far = prev->second.p50_ns;
        ++w.out.resumed_candidates;
        if (prev->second.status != candidate_status::ok) ++w.out.failed_candidates;
        continue;
      }
      forced_route route{c.backend, c.config};
      dispatch_options forced;
      forced.forced = &route;
      auto row = evaluate(w, c.backend, c.config, forced, true);
      if (row.status != candidate_status::ok) {
        ++w.out.failed_candidates;
        log::get("dispatch")
            ->info("pretune: {} {} '{}': {}: {}", w.label, c.backend, c.config,
                   tuning::candidate_status_name(row.status), row.reason);
      }
      w.rows.push_back(std::move(row));
    }
    return true;
  }

  // One route: correctness check against the reference, then timing.
  candidate_row evaluate(shape_work& w, const std::string& backend, const std::string& config,
                         const dispatch_options& route, bool store) {
    candidate_row row;
    row.device = fp_;
    row.op = w.desc->name;
    row.dtype = w.dtype_col;
    row.shape = w.out.shape;
    row.backend = backend;
    row.config = config;
    row.kernel_hash = route_hash(dev_, *w.desc, backend, config);
    try {
      if (w.in_place) w.call = w.desc->sample(q_, w.out.entry.shape, w.so);
      dispatch_call(q_, w.call, route);
      q_.wait_and_throw();
      std::vector<host_tensor> got;
      for (auto& t : w.call.outputs) got.push_back(read_host(q_, t));
      auto cmp = compare_outputs(*w.desc, w.call, w.expected, got);
      if (!cmp.ok) {
        row.status = candidate_status::wrong_result;
        row.reason = short_reason(cmp.message);
      } else {
        bool timed_once = false;
        auto t = time_route(w, route, &timed_once);
        if (timed_once)
          row.reason = fmt::format("timed once: more than {}x the best so far", hopeless_factor);
        else if (w.best_so_far == 0 || t.p50 < w.best_so_far)
          w.best_so_far = t.p50;
        row.p20_ns = t.p20;
        row.p50_ns = t.p50;
        row.p80_ns = t.p80;
      }
    } catch (const prism::error& e) {
      row.status = classify(e);
      row.reason = short_reason(e.what());
      drain();
    }
    if (store) db_.put_candidate(row);
    return row;
  }

  // The shape's first timed route (its default, when that works) sets how many calls each of
  // the shape's timed runs holds (calls_per_sample), from one warm finished call.
  timing time_route(shape_work& w, const dispatch_options& route, bool* timed_once) {
    const double best_so_far = w.best_so_far;
    int& n = w.out.calls_per_sample;
    // Warm-up (caches, lazily built helper kernels), and the hopeless check on its time.
    double warm = 0;
    if (n == 0) {
      const double single = run_once_ns(q_, w.call, route);
      n = calls_per_sample(single, o_.pipeline_calls);
      log::get("dispatch")->info("pretune: {}: {} calls back to back a timed run", w.label, n);
      warm = n == 1 ? single : run_once_ns(q_, w.call, route, n);
    } else {
      warm = run_once_ns(q_, w.call, route, n);
    }
    if (best_so_far > 0 && warm > hopeless_factor * best_so_far) {
      *timed_once = true;
      return timing{warm, warm, warm};
    }
    std::vector<double> t;
    double sum = 0;
    // Past min_runs, runs go on while they sum below the target and their calls stay within
    // max_runs: a run of n calls already averages them, and a ~1 ms GEMV at 10 calls a run
    // would otherwise time 250 calls a candidate where it timed 25.
    auto more = [&] {
      const int runs = static_cast<int>(t.size());
      if (runs >= o_.max_runs) return false;
      if (runs < o_.min_runs) return true;
      return sum < o_.target_s_per_candidate * 1e9 && (runs + 1) * n <= o_.max_runs;
    };
    while (more()) {
      t.push_back(run_once_ns(q_, w.call, route, n));
      sum += t.back() * n;
      if (t.size() >= 2 && best_so_far > 0 && percentile(t, 0.5) > losing_factor * best_so_far) break;
    }
    return timing{percentile(t, 0.2), percentile(t, 0.5), percentile(t, 0.8)};
  }

  // Stage 3: the winner. The fastest correct candidates (up to `finalists`, within
  // `finalist_window` of the best p50) are re-timed round by round, interleaved with the
  // default route, so they all see the same machine load: one lucky or unlucky series cannot
  // pick the winner. The finalist with the smallest median must then beat the default's median
  // by `confirm_margin`, else the default route is stored.
  tuning::result_row validate(shape_work& w) {
    const candidate_row& def = w.def;
    std::vector<const candidate_row*> ok;
    for (auto& r : w.rows)
      if (r.status == candidate_status::ok) ok.push_back(&r);
    std::sort(ok.begin(), ok.end(), [](auto* x, auto* y) { return x->p50_ns < y->p50_ns; });
    const double best_p50 = ok.empty() ? 0 : ok.front()->p50_ns;
    std::vector<const candidate_row*> finals;
    for (auto* r : ok) {
      if (finals.size() >= finalists || r->p50_ns > finalist_window * best_p50) break;
      if (def.status == candidate_status::ok && r->backend == def.backend && r->config == def.config)
        continue;  // the default is timed in every round anyway
      finals.push_back(r);
    }
    if (finals.empty() && def.status != candidate_status::ok)
      throw prism::error(errc::unsupported, "prism pretune", "no candidate produced a correct result");

    const candidate_row* chosen = &def;
    double chosen_ns = def.p50_ns, default_ns = def.status == candidate_status::ok ? def.p50_ns : 0;
    const bool default_wins_outright =
        def.status == candidate_status::ok && (ok.empty() || def.p50_ns <= best_p50);
    if (!finals.empty() && !default_wins_outright) {
      dispatch_options untuned;
      untuned.skip_tuning_db = true;
      std::vector<forced_route> routes;
      for (auto* f : finals) routes.push_back({f->backend, f->config});
      std::vector<double> td;
      std::vector<std::vector<double>> tf(finals.size());
      const int n = std::max(1, w.out.calls_per_sample);
      for (int r = 0; r < confirm_rounds; ++r) {
        if (def.status == candidate_status::ok) td.push_back(run_once_ns(q_, w.call, untuned, n));
        for (std::size_t i = 0; i < finals.size(); ++i) {
          dispatch_options forced;
          forced.forced = &routes[i];
          tf[i].push_back(run_once_ns(q_, w.call, forced, n));
        }
      }
      if (!td.empty()) default_ns = chosen_ns = percentile(td, 0.5);
      if (auto pick = pick_final(td, tf, confirm_margin)) {
        chosen = finals[*pick];
        chosen_ns = percentile(tf[*pick], 0.5);
      } else {
        log::get("dispatch")
            ->info(
                "pretune: {}: no finalist is clearly faster than the default in the final rounds ({}); "
                "keeping the "
                "default route",
                w.label, human_ns(default_ns));
      }
    }
    tuning::result_row win;
    win.device = fp_;
    win.op = w.desc->name;
    win.dtype = w.dtype_col;
    win.shape = w.out.shape;
    win.driver_version = dev_.driver_version();
    win.prism_version = prism::version();
    win.backend = chosen->backend;
    win.config = chosen->config;
    win.p50_ns = chosen_ns;
    win.p20_ns = std::min(chosen->p20_ns, chosen_ns);
    win.p80_ns = std::max(chosen->p80_ns, chosen_ns);
    win.default_ns = default_ns;
    win.kernel_hash = chosen->kernel_hash;
    return win;
  }

  // Stage 4: the shape's winner, in one transaction.
  void commit(shape_work& w, const tuning::result_row& win) {
    db_.put_shape(win, {});
    w.out.row = win;
    w.out.status = shape_outcome::state::tuned;
  }

  // Stage 5: one progress line per shape, and the outcome kept for the summary.
  void report(const shape_outcome& out) {
    ++prog_.done;
    const std::string label =
        fmt::format("{} {} [{}]", out.entry.op, entry_dtype(out.entry), out.entry.shape.str());
    switch (out.status) {
      case shape_outcome::state::tuned:
        prog_.line(
            fmt::format("pretune: [{}/{}] {} -> {} {}  {} (default {}, {:.2f}x)  [{} candidates, {} failed, "
                        "{} resumed; {:.1f} s: reference {:.1f}, builds {:.1f}, measuring {:.1f}]  ETA {}",
                        prog_.done, prog_.total, label, out.row.backend,
                        out.row.config.empty() ? "(default)" : out.row.config, human_ns(out.row.p50_ns),
                        human_ns(out.row.default_ns), out.row.speedup(), out.candidates,
                        out.failed_candidates, out.resumed_candidates, out.total_s, out.reference_s,
                        out.build_s, out.measure_s, prog_.eta()));
        break;
      case shape_outcome::state::already_tuned:
        prog_.line(fmt::format("pretune: [{}/{}] {}: already tuned ({} {}), skipped", prog_.done, prog_.total,
                               label, out.row.backend,
                               out.row.config.empty() ? "(default)" : out.row.config));
        break;
      case shape_outcome::state::not_reached:
        report_.shapes.push_back(out);
        return;
      case shape_outcome::state::covered:
        prog_.line(fmt::format("pretune: [{}/{}] {}: {}", prog_.done, prog_.total, label, out.detail));
        break;
      case shape_outcome::state::failed:
        prog_.line(
            fmt::format("pretune: [{}/{}] {}: FAILED: {}", prog_.done, prog_.total, label, out.detail));
        break;
    }
    report_.shapes.push_back(out);
  }

  void drain() {
    try {
      q_.wait_and_throw();
    } catch (const std::exception&) {
    }
  }

  const device& dev_;
  tuning::database& db_;
  const pretune_options& o_;
  queue q_;
  std::string fp_;
  vendor_context vendor_;
  pretune_report report_;
  progress prog_;
  const clock_type::time_point start_ = clock_type::now();
};

}  // namespace

std::string entry_dtype(const tuning::shape_entry& e) {
  return e.act.empty() ? e.dtype : e.dtype + " act=" + e.act;
}

int calls_per_sample(double single_ns, int max_calls) {
  const int cap = std::max(1, max_calls);
  if (!(single_ns > 0)) return 1;
  return static_cast<int>(
      std::clamp(std::floor(sample_target_ns / single_ns), 1.0, static_cast<double>(cap)));
}

pretune_report pretune(const device& dev, tuning::database& db, const pretune_options& o) {
  return pretune_run(dev, db, o).run();
}

std::vector<std::size_t> kv_length_buckets(const std::vector<tuning::shape_entry>& entries) {
  constexpr std::size_t none = std::size_t(-1);
  std::vector<std::size_t> rep(entries.size(), none);
  // op|dtype|key without lk -> (lk, index), for ops whose key has an lk component.
  std::map<std::string, std::vector<std::pair<std::int64_t, std::size_t>>> groups;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const auto* d = op_registry::instance().find(e.op);
    if (!d || std::find(d->key_names.begin(), d->key_names.end(), "lk") == d->key_names.end()) continue;
    const auto lk = e.shape.find("lk");
    if (!lk || *lk <= 0) continue;  // lk = 0 is only near itself
    std::vector<tuning::shape_key::component> rest;
    for (const auto& c : e.shape.components())
      if (c.first != "lk") rest.push_back(c);
    groups[e.op + '|' + e.dtype + '|' + e.act + '|' + tuning::shape_key(rest).canonical()].push_back(
        {*lk, i});
  }
  for (auto& [name, members] : groups) {
    std::stable_sort(members.begin(), members.end());
    for (std::size_t begin = 0; begin < members.size();) {
      std::size_t end = begin + 1;
      const double lo = std::log2(static_cast<double>(members[begin].first));
      while (end < members.size() && std::log2(static_cast<double>(members[end].first)) - lo <= 16) ++end;
      const double mid = (lo + std::log2(static_cast<double>(members[end - 1].first))) / 2;
      std::size_t best = begin;
      for (std::size_t k = begin; k < end; ++k)
        if (std::abs(std::log2(static_cast<double>(members[k].first)) - mid) <
            std::abs(std::log2(static_cast<double>(members[best].first)) - mid))
          best = k;
      for (std::size_t k = begin; k < end; ++k) rep[members[k].second] = members[best].second;
      begin = end;
    }
  }
  return rep;
}

std::string summary_table(const pretune_report& report) {
  std::size_t w = 5;
  for (auto& s : report.shapes)
    w = std::max(w, s.entry.op.size() + entry_dtype(s.entry).size() + s.shape.size() + 4);
  std::size_t cw = 6;
  for (auto& s : report.shapes) cw = std::max(cw, s.row.backend.size() + s.row.config.size() + 1);
  cw = std::min<std::size_t>(cw, 90);
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>10}  {:>10}  {:>8}\n", "shape", w, "winner", cw, "time",
                                "default", "speedup");
  double log_sum = 0;
  std::size_t n = 0, tuned = 0, skipped = 0, failed = 0, left = 0, covered = 0;
  for (auto& s : report.shapes) {
    std::string shape = fmt::format("{} {} [{}]", s.entry.op, entry_dtype(s.entry), s.shape);
    std::string winner;
    switch (s.status) {
      case shape_outcome::state::tuned:
      case shape_outcome::state::already_tuned:
        winner = s.row.backend + " " + (s.row.config.empty() ? "(default)" : s.row.config);
        if (winner.size() > cw) winner = winner.substr(0, cw - 3) + "...";
        out += fmt::format("{:<{}}  {:<{}}  {:>10}  {:>10}  {:>8}{}\n", shape, w, winner, cw,
                           human_ns(s.row.p50_ns), human_ns(s.row.default_ns),
                           s.row.speedup() > 0 ? fmt::format("{:.2f}x", s.row.speedup()) : "-",
                           s.status == shape_outcome::state::already_tuned ? "  (earlier run)" : "");
        if (s.row.speedup() > 0) {
          log_sum += std::log(s.row.speedup());
          ++n;
        }
        ++(s.status == shape_outcome::state::tuned ? tuned : skipped);
        break;
      case shape_outcome::state::failed:
        out += fmt::format("{:<{}}  FAILED: {}\n", shape, w, s.detail);
        ++failed;
        break;
      case shape_outcome::state::not_reached:
        out += fmt::format("{:<{}}  not tuned: {}\n", shape, w, s.detail.empty() ? "budget spent" : s.detail);
        ++left;
        break;
      case shape_outcome::state::covered:
        out += fmt::format("{:<{}}  {}\n", shape, w, s.detail);
        ++covered;
        break;
    }
  }
  out += fmt::format("{} tuned, {} already tuned, {} in a KV-length bucket, {} failed, {} left", tuned,
                     skipped, covered, failed, left);
  if (n)
    out += fmt::format("; geomean speedup vs default {:.2f}x", std::exp(log_sum / static_cast<double>(n)));
  out += fmt::format("; {} elapsed", human_s(report.seconds));
  if (report.budget_exhausted) out += "\nbudget spent: run the same command again to resume where it stopped";
  return out + "\n";
}

}  // namespace prism::dispatch::tuner
