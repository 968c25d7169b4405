// SPDX-License-Identifier: Apache-2.0
// The per-op dispatcher (see dispatcher.hpp): process-wide state built once from env, routes
// file and vendor profiles; per-device routes; a memo of decisions per call signature; the
// fallback loop; counters and the dispatch log.
#include "dispatch/dispatcher.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/config/env_settings.hpp"
#include "dispatch/config/routes_file.hpp"
#include "dispatch/config/routing.hpp"
#include "dispatch/config/vendor_profile.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "dispatch/tuning_tier.hpp"
#include "prism/error.hpp"
#include "runtime/log.hpp"

namespace prism::dispatch {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// ---- counters ------------------------------------------------------------------------------
// Per (op, backend, tier) counters live in a never-destroyed registry so decisions can hold raw
// pointers and the atexit summary reads plain host memory. A decision's step has one tier (the
// decision's, or fallback for a later backend), so each step points at one counter.
struct counter {
  std::string op, backend;
  source_tier tier = source_tier::default_order;
  std::atomic<std::uint64_t> calls{0}, fallbacks{0}, time_ns{0};
};

struct counter_registry {
  std::mutex mutex;
  std::deque<counter> items;
  counter* get(const std::string& op, const std::string& backend, source_tier tier) {
    std::lock_guard lock(mutex);
    for (auto& c : items)
      if (c.op == op && c.backend == backend && c.tier == tier) return &c;
    auto& c = items.emplace_back();
    c.op = op;
    c.backend = backend;
    c.tier = tier;
    return &c;
  }
};
counter_registry& counters() {
  static auto* r = new counter_registry;
  return *r;
}

// ---- per-op, per-device and global state -----------------------------------------------------
// One implementation of an op together with the backend that made it.
struct impl_entry {
  const backend* owner = nullptr;
  op_implementation impl;
};

struct op_state {
  const op_descriptor* desc = nullptr;
  op_catalog_entry catalog;
  std::vector<const backend*> backends;  // those that serve the op, in registry order
  std::vector<impl_entry> impls;         // grouped per backend in that order
};

struct device_state {
  device dev;
  std::string fingerprint;
  vendor_context vendor;
  std::vector<static_route> routes;  // per op index
  std::unique_ptr<tuning_tier> tuning;
};

// One resolved candidate of a decision.
struct step {
  const impl_entry* impl = nullptr;
  kernel_config config;
  std::string config_text;
  source_override src;
  std::string src_note;  // "override <path>" when a vendor kernel replaces the file
  counter* count = nullptr;
  bool default_retry = false;  // the routed backend again with its default config (a fallback)
};

struct decision {
  std::vector<step> steps;
  source_tier tier = source_tier::default_order;
  std::string origin;
  std::string dtypes, shape;
  std::string borrowed_shape;  // db-nearest: the tuned row's shape key
  device_state* dev = nullptr;
  // PRISM_RECORD_UNTUNED: the recorded shape's counter, bumped per dispatch (null: not recorded).
  std::atomic<std::uint64_t>* untuned_calls = nullptr;
};

constexpr std::size_t max_memo_entries = 16384;

struct signature_hash {
  std::size_t operator()(const std::vector<std::int64_t>& v) const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    for (auto x : v) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
};

// The state's log sink. set_log_options swaps it while calls run on other threads, so a sink,
// once set, lives as long as its state (states are never freed; a few sinks per process).
// Assigned under the state mutex.
class log_slot {
 public:
  log_sink* operator->() const noexcept { return sink_.load(std::memory_order_acquire); }
  log_sink* get() const noexcept { return sink_.load(std::memory_order_acquire); }
  explicit operator bool() const noexcept { return get() != nullptr; }
  log_slot& operator=(std::unique_ptr<log_sink> s) {
    sink_.store(s.get(), std::memory_order_release);
    held_.push_back(std::move(s));
    return *this;
  }

 private:
  std::atomic<log_sink*> sink_{nullptr};
  std::vector<std::unique_ptr<log_sink>> held_;
};

struct state {
  env_settings env;
  std::optional<routes_config> routes;
  vendor_set vendors;
  std::vector<op_state> ops;
  log_slot log;

  std::mutex devices_mutex;
  std::deque<device_state> devices;

