// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the op suite: the one queue, running a call against its reference, and
// asserting that bad input is refused before anything is enqueued.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "runtime/env.hpp"

namespace prism::test {

/// The suite's queue on the PRISM_DEVICE / default device (shared by every test).
queue& shared_queue();
/// The op's default config and search space on the suite's device, as the dispatcher sees them
/// (dispatch::tune_space_for).
tune_space suite_space(const op_descriptor& d);
/// Reference first, then the OpenCL implementation with `cfg`, then compare.
void run_and_compare(const op_descriptor& d, op_call& c, const kernel_config& cfg, bool small_integers);

/// PRISM_CL_OPTIONS set to `options` for a scope (programs and build_kernel's memo key on it), then
/// put back as it was, also when the scope exits by a throw: a define a test passes there never
/// leaks into the suite's later builds.
class scoped_cl_options {
 public:
  explicit scoped_cl_options(std::optional<std::string> options) : before_(env::get("PRISM_CL_OPTIONS")) {
    env::override_for_testing("PRISM_CL_OPTIONS", std::move(options));
  }
  ~scoped_cl_options() { env::override_for_testing("PRISM_CL_OPTIONS", before_); }
  scoped_cl_options(const scoped_cl_options&) = delete;
  scoped_cl_options& operator=(const scoped_cl_options&) = delete;

 private:
  std::optional<std::string> before_;
};

/// The call must throw prism::error(invalid_argument) whose text holds every `needles` entry,
/// and leave every output's contents untouched (nothing was enqueued that wrote them).
inline void expect_refused(queue& q, const op_descriptor& d, const op_call& c,
                           const std::vector<std::string>& needles, errc code = errc::invalid_argument) {
  std::vector<std::vector<std::byte>> before;
  for (const auto& o : c.outputs)
    before.push_back(o.defined() && o.numel() ? o.to_host(q) : std::vector<std::byte>{});
  try {
    enqueue_opencl(q, d, c);
    q.wait_and_throw();
    ADD_FAILURE() << describe_call(d, c) << " was accepted; expected an error mentioning " << needles.front();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "'" << n << "' not in: " << e.what();
  }
  q.wait();
  for (std::size_t i = 0; i < c.outputs.size(); ++i)
    if (c.outputs[i].defined() && c.outputs[i].numel())
      EXPECT_TRUE(c.outputs[i].to_host(q) == before[i]) << "output " << i << " was written despite the error";
}

}  // namespace prism::test
