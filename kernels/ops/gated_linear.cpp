// SPDX-License-Identifier: Apache-2.0
// The decode step's GEMVs with their neighbours folded in (kernels/cl/gemv_gated.cl), for small
// M (any M is correct; prefill keeps the GEMM kernels, built for large M):
// - linear_silu_and_mul: silu_and_mul(linear(x, w)) for a fused gate|up weight [2F, K], without
//   the [M, 2F] intermediate or a second launch; with `norm_weight`, an RMSNorm of x first;
// - rms_norm_linear: linear(rms_norm(x, g), w, bias), the norm read in the GEMV's loads.
// With the residual add in the previous projection's epilogue (addmm into the residual), the
// norms between a decoder layer's GEMVs cost no launch of their own. Block-quantized weights run
// on linear's quantized kernels (gemm_quant.cl): rms_norm_linear on the CPU and GPU forms,
// linear_silu_and_mul on the CPU kernel's gate/up row pairs (int8 activations).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "kernels/op_support.hpp"
#include "kernels/ops/gemm_shared.hpp"

namespace prism {

using namespace kernels;

namespace {

// The two ops' operands, by role.
struct gemv_operands {
  bool gated = false;
  const tensor* x = nullptr;
  const tensor* w = nullptr;
  const tensor* g = nullptr;  // the RMSNorm weight, or null
  const tensor* b = nullptr;  // the bias (rms_norm_linear), or null
};

const tensor* optional_input(const op_call& c, std::size_t i) {
  return c.inputs.size() > i && c.inputs[i].defined() ? &c.inputs[i] : nullptr;
}

// linear_silu_and_mul: input, weight [, norm_weight]; rms_norm_linear: input, norm_weight,
// weight [, bias].
gemv_operands operands(const op_call& c) {
  if (c.op == "rms_norm_linear")
    return {false, &c.inputs[0], &c.inputs[2], &c.inputs[1], optional_input(c, 3)};
  return {true, &c.inputs[0], &c.inputs[1], optional_input(c, 2), nullptr};
}

std::int64_t out_features(const gemv_operands& o) {
  return o.gated ? o.w->size(0) / 2 : o.w->size(0);
}

void check_gemv(const op_call& c) {
  const gemv_operands o = operands(c);
  const tensor& x = *o.x;
  const tensor& w = *o.w;
  require_rank(c, x, "input", 2, 2);
  require_rank(c, w, "weight", 2, 2);
  require_dtype(c, x, "input", {dtype::f32, dtype::f16, dtype::bf16});
  if (is_quantized(w.type())) {
    const std::int64_t block = static_cast<std::int64_t>(dtype_block_elements(w.type()));
    if (w.strides()[1] != 1 || w.size(1) % block != 0 || w.offset() % block != 0 ||
        (w.size(0) > 1 && w.strides()[0] % block != 0))
      fail(c, fmt::format(
                  "'weight' {} must hold whole blocks of {} along k (dim 1): k contiguous, a multiple of "
                  "{}, starting on a block; got shape {} strides {} offset {}",
                  dtype_name(w.type()), block, block, w.shape().str(), w.strides().str(), w.offset()));
  } else {
    require_same_dtype(c, x, "input", w, "weight");
  }
  if (o.gated && w.size(0) % 2 != 0)
    fail(c, "'weight' has shape " + w.shape().str() + "; expected [2 F, K]: F gate rows, then F up rows");
  if (w.size(1) != x.size(1))
    fail(c, "'weight' has shape " + w.shape().str() + " but 'input' has " + x.shape().str() +
                "; the last dims (K) must match");
  if (o.g) {
    require_same_dtype(c, x, "input", *o.g, "norm_weight");
    if (o.g->dim() != 1 || o.g->size(0) != x.size(1))
      fail(c, "'norm_weight' has shape " + o.g->shape().str() + "; expected [" + std::to_string(x.size(1)) +
                  "] (the last dim of 'input' " + x.shape().str() + ")");
    const double eps = c.get_f64("eps");
    if (!(eps >= 0)) fail(c, "attribute 'eps' must be >= 0; got " + format_attr(eps));
  }
  if (o.b) {
    require_same_dtype(c, x, "input", *o.b, "bias");
    if (o.b->dim() != 1 || o.b->size(0) != w.size(0))
      fail(c, "'bias' has shape " + o.b->shape().str() + "; expected [" + std::to_string(w.size(0)) +
                  "] (weight's dim 0)");
  }
  if (x.size(1) > std::numeric_limits<int>::max() || w.size(0) > std::numeric_limits<int>::max() ||
      x.size(0) > std::numeric_limits<int>::max())
    fail(c, "sizes beyond 2^31 - 1 are not supported; got input " + x.shape().str() + ", weight " +
                w.shape().str());
}

// Double-precision reference: the norm (if any) in double, then the dots; magnitude from the
// absolute products for the tolerance.
void reference_gemv(host_call& h) {
  const op_call& c = *h.call;
  const bool gated = c.op != "rms_norm_linear";
  const auto& x = h.inputs[0];
  const auto& w = h.inputs[gated ? 1 : 2];
  const bool norm = gated ? h.inputs.size() > 2 && !h.inputs[2].values.empty() : true;
  const std::vector<double>* g = norm ? &h.inputs[gated ? 2 : 1].values : nullptr;
  const std::vector<double>* bias =
      !gated && h.inputs.size() > 3 && !h.inputs[3].values.empty() ? &h.inputs[3].values : nullptr;
  const double eps = norm ? c.get_f64("eps") : 0.0;
  const std::int64_t M = x.shape[0], K = x.shape[1], F = gated ? w.shape[0] / 2 : w.shape[0];
  // A block-quantized weight's kernels quantize the (normalized) activations to int8 per
  // 32-block: the error scale is then sum over blocks of max_block |a| * sum_block |w|, which
  // also bounds sum |a w| (linear's quantized reference, gemm_tolerance).
  const bool quant = is_quantized(c.inputs[gated ? 1 : 2].type());
  auto& out = h.outputs[0];
  out.magnitude.assign(out.values.size(), 0.0);
  std::vector<double> a(static_cast<std::size_t>(K));
  for (std::int64_t m = 0; m < M; ++m) {
    double ss = 0;
    for (std::int64_t k = 0; k < K; ++k) ss += x.values[m * K + k] * x.values[m * K + k];
    const double rs = norm ? 1.0 / std::sqrt(ss / static_cast<double>(K) + eps) : 1.0;
    for (std::int64_t k = 0; k < K; ++k) a[k] = x.values[m * K + k] * (g ? (*g)[k] * rs : 1.0);
    auto dot = [&](std::int64_t row, double& mag) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += a[k] * w.values[row * K + k];
      for (std::int64_t kb = 0; kb < K; kb += 32) {
        double amax = 0, wsum = 0, prod = 0;
        for (std::int64_t k = kb; k < std::min(kb + 32, K); ++k) {
          amax = std::max(amax, std::fabs(a[k]));
          wsum += std::fabs(w.values[row * K + k]);
          prod += std::fabs(a[k] * w.values[row * K + k]);
        }
        mag += quant ? amax * wsum : prod;
      }
      return s;
    };
    for (std::int64_t j = 0; j < F; ++j) {
      double mg = 0, mu = 0;
      const double gv = dot(j, mg);
      if (!gated) {
        const double bv = bias ? (*bias)[j] : 0.0;
        out.values[m * F + j] = gv + bv;
        out.magnitude[m * F + j] = mg + std::fabs(gv + bv);
        continue;
      }
      const double u = dot(F + j, mu);
      const double s = gv / (1.0 + std::exp(-gv));
      out.values[m * F + j] = s * u;
      // d(silu(g) u) = silu'(g) u dg + silu(g) du, |silu'| < 1.1; plus the result's own size.
      out.magnitude[m * F + j] = 1.1 * std::fabs(u) * mg + std::fabs(s) * mu + std::fabs(s * u);
    }
  }
}

config_schema gemv_schema() {
  config_schema s;
  s.params = {
      {"variant",
       0,
       {0, 1},
       "0: a work-group splits K (GPUs); 1: one work-item per nb output units, K swept vw-wide (CPUs)"},
      {"mb", 1, {1, 2, 4, 8, 16}, "variant 0: input rows per work-group (M <= mb is the case it is for)"},
      {"nb",
       2,
       {1, 2, 4, 8},
       "output units (gate/up row pairs, or rows) per work-group (variant 0) or item (1)"},
      {"wg", 128, {8, 16, 32, 64, 128, 256}, "work-group size (variant 0: the k split)"},
      {"vw", 8, {1, 2, 4, 8, 16}, "variant 1: vector width along K"},
      {"qa",
       1,
       {0, 1, 2},
       "block-quantized weight (linear_silu_and_mul: variant 1 only): 1 = int8 activations per 32-block, "
       "normalized as "
       "they are quantized (llama.cpp's CPU rule); 0 = float activations, the norm read in the rows "
       "kernel's loads (variant 0) or written as rows first (variant 1); 2 (CPU kernel, variant 1, M <= 8) = "
       "as 1 with no quantize launch: the first work-group to arrive normalizes and quantizes the rows "
       "while the others wait (the gemm family's qa=2)"},
      {"qp",
       0,
       {0, 2, 3},
       "rms_norm_linear, block-quantized weight, GPU rows kernel (variant 0) with qa=1: how a team walks "
       "its row: 0 = 4-byte slots (4 lanes a q4 block), 2 = a lane per block (gemm_q_blocks_i8), 3 = as 2 "
       "with no quantize launch: each work-group normalizes and quantizes the input row into local memory "
       "itself; its group is wg / 32 teams of nb weight rows (the other walks' shape is fixed)"},
      gemm_detail::quant_unroll_param("rms_norm_linear, block-quantized weight, qp=2 or 3"),
      {"qx",
       0,
       {0, 1},
       "rms_norm_linear, q4_0/q4_1 weight, CPU kernel (variant 1) with qa=1: 1 = the four-block walk through "
       "x86's AVX512-VNNI vpdpbusd, a function of its own called once a row; only on a CPU device whose "
       "host has AVX512-VNNI (the gemm family's qx)"}};
  s.rule = [](const kernel_config& k) -> std::optional<std::string> {
    if (k.at("variant") == 0 && (k.at("mb") * k.at("nb") * 2 + k.at("mb")) * k.at("wg") * 4 > 32768)
      return "(mb * nb * 2 + mb) * wg * 4 bytes of local memory must stay <= 32 KiB";
    return std::nullopt;
  };
  return s;
}

op_implementation gemv_implementation(const char* name) {
  op_implementation impl;
  impl.name = name;
  impl.kernel_file = "gemv_gated.cl";
  impl.supports = [](const device& dev, const op_call& c,
                     const kernel_config& cfg) -> std::optional<std::string> {
    const gemv_operands o = operands(c);
    if (is_quantized(o.w->type()))
      return fmt::format("weight is {} (block-quantized): {} serves it", dtype_name(o.w->type()),
                         o.gated ? "opencl.quant_gated" : "opencl.quant_norm");
    if (auto r = check_wg(dev, cfg.at("wg"))) return r;
    const std::int64_t rpu = o.gated ? 2 : 1;
    const auto local =
        static_cast<std::uint64_t>((cfg.at("mb") * cfg.at("nb") * rpu + cfg.at("mb")) * cfg.at("wg") * 4);
    if (cfg.at("variant") == 0 && local > dev.local_mem_size())
      return fmt::format("needs {} bytes of local memory; the device has {}", local, dev.local_mem_size());
    return std::nullopt;
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const gemv_operands o = operands(c);
    tensor x = o.x->contiguous(q);
    tensor w = o.w->contiguous(q);
    // Absent operands bind the input's buffer (never read: NORM / ROW_BIAS are 0).
    tensor g = o.g ? o.g->contiguous(q) : x;
    tensor b = o.b ? o.b->contiguous(q) : x;
    tensor out = c.outputs[0];
    const std::int64_t M = x.size(0), K = x.size(1), F = out_features(o);
    if (M == 0 || F == 0) return event{};
    const std::int64_t mb = std::min<std::int64_t>(cfg.at("mb"), M), nb = cfg.at("nb"), wg = cfg.at("wg");
    const bool rows = cfg.at("variant") == 1;
    // Variant 0 reads 16 bytes per load when the operands' rows start 16-byte aligned.
    const auto es = static_cast<std::int64_t>(dtype_size(x.type()));
    const bool vec16 = !rows && (K * es) % 16 == 0 && (x.offset() * es) % 16 == 0 &&
                       (w.offset() * es) % 16 == 0 && (!o.g || (g.offset() * es) % 16 == 0);
    const std::string opts = fmt::format(
        "{} -DHAS_BIAS=0 -DGATED={} -DNORM={} -DROW_BIAS={} -DMB={} -DNB={} -DWG={} "
        "-DVW={} -DVEC16={}",
        gemm_detail::dtype_define(x.type()), o.gated ? 1 : 0, o.g ? 1 : 0, o.b ? 1 : 0, mb, nb, wg,
        rows ? cfg.at("vw") : 1, vec16 ? 1 : 0);
    kernel k =
        build_kernel(q.get_context(), "gemv_gated.cl", src, opts, rows ? "gemv_decode_rows" : "gemv_decode");
    const auto uwg = static_cast<std::size_t>(wg);
    const nd_range r = rows ? nd_range(range<2>(round_up(static_cast<std::size_t>((F + nb - 1) / nb), uwg),
                                                static_cast<std::size_t>(M)),
                                       range<2>(uwg, std::size_t{1}))
                            : nd_range(range<2>(static_cast<std::size_t>((F + nb - 1) / nb * wg),
                                                static_cast<std::size_t>((M + mb - 1) / mb)),
                                       range<2>(uwg, std::size_t{1}));
    const float eps = o.g ? static_cast<float>(c.get_f64("eps")) : 0.0f;
    return q.submit([&](handler& h) {
      accessor<std::byte> X(x.storage(), h, read_only, x.byte_extent());
      accessor<std::byte> W(w.storage(), h, read_only, w.byte_extent());
      accessor<std::byte> G(g.storage(), h, read_only, g.byte_extent());
      accessor<std::byte> B(b.storage(), h, read_only, b.byte_extent());
      accessor<std::byte> O(out.storage(), h, write_only, out.byte_extent());
      h.parallel_for(r, k, static_cast<int>(M), static_cast<int>(F), static_cast<int>(K), X, x.offset(),
                     static_cast<int>(x.strides()[0]), W, w.offset(), static_cast<int>(w.strides()[0]), O,
                     out.offset(), static_cast<int>(out.strides()[0]), G, g.offset(), eps, B, b.offset());
    });
  };
  return impl;
}

// rms_norm_linear with a block-quantized weight: linear's quantized GEMV on int8 activations, the
// norm applied while quantize_rows_q8 quantizes them (kernels/ops/matmul.cpp). The config's
// variant picks the kernel: 1 (CPUs) one weight row per work-item, 0 (GPUs) the rows kernel.
// linear_silu_and_mul (`gated`): the CPU kernel only, each work-item the gate row and the up row
// of one output (GPUs run a quantized MLP as post_attention, or as rms_norm_linear then
// silu_and_mul).
op_implementation quant_implementation(bool gated) {
  op_implementation impl;
  impl.name = gated ? "opencl.quant_gated" : "opencl.quant_norm";
  impl.kernel_file = "gemm_quant.cl";
  impl.supports = [gated](const device& dev, const op_call& c,
                          const kernel_config& cfg) -> std::optional<std::string> {
    const gemv_operands o = operands(c);
    if (!is_quantized(o.w->type()))
      return fmt::format("weight is not block-quantized (q8_0, q4_0, q4_1): {} serves it",
                         gated ? "opencl.gemv_silu_and_mul" : "opencl.gemv_rms_norm");
    if (gated && cfg.at("variant") != 1)
      return std::string(
          "a block-quantized gate|up weight runs on the CPU kernel (variant=1); GPUs run a quantized MLP as "
          "post_attention, or as rms_norm_linear then silu_and_mul");
    if (gated && cfg.at("qa") == 0 && cfg.at("nb") != 1)
      return fmt::format(
          "the CPU kernel on float activations (qa=0) walks one gate row and its up row together a "
          "work-item: nb=1, got nb={} (nb gate/up pairs a work-item need int8 activations, qa=1 or 2)",
          cfg.at("nb"));
    if (cfg.at("qx") == 1) {
      if (cfg.at("variant") != 1)
        return std::string("qx=1 (the AVX512-VNNI walk) is the CPU kernel's: it needs variant=1");
      if (auto r = gemm_detail::x86_dot_refusal(dev, o.w->type(), cfg.at("qa") >= 1)) return r;
    }
    if (cfg.at("qa") == 2) {
      if (cfg.at("variant") != 1)
        return std::string("qa=2 (no quantize launch) is the CPU kernel's: it needs variant=1");
      if (o.x->size(0) > gemm_detail::kFusedQuantizeRows)
        return fmt::format(
            "qa=2 has one work-group normalize and quantize every input row while the others wait: M <= {}, "
            "got M = {} (qa=1 quantizes them in a launch of their own)",
            gemm_detail::kFusedQuantizeRows, o.x->size(0));
    }
    if (cfg.at("variant") == 0 && cfg.at("qa") == 1 && cfg.at("qp") == 3) {
      // gemm_q_blocks_i8 with QL_K (enqueue_quant_norm_linear's group): wg / 32 teams of nb weight
      // rows, the row's int8 copy in local memory.
      if (cfg.at("wg") < 32)
        return fmt::format(
            "qp=3 runs 32-lane teams, wg / 32 a group: wg={} is below 32 (valid: 32, 64, 128, 256)",
            cfg.at("wg"));
      if (auto r = check_wg(dev, cfg.at("wg"))) return r;
      const std::uint64_t local =
          gemm_detail::quant_local_walk_bytes(cfg.at("nb"), cfg.at("wg") / 32, o.x->size(1));
      if (local > dev.local_mem_size())
        return fmt::format("qp=3 holds the quantized input row (K = {}) in local memory: {} B > device {} B",
                           o.x->size(1), local, dev.local_mem_size());
      return std::nullopt;
    }
    const auto group = static_cast<std::uint64_t>(gemm_detail::quantize_norm_group(o.x->size(1)));
    if (o.g && cfg.at("qa") == 1 && group > dev.max_work_group_size())
      return fmt::format(
          "the norm takes a row's {} blocks in one work-group of {} items; the device allows {}",
          o.x->size(1) / 32, group, dev.max_work_group_size());
    return std::nullopt;
  };
  impl.enqueue = [gated](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const gemv_operands o = operands(c);
    if (o.x->size(0) == 0 || o.w->size(0) == 0) return event{};
    const std::optional<gemm_detail::quant_norm> norm =
        o.g ? std::optional(gemm_detail::quant_norm{*o.g, c.get_f64("eps")}) : std::nullopt;
    const gemm_detail::quant_walk walk{static_cast<int>(cfg.at("qp")),
                                       cfg.at("nb"),
                                       cfg.at("wg"),
                                       cfg.at("qu"),
                                       cfg.at("qx") == 1,
                                       cfg.at("qa") == 2,
                                       gated};
    return gemm_detail::enqueue_quant_norm_linear(q, *o.x, norm ? &*norm : nullptr, *o.w,
                                                  o.b ? *o.b : tensor{}, c.outputs[0], cfg.at("variant") == 1,
                                                  cfg.at("qa") >= 1, src, walk);
  };
  return impl;
}

tolerance gemv_tolerance(const op_call& c, int) {
  const double k = static_cast<double>(c.inputs[0].size(1));
  const double f32 = std::ldexp(1.0, -23) * (8.0 + std::sqrt(k));
  // Int8 activations (block-quantized weight): each block's rounding, at most absmax / 254 * sum
  // |w| (gemm_tolerance's bound for linear's quantized kernels).
  if (is_quantized(operands(c).w->type()))
    return tolerance{1.0, 0.0, 0.0, f32 + (1.0 + std::ldexp(1.0, -10)) / 254.0};
  return tolerance{1.0, 0.0, 0.0, f32};
}

// Random operands: input and weight in [-1, 1]; the norm weight in [0.5, 1.5] (a layer norm's
// gain), the bias in [-1, 1].
op_call make_gemv_call(queue& q, const char* op, const sample_options& o, std::int64_t M, std::int64_t F,
                       std::int64_t K, bool norm, bool bias, dtype weight_type = dtype::f32) {
  std::mt19937_64 rng(o.seed);
  const dtype t = is_floating(o.type) ? o.type : o.act;  // a block-quantized o.type: activations o.act
  op_call c;
  c.op = op;
  const bool gated = c.op == "linear_silu_and_mul";
  tensor x = random_tensor(q, {M, K}, t, rng, -1, 1, false);
  // A block-quantized weight: f32 values quantized (tensor::from_floats rounds them to blocks).
  const std::int64_t rows = gated ? 2 * F : F;
  tensor w = is_quantized(weight_type) ? gemm_detail::random_tensor(q, {rows, K}, weight_type, o, 7)
                                       : random_tensor(q, {rows, K}, t, rng, -1, 1, false);
  tensor g = norm ? random_tensor(q, {K}, t, rng, 0.5, 1.5, false) : tensor{};
  if (gated)
    c.inputs = {x, w, g};
  else
    c.inputs = {x, g, w, bias ? random_tensor(q, {F}, t, rng, -1, 1, false) : tensor{}};
  if (norm) c.attrs["eps"] = 1e-6;
  allocate_outputs(q, op_registry::instance().get(op), c);
  return c;
}

op_descriptor make_gemv_op(bool gated) {
  op_descriptor d;
  const char* name = gated ? "linear_silu_and_mul" : "rms_norm_linear";
  d.name = name;
  d.family = "gated_gemv";
  if (gated) {
    d.summary =
        "silu(x' w[:F]^T) * (x' w[F:]^T) for a fused gate|up weight [2F, K], x' = x or rms_norm(x, "
        "norm_weight): "
        "SwiGLU's first half in one kernel (for small M)";
    d.inputs = {{"input"}, {"weight"}, {"norm_weight", true}};
    d.attrs = {{"eps", 1e-6, "added to the mean square (with norm_weight)"}};
  } else {
    d.summary =
        "rms_norm(x, norm_weight) w^T (+ bias) in one kernel: the norm read in the GEMV's loads (small M)";
    d.inputs = {{"input"}, {"norm_weight"}, {"weight"}, {"bias", true}};
    d.attrs = {{"eps", 1e-6, "added to the mean square"}};
  }
  d.outputs = {{"out"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = check_gemv;
  d.infer_outputs = [](const op_call& c) {
    const gemv_operands o = operands(c);
    return std::vector<tensor_spec>{{{o.x->size(0), out_features(o)}, o.x->type()}};
  };
  d.key_names = {"m", "n", "k"};
  d.key = [](const op_call& c) {
    const gemv_operands o = operands(c);
    return shape_key{{"m", o.x->size(0)}, {"n", out_features(o)}, {"k", o.x->size(1)}};
  };
  d.flops = [](const op_call& c) {
    const gemv_operands o = operands(c);
    return 2.0 * static_cast<double>(o.x->size(0)) * static_cast<double>(o.w->numel());
  };
  d.bytes = [](const op_call& c) {
    double b = static_cast<double>(c.outputs[0].nbytes());
    for (const auto& t : c.inputs)
      if (t.defined()) b += static_cast<double>(t.nbytes());
    return b;
  };
  d.reference = reference_gemv;
  d.tol = gemv_tolerance;
  d.config = gemv_schema();
  d.implementations = {gemv_implementation(gated ? "opencl.gemv_silu_and_mul" : "opencl.gemv_rms_norm")};
  d.implementations.push_back(quant_implementation(gated));
  // Tuning samples carry the norm: that is the decode step's call. A block-quantized dtype names
  // the weight's type, with o.act's activations (f32 unless the entry's `act` says), as linear's
  // samples do (a shape set's q4_0 entry then tunes the call that decode makes, under its own
  // database key).
  d.sample = [name](queue& q, const shape_key& k, const sample_options& o) {
    if (!is_quantized(o.type))
      return make_gemv_call(q, name, o, k.at("m"), k.at("n"), k.at("k"), true, false);
    gemm_detail::sample_activation_type(name, o, k.at("k"));  // refuses a k of partial blocks, bad act
    return make_gemv_call(q, name, o, k.at("m"), k.at("n"), k.at("k"), true, false, o.type);
  };
  d.config_test_shapes = {"m=1,n=3,k=5", "m=3,n=40,k=300"};
  d.test_cases = [name, gated](dtype) {
    auto tc = [name](std::int64_t M, std::int64_t F, std::int64_t K, bool norm, bool bias) {
      return
          [=](queue& q, const sample_options& o) { return make_gemv_call(q, name, o, M, F, K, norm, bias); };
    };
    std::vector<test_case> cases{{"empty", tc(0, 8, 16, true, false)},
                                 {"one", tc(1, 1, 1, true, false)},
                                 {"decode_norm", tc(1, 688, 256, true, false)},
                                 {"odd_norm", tc(5, 37, 301, true, false)},
                                 {"large_m_norm", tc(33, 64, 128, true, false)}};
    if (gated) {
      cases.push_back({"decode", tc(1, 688, 256, false, false)});
      cases.push_back({"odd", tc(5, 37, 301, false, false)});
    } else {
      cases.push_back({"decode_bias", tc(1, 96, 264, true, true)});
      // Block-quantized weights: the norm rides the int8 activation quantization.
      auto qc = [name](std::int64_t M, std::int64_t F, std::int64_t K, bool bias, dtype wt) {
        return [=](queue& q, const sample_options& o) {
          return make_gemv_call(q, name, o, M, F, K, true, bias, wt);
        };
      };
      cases.push_back({"decode_q4_0", qc(1, 40, 96, false, dtype::q4_0)});
      cases.push_back({"q8_0", qc(3, 33, 64, false, dtype::q8_0)});
      cases.push_back({"decode_q4_1_bias", qc(1, 24, 576, true, dtype::q4_1)});
    }
    return cases;
  };
  return d;
}

}  // namespace

void register_gated_linear_ops(op_registry& r) {
  r.add(make_gemv_op(true));
  r.add(make_gemv_op(false));
}

}  // namespace prism
