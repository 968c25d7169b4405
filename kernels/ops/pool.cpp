// SPDX-License-Identifier: Apache-2.0
// masked_mean: the mean over tokens of [batch, tokens, dim] under a [batch, tokens] mask (bool,
// integer or float weights, as Hugging Face's attention_mask), sentence-embedding pooling in one
// dispatch. Kernel: kernels/cl/pool.cl (strided operands, no copies).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

constexpr const char* op_name = "masked_mean";

bool has_mask(const op_call& c) {
  return c.inputs.size() > 1 && c.inputs[1].defined();
}

void check(const op_call& c) {
  const tensor& x = c.inputs[0];
  if (x.dim() != 3) fail(c, "'input' must be 3-D [batch, tokens, dim], got shape " + x.shape().str());
  if (has_mask(c)) {
    const tensor& m = c.inputs[1];
    if (m.type() != dtype::boolean && m.type() != dtype::i32 && m.type() != dtype::i64 &&
        m.type() != x.type())
      fail(c,
           fmt::format("'mask' has dtype {}; valid: bool, i32, i64 (nonzero = keep) or the input's dtype {} "
                       "(weights)",
                       dtype_name(m.type()), dtype_name(x.type())));
    if (m.dim() != 2 || m.size(0) != x.size(0) || m.size(1) != x.size(1))
      fail(c, fmt::format("'mask' has shape {}; expected [{}, {}] ([batch, tokens] of 'input' {})",
                          m.shape().str(), x.size(0), x.size(1), x.shape().str()));
  }
  const double eps = c.get_f64("eps");
  if (!(eps > 0)) fail(c, "attribute 'eps' must be > 0; got " + format_attr(eps));
}

void reference(host_call& h) {
  const op_call& c = *h.call;
  const host_tensor& x = h.inputs[0];
  const host_tensor* m = h.inputs.size() > 1 && h.inputs[1].defined ? &h.inputs[1] : nullptr;
  const std::int64_t B = x.shape[0], T = x.shape[1], D = x.shape[2];
  const double eps = c.get_f64("eps");
  host_tensor& out = h.outputs[0];
  out.magnitude.assign(out.values.size(), 0.0);
  for (std::int64_t b = 0; b < B; ++b) {
    double count = 0;
    for (std::int64_t t = 0; t < T; ++t) count += m ? m->values[b * T + t] : 1.0;
    const double denom = std::max(count, eps);
    for (std::int64_t d = 0; d < D; ++d) {
      double acc = 0, mag = 0;
      for (std::int64_t t = 0; t < T; ++t) {
        const double w = m ? m->values[b * T + t] : 1.0;
        if (w == 0) continue;
        acc += w * x.values[(b * T + t) * D + d];
        mag += std::fabs(w * x.values[(b * T + t) * D + d]);
      }
      out.values[b * D + d] = acc / denom;
      // Sequential f32 sums of T terms, then one division.
      out.magnitude[b * D + d] = (static_cast<double>(T) + 2) * mag / denom;
    }
  }
}

op_call make(queue& q, const sample_options& o, std::int64_t b, std::int64_t t, std::int64_t d, int mask,
             bool strided) {
  std::mt19937_64 rng(o.seed);
  op_call c;
  c.op = op_name;
  const dims shape{b, t, d};
  tensor x = strided ? random_tensor(q, {b, d, t}, o.type, rng, -3, 3, o.small_integers).transpose(1, 2)
                     : random_tensor(q, shape, o.type, rng, -3, 3, o.small_integers);
  tensor m;
  if (mask != 0) {
    // Padding at the end of each sequence (as a tokenizer pads), one row fully masked.
    std::vector<float> bits(static_cast<std::size_t>(b * t));
    for (std::int64_t i = 0; i < b; ++i) {
      const std::int64_t len = i == 1 ? 0 : t - static_cast<std::int64_t>(rng() % (t / 2 + 1));
      for (std::int64_t j = 0; j < t; ++j) bits[i * t + j] = j < len ? 1.0f : 0.0f;
    }
    const dtype mt = mask == 1 ? dtype::boolean : mask == 2 ? dtype::i64 : o.type;
    if (mask == 3)  // weights
      for (auto& v : bits) v *= 0.5f + static_cast<float>(rng() % 4) * 0.25f;
    m = tensor::from_floats(q, bits, {b, t}, mt);
  }
  c.inputs = {x, m};
  allocate_outputs(q, op_registry::instance().get(op_name), c);
  return c;
}

}  // namespace

