// SPDX-License-Identifier: Apache-2.0
// Norms over the last dim: layer_norm (weight, bias, eps), rms_norm (weight, eps), the fused
// fused_add_rms_norm and fused_add_layer_norm (residual <- input + residual in place, out <- the
// norm of that sum: a pre- or post-norm block's residual step in one pass) and l2_normalize
// (x / max(||x||, eps), torch.nn.functional.normalize). A strided input is copied to contiguous
// rows first; the in-place residual must be contiguous.
#include <cmath>

#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

std::vector<dtype> floats() {
  return {dtype::f32, dtype::f16, dtype::bf16};
}

enum class norm_kind { layer, rms, fused, fused_layer, l2 };

bool centred(norm_kind k) {  // subtracts the mean and takes a bias
  return k == norm_kind::layer || k == norm_kind::fused_layer;
}
bool adds_residual(norm_kind k) {
  return k == norm_kind::fused || k == norm_kind::fused_layer;
}
const char* norm_name(norm_kind k) {
  switch (k) {
    case norm_kind::layer:
      return "layer_norm";
    case norm_kind::rms:
      return "rms_norm";
    case norm_kind::fused:
      return "fused_add_rms_norm";
    case norm_kind::fused_layer:
      return "fused_add_layer_norm";
    case norm_kind::l2:
      return "l2_normalize";
  }
  return "?";
}

std::int64_t last_dim(const tensor& t) {
  return t.dim() ? t.size(-1) : 1;
}

void check_param(const op_call& c, int idx, const std::string& name) {
  if (static_cast<int>(c.inputs.size()) <= idx || !c.inputs[idx].defined()) return;
  const tensor& p = c.inputs[idx];
  require_dtype(c, p, name, {dtype::f32, dtype::f16, dtype::bf16});
  if (p.dim() != 1 || p.size(0) != last_dim(c.inputs[0]))
    fail(c, "'" + name + "' has shape " + p.shape().str() + "; expected [" +
                std::to_string(last_dim(c.inputs[0])) + "] (the last dim of 'input' " +
                c.inputs[0].shape().str() + ")");
}

