// SPDX-License-Identifier: Apache-2.0
// Reductions (sum, mean, max, min over one or more dims with keepdim; argmax -> i64) and the
// softmax family (softmax, log_softmax over one dim). Inputs are brought into a contiguous
// [outer, R, inner] view (a copy only when strided, or when the reduced dims are not adjacent).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

std::vector<dtype> floats() {
  return {dtype::f32, dtype::f16, dtype::bf16};
}

/// Sorted, unique, normalised reduced dims ("dims" attribute; [] = all dims).
std::vector<int> reduced_dims(const op_call& c, int ndim, bool single = false) {
  std::vector<int> out;
  auto v = c.get_ints("dims");
  if (v.empty()) {
    for (int d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  if (single && v.size() != 1)
    fail(c, "attribute 'dims' must name one dim (or be omitted to reduce the flattened tensor); got " +
                format_attr(v));
  for (auto d : v) out.push_back(normalize_dim(c, d, ndim, "dims entry"));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(c, "attribute 'dims' " + format_attr(v) + " names a dim twice");
  return out;
}

struct reduce_view {
  tensor x;  ///< contiguous
  std::int64_t outer = 1, r = 1, inner = 1;
};

/// Brings `in` into a contiguous [outer, R, inner] arrangement with R the reduced dims.
reduce_view canonical(queue& q, const tensor& in, const std::vector<int>& rd) {
  reduce_view v;
  tensor x = in;
  bool block = true;
  for (std::size_t i = 1; i < rd.size(); ++i)
    if (rd[i] != rd[i - 1] + 1) block = false;
  if (!block) {
    dims order;
    for (int d = 0; d < in.dim(); ++d)
      if (!std::binary_search(rd.begin(), rd.end(), d)) order.push_back(d);
    for (int d : rd) order.push_back(d);
    x = x.permute(order);
    std::vector<int> nrd;
    for (std::size_t i = 0; i < rd.size(); ++i)
      nrd.push_back(in.dim() - static_cast<int>(rd.size()) + static_cast<int>(i));
    v.x = x.contiguous(q);
    for (int d = 0; d < in.dim() - static_cast<int>(rd.size()); ++d) v.outer *= v.x.shape()[d];
    for (int d : nrd) v.r *= v.x.shape()[d];
    return v;
  }
  v.x = x.contiguous(q);
  if (rd.empty()) {
    v.outer = in.numel();
    return v;
  }
  for (int d = 0; d < rd.front(); ++d) v.outer *= in.shape()[d];
  for (int d : rd) v.r *= in.shape()[d];
  for (int d = rd.back() + 1; d < in.dim(); ++d) v.inner *= in.shape()[d];
  return v;
}

dims reduced_shape(const dims& s, const std::vector<int>& rd, bool keepdim) {
  dims out;
  for (int d = 0; d < s.size(); ++d) {
    bool r = std::binary_search(rd.begin(), rd.end(), d);
    if (!r)
      out.push_back(s[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

/// Host-side [outer, R, inner] walk over the logical input for references.
struct host_reduce {
  std::int64_t outer = 1, r = 1, inner = 1;
  std::vector<std::int64_t> order;  ///< permutation of input flat indices into [outer, R, inner]
};
host_reduce host_canonical(const dims& shape, const std::vector<int>& rd) {
  host_reduce h;
  std::vector<int> keep;
  for (int d = 0; d < shape.size(); ++d)
    if (!std::binary_search(rd.begin(), rd.end(), d)) keep.push_back(d);
  for (int d : keep) h.outer *= shape[d];
  for (int d : rd) h.r *= shape[d];
  // index = (o, r) with inner folded into outer (the reference does not care about inner).
  std::vector<int> perm = keep;
  perm.insert(perm.end(), rd.begin(), rd.end());
  dims st = contiguous_strides(shape);
  const std::int64_t n = shape.product();
  h.order.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  std::vector<std::int64_t> idx(perm.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < perm.size(); ++k) off += idx[k] * st[perm[k]];
    h.order[static_cast<std::size_t>(i)] = off;
    for (int k = static_cast<int>(perm.size()) - 1; k >= 0; --k) {
      if (++idx[k] < shape[perm[k]]) break;
      idx[k] = 0;
    }
  }
  return h;
}

std::size_t pow2_ok(std::int64_t wg) {
  return static_cast<std::size_t>(wg);
}

// How a kernel over a reduce_view is launched; reduce.cl and softmax.cl share these forms and
// their argument lists: a work-item per row, a work-group per row, a work-item per
// (outer, inner) column, or a work-item per block of consecutive rows (`items` work-items; the
// kernel derives the block length from the global size).
enum class row_layout { per_item, rows, cols, row_block };

event launch_over_view(queue& q, const kernel& k, const reduce_view& v, const tensor& out, std::int64_t wg,
                       row_layout layout, std::optional<local_memory> scratch = std::nullopt,
                       std::int64_t items = 0) {
  tensor x = v.x, o = out;
  const std::int64_t x_off = x.offset(), o_off = o.offset();
  const std::size_t local = pow2_ok(wg);
  return q.submit([&](handler& h) {
    accessor<std::byte> X(x.storage(), h, read_only, x.byte_extent());
    accessor<std::byte> O(o.storage(), h, access_mode::write, o.byte_extent());
    switch (layout) {
      case row_layout::per_item: {
        h.parallel_for(
            nd_range(range<1>(round_up(static_cast<std::size_t>(v.outer), local)), range<1>(local)), k,
            v.outer, v.r, X, x_off, O, o_off);
        break;
      }
      case row_layout::row_block:
        h.parallel_for(nd_range(range<1>(round_up(static_cast<std::size_t>(items), local)), range<1>(local)),
                       k, v.outer, v.r, X, x_off, O, o_off, *scratch);
        break;
      case row_layout::rows:
        h.parallel_for(nd_range(range<1>(static_cast<std::size_t>(v.outer) * local), range<1>(local)), k, v.r,
                       X, x_off, O, o_off);
        break;
      case row_layout::cols:
        h.parallel_for(
            nd_range(range<1>(round_up(static_cast<std::size_t>(v.outer * v.inner), local)), range<1>(local)),
            k, v.outer, v.r, v.inner, X, x_off, O, o_off);
        break;
    }
  });
}

// ---- reductions -------------------------------------------------------------------------------

// argmax's work-groups a row (config sg): up to sg where the rows are few (a decode step's one row
// of logits) and each group still takes at least four vectors an item; 1 otherwise, and for rows
// whose indices need more than an int (reduce_rows_split keeps them in 32 bits).
std::int64_t split_groups(std::int64_t rows, std::int64_t r, std::int64_t wg, std::int64_t vec,
                          std::int64_t sg) {
  if (sg <= 1 || rows > 16 || r >= (std::int64_t{1} << 31)) return 1;
  return std::clamp<std::int64_t>(r / (4 * wg * vec), 1, sg);
}

op_descriptor make_reduce(const std::string& name) {
  const bool argmax = name == "argmax";
  const bool needs_nonempty = name == "max" || name == "min" || argmax;
  op_descriptor d;
  d.name = name;
  d.family = "reduce";
  d.summary =
      argmax ? "index (i64) of the first maximum over `dims` (one dim, or all flattened); NaN counts as max"
             : name + " over `dims` (all when omitted) with keepdim; f32 accumulation";
  d.inputs = {{"input"}};
  d.outputs = {{"out"}};
  d.attrs = {{"dims", std::vector<std::int64_t>{},
              argmax ? "the dim ([]: the flattened tensor)" : "reduced dims ([]: all)"},
             {"keepdim", false, "keep reduced dims as size 1"}};
  d.dtypes = floats();
  d.check = [argmax, needs_nonempty](const op_call& c) {
    const tensor& x = c.inputs[0];
    auto rd = reduced_dims(c, x.dim(), argmax);
    std::int64_t r = 1;
    for (int dd : rd) r *= x.shape()[dd];
    if (needs_nonempty && r == 0 && x.numel() == 0 && reduced_shape(x.shape(), rd, false).product() != 0)
      fail(c,
           "cannot reduce over an empty dim: 'input' is " + x.shape().str() + " and the reduced extent is 0");
  };
  d.infer_outputs = [argmax](const op_call& c) {
    const tensor& x = c.inputs[0];
    auto rd = reduced_dims(c, x.dim(), argmax);
    return std::vector<tensor_spec>{
        {reduced_shape(x.shape(), rd, c.get_bool("keepdim")), argmax ? dtype::i64 : x.type()}};
  };
  d.key_names = {"outer", "r", "inner"};
  d.key = [argmax](const op_call& c) {
    const tensor& x = c.inputs[0];
    auto rd = reduced_dims(c, x.dim(), argmax);
    std::int64_t r = 1;
    for (int dd : rd) r *= x.shape()[dd];
    std::int64_t rest = r ? x.numel() / r : 0;
    bool inner_axis = !rd.empty() && rd.back() != x.dim() - 1;
    std::int64_t inner = 1;
    if (inner_axis)
      for (int dd = rd.back() + 1; dd < x.dim(); ++dd) inner *= x.shape()[dd];
    return shape_key{{"outer", inner ? rest / inner : 0}, {"r", r}, {"inner", inner}};
  };
  d.flops = [](const op_call& c) { return static_cast<double>(c.inputs[0].numel()); };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[0].nbytes() + c.outputs[0].nbytes());
  };
  d.reference = [name, argmax](host_call& h) {
    const auto& in = h.inputs[0];
    auto rd = reduced_dims(*h.call, in.shape.size(), argmax);
    host_reduce hr = host_canonical(in.shape, rd);
    auto& out = h.outputs[0];
    out.magnitude.assign(out.values.size(), 0.0);
    for (std::int64_t o = 0; o < static_cast<std::int64_t>(out.values.size()); ++o) {
      double acc = name == "max" ? -INFINITY : name == "min" ? INFINITY : 0.0, mag = 0;
      std::int64_t best = 0;
      bool nan = false;
      for (std::int64_t r = 0; r < hr.r; ++r) {
        double v = in.values[hr.order[o * hr.r + r]];
        mag += std::fabs(v);
        if (argmax) {
          double bv = in.values[hr.order[o * hr.r + best]];
          if (!std::isnan(bv) && (std::isnan(v) || v > bv)) best = r;
        } else if (std::isnan(v)) {
          nan = true;
        } else if (name == "max") {
          acc = std::max(acc, v);
        } else if (name == "min") {
          acc = std::min(acc, v);
        } else {
          acc += v;
        }
      }
      if (argmax) {
        out.values[o] = static_cast<double>(best);
      } else {
        if (name == "mean") {
          acc /= static_cast<double>(hr.r);
          mag /= static_cast<double>(std::max<std::int64_t>(hr.r, 1));
        }
        out.values[o] = nan ? NAN : acc;
        // f32 summation error bound: (R + 2) u sum|x| (sequential + tree, with margin).
        out.magnitude[o] = static_cast<double>(hr.r + 2) * mag;
      }
    }
  };
  d.tol = [name](const op_call& c, int) {
    if (name == "max" || name == "min" || name == "argmax") return tolerance{};
    return float_tolerance(c.outputs[0].type(), 1.0, 2 * eps_f32);
  };
  // Sums of small integers are exact in f32; a mean is not: its final division may be off by
  // 2.5 ulp on OpenCL C 1.2 devices (NVIDIA's driver, seen 2026-11-22), so it keeps its bound.
  d.exact_on_small_integers = name != "mean";
  d.config = row_schema();
  d.config.params.push_back(
      {"sg",
       1,
       {1, 4, 16, 64, 256},
       "argmax over at most 16 long rows: up to sg work-groups a row, each "
       "taking a slice, the last to finish picking among their winners; other reductions "
       "ignore it"});
  op_implementation impl;
  impl.name = "opencl.reduce";
  impl.kernel_file = "reduce.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [name, argmax](queue& q, const op_call& c, const kernel_config& cfg,
                                source_override src) -> event {
    const tensor& out = c.outputs[0];
    if (out.numel() == 0) return event{};
    auto rd = reduced_dims(c, c.inputs[0].dim(), argmax);
    reduce_view v = canonical(q, c.inputs[0], rd);
    const std::int64_t wg = cfg.at("wg"), vec = cfg.at("vec");
    std::string opts = "-DRED_" + name + " " + dtype_defines("A", v.x.type()) +
                       dtype_defines("O", out.type()) + "-DWG=" + std::to_string(wg) +
                       " -DVEC=" + std::to_string(vec);
    const bool rows = v.inner == 1;
    const bool per_item = rows && !argmax && cfg.at("variant") == 1;
    if (argmax && rows) {  // argmax runs the group kernels whatever the variant
      const std::int64_t groups = split_groups(v.outer, v.r, wg, vec, cfg.at("sg"));
      if (groups > 1) {
        kernel k = build_kernel(q.get_context(), "reduce.cl", src, opts, "reduce_rows_split");
        auto [part, counters] = split_workspace(q, static_cast<std::size_t>(2 * v.outer * groups),
                                                static_cast<std::size_t>(v.outer));
        tensor x = v.x, o = out;
        const std::int64_t x_off = x.offset(), o_off = o.offset();
        return q.submit([&](handler& h) {
          accessor<std::byte> X(x.storage(), h, read_only, x.byte_extent());
          accessor<std::byte> O(o.storage(), h, access_mode::write, o.byte_extent());
          accessor<float> P(part, h, read_write);
          accessor<int> C(counters, h, read_write);
          const std::size_t local = pow2_ok(wg);
          h.parallel_for(
              nd_range(range<1>(static_cast<std::size_t>(v.outer * groups) * local), range<1>(local)), k, v.r,
              static_cast<int>(groups), X, x_off, O, o_off, P, C);
        });
      }
    }
    kernel k = build_kernel(q.get_context(), "reduce.cl", src, opts,
                            per_item ? "reduce_row_per_item"
                            : rows   ? "reduce_rows"
                                     : "reduce_cols");
    return launch_over_view(q, k, v, out, wg,
                            per_item ? row_layout::per_item
                            : rows   ? row_layout::rows
                                     : row_layout::cols);
  };
  d.implementations = {impl};
  auto make = [name](queue& q, const sample_options& o, dims shape, std::vector<std::int64_t> rdims,
                     bool keep, bool strided) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = name;
    if (!rdims.empty()) c.set("dims", rdims);
    if (keep) c.set("keepdim", true);
    c.inputs = {strided ? random_strided(q, shape, o.type, rng, -2, 2, o.small_integers)
                        : random_tensor(q, shape, o.type, rng, -2, 2, o.small_integers)};
    allocate_outputs(q, op_registry::instance().get(name), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, {k.at("outer"), k.at("r"), k.get("inner", 1)}, {1}, false, false);
  };
  d.config_test_shapes = {"outer=1,r=1,inner=1", "outer=5,r=1031,inner=1", "outer=3,r=17,inner=9"};
  d.test_cases = [make, argmax](dtype) {
    auto tc = [make](dims s, std::vector<std::int64_t> rd, bool keep, bool strided) {
      return [=](queue& q, const sample_options& o) { return make(q, o, s, rd, keep, strided); };
    };
    std::vector<test_case> v = {
        {"empty_outer", tc({0, 7}, {1}, false, false)},  {"one", tc({1}, {}, false, false)},
        {"odd.last", tc({7, 1031}, {-1}, false, false)}, {"odd.middle", tc({5, 33, 9}, {1}, true, false)},
        {"all", tc({13, 77}, {}, false, false)},         {"large", tc({64, 16384}, {1}, false, false)},
        {"strided", tc({33, 65}, {1}, false, true)},     {"first_dim", tc({129, 31}, {0}, false, false)}};
    if (!argmax) {
      v.push_back({"multi.adjacent", tc({4, 6, 10, 3}, {1, 2}, true, false)});
      v.push_back({"multi.split", tc({4, 6, 10, 3}, {0, 2}, false, false)});
    }
    return v;
  };
  return d;
}

// ---- softmax ----------------------------------------------------------------------------------

op_descriptor make_softmax(bool log) {
  const std::string name = log ? "log_softmax" : "softmax";
  op_descriptor d;
  d.name = name;
  d.family = "softmax";
  d.summary =
      log ? "x - max - log(sum(exp(x - max))) over `dim`" : "exp(x - max) / sum(exp(x - max)) over `dim`";
  d.inputs = {{"input"}};
  d.outputs = {{"out"}};
  d.attrs = {{"dim", std::int64_t{-1}, "the softmax dim"}};
  d.dtypes = floats();
  d.check = [](const op_call& c) { normalize_dim(c, c.get_int("dim"), c.inputs[0].dim()); };
  d.infer_outputs = [](const op_call& c) {
    return std::vector<tensor_spec>{{c.inputs[0].shape(), c.inputs[0].type()}};
  };
  d.key_names = {"rows", "r", "inner"};
  d.key = [](const op_call& c) {
    const tensor& x = c.inputs[0];
    int dim = normalize_dim(c, c.get_int("dim"), x.dim());
    std::int64_t r = x.dim() ? x.shape()[dim] : 1, inner = 1;
    for (int k = dim + 1; k < x.dim(); ++k) inner *= x.shape()[k];
    return shape_key{{"rows", (r * inner) != 0 ? x.numel() / (r * inner) : 0}, {"r", r}, {"inner", inner}};
  };
  d.flops = [](const op_call& c) { return 4.0 * static_cast<double>(c.inputs[0].numel()); };
  d.bytes = [](const op_call& c) { return 2.0 * static_cast<double>(c.inputs[0].nbytes()); };
  d.reference = [log](host_call& h) {
    const auto& in = h.inputs[0];
    auto& out = h.outputs[0];
    if (in.values.empty()) return;
    int dim = in.shape.size() ? normalize_dim(*h.call, h.call->get_int("dim"), in.shape.size()) : 0;
    std::vector<int> rd;
    if (in.shape.size()) rd = {dim};
    host_reduce hr = host_canonical(in.shape, rd);
    out.magnitude.assign(out.values.size(), 0.0);
    const double R = static_cast<double>(hr.r);
    for (std::int64_t o = 0; o < hr.outer; ++o) {
      double m = -INFINITY;
      for (std::int64_t r = 0; r < hr.r; ++r) m = std::max(m, in.values[hr.order[o * hr.r + r]]);
      double s = 0;
      for (std::int64_t r = 0; r < hr.r; ++r) s += std::exp(in.values[hr.order[o * hr.r + r]] - m);
      for (std::int64_t r = 0; r < hr.r; ++r) {
        std::int64_t i = hr.order[o * hr.r + r];
        double x = in.values[i];
        double y = log ? x - m - std::log(s) : std::exp(x - m) / s;
        out.values[i] = y;
        // f32 error model: exp 3 ulp + |x - m| u, sum R u, divide / log a few ulp.
        out.magnitude[i] = log ? 2 * (std::fabs(x - m) + std::fabs(std::log(s)) + R + 8)
                               : 2 * std::fabs(y) * (R + 8 + std::fabs(x - m));
      }
    }
  };
  d.tol = [](const op_call& c, int) { return float_tolerance(c.outputs[0].type(), 1.0, eps_f32); };
  d.config = row_schema(true);
  d.config.params[2].help +=
      ". softmax: variants 1 and 2 give each work-item a block of consecutive rows, pipelined through "
      "local-memory scratch rows when they fit (one row per work-item otherwise)";
  op_implementation impl;
  impl.name = "opencl.softmax";
  impl.kernel_file = "softmax.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [log](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const tensor& out = c.outputs[0];
    if (out.numel() == 0) return event{};
    const tensor& in = c.inputs[0];
    std::vector<int> rd;
    if (in.dim()) rd = {normalize_dim(c, c.get_int("dim"), in.dim())};
    reduce_view v = canonical(q, in, rd);
    const std::int64_t wg = cfg.at("wg"), vec = cfg.at("vec"), variant = cfg.at("variant");
    const bool rows = v.inner == 1;
    const bool per_item = rows && variant >= 1;
    // The per-item variants pipeline blocks of rows (softmax_row_block in softmax.cl) when every
    // work-item of a group gets its f32 scratch rows in local memory (one for f32 input, two for
    // 16-bit): PoCL's 1 MiB takes R up to 64 Ki / 32 Ki at wg=4. Longer rows take the
    // one-row-per-item kernel.
    const std::uint64_t scratch_bytes = static_cast<std::uint64_t>(wg) * static_cast<std::uint64_t>(v.r) * 4 *
                                        (in.type() == dtype::f32 ? 1 : 2);
    const bool block = per_item && v.r > 0 && scratch_bytes <= q.get_device().local_mem_size();
    std::string opts = dtype_defines("A", in.type()) + "-DLOG=" + (log ? "1" : "0") +
                       " -DOUT_F32=" + (in.type() == dtype::f32 ? "1" : "0") + " -DWG=" + std::to_string(wg) +
                       " -DVEC=" + std::to_string(vec) + " -DNT=" + (variant == 2 ? "1" : "0");
    kernel k = build_kernel(q.get_context(), "softmax.cl", src, opts,
                            block      ? "softmax_row_block"
                            : per_item ? "softmax_row_per_item"
                            : rows     ? "softmax_rows"
                                       : "softmax_cols");
    if (!block)
      return launch_over_view(q, k, v, out, wg,
                              per_item ? row_layout::per_item
                              : rows   ? row_layout::rows
                                       : row_layout::cols);
    // Four work-groups per compute unit balance the load; the rest of the rows lengthen each
    // work-item's block, and a longer block hides more of the memory traffic.
    const std::int64_t items = std::min<std::int64_t>(
        v.outer, std::int64_t{4} * wg * std::max<std::uint32_t>(1, q.get_device().compute_units()));
    return launch_over_view(q, k, v, out, wg, row_layout::row_block,
                            local_memory{static_cast<std::size_t>(scratch_bytes)}, items);
  };
  d.implementations = {impl};
  auto make = [name](queue& q, const sample_options& o, dims shape, std::int64_t dim, bool strided) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = name;
    c.set("dim", dim);
    c.inputs = {strided ? random_strided(q, shape, o.type, rng, -6, 6, o.small_integers)
                        : random_tensor(q, shape, o.type, rng, -6, 6, o.small_integers)};
    allocate_outputs(q, op_registry::instance().get(name), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    std::int64_t inner = k.get("inner", 1);
    if (inner == 1) return make(q, o, {k.at("rows"), k.at("r")}, -1, false);
    return make(q, o, {k.at("rows"), k.at("r"), inner}, 1, false);
  };
  d.config_test_shapes = {"rows=1,r=1,inner=1", "rows=7,r=1031,inner=1", "rows=3,r=17,inner=5"};
  d.test_cases = [make](dtype) {
    auto tc = [make](dims s, std::int64_t dim, bool strided) {
      return [=](queue& q, const sample_options& o) { return make(q, o, s, dim, strided); };
    };
    return std::vector<test_case>{{"empty", tc({0, 16}, -1, false)},    {"one", tc({1}, 0, false)},
                                  {"odd", tc({7, 1031}, -1, false)},    {"large", tc({128, 8192}, -1, false)},
                                  {"middle", tc({3, 33, 7}, 1, false)}, {"strided", tc({33, 65}, -1, true)}};
  };
  return d;
}

}  // namespace

void register_reduce_ops(op_registry& r) {
  for (const char* n : {"sum", "mean", "max", "min", "argmax"}) r.add(make_reduce(n));
  r.add(make_softmax(false));
  r.add(make_softmax(true));
}

}  // namespace prism
