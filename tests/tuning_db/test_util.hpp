// SPDX-License-Identifier: Apache-2.0
// Shared fixtures for the in-process tuning_db tests: temp database paths and row builders.
#pragma once

#include <filesystem>
#include <string>

#include "prism/tuning_db.hpp"
#include "tests/tuning_db/spawn.hpp"

namespace prism::tuning::test {

inline constexpr const char* dev_a = "aaaaaaaaaaaaaaaa";
inline constexpr const char* dev_b = "bbbbbbbbbbbbbbbb";

inline result_row make_row(const std::string& device, const std::string& shape, double p50, double def = 0,
                           const std::string& config = "tile=16") {
  result_row r;
  r.device = device;
  r.op = "matmul";
  r.dtype = "f32";
  r.shape = shape_key::parse(shape).str();
  r.backend = "opencl";
  r.config = config;
  r.p20_ns = p50 * 0.9;
  r.p50_ns = p50;
  r.p80_ns = p50 * 1.1;
  r.default_ns = def;
  r.kernel_hash = "k1";
  r.driver_version = "drv1";
  return r;
}

inline lookup_query query(const std::string& device, const std::string& shape,
                          const std::string& driver = "drv1") {
  lookup_query q;
  q.device = device;
  q.op = "matmul";
  q.dtype = "f32";
  q.shape = shape_key::parse(shape);
  q.driver_version = driver;
  return q;
}

}  // namespace prism::tuning::test
