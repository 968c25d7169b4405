// The pretune loop: per shape, sample a call, compute the host reference, then for the default
// route and every candidate: run once (compile + correctness check), warm up, time the whole
// routine N times; the fastest few correct candidates are re-timed interleaved with the default,
// and the best of them must beat the default there.
#include "dispatch/tuner/pretune.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "dispatch/dispatcher.hpp"
#include "dispatch/tuner/tuning_glue.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/shape_limits.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
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

// One run of the whole routine: every kernel it enqueues, finished.
double run_once_ns(queue& q, op_call& call, const forced_route* route) {
  auto t0 = clock_type::now();
  dispatch_call(q, call, route);
  q.wait_and_throw();
  return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
}

// A candidate whose warm run is this much slower than the best so far is timed once only:
// it cannot win, and full timing of slow candidates would dominate pretune's run time.
constexpr double hopeless_factor = 1.5;
// After two timed runs, a candidate whose median is this much slower than the best stops early.
constexpr double losing_factor = 1.2;

timing measure(queue& q, op_call& call, const forced_route* route, const pretune_options& o,
               double best_so_far, bool* timed_once) {
  double warm = run_once_ns(q, call, route);  // warm-up (caches, lazily built helper kernels)
  if (best_so_far > 0 && warm > hopeless_factor * best_so_far) {
    *timed_once = true;
    return timing{warm, warm, warm};
  }
  std::vector<double> t;
  double sum = 0;
  while (static_cast<int>(t.size()) < o.max_runs &&
         (static_cast<int>(t.size()) < o.min_runs || sum < o.target_s_per_candidate * 1e9)) {
    t.push_back(run_once_ns(q, call, route));
    sum += t.back();
    if (t.size() >= 2 && best_so_far > 0 && percentile(t, 0.5) > losing_factor * best_so_far) break;
  }
  return timing{percentile(t, 0.2), percentile(t, 0.5), percentile(t, 0.8)};
}

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
  void update(const std::string& what, std::size_t cand, std::size_t cands) const {
    if (!bar) return;
    const int width = 24;
    int filled = total ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu  %s  cand %zu/%zu  elapsed %s  ETA %s",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done, total,
                 what.c_str(), cand, cands, human_s(seconds_since(start)).c_str(), eta().c_str());
    std::fflush(stderr);
  }
  void line(const std::string& text) const {
    if (bar) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }
};

bool same_route(const std::string& b1, const std::string& c1, const std::string& b2, const std::string& c2) {
  return b1 == b2 && c1 == c2;
}

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