  std::shared_mutex memo_mutex;
  // Shared so a call in flight keeps its decision alive while another thread clears the memo.
  std::unordered_map<std::vector<std::int64_t>, std::shared_ptr<const decision>, signature_hash> memo;
};

std::mutex& state_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::atomic<state*>& current_state() {
  static auto* s = new std::atomic<state*>(nullptr);
  return *s;
}
// Replaced states are kept (never freed): decisions of in-flight calls may still point at them.
std::vector<std::unique_ptr<state>>& retired_states() {
  static auto* v = new std::vector<std::unique_ptr<state>>;
  return *v;
}

// Tier 3 answers from each device's tuning_tier (the tuning database) unless a custom lookup
// replaced it (set_tuning_lookup; an empty function switches tier 3 off).
struct tuning_override {
  bool active = false;
  tuning_lookup lookup;
};
std::mutex& tuning_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
tuning_override& tuning_replacement() {
  static auto* o = new tuning_override;
  return *o;
}

std::atomic<bool>& any_injection() {
  static std::atomic<bool> b{false};
  return b;
}
std::mutex& injection_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<std::pair<std::string, std::string>, int>& injections() {
  static auto* m = new std::map<std::pair<std::string, std::string>, int>;
  return *m;
}

std::atomic<bool>& summary_registered() {
  static std::atomic<bool> b{false};
  return b;
}

void print_summary_at_exit() {
  auto* s = current_state().load();
  if (!s || !s->log || !s->log->enabled()) return;
  try {
    s->log->write_summary(format_summary(statistics(), s->log->profile(), graph_counters()));
  } catch (...) {
    // at exit nothing can be reported any more; the log lines themselves were written
  }
}

std::unique_ptr<state> build_state() {
  auto s = std::make_unique<state>();
  s->env = parse_env(process_environment());
  for (const auto& u : s->env.unknown) prism::log::get("dispatch")->warn("{}", u);
  if (!s->env.routes_file.empty()) s->routes = load_routes_file(s->env.routes_file);
  s->vendors = load_vendors(s->env.vendor_path);

  const auto& all = op_registry::instance().all();
  s->ops.resize(all.size());
  std::vector<op_catalog_entry> catalog;
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto& o = s->ops[i];
    o.desc = all[i];
    o.catalog.name = all[i]->name;
    o.catalog.key_names = all[i]->key_names;
    for (const backend* be : backend_registry()) {
      auto impls = be->implementations(*o.desc);
      if (impls.empty()) continue;
      o.backends.push_back(be);
      o.catalog.backends.emplace_back(be->name());
      for (auto& impl : impls) {
        if (!impl.kernel_file.empty() &&
            std::find(o.catalog.kernel_files.begin(), o.catalog.kernel_files.end(), impl.kernel_file) ==
                o.catalog.kernel_files.end())
          o.catalog.kernel_files.push_back(impl.kernel_file);
        o.impls.push_back({be, std::move(impl)});
      }
    }
    catalog.push_back(o.catalog);
  }
  validate_sources(catalog, backend_names(), s->env, s->routes ? &*s->routes : nullptr,
                   s->vendors.profiles());
  // Configs written in routes files and vendor profiles are checked now, not at first use.
  auto check_one = [&](const std::string& op, const std::string& backend, const std::string& config,
                       const std::string& origin) {
    if (config.empty()) return;
    for (auto& o : s->ops) {
      if (o.desc->name != op) continue;
      try {
        backend_named(backend, origin).read_config(*o.desc, config, vendor_context{&s->vendors, nullptr});
      } catch (const prism::error& e) {
        throw error(errc::config_error, origin, e.message());
      }
    }
  };
  auto check_config = [&](const std::string& op, const file_route& r) {
    check_one(op, r.backend, r.config, r.origin);
    for (const auto& c : r.cases) check_one(op, c.backend, c.config, c.origin);
  };
  if (s->routes)
    for (const auto& [op, r] : s->routes->routes) check_config(op, r);
  for (const auto& v : s->vendors.profiles())
    for (const auto& [op, r] : v.routes) check_config(op, r);
  if (!s->env.vendor.empty()) {
    // PRISM_VENDOR must name a loaded profile; checked here so the error comes at start-up.
    select_vendor(s->vendors.profiles(), device_description{}, s->env.vendor);
  }
  s->log = std::make_unique<log_sink>(s->env.log);
  return s;
}

state& get_state() {
  if (auto* s = current_state().load(std::memory_order_acquire)) return *s;
  std::lock_guard lock(state_mutex());
  if (auto* s = current_state().load()) return *s;
  auto fresh = build_state();
  auto* raw = fresh.get();
  retired_states().push_back(std::move(fresh));
  current_state().store(raw, std::memory_order_release);
  if (raw->log->enabled() && !summary_registered().exchange(true)) std::atexit(print_summary_at_exit);
  return *raw;
}

device_state& get_device_state_locked(state& s, const device& dev);