op_descriptor make_norm(norm_kind kind) {
  op_descriptor d;
  const bool fused = adds_residual(kind);
  d.name = norm_name(kind);
  d.family = "norm";
  const int w_idx = kind == norm_kind::l2 ? -1 : fused ? 2 : 1;
  const int b_idx = kind == norm_kind::layer ? 2 : kind == norm_kind::fused_layer ? 3 : -1;
  switch (kind) {
    case norm_kind::layer:
      d.summary = "(x - mean) / sqrt(var + eps) * weight + bias over the last dim";
      d.inputs = {{"input"}, {"weight", true}, {"bias", true}};
      d.outputs = {{"out"}};
      d.attrs = {{"eps", 1e-5, "added to the variance"}};
      break;
    case norm_kind::rms:
      d.summary = "x / sqrt(mean(x^2) + eps) * weight over the last dim";
      d.inputs = {{"input"}, {"weight", true}};
      d.outputs = {{"out"}};
      d.attrs = {{"eps", 1e-6, "added to the mean square"}};
      break;
    case norm_kind::fused:
      d.summary = "residual <- input + residual (in place); out <- rms_norm(residual) * weight";
      d.inputs = {{"input"}, {"residual"}, {"weight", true}};
      d.outputs = {{"out"}, {"residual", false, "residual"}};
      d.attrs = {{"eps", 1e-6, "added to the mean square"}};
      break;
    case norm_kind::fused_layer:
      d.summary = "residual <- input + residual (in place); out <- layer_norm(residual) * weight + bias";
      d.inputs = {{"input"}, {"residual"}, {"weight", true}, {"bias", true}};
      d.outputs = {{"out"}, {"residual", false, "residual"}};
      d.attrs = {{"eps", 1e-5, "added to the variance"}};
      break;
    case norm_kind::l2:
      d.summary = "x / max(||x||_2, eps) over the last dim (torch.nn.functional.normalize, p=2, dim=-1)";
      d.inputs = {{"input"}};
      d.outputs = {{"out"}};
      d.attrs = {{"eps", 1e-12, "lower bound of the norm (a zero row stays zero)"}};
      break;
  }
  d.dtypes = floats();
  d.check = [fused, w_idx, b_idx](const op_call& c) {
    const tensor& x = c.inputs[0];
    require_rank(c, x, "input", 1, max_tensor_dims);
    if (fused) {
      const tensor& r = c.inputs[1];
      require_same_dtype(c, x, "input", r, "residual");
      if (!(r.shape() == x.shape()))
        fail(c, "'residual' has shape " + r.shape().str() + " but 'input' has " + x.shape().str() +
                    "; they must match");
      require_contiguous(c, r, "residual");
    }
    if (w_idx > 0) check_param(c, w_idx, "weight");
    if (b_idx > 0) check_param(c, b_idx, "bias");
    double eps = c.get_f64("eps");
    if (!(eps >= 0)) fail(c, "attribute 'eps' must be >= 0; got " + format_attr(eps));
    if (w_idx > 0 && c.inputs.size() > static_cast<std::size_t>(w_idx) && c.inputs[w_idx].defined() &&
        b_idx > 0 && c.inputs.size() > static_cast<std::size_t>(b_idx) && c.inputs[b_idx].defined())
      require_same_dtype(c, c.inputs[w_idx], "weight", c.inputs[b_idx], "bias");
  };
  d.infer_outputs = [fused](const op_call& c) {
    std::vector<tensor_spec> v = {{c.inputs[0].shape(), c.inputs[0].type()}};
    if (fused) v.push_back({c.inputs[1].shape(), c.inputs[1].type()});
    return v;
  };
  d.key_names = {"rows", "d"};
  d.key = [](const op_call& c) {
    std::int64_t dd = last_dim(c.inputs[0]);
    return shape_key{{"rows", dd ? c.inputs[0].numel() / dd : 0}, {"d", dd}};
  };
  d.flops = [](const op_call& c) { return 5.0 * static_cast<double>(c.inputs[0].numel()); };
  d.bytes = [fused](const op_call& c) {
    return static_cast<double>(c.inputs[0].nbytes()) * (fused ? 4.0 : 2.0);
  };
  d.reference = [kind, w_idx, b_idx](host_call& h) {
    const op_call& c = *h.call;
    const auto& x = h.inputs[0];
    const host_tensor* w = w_idx > 0 && static_cast<int>(h.inputs.size()) > w_idx && h.inputs[w_idx].defined
                               ? &h.inputs[w_idx]
                               : nullptr;
    const host_tensor* b = b_idx > 0 && static_cast<int>(h.inputs.size()) > b_idx && h.inputs[b_idx].defined
                               ? &h.inputs[b_idx]
                               : nullptr;
    const std::int64_t D = x.shape.size() ? x.shape[x.shape.size() - 1] : 1;
    const std::int64_t rows = D ? x.numel() / D : 0;
    const double eps = c.get_f64("eps");
    auto& out = h.outputs[0];
    out.magnitude.assign(out.values.size(), 0.0);
    std::vector<double> t(static_cast<std::size_t>(D));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < D; ++j) {
        t[j] = x.values[r * D + j];
        if (adds_residual(kind)) {
          t[j] += h.inputs[1].values[r * D + j];
          h.outputs[1].values[r * D + j] = t[j];
        }
      }
      double mean = 0, absmean = 0;
      if (centred(kind)) {
        for (double v : t) mean += v;
        mean /= static_cast<double>(D);
      }
      double var = 0;
      for (double v : t) {
        var += (v - mean) * (v - mean);
        absmean += std::fabs(v);
      }
      absmean /= static_cast<double>(D);
      // l2: var holds the sum of squares, rs = 1 / max(||x||, eps).
      const double rs = kind == norm_kind::l2 ? 1.0 / std::max(std::sqrt(var), eps)
                                              : 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
      const double Dd = static_cast<double>(D);
      for (std::int64_t j = 0; j < D; ++j) {
        double wj = w ? w->values[j] : 1.0;
        double y = (t[j] - mean) * rs * wj;
        if (b) y += b->values[j];
        out.values[r * D + j] = y;
        // f32 error model: the statistics carry ~D u relative error (sequential + tree sums), the
        // mean's absolute error D u mean|x| shifts every element; margin x2.
        out.magnitude[r * D + j] =
            2 * (std::fabs(wj) * rs * (Dd * absmean + std::fabs(t[j] - mean) * (Dd + 8)) +
                 (b ? std::fabs(b->values[j]) : 0) + std::fabs(y));
      }
    }
  };
  d.tol = [](const op_call& c, int output) {
    if (output == 1) return tolerance{};  // fused residual: one f32 add, one storage rounding
    return float_tolerance(c.outputs[0].type(), 1.0, eps_f32);
  };
  d.config = row_schema(true);
  op_implementation impl;
  impl.name = "opencl.norm_rows";
  impl.kernel_file = "norm.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [kind, w_idx, b_idx](queue& q, const op_call& c, const kernel_config& cfg,
                                      source_override src) -> event {
    const tensor& out = c.outputs[0];
    if (out.numel() == 0) return event{};
    tensor x = c.inputs[0].contiguous(q);
    tensor w = w_idx > 0 && static_cast<int>(c.inputs.size()) > w_idx ? c.inputs[w_idx] : tensor();
    tensor b = b_idx > 0 && static_cast<int>(c.inputs.size()) > b_idx ? c.inputs[b_idx] : tensor();
    if (w.defined()) w = w.contiguous(q);
    if (b.defined()) b = b.contiguous(q);
    const bool has_w = w.defined(), has_b = b.defined();
    const dtype wt = has_w ? w.type() : has_b ? b.type() : x.type();
    const std::int64_t wg = cfg.at("wg");
    std::string opts = dtype_defines("A", x.type()) + dtype_defines("W", wt) +
                       "-DHAS_W=" + (has_w ? "1" : "0") + " -DHAS_B=" + (has_b ? "1" : "0") +
                       " -DWG=" + std::to_string(wg) + " -DVEC=" + std::to_string(cfg.at("vec")) +
                       " -DNT=" + (cfg.at("variant") == 2 ? "1" : "0");
    const bool per_item = cfg.at("variant") >= 1;
    std::string kname = std::string(norm_name(kind)) + (per_item ? "_row_per_item" : "_rows");
    kernel k = build_kernel(q.get_context(), "norm.cl", src, opts, kname);
    const std::int64_t D = last_dim(x), rows = x.numel() / D;
    const float eps = static_cast<float>(c.get_f64("eps"));
    // Absent weight/bias: bind `x` (never read; HAS_W/HAS_B are 0).
    tensor wb = has_w ? w : x, bb = has_b ? b : x, o = out;
    const std::size_t uwg = static_cast<std::size_t>(wg);
    nd_range r = per_item ? nd_range(range<1>(round_up(static_cast<std::size_t>(rows), uwg)), range<1>(uwg))
                          : nd_range(range<1>(static_cast<std::size_t>(rows) * uwg), range<1>(uwg));
    return q.submit([&](handler& h) {
      accessor<std::byte> X(x.storage(), h, read_only, x.byte_extent());
      accessor<std::byte> W(wb.storage(), h, read_only, wb.byte_extent());
      accessor<std::byte> O(o.storage(), h, access_mode::write, o.byte_extent());
      if (kind == norm_kind::layer) {
        accessor<std::byte> B(bb.storage(), h, read_only, bb.byte_extent());
        if (per_item)
          h.parallel_for(r, k, rows, D, X, x.offset(), W, wb.offset(), B, bb.offset(), O, o.offset(), eps);
        else
          h.parallel_for(r, k, D, X, x.offset(), W, wb.offset(), B, bb.offset(), O, o.offset(), eps);
      } else if (kind == norm_kind::rms || kind == norm_kind::l2) {
        if (per_item)
          h.parallel_for(r, k, rows, D, X, x.offset(), W, wb.offset(), O, o.offset(), eps);
        else
          h.parallel_for(r, k, D, X, x.offset(), W, wb.offset(), O, o.offset(), eps);
      } else if (kind == norm_kind::fused_layer) {
        tensor res = c.inputs[1];
        accessor<std::byte> R(res.storage(), h, read_write, res.byte_extent());
        accessor<std::byte> B(bb.storage(), h, read_only, bb.byte_extent());
        if (per_item)
          h.parallel_for(r, k, rows, D, X, x.offset(), R, res.offset(), W, wb.offset(), B, bb.offset(), O,
                         o.offset(), eps);
        else
          h.parallel_for(r, k, D, X, x.offset(), R, res.offset(), W, wb.offset(), B, bb.offset(), O,
                         o.offset(), eps);
      } else {
        tensor res = c.inputs[1];
        accessor<std::byte> R(res.storage(), h, read_write, res.byte_extent());
        if (per_item)
          h.parallel_for(r, k, rows, D, X, x.offset(), R, res.offset(), W, wb.offset(), O, o.offset(), eps);
        else
          h.parallel_for(r, k, D, X, x.offset(), R, res.offset(), W, wb.offset(), O, o.offset(), eps);
      }
    });
  };
  d.implementations = {impl};
  const std::string name = d.name;
  auto make = [name, kind](queue& q, const sample_options& o, dims shape, bool weight, bool bias,
                           bool strided) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = name;
    tensor x = strided ? random_strided(q, shape, o.type, rng, -3, 3, o.small_integers)
                       : random_tensor(q, shape, o.type, rng, -3, 3, o.small_integers);
    std::int64_t D = shape.size() ? shape[shape.size() - 1] : 1;
    tensor w = weight ? random_tensor(q, {D}, o.type, rng, 0.5, 1.5, false) : tensor();
    if (kind == norm_kind::layer) {
      tensor b = bias ? random_tensor(q, {D}, o.type, rng, -1, 1, false) : tensor();
      c.inputs = {x, w, b};
    } else if (kind == norm_kind::rms) {
      c.inputs = {x, w};
    } else if (kind == norm_kind::l2) {
      c.inputs = {x};
    } else if (kind == norm_kind::fused) {
      c.inputs = {x, random_tensor(q, shape, o.type, rng, -3, 3, o.small_integers), w};
    } else {
      tensor b = bias ? random_tensor(q, {D}, o.type, rng, -1, 1, false) : tensor();
      c.inputs = {x, random_tensor(q, shape, o.type, rng, -3, 3, o.small_integers), w, b};
    }
    c.set("eps", kind == norm_kind::l2 ? 1e-12 : 1e-5);
    allocate_outputs(q, op_registry::instance().get(name), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, {k.at("rows"), k.at("d")}, true, true, false);
  };
  d.config_test_shapes = {"rows=1,d=1", "rows=5,d=1031"};
  const bool new_op = kind == norm_kind::fused_layer || kind == norm_kind::l2;
  d.test_cases = [make, new_op](dtype) {
    auto tc = [make](dims s, bool w, bool b, bool strided) {
      return [=](queue& q, const sample_options& o) { return make(q, o, s, w, b, strided); };
    };
    if (new_op)  // few variants: each costs a PoCL compile
      return std::vector<test_case>{{"empty", tc({0, 64}, true, true, false)},
                                    {"one", tc({1}, true, true, false)},
                                    {"odd", tc({7, 1031}, true, true, false)},
                                    {"no_weight", tc({3, 130}, false, false, false)},
                                    {"strided", tc({33, 65}, true, true, true)}};
    return std::vector<test_case>{
        {"empty", tc({0, 64}, true, true, false)},    {"one", tc({1}, true, true, false)},
        {"odd", tc({7, 1031}, true, true, false)},    {"no_weight", tc({3, 130}, false, false, false)},
        {"large", tc({64, 8192}, true, true, false)}, {"rank3", tc({2, 5, 96}, true, false, false)},
        {"strided", tc({33, 65}, true, true, true)}};
  };
  return d;
}

}  // namespace

void register_norm_ops(op_registry& r) {
  r.add(make_norm(norm_kind::layer));
  r.add(make_norm(norm_kind::rms));
  r.add(make_norm(norm_kind::fused));
  r.add(make_norm(norm_kind::fused_layer));
  r.add(make_norm(norm_kind::l2));
}

}  // namespace prism