pretune_report pretune(const device& dev, tuning::database& db, const pretune_options& o) {
  if (!db.writable())
    throw prism::error(errc::database_error, "prism pretune",
                       "cannot save tuning results to " + db.path() + ": " + db.read_only_reason() +
                           " (choose a writable file with --db or PRISM_TUNING_DB)");
  auto log = log::get("dispatch");
  pretune_report report;
  const auto start = clock_type::now();
  const std::string fp = dev.fingerprint().hash;
  const std::string vendor = matched_vendor(dev).name;
  db.put_device(tuning::describe(dev));

  // Select the entries to tune.
  std::vector<tuning::shape_entry> entries;
  for (const auto& e : o.shapes.entries) {
    if (!o.ops.empty() && std::find(o.ops.begin(), o.ops.end(), e.op) == o.ops.end()) continue;
    if (!o.dtypes.empty() && std::find(o.dtypes.begin(), o.dtypes.end(), e.dtype) == o.dtypes.end()) continue;
    entries.push_back(e);
  }
  for (const auto& name : o.ops)
    op_registry::instance().get(name);  // unknown op: not_found listing the valid ones
  for (const auto& b : o.backends)
    if (std::find(backend_names().begin(), backend_names().end(), b) == backend_names().end())
      throw prism::error(errc::not_found, "prism pretune",
                         "unknown backend '" + b + "'; valid: opencl, clblast, host");

  progress prog;
  prog.bar = o.progress_bar;
  prog.total = entries.size();

  // The default route is measured with tier 3 off; it is restored however we leave.
  uninstall_db_lookup();
  struct restore_lookup {
    ~restore_lookup() { install_db_lookup(); }
  } restore;

  queue q(dev);
  candidate_options copt;
  copt.backends = o.backends;
  copt.pick = o.pick;
  copt.max_per_backend = o.max_per_backend;
  copt.seed = o.seed;

  for (const auto& entry : entries) {
    shape_outcome out;
    out.entry = entry;
    out.shape = entry.shape.str();
    const std::string label = fmt::format("{} {} [{}]", entry.op, entry.dtype, entry.shape.str());
    if (o.budget_s > 0 && seconds_since(start) >= o.budget_s) {
      report.budget_exhausted = true;
      report.shapes.push_back(out);
      continue;
    }
    auto shape_start = clock_type::now();
    try {
      const op_descriptor* desc = op_registry::instance().find(entry.op);
      if (!desc)
        throw prism::error(errc::not_found, "prism pretune", "op '" + entry.op + "' is not registered");
      if (!desc->sample)
        throw prism::error(errc::unsupported, "prism pretune", "op '" + entry.op + "' cannot be sampled");
      const dtype type = parse_dtype(entry.dtype);
      sample_options so;
      so.type = type;
      so.seed = o.seed;
      check_shape_limits("prism pretune", entry.op, prism::shape_key::parse(entry.shape.str()), type, dev);
      op_call call = desc->sample(q, prism::shape_key::parse(entry.shape.str()), so);
      q.wait_and_throw();
      // The descriptor's own key and dtypes are what the dispatcher will look up.
      out.shape = desc->key ? desc->key(call).str() : entry.shape.str();
      const std::string dtype_col = dtype_key(call_dtypes(call));
      const auto key = tuning::shape_key::parse(out.shape);

      if (!o.force) {
        if (auto row = db.find_result(fp, entry.op, dtype_col, key)) {
          bool fresh = row->kernel_hash == kernel_hash(dev, row->op, row->backend, row->config) &&
                       (row->driver_version.empty() || row->driver_version == dev.driver_version());
          if (fresh) {
            out.status = shape_outcome::state::already_tuned;
            out.row = *row;
            ++prog.done;
            prog.line(fmt::format("pretune: [{}/{}] {}: already tuned ({} {}), skipped", prog.done,
                                  prog.total, label, row->backend,
                                  row->config.empty() ? "(default)" : row->config));
            report.shapes.push_back(out);
            continue;
          }
        }
      }

      // Inputs that are also outputs (in-place ops) are re-sampled before each check.
      bool in_place = false;
      for (auto& in : call.inputs)
        for (auto& ou : call.outputs)
          if (in.defined() && ou.defined() && in.same_storage(ou)) in_place = true;
      const auto ref_start = clock_type::now();
      const auto expected = compute_reference(q, *desc, call);
      log->info("pretune: {}: host reference in {:.2f} s", label, seconds_since(ref_start));

      double best_so_far = 0;  // fastest p50 measured for this shape
      std::map<std::string, candidate_row> previous;
      for (auto& c : db.candidates(fp, entry.op, dtype_col, key)) previous[c.backend + '\x1f' + c.config] = c;

      // Runs one route: correctness check, then timing. Returns the stored candidate row.
      auto evaluate = [&](const std::string& backend, const std::string& config, const forced_route* route,
                          bool store) -> candidate_row {
        candidate_row row;
        row.device = fp;
        row.op = entry.op;
        row.dtype = dtype_col;
        row.shape = out.shape;
        row.backend = backend;
        row.config = config;
        row.kernel_hash = kernel_hash(dev, entry.op, backend, config);
        try {
          if (in_place) call = desc->sample(q, prism::shape_key::parse(entry.shape.str()), so);
          dispatch_call(q, call, route);
          q.wait_and_throw();
          std::vector<host_tensor> got;
          for (auto& t : call.outputs) got.push_back(read_host(q, t));
          auto cmp = compare_outputs(*desc, call, expected, got);
          if (!cmp.ok) {
            row.status = candidate_status::wrong_result;
            row.reason = short_reason(cmp.message);
          } else {
            bool timed_once = false;
            auto t = measure(q, call, route, o, best_so_far, &timed_once);
            if (timed_once)
              row.reason = fmt::format("timed once: more than {}x the best so far", hopeless_factor);
            else if (best_so_far == 0 || t.p50 < best_so_far)
              best_so_far = t.p50;
            row.p20_ns = t.p20;
            row.p50_ns = t.p50;
            row.p80_ns = t.p80;
          }
        } catch (const prism::error& e) {
          row.status = classify(e);
          row.reason = short_reason(e.what());
          try {
            q.wait_and_throw();
          } catch (const std::exception&) {
          }
        }
        if (store) db.put_candidate(row);
        return row;
      };

      // 1. The untuned default route (what dispatch does without the database).
      prog.update(label, 0, 0);
      const auto def_result = [&] {
        auto r = dispatch_call(q, call);
        q.wait_and_throw();
        return r;
      }();
      candidate_row def = evaluate(def_result.backend, def_result.config, nullptr, false);
      if (def.status != candidate_status::ok)
        log->warn("pretune: the default route {} '{}' of {} fails: {}", def.backend, def.config, label,
                  def.reason);

      // 2. Every candidate.
      copt.default_ns = def.status == candidate_status::ok ? def.p50_ns : 0;
      auto cands = make_candidates(dev, *desc, type, vendor, copt);
      out.candidates = cands.size();
      std::vector<candidate_row> rows;
      bool out_of_budget = false;
      for (std::size_t i = 0; i < cands.size(); ++i) {
        if (o.budget_s > 0 && seconds_since(start) >= o.budget_s) {
          out_of_budget = true;
          break;
        }
        const auto& c = cands[i];
        prog.update(label, i + 1, cands.size());
        auto prev = previous.find(c.backend + '\x1f' + c.config);
        if (prev != previous.end() &&
            prev->second.kernel_hash == kernel_hash(dev, entry.op, c.backend, c.config)) {
          rows.push_back(prev->second);
          if (prev->second.status == candidate_status::ok &&
              (best_so_far == 0 || prev->second.p50_ns < best_so_far))
            best_so_far = prev->second.p50_ns;
          ++out.resumed_candidates;
          if (prev->second.status != candidate_status::ok) ++out.failed_candidates;
          continue;
        }
        forced_route route{c.backend, c.config};
        auto row = evaluate(c.backend, c.config, &route, true);
        if (row.status != candidate_status::ok) {
          ++out.failed_candidates;
          log->info("pretune: {} {} '{}': {}: {}", label, c.backend, c.config,
                    tuning::candidate_status_name(row.status), row.reason);
        }
        rows.push_back(std::move(row));
      }
      if (out_of_budget) {
        report.budget_exhausted = true;
        out.status = shape_outcome::state::not_reached;
        out.detail = "budget spent mid-shape (measured candidates are kept; run again to resume)";
        report.shapes.push_back(out);
        continue;
      }

      // 3. The winner. The fastest correct candidates (up to `finalists`, within
      //    `finalist_window` of the best p50) are re-timed round by round, interleaved with the
      //    default route, so they all see the same machine load: one lucky or unlucky series
      //    cannot pick the winner. The finalist with the smallest median must then beat the
      //    default's median by `confirm_margin`, else the default route is stored.
      std::vector<const candidate_row*> ok;
      for (auto& r : rows)
        if (r.status == candidate_status::ok) ok.push_back(&r);
      std::sort(ok.begin(), ok.end(), [](auto* x, auto* y) { return x->p50_ns < y->p50_ns; });
      const double best_p50 = ok.empty() ? 0 : ok.front()->p50_ns;
      std::vector<const candidate_row*> finals;
      for (auto* r : ok) {
        if (finals.size() >= finalists || r->p50_ns > finalist_window * best_p50) break;
        if (def.status == candidate_status::ok && same_route(r->backend, r->config, def.backend, def.config))
          continue;  // the default is timed in every round anyway
        finals.push_back(r);
      }
      if (finals.empty() && def.status != candidate_status::ok)
        throw prism::error(errc::unsupported, "prism pretune", "no candidate produced a correct result");

      tuning::result_row win;
      win.device = fp;
      win.op = entry.op;
      win.dtype = dtype_col;
      win.shape = out.shape;
      win.driver_version = dev.driver_version();
      win.prism_version = prism::version();
      const candidate_row* chosen = &def;
      double chosen_ns = def.p50_ns, default_ns = def.status == candidate_status::ok ? def.p50_ns : 0;
      const bool default_wins_outright =
          def.status == candidate_status::ok && (ok.empty() || def.p50_ns <= best_p50);
      if (!finals.empty() && !default_wins_outright) {
        std::vector<forced_route> routes;
        for (auto* f : finals) routes.push_back({f->backend, f->config});
        std::vector<double> td;
        std::vector<std::vector<double>> tf(finals.size());
        for (int r = 0; r < confirm_rounds; ++r) {
          if (def.status == candidate_status::ok) td.push_back(run_once_ns(q, call, nullptr));
          for (std::size_t i = 0; i < finals.size(); ++i) tf[i].push_back(run_once_ns(q, call, &routes[i]));
        }
        if (!td.empty()) default_ns = chosen_ns = percentile(td, 0.5);
        if (auto pick = pick_final(td, tf, confirm_margin)) {
          chosen = finals[*pick];
          chosen_ns = percentile(tf[*pick], 0.5);
        } else {
          log->info(
              "pretune: {}: no finalist is clearly faster than the default in the final rounds ({}); "
              "keeping the default route",
              label, human_ns(default_ns));
        }
      }
      win.backend = chosen->backend;
      win.config = chosen->config;
      win.p50_ns = chosen_ns;
      win.p20_ns = std::min(chosen->p20_ns, chosen_ns);
      win.p80_ns = std::max(chosen->p80_ns, chosen_ns);
      win.default_ns = default_ns;
      win.kernel_hash = chosen->kernel_hash;
      db.put_shape(win, {});
      out.row = win;
      out.status = shape_outcome::state::tuned;
      ++prog.tuned;
      prog.tuned_seconds += seconds_since(shape_start);
    } catch (const prism::error& e) {
      out.status = shape_outcome::state::failed;
      out.detail = short_reason(e.what());
      try {
        q.wait_and_throw();
      } catch (const std::exception&) {
      }
    }
    ++prog.done;
    if (out.status == shape_outcome::state::tuned)
      prog.line(
          fmt::format("pretune: [{}/{}] {} -> {} {}  {} (default {}, {:.2f}x)  [{} candidates, {} failed, {} "
                      "resumed]  ETA {}",
                      prog.done, prog.total, label, out.row.backend,
                      out.row.config.empty() ? "(default)" : out.row.config, human_ns(out.row.p50_ns),
                      human_ns(out.row.default_ns), out.row.speedup(), out.candidates, out.failed_candidates,
                      out.resumed_candidates, prog.eta()));
    else
      prog.line(fmt::format("pretune: [{}/{}] {}: FAILED: {}", prog.done, prog.total, label, out.detail));
    report.shapes.push_back(out);
  }
  if (prog.bar) std::fprintf(stderr, "\r\033[K");
  report.seconds = seconds_since(start);
  return report;
}