device_description describe(const device& d) {
  return {d.platform_name(), d.vendor(), device_type_name(d.type()), d.name()};
}

device_state& get_device_state(state& s, const device& dev) {
  // The warm path: the same thread dispatching to the same device again takes no lock.
  thread_local const state* cached_state = nullptr;
  thread_local const void* cached_device = nullptr;
  thread_local device_state* cached = nullptr;
  const void* key = &dev.get_impl();
  if (cached_state == &s && cached_device == key) return *cached;
  std::lock_guard lock(s.devices_mutex);
  for (auto& d : s.devices)
    if (d.dev == dev) {
      cached_state = &s;
      cached_device = key;
      cached = &d;
      return d;
    }
  auto& created = get_device_state_locked(s, dev);
  cached_state = &s;
  cached_device = key;
  cached = &created;
  return created;
}

// Caller holds s.devices_mutex and found no entry for `dev`.
device_state& get_device_state_locked(state& s, const device& dev) {
  device_state d;  // built aside, so a failing vendor match leaves no half-made entry
  d.dev = dev;
  d.fingerprint = dev.fingerprint().hash;
  d.vendor = vendor_context{&s.vendors, select_vendor(s.vendors.profiles(), describe(dev), s.env.vendor)};
  routing_sources src{&s.env, s.routes ? &*s.routes : nullptr, d.vendor.profile};
  for (const auto& o : s.ops) d.routes.push_back(resolve_route(o.catalog, src));
  d.tuning = std::make_unique<tuning_tier>(dev, d.vendor);
  return s.devices.emplace_back(std::move(d));
}

// What route conditions read: the call's shape key, `esize` (its first output's element size) and
// `qbits` (the bits per value of its block-quantized input, 0 without one).
shape_key routing_key(shape_key key, const op_call& call) {
  if (!call.outputs.empty() && call.outputs[0].defined())
    key.set(route_esize_component, static_cast<std::int64_t>(dtype_size(call.outputs[0].type())));
  std::int64_t qbits = 0;
  for (const auto& t : call.inputs)
    if (t.defined() && is_quantized(t.type())) qbits = t.type() == dtype::q8_0 ? 8 : 4;
  key.set(route_qbits_component, qbits);
  return key;
}

// The memo key: device, op, and everything of the call that routing and shape keys can depend
// on (dtypes, shapes, attrs), without formatting strings.
void signature_of(const device_state& dev, int op, const op_call& call, std::vector<std::int64_t>& sig) {
  sig.clear();
  sig.push_back(reinterpret_cast<std::intptr_t>(&dev));
  sig.push_back(op);
  auto add_tensor = [&](const tensor& t) {
    if (!t.defined()) {
      sig.push_back(-1);
      return;
    }
    sig.push_back(static_cast<std::int64_t>(t.type()) * 16 + t.dim());
    for (auto e : t.shape()) sig.push_back(e);
  };
  for (const auto& t : call.inputs) add_tensor(t);
  sig.push_back(-2);
  for (const auto& t : call.outputs) add_tensor(t);
  for (const auto& [name, value] : call.attrs) {
    sig.push_back(static_cast<std::int64_t>(std::hash<std::string>{}(name)));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            sig.push_back(static_cast<std::int64_t>(std::hash<std::string>{}(v)));
          } else if constexpr (std::is_same_v<V, std::vector<std::int64_t>>) {
            sig.push_back(static_cast<std::int64_t>(v.size()));
            for (auto x : v) sig.push_back(x);
          } else if constexpr (std::is_same_v<V, double>) {
            std::int64_t bits;
            std::memcpy(&bits, &v, sizeof bits);
            sig.push_back(bits);
          } else {
            sig.push_back(static_cast<std::int64_t>(v));
          }
        },
        value);
  }
}

// The dtype a shape set names for this call (tuning_query::sample_dtype): descriptors sample
// with one dtype for their data inputs and pick index dtypes themselves.
std::string_view sample_dtype_of(const op_call& call) {
  // A block-quantized weight names the sample (it is what descriptors sample with `q4_0`).
  for (const auto& t : call.inputs)
    if (t.defined() && is_quantized(t.type())) return dtype_name(t.type());
  for (const auto& t : call.inputs)
    if (t.defined() && is_floating(t.type())) return dtype_name(t.type());
  for (const auto& t : call.inputs)
    if (t.defined()) return dtype_name(t.type());
  for (const auto& t : call.outputs)
    if (t.defined()) return dtype_name(t.type());
  return {};
}

