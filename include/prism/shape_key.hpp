// SPDX-License-Identifier: Apache-2.0
// prism::shape_key: the canonical problem size of an op call ("m=128,n=4096,k=4096"), with the one
// nearness rule every layer uses: shape_distance for nearest-shape lookups and bucket() for
// recording (PRISM_RECORD_UNTUNED). The op descriptors decide which components a key has;
// the tuning database stores and compares keys without knowing any op.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prism {

/// Named integer components in a fixed order. Two keys are equal when they hold the same
/// name=value pairs, in any order. Thread safety: value type.
class shape_key {
 public:
  using component = std::pair<std::string, std::int64_t>;

  shape_key() = default;
  /// Throws errc::invalid_argument for a name that is not [A-Za-z0-9_]+ or a repeated name.
  shape_key(std::initializer_list<component> components);
  explicit shape_key(std::vector<component> components);
  /// Parses "a=1,b=2" (spaces around tokens allowed; "" is the empty key). Throws
  /// errc::invalid_argument naming the bad token: empty name, non-integer value, repeated name.
  static shape_key parse(std::string_view text);

  const std::vector<component>& components() const noexcept { return components_; }
  bool empty() const noexcept { return components_.empty(); }
  std::optional<std::int64_t> find(std::string_view name) const;
  /// Throws errc::not_found naming the component and listing those present.
  std::int64_t at(std::string_view name) const;
  std::int64_t get(std::string_view name, std::int64_t fallback) const;
  /// Replaces the value of an existing name, or appends it.
  void set(std::string_view name, std::int64_t value);

  /// "a=1,b=2" in component order ("" when empty).
  std::string str() const;
  /// Components sorted by name: what equality and memo keys use.
  std::string canonical() const;
  /// True when both keys have the same component names (so shape_distance is defined).
  bool comparable(const shape_key& other) const;
  /// The log2 bucket, order-free: components <= 1 (flags, unit and empty dims) exactly, larger
  /// ones as floor(log2), e.g. "k~12,m~4,n~12" for m=16..31, n=k=4096..8191. Derived from
  /// shape_distance: keys in one bucket are less than 1 apart in every component, so a
  /// nearest-shape lookup serves a whole bucket from the one shape tuned in it.
  std::string bucket() const;

  bool operator==(const shape_key& other) const { return canonical() == other.canonical(); }
  bool operator<(const shape_key& other) const { return canonical() < other.canonical(); }

 private:
  std::vector<component> components_;
};

/// The one nearness rule: the sum over components of |log2 a - log2 b| (each factor of 2 in
/// one dimension costs 1). Components <= 0 (off flags, empty dims) must be equal, else the keys
/// are not comparable. +infinity when the keys are not comparable.
double shape_distance(const shape_key& a, const shape_key& b);

}  // namespace prism
