// SPDX-License-Identifier: Apache-2.0
// FNV-1a 64-bit hashing for device fingerprints, program source hashes and cache keys.
// Stable across runs and platforms: the tuning database stores these strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace prism::hash {

constexpr std::uint64_t fnv1a64_offset = 0xcbf29ce484222325ull;

/// FNV-1a over `data`, continuing from `seed` (chain calls to hash several parts).
constexpr std::uint64_t fnv1a64(std::string_view data, std::uint64_t seed = fnv1a64_offset) noexcept {
  std::uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// 16 lower-case hex digits.
inline std::string to_hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 0xf];
  return s;
}

/// fnv1a64 of `data` as 16 hex digits.
inline std::string hex(std::string_view data) {
  return to_hex(fnv1a64(data));
}

}  // namespace prism::hash