// Why `text` is not a valid config of `be` for the op, or nullopt.
std::optional<std::string> config_problem(const op_state& o, const backend& be, const std::string& text,
                                          const vendor_context& vendor) {
  try {
    be.read_config(*o.desc, text, vendor);
    return std::nullopt;
  } catch (const prism::error& e) {
    return e.message();
  }
}

// Where tier 3's answer for a call comes from: the device's tuning tier, or the replacement.
std::optional<tuned_choice> ask_tuning(device_state& dev, const op_state& o, const std::string& dtypes,
                                       const shape_key& key, std::string_view sample_dtype,
                                       std::atomic<std::uint64_t>** untuned_calls) {
  tuning_override replacement;
  {
    std::lock_guard lock(tuning_mutex());
    replacement = tuning_replacement();
  }
  if (!replacement.active) return dev.tuning->lookup(*o.desc, dtypes, key, sample_dtype, untuned_calls);
  if (!replacement.lookup) return std::nullopt;
  const std::string shape = key.str();
  return replacement.lookup(tuning_query{dev.fingerprint, o.desc->name, dtypes, shape, sample_dtype});
}

// The op's backend named `name`, or null.
const backend* serving(const op_state& o, std::string_view name) {
  for (const backend* b : o.backends)
    if (name == b->name()) return b;
  return nullptr;
}

std::unique_ptr<decision> decide(state& s, device_state& dev, int op, const op_call& call,
                                 const dispatch_options& options) {
  auto& o = s.ops[op];
  auto d = std::make_unique<decision>();
  d->dev = &dev;
  d->dtypes = call_dtypes(call);
  const shape_key key = o.desc->key ? o.desc->key(call) : shape_key{};
  d->shape = key.str();

  const backend* first = nullptr;
  std::string first_config;
  if (options.forced) {
    first = serving(o, options.forced->backend);
    if (!first)
      throw error(errc::not_found, "ops::" + o.desc->name,
                  fmt::format("backend '{}' does not implement '{}'; its backends: {}",
                              options.forced->backend, o.desc->name, join(o.catalog.backends)));
    first_config = options.forced->config.value_or("");
    d->tier = source_tier::env;
    d->origin = "forced";
  } else {
    const static_route& routes = dev.routes[op];  // shape conditions, if any
    const static_route r = routes.cases.empty() ? routes : route_for_shape(routes, routing_key(key, call));
    first = serving(o, r.backend);  // validate_sources made sure the route names one
    first_config = r.config;
    d->tier = r.tier;
    d->origin = r.origin;
    if (!r.above_db() && !options.skip_tuning_db) {
      if (auto choice = ask_tuning(dev, o, d->dtypes, key, sample_dtype_of(call), &d->untuned_calls)) {
        const backend* chosen = serving(o, choice->backend);
        if (!chosen) {
          log::get("dispatch")
              ->warn("tuning db proposes backend '{}' for {} {}; '{}' has backends {}; ignored",
                     choice->backend, o.desc->name, d->shape, o.desc->name, join(o.catalog.backends));
        } else if (auto bad = config_problem(o, *chosen, choice->config, dev.vendor)) {
          log::get("dispatch")
              ->warn("tuning db proposes {} config '{}' for {} {}, which is not valid ({}); ignored",
                     choice->backend, choice->config, o.desc->name, d->shape, *bad);
        } else {
          first = chosen;
          first_config = choice->config;
          d->tier = choice->tier == source_tier::db_nearest ? source_tier::db_nearest : source_tier::db_exact;
          d->origin = std::string("tuning db ") + source_tier_name(d->tier);
          if (d->tier == source_tier::db_nearest && !choice->borrowed_shape.empty()) {
            d->borrowed_shape = choice->borrowed_shape;
            d->origin += " (row " + choice->borrowed_shape + ")";
          }
        }
      }
    }
    if (r.unused) d->origin += " (unused)";
  }

  // The routed backend first, then (unless forced) the op's other backends in registry order.
  std::vector<const backend*> order{first};
  if (!options.forced)
    for (const backend* b : o.backends)
      if (b != first) order.push_back(b);
  // A routed or tuned config that no implementation of its backend takes on this device (e.g. a
  // profile's tensor-core config on a GPU without that form) falls back to the same backend with
  // its default config before another backend; forced calls and strict mode keep it exact.
  for (const backend* be : order) {
    std::vector<std::string> texts{be == first ? first_config : std::string()};
    if (be == first && !options.forced && !s.env.strict && !first_config.empty()) texts.emplace_back();
    std::string routed_text;
    for (std::size_t v = 0; v < texts.size(); ++v) {
      kernel_config cfg = be->read_config(*o.desc, texts[v], dev.vendor);
      if (v == 0) routed_text = cfg.str();
      if (v > 0 && cfg.str() == routed_text) break;  // the routed config is the default
      for (const auto& entry : o.impls) {
        if (entry.owner != be) continue;
        step st;
        st.impl = &entry;
        st.config = cfg;
        st.config_text = cfg.str();
        st.default_retry = v > 0;
        if (!entry.impl.kernel_file.empty())
          if (const auto* k = dev.vendor.kernel(entry.impl.kernel_file)) {
            st.src = std::string_view(k->text);
            st.src_note = "kernel override " + k->path;
          }
        // The same tier run_decision reports for a call served by this step.
        const bool later = st.default_retry || (!d->steps.empty() && d->steps[0].impl->owner != be);
        st.count = counters().get(o.desc->name, be->name(), later ? source_tier::fallback : d->tier);
        d->steps.push_back(std::move(st));
      }
    }
  }
  return d;
}

