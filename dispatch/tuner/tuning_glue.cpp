// The dispatcher's tier-3 lookup on the tuning database (db-exact / db-nearest), the kernel hash
// that keeps stale rows out, and PRISM_RECORD_UNTUNED recording of misses.
#include "dispatch/tuner/tuning_glue.hpp"

#include <map>
#include <mutex>

#include "dispatch/backends/backend.hpp"
#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/dispatch.hpp"
#include "prism/tuning_db.hpp"
#include "runtime/hash.hpp"
#include "runtime/log.hpp"

namespace prism::dispatch::tuner {
namespace {

// Version of the hash recipe: bump when what goes into it changes.
constexpr std::string_view recipe = "prism-kernel-hash-1";

std::string opencl_sources(const device& dev, const op_descriptor& d) {
  std::string text;
  std::map<std::string, std::string> overrides;
  try {
    auto vendor = matched_vendor(dev);
    for (const auto& impl : d.implementations) {
      if (impl.kernel_file.empty()) continue;
      std::string path = vendor.directory + "/kernels/" + impl.kernel_file;
      if (FILE* f = std::fopen(path.c_str(), "rb")) {
        std::string body;
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) body.append(buf, n);
        std::fclose(f);
        overrides[impl.kernel_file] = std::move(body);
      }
    }
  } catch (const prism::error&) {
    // No vendor profile: the embedded sources are what runs.
  }
  for (const auto& impl : d.implementations) {
    if (impl.kernel_file.empty()) continue;
    text += impl.name;
    text += '\n';
    auto it = overrides.find(impl.kernel_file);
    if (it != overrides.end())
      text += it->second;
    else
      text += embedded_kernel_source(impl.kernel_file);
  }
  return text;
}

}  // namespace

std::string kernel_hash(const device& dev, const std::string& op, const std::string& backend,
                        const std::string& config) {
  std::uint64_t h = hash::fnv1a64(recipe);
  h = hash::fnv1a64(backend, h);
  h = hash::fnv1a64(config, h);
  if (backend == "opencl") {
    const auto* d = op_registry::instance().find(op);
    if (d) {
      h = hash::fnv1a64(embedded_kernel_source("prelude.cl"), h);
      h = hash::fnv1a64(opencl_sources(dev, *d), h);
    }
  } else if (backend == "clblast") {
    h = hash::fnv1a64("CLBlast 1.5", h);
  }
  return hash::to_hex(h);
}

std::string dtype_key(std::string_view dispatch_dtypes) {
  std::vector<std::string_view> parts;
  while (true) {
    auto bar = dispatch_dtypes.find('|');
    auto part = dispatch_dtypes.substr(0, bar);
    if (!part.empty() && part != "-") parts.push_back(part);
    if (bar == std::string_view::npos) break;
    dispatch_dtypes.remove_prefix(bar + 1);
  }
  if (parts.empty()) return "-";
  bool same = true;
  for (auto p : parts) same = same && p == parts[0];
  if (same) return std::string(parts[0]);
  std::string out;
  for (auto p : parts) {
    if (!out.empty()) out += '|';
    out += p;
  }
  return out;
}

namespace {

struct device_index {
  std::mutex mu;
  std::map<std::string, device> by_fingerprint;
  bool scanned = false;
};
device_index& devices() {
  static auto* d = new device_index;
  return *d;
}
std::optional<device> device_of(const std::string& fingerprint) {
  auto& idx = devices();
  std::lock_guard lock(idx.mu);
  if (!idx.scanned) {
    idx.scanned = true;
    for (auto& dev : device::get_devices()) idx.by_fingerprint[dev.fingerprint().hash] = dev;
  }
  auto it = idx.by_fingerprint.find(fingerprint);
  if (it == idx.by_fingerprint.end()) return std::nullopt;
  return it->second;
}

std::optional<tuned_choice> lookup(const tuning_query& q) {
  auto& db = tuning::database::process_default();
  static std::once_flag validator_once;
  std::call_once(validator_once, [&db] {
    db.set_validator([](const tuning::result_row& row) -> std::string {
      if (row.kernel_hash.empty()) return {};
      auto dev = device_of(row.device);
      if (!dev) return {};  // another machine's row: never looked up for this device anyway
      std::string now = kernel_hash(*dev, row.op, row.backend, row.config);
      if (now == row.kernel_hash) return {};
      return "kernel hash changed: tuned with " + row.kernel_hash + ", this prism builds " + now;
    });
  });
  std::string fp(q.device_fingerprint);
  auto dev = device_of(fp);
  tuning::lookup_query lq;
  lq.device = fp;
  lq.op = std::string(q.op);
  lq.dtype = dtype_key(q.dtypes);
  try {
    lq.shape = tuning::shape_key::parse(q.shape_key);
  } catch (const prism::error& e) {
    log::get("dispatch")->warn("tuning lookup: shape key '{}' of {}: {}", q.shape_key, q.op, e.message());
    return std::nullopt;
  }
  lq.driver_version = dev ? dev->driver_version() : std::string();
  auto m = db.lookup(lq);
  if (!m) {
    // Recorded as a shape-set entry: the dtype pretune samples with (not the row's collapsed
    // input dtypes like "f32|i64", which no shape set can name), and only ops pretune can sample.
    const op_descriptor* desc = op_registry::instance().find(lq.op);
    if (!q.sample_dtype.empty() && desc && desc->sample)
      tuning::record_untuned(lq.op, q.sample_dtype, lq.shape);
    return std::nullopt;
  }
  tuned_choice c;
  c.backend = m->row.backend;
  c.config = m->row.config;
  c.tier = m->tier == tuning::match_tier::exact ? source_tier::db_exact : source_tier::db_nearest;
  if (c.tier == source_tier::db_nearest) c.borrowed_shape = m->row.shape;
  return c;
}

}  // namespace

void install_db_lookup() {
  set_tuning_lookup(&lookup);
}
void uninstall_db_lookup() {
  set_tuning_lookup({});
}

namespace {
// Tier 3 is on in every process that links the dispatcher; the database opens on first lookup.
[[maybe_unused]] const bool installed_at_load = [] {
  install_db_lookup();
  return true;
}();
}  // namespace

}  // namespace prism::dispatch::tuner
