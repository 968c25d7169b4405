// SPDX-License-Identifier: Apache-2.0
// Launchers for elementwise.cl and cast.cl: merge dims, choose the flat or strided kernel,
// bind storage kinds and config as build defines.
#include "kernels/elementwise_launch.hpp"

#include <algorithm>

#include "kernels/op_support.hpp"

namespace prism::kernels {

namespace {
std::size_t flat_global(std::int64_t n, std::int64_t vec, std::int64_t ept, std::int64_t wg) {
  std::int64_t nv = n / vec;
  std::int64_t items = (nv + ept - 1) / ept;
  if (items < vec) items = vec;  // the tail needs up to vec-1 work-items
  return round_up(static_cast<std::size_t>(items), static_cast<std::size_t>(wg));
}
std::size_t strided_global(std::int64_t n, std::int64_t ept, std::int64_t wg) {
  return round_up(static_cast<std::size_t>((n + ept - 1) / ept), static_cast<std::size_t>(wg));
}
}  // namespace

event launch_elementwise(queue& q, const ew_launch& l, const kernel_config& cfg, source_override src) {
  const std::int64_t n = l.out.numel();
  if (n == 0) return event{};
  const std::int64_t wg = cfg.at("wg"), vec = cfg.at("vec"), ept = cfg.at("ept");
  const bool has_b = l.b.defined();
  nd_iter it = make_iter(l.out.shape(), {&l.a, has_b ? &l.b : nullptr, &l.out});
  const bool flat = it.flat() && it.operand_contiguous(2);
  // Rows path: two merged dims, unit inner stride everywhere (row strides free, 0 allowed).
  const bool rows = !flat && it.ndim == 2 && it.strides[0].v[1] == 1 && it.strides[2].v[1] == 1 &&
                    (!has_b || it.strides[1].v[1] == 1) && it.strides[2].v[0] != 0;
  int a_mode = 1, b_mode = has_b ? 1 : (l.scalar ? 3 : 0);
  if (flat) {
    if (it.ndim == 1 && it.strides[0].v[0] == 0) a_mode = 2;
    if (has_b && it.ndim == 1 && it.strides[1].v[0] == 0) b_mode = 2;
  }
  std::string opts = "-DOP_" + l.op_define + " " + dtype_defines("A", l.a.type()) +
                     dtype_defines("B", has_b ? l.b.type() : l.a.type()) + dtype_defines("O", l.out.type()) +
                     "-DVEC=" + std::to_string(vec) + " -DEPT=" + std::to_string(ept) +
                     " -DA_MODE=" + std::to_string(a_mode) + " -DB_MODE=" + std::to_string(b_mode);
  kernel k = build_kernel(q.get_context(), "elementwise.cl", src, opts,
                          flat   ? "ew_flat"
                          : rows ? "ew_rows"
                                 : "ew_strided");
  tensor a = l.a, b = has_b ? l.b : l.a, out = l.out;
  const float alpha = static_cast<float>(l.alpha), scalar = static_cast<float>(l.scalar.value_or(0.0));
  return q.submit([&](handler& h) {
    accessor<std::byte> A(a.storage(), h, read_only, a.byte_extent());
    accessor<std::byte> B(b.storage(), h, read_only, b.byte_extent());
    accessor<std::byte> O(out.storage(), h, access_mode::write, out.byte_extent());
    const std::int64_t a_off = a.offset(), b_off = b.offset(), o_off = out.offset();
    if (flat) {
      h.parallel_for(nd_range(range<1>(flat_global(n, vec, ept, wg)), range<1>(static_cast<std::size_t>(wg))),
                     k, n, A, a_off, B, b_off, O, o_off, alpha, scalar);
    } else if (rows) {
      const std::int64_t cols = it.shape.v[1], nrows = it.shape.v[0];
      std::int64_t items = std::max(cols / vec, vec);
      h.parallel_for(
          nd_range(range<2>(round_up(static_cast<std::size_t>(items), static_cast<std::size_t>(wg)),
                            static_cast<std::size_t>(nrows)),
                   range<2>(static_cast<std::size_t>(wg), std::size_t{1})),
          k, cols, A, a_off, it.strides[0].v[0], B, b_off, it.strides[1].v[0], O, o_off, it.strides[2].v[0],
          alpha, scalar);
    } else {
      const int nd = it.ndim;
      h.parallel_for(nd_range(range<1>(strided_global(n, ept, wg)), range<1>(static_cast<std::size_t>(wg))),
                     k, n, nd, it.shape, A, a_off, it.strides[0], B, b_off, it.strides[1], O, o_off,
                     it.strides[2], alpha, scalar);
    }
  });
}

event launch_cast(queue& q, const tensor& src, const tensor& dst, const kernel_config& cfg,
                  source_override src_text) {
  const std::int64_t n = dst.numel();
  if (n == 0) return event{};
  const std::int64_t wg = cfg.at("wg"), vec = cfg.at("vec"), ept = cfg.at("ept");
  nd_iter it = make_iter(dst.shape(), {&src, &dst});
  const bool flat = it.operand_contiguous(0) && it.operand_contiguous(1);
  std::string opts = dtype_defines("A", src.type()) + dtype_defines("O", dst.type()) +
                     "-DVEC=" + std::to_string(vec) + " -DEPT=" + std::to_string(ept);
  kernel k = build_kernel(q.get_context(), "cast.cl", src_text, opts, flat ? "cast_flat" : "cast_strided");
  tensor a = src, out = dst;
  const bool vector_path = is_floating(src.type()) && is_floating(dst.type()) && vec > 1;
  return q.submit([&](handler& h) {
    accessor<std::byte> A(a.storage(), h, read_only, a.byte_extent());
    accessor<std::byte> O(out.storage(), h, access_mode::write, out.byte_extent());
    const std::int64_t a_off = a.offset(), o_off = out.offset();
    if (flat) {
      std::size_t g = vector_path ? flat_global(n, vec, ept, wg) : strided_global(n, ept, wg);
      h.parallel_for(nd_range(range<1>(g), range<1>(static_cast<std::size_t>(wg))), k, n, A, a_off, O, o_off);
    } else {
      const int nd = it.ndim;
      h.parallel_for(nd_range(range<1>(strided_global(n, ept, wg)), range<1>(static_cast<std::size_t>(wg))),
                     k, n, nd, it.shape, A, a_off, it.strides[0], O, o_off, it.strides[1]);
    }
  });
}

}  // namespace prism::kernels