bool take_injected_failure(const std::string& op, const std::string& backend) {
  std::lock_guard lock(injection_mutex());
  auto it = injections().find({op, backend});
  if (it == injections().end() || it->second <= 0) return false;
  if (--it->second == 0) injections().erase(it);
  if (injections().empty()) any_injection().store(false);
  return true;
}

// The dispatch-log record of one step of a decision; exec, reject and error lines differ only in
// event, tier and reason.
log_record step_record(const decision& d, const op_call& call, const step& st, const char* event,
                       source_tier tier, std::string reason) {
  log_record r;
  r.event = event;
  r.timestamp = log_timestamp();
  r.pid = static_cast<std::int64_t>(::getpid());
  r.op = call.op;
  r.dtypes = d.dtypes;
  r.shape = d.shape;
  r.device = d.dev->fingerprint;
  r.backend = st.impl->owner->name();
  r.implementation = st.impl->impl.name;
  r.config = st.config_text;
  r.tier = source_tier_name(tier);
  if (tier == source_tier::db_nearest) r.borrowed_shape = d.borrowed_shape;
  r.reason = std::move(reason);
  r.attrs = format_attrs(call.attrs);
  return r;
}

void log_reject(state& s, const decision& d, const op_call& call, const step& st, const std::string& why) {
  s.log->write(step_record(d, call, st, "reject", d.tier, st.impl->impl.name + ": " + why));
}

