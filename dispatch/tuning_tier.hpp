// SPDX-License-Identifier: Apache-2.0
// The tuning-database tier of routing, as an explicit object: each device the dispatcher serves
// owns one, built from values the dispatcher already has (the device, its fingerprint and
// driver, its vendor profile). It asks the process's tuning database for the row of a call's
// (op, dtype, shape key), keeps rows built from other kernel sources out by their hash, and
// records misses for PRISM_RECORD_UNTUNED. No static hook installs it: linking the dispatcher
// is enough, also in a static build.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "dispatch/backends/backend.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime/device.hpp"
#include "prism/shape_key.hpp"
#include "prism/tuning_db.hpp"

namespace prism::dispatch {

/// The dtype column for a call's dispatch dtypes ("f32|f32|-" -> "f32"): the one dtype when
/// every defined input shares it, else the defined dtypes joined by '|'.
std::string dtype_key(std::string_view dispatch_dtypes);

/// A shape set entry's `act` (shape_entry::act) for a call sampled as `sample_dtype` with
/// dispatch dtypes `dtypes`: where sample_dtype is block-quantized, the first of the other
/// inputs' floating dtypes when it is f16 or bf16 ("bf16|q4_0|bf16" -> "bf16"); else "" (f32,
/// an entry's default, or not a quantized sample).
std::string_view quantized_activations(std::string_view sample_dtype, std::string_view dtypes);

/// Thread safety: safe.
class tuning_tier {
 public:
  tuning_tier(device dev, vendor_context vendor);

  /// The database's choice for a call of `d`, or nullopt (a miss is recorded for
  /// PRISM_RECORD_UNTUNED as `sample_dtype` + `key`, and `*untuned_calls`, when given, is set
  /// to the recorded shape's dispatch counter). Never throws: a database problem is a warning
  /// and a miss.
  std::optional<tuned_choice> lookup(const op_descriptor& d, const std::string& dtypes, const shape_key& key,
                                     std::string_view sample_dtype,
                                     std::atomic<std::uint64_t>** untuned_calls = nullptr) const;

  /// The hash stored with a tuned row: what decides its speed besides the device (the backend,
  /// its config and the backend's sources under this device's vendor profile), 16 hex digits.
  std::string route_hash(const op_descriptor& d, const backend& b, const std::string& config) const;

  /// "" when `row` (of this device) may still be used, else why not.
  std::string staleness(const tuning::result_row& row) const;

  const std::string& fingerprint() const noexcept { return fingerprint_; }

 private:
  device dev_;
  std::string fingerprint_, driver_;
  vendor_context vendor_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<std::string, std::string>, std::uint64_t> source_hashes_;  // (op, backend)
};

}  // namespace prism::dispatch
