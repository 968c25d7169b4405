// SPDX-License-Identifier: Apache-2.0
// Launchers for kernels/cl/elementwise.cl and kernels/cl/cast.cl, shared by the elementwise,
// gated and layout ops (and tensor::contiguous): pick the flat (vectorised) or strided path.
#pragma once

#include <optional>
#include <string>

#include "kernels/op_descriptor.hpp"

namespace prism::kernels {

struct ew_launch {
  std::string op_define;  ///< OP_<op_define> in elementwise.cl
  tensor a;
  tensor b;  ///< undefined: unary, or `scalar` when set
  std::optional<double> scalar;
  double alpha = 1.0;
  tensor out;
};

/// Config: wg, vec, ept (see elementwise_schema()).
event launch_elementwise(queue& q, const ew_launch& l, const kernel_config& cfg,
                         source_override src = std::nullopt);
/// Converting copy of `src` (broadcastable) into the view `dst`.
event launch_cast(queue& q, const tensor& src, const tensor& dst, const kernel_config& cfg,
                  source_override src_text = std::nullopt);

}  // namespace prism::kernels