dispatch_result run_decision(state& s, queue& q, const decision& d, const op_call& call, bool forced,
                             bool dry_run = false) {
  std::string refusals;
  const bool logging = s.log->enabled();
  for (std::size_t i = 0; i < d.steps.size(); ++i) {
    const auto& st = d.steps[i];
    std::optional<std::string> why;
    if (st.impl->impl.supports) why = st.impl->impl.supports(d.dev->dev, call, st.config);
    event ev;
    std::chrono::steady_clock::time_point t0;
    std::uint64_t build_ns0 = 0;  // kernel builds inside the call are reported apart (compile_us)
    // A recording queue runs nothing now and cannot wait: profile times only eager calls.
    const bool timing = logging && s.log->profile() && !q.is_recording();
    if (!why && dry_run) {
      dispatch_result res;
      res.backend = st.impl->owner->name();
      res.implementation = st.impl->impl.name;
      res.config = st.config_text;
      const bool fell_back = st.default_retry || st.impl->owner != d.steps[0].impl->owner;
      res.tier = fell_back ? source_tier::fallback : d.tier;
      res.reason = fell_back ? refusals : d.origin;
      return res;
    }
    if (!why) {
      if (timing) {
        // Profile mode times the whole routine on an idle queue (every kernel it enqueues: the
        // event an implementation returns covers only its last command), as pretune does.
        q.wait();
        build_ns0 = program_build_ns_on_this_thread();
        t0 = std::chrono::steady_clock::now();
      }
      try {
        if (any_injection().load(std::memory_order_relaxed) &&
            take_injected_failure(call.op, st.impl->owner->name()))
          throw error(errc::opencl_error, st.impl->impl.name, "injected launch failure (test hook)");
        ev = st.impl->impl.enqueue(q, call, st.config, st.src);
      } catch (const prism::error& e) {
        // A command a graph cannot record (a host task, a blocking read): name the op and backend.
        if (e.code() == errc::invalid_argument && q.is_recording())
          throw error(
              errc::unsupported, "ops::" + call.op,
              fmt::format("{} on the {} backend ({}) cannot be recorded in a graph: {}; route it to a "
                          "device backend, or call it outside the recording",
                          call.op, st.impl->owner->name(), st.impl->impl.name, e.what()));
        if (e.code() == errc::invalid_argument) throw;  // a bad call is the caller's, not a backend's
        why = std::string("launch failed: ") + e.what();
      }
    }
    if (why) {
      if (logging && s.log->candidates()) log_reject(s, d, call, st, *why);
      refusals += (refusals.empty() ? "" : "; ") + st.impl->impl.name + ": " + *why;
      // Several implementations of one backend (e.g. GEMM variants) are tried in turn; strict
      // mode and forced routes fail only once the routed backend has none left.
      const bool last_of_backend = i + 1 == d.steps.size() || d.steps[i + 1].impl->owner != st.impl->owner;
      if (last_of_backend && st.impl->owner == d.steps[0].impl->owner && (forced || s.env.strict)) {
        if (logging) s.log->write(step_record(d, call, st, "error", d.tier, refusals));
        throw error(errc::unsupported, "ops::" + call.op,
                    fmt::format("{} routed to {} ({} {}) cannot serve {} [{}]: {}{}", call.op,
                                st.impl->owner->name(), source_tier_name(d.tier), d.origin, d.dtypes, d.shape,
                                refusals, forced ? "" : " (PRISM_STRICT_ROUTES=1 forbids falling back)"));
      }
      continue;
    }
    const bool fell_back = st.default_retry || st.impl->owner != d.steps[0].impl->owner;
    st.count->calls.fetch_add(1, std::memory_order_relaxed);
    if (d.untuned_calls) d.untuned_calls->fetch_add(1, std::memory_order_relaxed);
    if (fell_back) st.count->fallbacks.fetch_add(1, std::memory_order_relaxed);
    dispatch_result res;
    res.done = ev;
    res.tier = fell_back ? source_tier::fallback : d.tier;
    std::string reason = fell_back ? "fallback from " + std::string(d.steps[0].impl->owner->name()) + " (" +
                                         d.origin + "): " + refusals
                                   : d.origin;
    if (logging) {
      if (!st.src_note.empty()) reason += "; " + st.src_note;
      // A call on a recording queue launches nothing now: its kernels run at each graph replay.
      log_record r =
          step_record(d, call, st, q.is_recording() ? "record" : "exec", res.tier, std::move(reason));
      if (timing) {
        q.wait();
        const auto all_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                .count());
        const auto build_ns = std::min(all_ns, program_build_ns_on_this_thread() - build_ns0);
        const auto ns = all_ns - build_ns;
        st.count->time_ns.fetch_add(ns, std::memory_order_relaxed);
        r.time_us = static_cast<double>(ns) / 1e3;
        r.compile_us = static_cast<double>(build_ns) / 1e3;
      }
      s.log->write(r);
      res.reason = r.reason;
    } else {
      res.reason = std::move(reason);
    }
    res.backend = st.impl->owner->name();
    res.implementation = st.impl->impl.name;
    res.config = st.config_text;
    return res;
  }
  throw error(
      errc::unsupported, "ops::" + call.op,
      fmt::format("no implementation of {} can serve {} [{}]: {}", call.op, d.dtypes, d.shape, refusals));
}

}  // namespace

std::string call_dtypes(const op_call& call) {
  std::string out;
  for (const auto& t : call.inputs) {
    if (!out.empty()) out += '|';
    out += t.defined() ? dtype_name(t.type()) : "-";
  }
  return out;
}

std::vector<std::string> op_backends(const op_descriptor& d) {
  std::vector<std::string> out;
  for (const backend* b : backend_registry())
    if (!b->implementations(d).empty()) out.emplace_back(b->name());
  return out;
}

tune_space tune_space_for(const op_descriptor& d, const device& dev) {
  auto& s = get_state();
  return get_device_state(s, dev).vendor.tune_space_of(d);
}

vendor_context device_vendor(const device& dev) {
  auto& s = get_state();
  return get_device_state(s, dev).vendor;
}

tune_space vendor_tune_space(const op_descriptor& d, const std::string& vendor) {
  auto& s = get_state();
  const vendor_profile* p = s.vendors.find(vendor);
  if (!p) {
    std::string names;
    for (const auto& v : s.vendors.profiles()) names += (names.empty() ? "" : ", ") + v.name;
    throw error(errc::not_found, "vendor profiles",
                "no vendor profile named '" + vendor + "'; loaded: " + names);
  }
  return s.vendors.tune_space_of(d, p);
}

std::string route_hash(const device& dev, const op_descriptor& d, const std::string& backend,
                       const std::string& config) {
  auto& s = get_state();
  return get_device_state(s, dev).tuning->route_hash(d, backend_named(backend, "ops::" + d.name), config);
}

