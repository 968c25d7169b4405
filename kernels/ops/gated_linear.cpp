// SPDX-License-Identifier: Apache-2.0
// linear_silu_and_mul: silu_and_mul(linear(x, w)) for a fused gate|up weight [2F, K], in one
// kernel (kernels/cl/gemv_gated.cl): the decode step's "gate/up -> SiLU * mul" without the
// [M, 2F] intermediate or a second launch. A GEMV: meant for decode's small M (any M is correct;
// prefill keeps linear + silu_and_mul, whose GEMM kernels are built for large M).
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

std::int64_t dtype_code(dtype t) {
  return t == dtype::f32 ? 0 : t == dtype::f16 ? 1 : 2;
}

op_descriptor make_linear_silu_and_mul() {
  op_descriptor d;
  d.name = "linear_silu_and_mul";
  d.family = "gated_gemv";
  d.summary =
      "silu(x w[:F]^T) * (x w[F:]^T) for a fused gate|up weight [2F, K]: SwiGLU's first half in one kernel "
      "(for small M)";
  d.inputs = {{"input"}, {"weight"}};
  d.outputs = {{"out"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = [](const op_call& c) {
    const tensor& x = c.inputs[0];
    const tensor& w = c.inputs[1];
    require_rank(c, x, "input", 2, 2);
    require_rank(c, w, "weight", 2, 2);
    require_dtype(c, x, "input", {dtype::f32, dtype::f16, dtype::bf16});
    require_same_dtype(c, x, "input", w, "weight");
    if (w.size(0) % 2 != 0)
      fail(c, "'weight' has shape " + w.shape().str() + "; expected [2 F, K]: F gate rows, then F up rows");
    if (w.size(1) != x.size(1))
      fail(c, "'weight' has shape " + w.shape().str() + " but 'input' has " + x.shape().str() +
                  "; the last dims (K) must match");
    if (x.size(1) > std::numeric_limits<int>::max() || w.size(0) > std::numeric_limits<int>::max() ||
        x.size(0) > std::numeric_limits<int>::max())
      fail(c, "sizes beyond 2^31 - 1 are not supported; got input " + x.shape().str() + ", weight " +
                  w.shape().str());
  };
  d.infer_outputs = [](const op_call& c) {
    return std::vector<tensor_spec>{{{c.inputs[0].size(0), c.inputs[1].size(0) / 2}, c.inputs[0].type()}};
  };
  d.key_names = {"m", "n", "k"};
  d.key = [](const op_call& c) {
    return shape_key{{"m", c.inputs[0].size(0)}, {"n", c.inputs[1].size(0) / 2}, {"k", c.inputs[0].size(1)}};
  };
  d.flops = [](const op_call& c) {
    return 2.0 * static_cast<double>(c.inputs[0].size(0)) * static_cast<double>(c.inputs[1].numel());
  };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[0].nbytes() + c.inputs[1].nbytes() + c.outputs[0].nbytes());
  };
  d.reference = [](host_call& h) {
    const auto& x = h.inputs[0];
    const auto& w = h.inputs[1];
    const std::int64_t M = x.shape[0], K = x.shape[1], F = w.shape[0] / 2;
    auto& out = h.outputs[0];
    out.magnitude.assign(out.values.size(), 0.0);
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t j = 0; j < F; ++j) {
        double g = 0, u = 0, mg = 0, mu = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const double a = x.values[m * K + k];
          g += a * w.values[j * K + k];
          u += a * w.values[(F + j) * K + k];
          mg += std::fabs(a * w.values[j * K + k]);
          mu += std::fabs(a * w.values[(F + j) * K + k]);
        }
        const double s = g / (1.0 + std::exp(-g));
        out.values[m * F + j] = s * u;
        // d(silu(g) u) = silu'(g) u dg + silu(g) du, |silu'| < 1.1; plus the result's own size.
        out.magnitude[m * F + j] = 1.1 * std::fabs(u) * mg + std::fabs(s) * mu + std::fabs(s * u);
      }
  };
  d.tol = [](const op_call& c, int) {
    const double k = static_cast<double>(c.inputs[0].size(1));
    return tolerance{1.0, 0.0, 0.0, std::ldexp(1.0, -23) * (8.0 + std::sqrt(k))};
  };
  config_schema s;
  s.params = {
      {"variant",
       0,
       {0, 1},
       "0: a work-group splits K (GPUs); 1: one work-item per nb pairs, K swept vw-wide (CPUs)"},
      {"mb", 1, {1, 2, 4, 8, 16}, "variant 0: input rows per work-group (M <= mb is the case it is for)"},
      {"nb", 2, {1, 2, 4, 8}, "output pairs (gate and up rows) per work-group (variant 0) or work-item (1)"},
      {"wg", 128, {8, 16, 32, 64, 128, 256}, "work-group size (variant 0: the k split)"},
      {"vw", 8, {1, 2, 4, 8, 16}, "variant 1: vector width along K"}};
  s.rule = [](const kernel_config& k) -> std::optional<std::string> {
    if (k.at("variant") == 0 && k.at("mb") * k.at("nb") * 2 * k.at("wg") * 4 > 32768)
      return "mb * nb * 2 * wg * 4 bytes of local memory must stay <= 32 KiB";
    return std::nullopt;
  };
  d.config = s;
  op_implementation impl;
  impl.name = "opencl.gemv_silu_and_mul";
  impl.kernel_file = "gemv_gated.cl";
  impl.supports = [](const device& dev, const op_call&,
                     const kernel_config& cfg) -> std::optional<std::string> {
    if (auto r = check_wg(dev, cfg.at("wg"))) return r;
    const auto local = static_cast<std::uint64_t>(cfg.at("mb") * cfg.at("nb") * 2 * cfg.at("wg") * 4);
    if (cfg.at("variant") == 0 && local > dev.local_mem_size())
      return fmt::format("needs {} bytes of local memory; the device has {}", local, dev.local_mem_size());
    return std::nullopt;
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    tensor x = c.inputs[0].contiguous(q);
    tensor w = c.inputs[1].contiguous(q);
    tensor out = c.outputs[0];
    const std::int64_t M = x.size(0), K = x.size(1), F = w.size(0) / 2;
    if (M == 0 || F == 0) return event{};
    const std::int64_t mb = std::min<std::int64_t>(cfg.at("mb"), M), nb = cfg.at("nb"), wg = cfg.at("wg");
    const bool rows = cfg.at("variant") == 1;
    // Variant 0 reads 16 bytes per load when both operands' rows start 16-byte aligned.
    const auto es = static_cast<std::int64_t>(dtype_size(x.type()));
    const bool vec16 = !rows && (K * es) % 16 == 0 && (x.offset() * es) % 16 == 0 && (w.offset() * es) % 16 == 0;
    const std::string opts = fmt::format("-DPRISM_DTYPE={} -DHAS_BIAS=0 -DMB={} -DNB={} -DWG={} -DVW={} -DVEC16={}",
                                         dtype_code(x.type()), mb, nb, wg, rows ? cfg.at("vw") : 1, vec16 ? 1 : 0);
    kernel k = build_kernel(q.get_context(), "gemv_gated.cl", src, opts,
                            rows ? "gemv_silu_and_mul_rows" : "gemv_silu_and_mul");
    const auto uwg = static_cast<std::size_t>(wg);
    const nd_range r = rows ? nd_range(range<2>(round_up(static_cast<std::size_t>((F + nb - 1) / nb), uwg),
                                                static_cast<std::size_t>(M)),
                                       range<2>(uwg, std::size_t{1}))
                            : nd_range(range<2>(static_cast<std::size_t>((F + nb - 1) / nb * wg),
                                                static_cast<std::size_t>((M + mb - 1) / mb)),
                                       range<2>(uwg, std::size_t{1}));
    return q.submit([&](handler& h) {
      accessor<std::byte> X(x.storage(), h, read_only, x.byte_extent());
      accessor<std::byte> W(w.storage(), h, read_only, w.byte_extent());
      accessor<std::byte> O(out.storage(), h, write_only, out.byte_extent());
      h.parallel_for(r, k, static_cast<int>(M), static_cast<int>(F), static_cast<int>(K), X, x.offset(),
                     static_cast<int>(x.strides()[0]), W, w.offset(), static_cast<int>(w.strides()[0]), O,
                     out.offset(), static_cast<int>(out.strides()[0]));
    });
  };
  d.implementations = {impl};
  auto make = [](queue& q, const sample_options& o, std::int64_t M, std::int64_t F, std::int64_t K) {
    std::mt19937_64 rng(o.seed);
    const dtype t = is_floating(o.type) ? o.type : dtype::f32;
    op_call c;
    c.op = "linear_silu_and_mul";
    c.inputs = {random_tensor(q, {M, K}, t, rng, -1, 1, false),
                random_tensor(q, {2 * F, K}, t, rng, -1, 1, false)};
    allocate_outputs(q, op_registry::instance().get("linear_silu_and_mul"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, k.at("m"), k.at("n"), k.at("k"));
  };
  d.config_test_shapes = {"m=1,n=3,k=5", "m=3,n=40,k=300"};
  d.test_cases = [make](dtype) {
    auto tc = [make](std::int64_t M, std::int64_t F, std::int64_t K) {
      return [=](queue& q, const sample_options& o) { return make(q, o, M, F, K); };
    };
    return std::vector<test_case>{{"empty", tc(0, 8, 16)},
                                  {"one", tc(1, 1, 1)},
                                  {"decode", tc(1, 688, 256)},
                                  {"odd", tc(5, 37, 301)},
                                  {"large_m", tc(33, 64, 128)}};
  };
  return d;
}

}  // namespace

void register_gated_linear_ops(op_registry& r) {
  r.add(make_linear_silu_and_mul());
}

}  // namespace prism