void register_pool_ops(op_registry& r) {
  op_descriptor d;
  d.name = op_name;
  d.family = "pool";
  d.summary = "out[b, :] = sum_t mask[b, t] * input[b, t, :] / max(sum_t mask[b, t], eps) (mean pooling)";
  d.inputs = {{"input"}, {"mask", true}};
  d.outputs = {{"out"}};
  d.attrs = {{"eps", 1e-9, "lower bound of the mask sum (an all-masked row gives 0)"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = check;
  d.infer_outputs = [](const op_call& c) {
    const tensor& x = c.inputs[0];
    return std::vector<tensor_spec>{{{x.size(0), x.size(2)}, x.type()}};
  };
  d.key_names = {"b", "t", "d", "mask"};
  d.key = [](const op_call& c) {
    const tensor& x = c.inputs[0];
    const dtype mt = has_mask(c) ? c.inputs[1].type() : x.type();
    const std::int64_t mk = !has_mask(c) ? 0 : mt == dtype::boolean ? 1 : is_floating(mt) ? 3 : 2;
    return shape_key{{"b", x.size(0)}, {"t", x.size(1)}, {"d", x.size(2)}, {"mask", mk}};
  };
  d.flops = [](const op_call& c) { return 2.0 * static_cast<double>(c.inputs[0].numel()); };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[0].nbytes() + c.outputs[0].nbytes()) +
           (has_mask(c) ? static_cast<double>(c.inputs[1].nbytes()) : 0.0);
  };
  d.reference = reference;
  d.tol = [](const op_call& c, int) { return float_tolerance(c.outputs[0].type(), 1.0, eps_f32); };
  d.config.params = {{"wg", 64, {16, 32, 64, 128, 256}, "work-group size (one work-item per output)"}};
  op_implementation impl;
  impl.name = "opencl.masked_mean";
  impl.kernel_file = "pool.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const tensor& out = c.outputs[0];
    if (out.numel() == 0) return event{};
    const tensor& x = c.inputs[0];
    const bool mask = has_mask(c);
    const tensor& m = mask ? c.inputs[1] : x;  // bound, never read without HAS_MASK
    const std::int64_t wg = cfg.at("wg");
    const std::string opts =
        dtype_defines("A", x.type()) + dtype_defines("M", m.type()) + " -DHAS_MASK=" + (mask ? "1" : "0");
    kernel k = build_kernel(q.get_context(), "pool.cl", src, opts, "masked_mean");
    const std::int64_t B = x.size(0), T = x.size(1), D = x.size(2);
    const std::int64_t smb = mask ? m.strides()[0] : 0, smt = mask ? m.strides()[1] : 0;
    const float eps = static_cast<float>(c.get_f64("eps"));
    const std::size_t uwg = static_cast<std::size_t>(wg);
    nd_range r(range<1>(round_up(static_cast<std::size_t>(B * D), uwg)), range<1>(uwg));
    tensor xs = x, ms = m, o = out;
    return q.submit([&](handler& h) {
      accessor<std::byte> X(xs.storage(), h, read_only, xs.byte_extent());
      accessor<std::byte> M(ms.storage(), h, read_only, ms.byte_extent());
      accessor<std::byte> O(o.storage(), h, access_mode::write, o.byte_extent());
      h.parallel_for(r, k, B, T, D, X, x.offset(), x.strides()[0], x.strides()[1], x.strides()[2], M,
                     m.offset(), smb, smt, O, o.offset(), eps);
    });
  };
  d.implementations = {impl};
  d.sample = [](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, k.at("b"), k.at("t"), k.at("d"), static_cast<int>(k.get("mask", 1)), false);
  };
  d.config_test_shapes = {"b=3,t=5,d=33,mask=1"};
  d.test_cases = [](dtype) {
    auto tc = [](std::int64_t b, std::int64_t t, std::int64_t dd, int mask, bool strided) {
      return [=](queue& q, const sample_options& o) { return make(q, o, b, t, dd, mask, strided); };
    };
    return std::vector<test_case>{{"empty", tc(0, 4, 8, 1, false)},
                                  {"one", tc(1, 1, 1, 0, false)},
                                  {"odd", tc(3, 7, 65, 1, false)},
                                  {"int_mask", tc(2, 9, 16, 2, false)},
                                  {"weights", tc(3, 6, 20, 3, true)}};
  };
  r.add(std::move(d));
}

}  // namespace prism