tuning::row_validator stale_row_validator(const std::vector<device>& devices) {
  auto& s = get_state();
  std::map<std::string, const tuning_tier*> tiers;
  for (const auto& dev : devices) {
    auto& ds = get_device_state(s, dev);
    tiers[ds.fingerprint] = ds.tuning.get();
  }
  // Device states are never destroyed (retired states are kept), so the pointers stay valid.
  return [tiers](const tuning::result_row& row) -> std::string {
    auto it = tiers.find(row.device);
    return it == tiers.end() ? std::string() : it->second->staleness(row);
  };
}

int op_index(std::string_view op) {
  const auto& all = op_registry::instance().all();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i]->name == op) return static_cast<int>(i);
  op_registry::instance().get(op);  // throws not_found listing the valid names
  return -1;
}

namespace {
void forget_decisions();

// The tuning database's rows changed behind the memo (a PostgreSQL snapshot refresh, another
// database file): decide afresh, and recorded graphs record again.
void follow_tuning_changes() {
  static std::atomic<std::uint64_t> seen{0};
  const std::uint64_t now = tuning::database::changes();
  if (now == seen.load(std::memory_order_relaxed)) return;
  seen.store(now, std::memory_order_relaxed);
  forget_decisions();
}

dispatch_result route_and_run(queue& q, int op, op_call& call, const dispatch_options& options,
                              bool dry_run) {
  follow_tuning_changes();
  auto& s = get_state();
  auto& o = s.ops[op];
  complete_attrs(*o.desc, call);  // before the memo: an omitted default is the explicit one
  if (call.outputs.empty()) allocate_outputs(q, *o.desc, call);
  check_call(*o.desc, call);
  auto& dev = get_device_state(s, q.get_device());
  thread_local std::vector<std::int64_t> sig;
  signature_of(dev, op, call, sig);
  sig.push_back(options.skip_tuning_db ? 1 : 0);
  if (options.forced) {
    // A forced route (the tuner's candidates, `prism run --backend`) is memoized too, keyed by its
    // backend and config text: deciding afresh parsed and validated the config on every call,
    // which the tuner then timed with the kernel.
    sig.push_back(-2);
    for (char ch : options.forced->backend) sig.push_back(ch);
    sig.push_back(options.forced->config ? -3 : -4);
    if (options.forced->config)
      for (char ch : *options.forced->config) sig.push_back(ch);
  }
  std::shared_ptr<const decision> d;
  {
    std::shared_lock lock(s.memo_mutex);
    auto it = s.memo.find(sig);
    if (it != s.memo.end()) d = it->second;
  }
  if (!d) {
    d = decide(s, dev, op, call, options);
    std::unique_lock lock(s.memo_mutex);
    // Growing shapes (a KV cache's length) add keys forever: start over past a bound.
    if (s.memo.size() >= max_memo_entries) s.memo.clear();
    s.memo.emplace(sig, d);
  }
  return run_decision(s, q, *d, call, options.forced != nullptr, dry_run);
}
}  // namespace

dispatch_result dispatch_call(queue& q, int op, op_call& call) {
  return route_and_run(q, op, call, dispatch_options{}, false);
}

dispatch_result plan_call(queue& q, op_call& call, const dispatch_options& options) {
  return route_and_run(q, op_index(call.op), call, options, true);
}

dispatch_result dispatch_call(queue& q, op_call& call, const dispatch_options& options) {
  return route_and_run(q, op_index(call.op), call, options, false);
}

dispatch_result dispatch_call(queue& q, op_call& call, const forced_route* forced) {
  dispatch_options options;
  options.forced = forced;
  return dispatch_call(q, call, options);
}

// ---- public API of prism/dispatch.hpp ------------------------------------------------------

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const auto* d : op_registry::instance().all()) out.push_back(d->name);
  return out;
}

void init() {
  get_state();
}

std::vector<route_entry> effective_routes(const device& dev) {
  auto& s = get_state();
  auto& d = get_device_state(s, dev);
  std::vector<route_entry> out;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const auto& r = d.routes[i];
    route_entry e;
    e.op = s.ops[i].desc->name;
    e.backend = r.backend;
    e.tier = r.tier;
    e.origin = r.origin;
    e.unused = r.unused;
    e.order = candidate_order(s.ops[i].catalog, r.backend);
    for (const auto& c : r.cases)
      e.cases.push_back({c.entry.when.text(), c.entry.backend, c.entry.config, c.tier, c.entry.origin});
    out.push_back(std::move(e));
  }
  return out;
}