std::string summary_table(const pretune_report& report) {
  std::size_t w = 5;
  for (auto& s : report.shapes)
    w = std::max(w, s.entry.op.size() + s.entry.dtype.size() + s.shape.size() + 4);
  std::size_t cw = 6;
  for (auto& s : report.shapes) cw = std::max(cw, s.row.backend.size() + s.row.config.size() + 1);
  cw = std::min<std::size_t>(cw, 90);
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>10}  {:>10}  {:>8}\n", "shape", w, "winner", cw, "time",
                                "default", "speedup");
  double log_sum = 0;
  std::size_t n = 0, tuned = 0, skipped = 0, failed = 0, left = 0;
  for (auto& s : report.shapes) {
    std::string shape = fmt::format("{} {} [{}]", s.entry.op, s.entry.dtype, s.shape);
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
    }
  }
  out += fmt::format("{} tuned, {} already tuned, {} failed, {} left", tuned, skipped, failed, left);
  if (n)
    out += fmt::format("; geomean speedup vs default {:.2f}x", std::exp(log_sum / static_cast<double>(n)));
  out += fmt::format("; {} elapsed", human_s(report.seconds));
  if (report.budget_exhausted) out += "\nbudget spent: run the same command again to resume where it stopped";
  return out + "\n";
}

}  // namespace prism::dispatch::tuner
