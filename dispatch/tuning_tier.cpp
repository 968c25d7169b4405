// SPDX-License-Identifier: Apache-2.0
// The tuning-database tier of one device (see tuning_tier.hpp).
#include "dispatch/tuning_tier.hpp"

#include <vector>

#include "prism/dtype.hpp"
#include "runtime/hash.hpp"
#include "runtime/log.hpp"

namespace prism::dispatch {
namespace {

// Version of the hash recipe: bump when what goes into it changes. 2: the backend's sources
// enter as their own hash (cached per op and backend), not as their bytes.
constexpr std::string_view recipe = "prism-kernel-hash-2";

}  // namespace

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

tuning_tier::tuning_tier(device dev, vendor_context vendor)
    : dev_(std::move(dev)),
      fingerprint_(dev_.fingerprint().hash),
      driver_(dev_.driver_version()),
      vendor_(vendor) {}

std::string tuning_tier::route_hash(const op_descriptor& d, const backend& b,
                                    const std::string& config) const {
  std::uint64_t sources = 0;
  {
    std::lock_guard lock(mutex_);
    auto key = std::make_pair(d.name, std::string(b.name()));
    auto it = source_hashes_.find(key);
    if (it == source_hashes_.end())
      it = source_hashes_.emplace(key, b.source_hash(d, vendor_, hash::fnv1a64_offset)).first;
    sources = it->second;
  }
  std::uint64_t h = hash::fnv1a64(recipe);
  h = hash::fnv1a64(b.name(), h);
  h = hash::fnv1a64(config, h);
  return hash::to_hex(hash::fnv1a64(hash::to_hex(sources), h));
}

std::string tuning_tier::staleness(const tuning::result_row& row) const {
  if (row.kernel_hash.empty()) return {};
  const op_descriptor* d = op_registry::instance().find(row.op);
  const backend* b = find_backend(row.backend);
  if (!d || !b) return {};  // the dispatcher refuses such a row with its own warning
  std::string now = route_hash(*d, *b, row.config);
  if (now == row.kernel_hash) return {};
  return "kernel hash changed: tuned with " + row.kernel_hash + ", this prism builds " + now;
}

std::string_view quantized_activations(std::string_view sample_dtype, std::string_view dtypes) {
  if (sample_dtype.empty() || !is_quantized(parse_dtype(sample_dtype))) return {};
  while (!dtypes.empty()) {
    const std::size_t bar = dtypes.find('|');
    const std::string_view one = dtypes.substr(0, bar);
    if (one == "f16" || one == "bf16") return one;
    if (one == "f32") return {};
    dtypes = bar == std::string_view::npos ? std::string_view{} : dtypes.substr(bar + 1);
  }
  return {};
}

std::optional<tuned_choice> tuning_tier::lookup(const op_descriptor& d, const std::string& dtypes,
                                                const shape_key& key, std::string_view sample_dtype,
                                                std::atomic<std::uint64_t>** untuned_calls) const {
  tuning::lookup_query q;
  q.device = fingerprint_;
  q.op = d.name;
  q.dtype = dtype_key(dtypes);
  q.shape = key;
  q.driver_version = driver_;
  q.splits = d.nearest_splits;
  q.validator = [this](const tuning::result_row& row) { return staleness(row); };
  std::optional<tuning::match> m;
  try {
    m = tuning::database::process_default().lookup(q);
  } catch (const prism::error& e) {
    log::get("dispatch")
        ->warn("tuning lookup of {} [{}]: {}; using the defaults", d.name, key.str(), e.message());
    return std::nullopt;
  }
  if (!m) {
    // Recorded as a shape-set entry: the dtype pretune samples with (not the row's collapsed
    // input dtypes like "f32|i64", which no shape set can name), and only ops pretune can sample.
    if (!sample_dtype.empty() && d.sample) {
      auto* calls =
          tuning::record_untuned(d.name, sample_dtype, key, quantized_activations(sample_dtype, dtypes));
      if (untuned_calls) *untuned_calls = calls;
    }
    return std::nullopt;
  }
  tuned_choice c;
  c.backend = m->row.backend;
  c.config = m->row.config;
  c.tier = m->tier == tuning::match_tier::exact ? source_tier::db_exact : source_tier::db_nearest;
  if (c.tier == source_tier::db_nearest) c.borrowed_shape = m->row.shape;
  return c;
}

}  // namespace prism::dispatch