namespace {
vendor_profile_info info_of(const vendor_profile& p) {
  vendor_profile_info i;
  i.name = p.name;
  i.directory = p.directory;
  i.priority = p.priority;
  i.match_summary = p.match_summary();
  for (const auto& [file, k] : p.kernels) i.kernel_overrides.push_back(file);
  return i;
}
}  // namespace

std::vector<vendor_profile_info> vendor_profiles() {
  std::vector<vendor_profile_info> out;
  for (const auto& p : get_state().vendors.profiles()) out.push_back(info_of(p));
  return out;
}

vendor_profile_info matched_vendor(const device& dev) {
  auto& s = get_state();
  auto& d = get_device_state(s, dev);
  if (!d.vendor.profile) return {};
  return info_of(*d.vendor.profile);
}

std::vector<dispatch_stat> statistics() {
  std::vector<dispatch_stat> out;
  auto& r = counters();
  std::lock_guard lock(r.mutex);
  for (const auto& c : r.items) {
    auto calls = c.calls.load();
    if (!calls) continue;
    out.push_back({c.op, c.backend, c.tier, calls, c.fallbacks.load(), c.time_ns.load()});
  }
  return out;
}

log_options get_log_options() {
  auto& s = get_state();
  std::lock_guard lock(state_mutex());
  const auto l = s.env.log;
  log_options o;
  o.mode = !l.enabled                  ? "0"
           : l.profile && l.candidates ? "all"
           : l.profile                 ? "profile"
           : l.candidates              ? "dispatch"
                                       : "1";
  o.file = l.file;
  o.filter = l.filter;
  return o;
}

void set_log_options(const log_options& o) {
  // Parsed as the environment would be: one validation, one set of messages.
  env_snapshot env = {{"PRISM_LOG_DISPATCH", o.mode}};
  if (!o.file.empty()) env.emplace_back("PRISM_LOG_DISPATCH_FILE", o.file);
  if (!o.filter.empty()) env.emplace_back("PRISM_LOG_DISPATCH_FILTER", o.filter);
  auto settings = parse_env(env).log;
  auto sink = std::make_unique<log_sink>(settings);
  auto& s = get_state();
  std::lock_guard lock(state_mutex());
  s.env.log = settings;
  s.log = std::move(sink);
  if (settings.enabled && !summary_registered().exchange(true)) std::atexit(print_summary_at_exit);
}

void log_fallback(std::string_view op, std::string_view dtypes, std::string_view shape,
                  std::string_view served_by, std::string_view reason) {
  auto& s = get_state();
  if (!s.log->enabled()) return;
  log_record r;
  r.event = "fallback";
  r.timestamp = log_timestamp();
  r.pid = static_cast<std::int64_t>(::getpid());
  r.op = op;
  r.dtypes = dtypes;
  r.shape = shape;
  r.backend = served_by;
  r.tier = source_tier_name(source_tier::fallback);
  r.reason = reason;
  s.log->write(r);
}

void reset_statistics() {
  auto& r = counters();
  std::lock_guard lock(r.mutex);
  for (auto& c : r.items) {
    c.calls = 0;
    c.fallbacks = 0;
    c.time_ns = 0;
  }
}

namespace {
std::atomic<std::uint64_t>& generation() {
  static std::atomic<std::uint64_t> g{1};
  return g;
}
void forget_decisions() {
  generation().fetch_add(1, std::memory_order_acq_rel);
  if (auto* s = current_state().load()) {
    std::unique_lock lock(s->memo_mutex);
    s->memo.clear();
  }
}
}  // namespace

std::uint64_t routing_generation() noexcept {
  return generation().load(std::memory_order_acquire);
}

void set_tuning_lookup(tuning_lookup lookup) {
  {
    std::lock_guard lock(tuning_mutex());
    tuning_replacement() = tuning_override{true, std::move(lookup)};
  }
  forget_decisions();
}

void use_tuning_database() {
  {
    std::lock_guard lock(tuning_mutex());
    tuning_replacement() = tuning_override{};
  }
  forget_decisions();
}

namespace testing {

void reload_config() {
  std::lock_guard lock(state_mutex());
  auto fresh = build_state();
  auto* raw = fresh.get();
  retired_states().push_back(std::move(fresh));
  current_state().store(raw, std::memory_order_release);
  generation().fetch_add(1, std::memory_order_acq_rel);
  if (raw->log->enabled() && !summary_registered().exchange(true)) std::atexit(print_summary_at_exit);
  reset_statistics();
}

void inject_launch_failure(const std::string& op, const std::string& backend, int count) {
  std::lock_guard lock(injection_mutex());
  injections()[{op, backend}] = count;
  any_injection().store(count > 0 || !injections().empty());
}

}  // namespace testing
}  // namespace prism::dispatch
