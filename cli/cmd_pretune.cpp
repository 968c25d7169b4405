// `prism pretune`: measure the candidates of every shape in a shape set on one device and store
// the fastest correct one per shape in the tuning database (docs/tuning.md).
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "dispatch/tuner/pretune.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/runtime.hpp"
#include "prism/tuning_db.hpp"

namespace {

struct pretune_args {
  std::string shapes_file;
  std::string model;
  std::vector<std::string> ops, dtypes, backends;
  double budget_s = 0;
  std::string strategy = "random";
  std::size_t max_candidates = 12;
  int min_runs = 3;
  int max_runs = 25;
  bool force = false;
  bool list_models = false;
  std::string progress = "auto";
  std::string kv_buckets = "on";
  std::uint64_t seed = 1;
};

}  // namespace

PRISM_CLI_COMMAND(60) {
  auto* cmd = app.add_subcommand(
      "pretune",
      "Measure backend/config candidates for every shape of a shape set and store the fastest per shape "
      "in the tuning database");
  auto a = std::make_shared<pretune_args>();
  auto* shapes = cmd->add_option("--shapes", a->shapes_file, "Shape set file (YAML, see docs/tuning.md)");
  auto* model =
      cmd->add_option("--model", a->model, "A shipped shape set, e.g. llama-2-7b (see --list-models)");
  shapes->excludes(model);
  cmd->add_flag("--list-models", a->list_models, "List the shipped shape sets and exit");
  cmd->add_option("--ops", a->ops, "Only these ops (comma separated)")->delimiter(',');
  cmd->add_option("--dtypes", a->dtypes, "Only these dtypes (comma separated, e.g. f32,f16)")->delimiter(',');
  cmd->add_option(
         "--backends", a->backends,
         "Candidate backends (comma separated: opencl, clblast, host; default: opencl and clblast where "
         "they serve, and host on CPU devices for calls whose default takes 1 ms or more: host blocks "
         "and drains the queue inside a model). The default route is always measured")
      ->delimiter(',');
  cmd->add_option("--budget-s", a->budget_s,
                  "Stop cleanly after this many seconds (finished shapes are kept; run "
                  "again to resume)");
  cmd->add_option("--strategy", a->strategy,
                  "exhaustive: every candidate; random: at most --max-candidates per "
                  "backend and shape (default)")
      ->check(CLI::IsMember({"exhaustive", "random"}));
  cmd->add_option("--max-candidates", a->max_candidates,
                  "random strategy: generated candidates per backend and shape (default 12)");
  cmd->add_option("--min-runs", a->min_runs, "Timed runs per candidate, at least (default 3)");
  cmd->add_option("--max-runs", a->max_runs, "Timed runs per candidate, at most (default 25)");
  cmd->add_option("--seed", a->seed, "Seed of the random strategy and of the sampled inputs (default 1)");
  cmd->add_flag("--force", a->force, "Re-tune shapes that already have a valid row");
  cmd->add_option("--kv-buckets", a->kv_buckets,
                  "on (default): attention shapes that differ only in KV length are tuned as one bucket; "
                  "off: each shape")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--progress", a->progress, "auto (bar on a terminal), bar, or lines")
      ->check(CLI::IsMember({"auto", "bar", "lines"}));
  cmd->add_option("--db", global.db,
                  "Tuning database file (default: PRISM_TUNING_DB, else "
                  "${XDG_CACHE_HOME:-~/.cache}/prism/tuning.db)");
  cmd->add_option("--device", global.device,
                  std::string("Device to tune (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");

  cmd->callback([&global, &exit_code, a] {
    using namespace prism;
    if (a->list_models) {
      for (auto& m : tuning::shipped_models()) std::printf("%s\n", m.c_str());
      exit_code = 0;
      return;
    }
    if (a->shapes_file.empty() == a->model.empty())
      throw error(errc::invalid_argument, "prism pretune",
                  "give exactly one of --shapes FILE.yaml or --model NAME (shipped: see --list-models)");
    if (a->min_runs < 1 || a->max_runs < a->min_runs)
      throw error(errc::invalid_argument, "prism pretune", "need 1 <= --min-runs <= --max-runs");
    dispatch::tuner::pretune_options o;
    o.shapes =
        a->model.empty() ? tuning::load_shape_set(a->shapes_file) : tuning::load_model_shape_set(a->model);
    o.ops = a->ops;
    o.dtypes = a->dtypes;
    o.backends = a->backends;
    o.budget_s = a->budget_s;
    o.pick = a->strategy == "exhaustive" ? dispatch::strategy::exhaustive : dispatch::strategy::random;
    o.max_per_backend = a->max_candidates;
    o.min_runs = a->min_runs;
    o.max_runs = a->max_runs;
    o.force = a->force;
    o.fold_kv_lengths = a->kv_buckets == "on";
    o.seed = a->seed;
    o.progress_bar = a->progress == "bar" || (a->progress == "auto" && ::isatty(2));

    device dev = prism::cli::pick_device(global.device);
    tuning::database::set_default_path(global.db.empty() ? tuning::database::default_path() : global.db);
    auto& db = tuning::database::process_default();
    dispatch::init();
    std::fprintf(stderr, "pretune: %s on %s [%s], database %s\n", o.shapes.name.c_str(), dev.name().c_str(),
                 dev.fingerprint().hash.c_str(), db.path().c_str());
    auto report = dispatch::tuner::pretune(dev, db, o);
    std::printf("%s", dispatch::tuner::summary_table(report).c_str());
    bool any_failed = false;
    for (auto& s : report.shapes)
      any_failed = any_failed || s.status == dispatch::tuner::shape_outcome::state::failed;
    exit_code = any_failed ? 1 : 0;
  });
}
