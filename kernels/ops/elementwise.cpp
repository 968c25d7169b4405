// SPDX-License-Identifier: Apache-2.0
// Elementwise ops: unary (neg .. silu, gelu in erf and tanh forms), binary with NumPy
// broadcasting and scalar operands (add/sub with alpha, mul, div, maximum, minimum, pow) and
// the gated activations silu_and_mul / gelu_and_mul. All share kernels/cl/elementwise.cl.
#include <cmath>

#include "kernels/elementwise_launch.hpp"
#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

constexpr const char* kFile = "elementwise.cl";

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

bool tanh_form(const op_call& c) {
  std::string a = c.get_str("approximate");
  if (a != "none" && a != "tanh") fail(c, "attribute 'approximate' is '" + a + "'; valid: none, tanh");
  return a == "tanh";
}

std::vector<dtype> floats() {
  return {dtype::f32, dtype::f16, dtype::bf16};
}

/// Elementwise ops share one implementation shape: flat or strided path of elementwise.cl.
op_implementation ew_impl(std::function<ew_launch(const op_call&)> plan) {
  op_implementation impl;
  impl.name = "opencl.elementwise";
  impl.kernel_file = kFile;
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [plan](queue& q, const op_call& c, const kernel_config& cfg, source_override src) {
    return launch_elementwise(q, plan(c), cfg, src);
  };
  return impl;
}

// ---- unary ------------------------------------------------------------------------------------

struct unary_def {
  const char* name;
  const char* summary;
  double (*ref)(double);
  double f32_ulps;
  double mag_eps;  ///< absolute error scale per |x| (cancellation in 1 + erf/tanh)
  double lo, hi;   ///< sample range
  bool exact_ints;
};

const unary_def unary_defs[] = {
    {"neg", "-x", [](double x) { return -x; }, 0, 0, -4, 4, true},
    {"abs", "|x|", [](double x) { return std::fabs(x); }, 0, 0, -4, 4, true},
    {"exp", "e^x", [](double x) { return std::exp(x); }, 3, 0, -8, 8, false},
    {"log", "natural log", [](double x) { return std::log(x); }, 3, 0, 0.05, 8, false},
    {"sqrt", "square root", [](double x) { return std::sqrt(x); }, 3, 0, 0, 8, false},
    {"rsqrt", "1/sqrt(x)", [](double x) { return 1.0 / std::sqrt(x); }, 2, 0, 0.05, 8, false},
    {"sin", "sine", [](double x) { return std::sin(x); }, 4, 0, -8, 8, false},
    {"cos", "cosine", [](double x) { return std::cos(x); }, 4, 0, -8, 8, false},
    {"tanh", "hyperbolic tangent", [](double x) { return std::tanh(x); }, 5, 0, -5, 5, false},
    {"sigmoid", "1/(1+e^-x)", sigmoid_ref, 8, 0, -8, 8, false},
    {"relu", "max(x, 0) (NaN kept)", [](double x) { return x < 0 ? 0.0 : x; }, 0, 0, -4, 4, true},
    {"silu", "x * sigmoid(x)", [](double x) { return x * sigmoid_ref(x); }, 8, 0, -8, 8, false},
};

const unary_def gelu_def{
    "gelu", "x * Phi(x); approximate=none (erf) or tanh", gelu_ref, 8, 32 * eps_f32, -5, 5, false};

shape_key flat_key(const op_call& c) {
  return {{"n", c.outputs.empty() ? c.inputs[0].numel() : c.outputs[0].numel()}};
}

std::vector<test_case> unary_cases(const std::string& op, double lo, double hi, const attr_map& attrs) {
  auto mk = [op, lo, hi, attrs](dims shape, bool strided) {
    return [=](queue& q, const sample_options& o) {
      std::mt19937_64 rng(o.seed);
      op_call c;
      c.op = op;
      c.attrs = attrs;
      c.inputs = {strided ? random_strided(q, shape, o.type, rng, lo, hi, o.small_integers)
                          : random_tensor(q, shape, o.type, rng, lo, hi, o.small_integers)};
      allocate_outputs(q, op_registry::instance().get(op), c);
      return c;
    };
  };
  return {{"empty", mk({0, 5}, false)},  {"one", mk({1}, false)},           {"scalar", mk({}, false)},
          {"odd", mk({1031}, false)},    {"large", mk({256, 1031}, false)}, {"strided", mk({33, 65}, true)},
          {"strided1d", mk({257}, true)}};
}

op_descriptor make_unary(const unary_def& u) {
  op_descriptor d;
  d.name = u.name;
  d.family = "unary";
  d.summary = u.summary;
  d.inputs = {{"input"}};
  d.outputs = {{"out"}};
  d.dtypes = floats();
  bool is_gelu = std::string(u.name) == "gelu";
  if (is_gelu) d.attrs = {{"approximate", std::string("none"), "none: erf form; tanh: tanh approximation"}};
  d.check = [is_gelu](const op_call& c) {
    if (is_gelu) tanh_form(c);
  };
  d.infer_outputs = [](const op_call& c) {
    return std::vector<tensor_spec>{{c.inputs[0].shape(), c.inputs[0].type()}};
  };
  d.key_names = {"n"};
  d.key = flat_key;
  d.flops = [](const op_call& c) { return static_cast<double>(c.inputs[0].numel()); };
  d.bytes = [](const op_call& c) { return 2.0 * static_cast<double>(c.inputs[0].nbytes()); };
  auto ref = u.ref;
  d.reference = [ref, is_gelu](host_call& h) {
    bool tanh_f = is_gelu && tanh_form(*h.call);
    auto& in = h.inputs[0].values;
    auto& out = h.outputs[0];
    out.magnitude.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      out.values[i] = tanh_f ? gelu_tanh_ref(in[i]) : ref(in[i]);
      out.magnitude[i] = std::fabs(in[i]);
    }
  };
  double ulps = u.f32_ulps, mag = u.mag_eps;
  d.tol = [ulps, mag](const op_call& c, int) { return float_tolerance(c.outputs[0].type(), ulps, mag); };
  d.exact_on_small_integers = u.exact_ints;
  d.config = elementwise_schema();
  std::string name = u.name;
  d.implementations = {ew_impl([name, is_gelu](const op_call& c) {
    ew_launch l;
    l.op_define = is_gelu && tanh_form(c) ? "gelu_tanh" : name;
    l.a = c.inputs[0];
    l.out = c.outputs[0];
    return l;
  })};
  double lo = u.lo, hi = u.hi;
  d.sample = [name, lo, hi](queue& q, const shape_key& k, const sample_options& o) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = name;
    c.inputs = {random_tensor(q, {k.at("n")}, o.type, rng, lo, hi, o.small_integers)};
    allocate_outputs(q, op_registry::instance().get(name), c);
    return c;
  };
  d.config_test_shapes = {"n=1", "n=4099"};
  d.test_cases = [name, lo, hi, is_gelu](dtype) {
    auto cases = unary_cases(name, lo, hi, {});
    if (is_gelu) {
      auto t = unary_cases(name, lo, hi, {{"approximate", std::string("tanh")}});
      for (auto& tc : t) tc.shape_class = "tanh." + tc.shape_class;
      cases.insert(cases.end(), t.begin(), t.end());
    }
    return cases;
  };
  return d;
}

// ---- binary -----------------------------------------------------------------------------------

struct binary_def {
  const char* name;
  const char* summary;
  double (*ref)(double, double, double);
  double f32_ulps;
  double mag_eps;  ///< times |a| + |alpha b|: rounding of alpha*b before the add
  double a_lo, a_hi, b_lo, b_hi;
  bool has_alpha;
  bool exact_ints;
};

const binary_def binary_defs[] = {
    {"add", "input + alpha * other", [](double a, double b, double al) { return a + al * b; }, 0.5, eps_f32,
     -4, 4, -4, 4, true, true},
    {"sub", "input - alpha * other", [](double a, double b, double al) { return a - al * b; }, 0.5, eps_f32,
     -4, 4, -4, 4, true, true},
    {"mul", "input * other", [](double a, double b, double) { return a * b; }, 0.5, 0, -4, 4, -4, 4, false,
     true},
    {"div", "input / other", [](double a, double b, double) { return a / b; }, 2.5, 0, -4, 4, 0.25, 4, false,
     false},
    {"maximum", "elementwise max (NaN propagates)",
     [](double a, double b, double) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }, 0, 0,
     -4, 4, -4, 4, false, true},
    {"minimum", "elementwise min (NaN propagates)",
     [](double a, double b, double) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }, 0, 0,
     -4, 4, -4, 4, false, true},
    {"pow", "input ^ other", [](double a, double b, double) { return std::pow(a, b); }, 16, 0, 0.1, 3, -3, 3,
     false, false},
};

/// The second operand: the `other` tensor, or the `scalar` attribute when `other` is undefined.
bool has_other_tensor(const op_call& c) {
  return c.inputs.size() > 1 && c.inputs[1].defined();
}

op_descriptor make_binary(const binary_def& b) {
  op_descriptor d;
  d.name = b.name;
  d.family = "binary";
  d.summary =
      std::string(b.summary) + "; NumPy broadcasting; `other` may be omitted for the `scalar` attribute";
  d.inputs = {{"input"}, {"other", true}};
  d.outputs = {{"out"}};
  d.attrs = {{"scalar", 0.0, "the second operand when `other` is undefined (absent otherwise)", true}};
  if (b.has_alpha) d.attrs.push_back({"alpha", 1.0, "multiplier of other"});
  d.dtypes = floats();
  d.check = [](const op_call& c) {
    if (has_other_tensor(c)) {
      require_same_dtype(c, c.inputs[0], "input", c.inputs[1], "other");
      broadcast_shapes(c, c.inputs[0].shape(), "input", c.inputs[1].shape(), "other");
    } else if (!c.has("scalar")) {
      fail(c, "'other' is undefined and no 'scalar' attribute is given; pass one of them");
    }
  };
  d.infer_outputs = [](const op_call& c) {
    dims s = has_other_tensor(c)
                 ? broadcast_shapes(c, c.inputs[0].shape(), "input", c.inputs[1].shape(), "other")
                 : c.inputs[0].shape();
    return std::vector<tensor_spec>{{s, c.inputs[0].type()}};
  };
  d.key_names = {"n"};
  d.key = flat_key;
  d.flops = [](const op_call& c) { return static_cast<double>(c.outputs[0].numel()); };
  d.bytes = [](const op_call& c) {
    double n = static_cast<double>(c.inputs[0].nbytes()) + static_cast<double>(c.outputs[0].nbytes());
    if (has_other_tensor(c)) n += static_cast<double>(c.inputs[1].nbytes());
    return n;
  };
  auto ref = b.ref;
  const bool has_alpha = b.has_alpha;
  d.reference = [ref, has_alpha](host_call& h) {
    const op_call& c = *h.call;
    double alpha = has_alpha ? c.get_f64("alpha") : 1.0;
    auto& out = h.outputs[0];
    const auto& A = h.inputs[0];
    const host_tensor* B = h.inputs.size() > 1 && h.inputs[1].defined ? &h.inputs[1] : nullptr;
    double scalar = B ? 0.0 : c.get_f64("scalar");
    out.magnitude.resize(out.values.size());
    const int nd = out.shape.size();
    std::vector<std::int64_t> idx(nd, 0);
    auto offset = [&](const dims& s) {
      std::int64_t off = 0;
      for (int k = 0; k < s.size(); ++k) {
        std::int64_t c2 = idx[nd - s.size() + k];
        off = off * s[k] + (s[k] == 1 ? 0 : c2);
      }
      return off;
    };
    for (std::size_t i = 0; i < out.values.size(); ++i) {
      double x = A.values[offset(A.shape)];
      double y = B ? B->values[offset(B->shape)] : scalar;
      out.values[i] = ref(x, y, alpha);
      out.magnitude[i] = std::fabs(x) + std::fabs(alpha * y);
      for (int k = nd - 1; k >= 0; --k) {
        if (++idx[k] < out.shape[k]) break;
        idx[k] = 0;
      }
    }
  };
  double ulps = b.f32_ulps, mag = b.mag_eps;
  d.tol = [ulps, mag](const op_call& c, int) { return float_tolerance(c.outputs[0].type(), ulps, mag); };
  d.exact_on_small_integers = b.exact_ints;
  d.config = elementwise_schema();
  std::string name = b.name;
  d.implementations = {ew_impl([name, has_alpha](const op_call& c) {
    ew_launch l;
    l.op_define = name;
    l.a = c.inputs[0];
    if (has_other_tensor(c)) {
      l.b = c.inputs[1];
    } else {
      l.scalar = c.get_f64("scalar");
    }
    if (has_alpha) l.alpha = c.get_f64("alpha");
    l.out = c.outputs[0];
    return l;
  })};
  double alo = b.a_lo, ahi = b.a_hi, blo = b.b_lo, bhi = b.b_hi;
  bool alpha = b.has_alpha;
  auto make = [name, alo, ahi, blo, bhi, alpha](queue& q, const sample_options& o, dims as, dims bs,
                                                int mode) {
    // mode 0: tensors, 1: scalar attribute, 2: strided (transposed) input
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = name;
    tensor a = mode == 2 ? random_strided(q, as, o.type, rng, alo, ahi, o.small_integers)
                         : random_tensor(q, as, o.type, rng, alo, ahi, o.small_integers);
    if (mode == 1) {
      c.inputs = {a, tensor()};
      c.set("scalar", o.small_integers ? 3.0 : (blo + bhi) / 2 + 0.375);
    } else {
      c.inputs = {a, random_tensor(q, bs, o.type, rng, blo, bhi, o.small_integers)};
    }
    if (alpha) c.set("alpha", o.small_integers ? 2.0 : 0.75);
    allocate_outputs(q, op_registry::instance().get(name), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, {k.at("n")}, {k.at("n")}, 0);
  };
  d.config_test_shapes = {"n=1", "n=4099"};
  d.test_cases = [make](dtype) {
    auto tc = [make](dims as, dims bs, int mode) {
      return [=](queue& q, const sample_options& o) { return make(q, o, as, bs, mode); };
    };
    return std::vector<test_case>{{"empty", tc({0, 3}, {3}, 0)},
                                  {"one", tc({1}, {1}, 0)},
                                  {"odd", tc({1031}, {1031}, 0)},
                                  {"large", tc({256, 1031}, {256, 1031}, 0)},
                                  {"broadcast.row", tc({37, 64}, {64}, 0)},
                                  {"broadcast.outer", tc({37, 1}, {1, 64}, 0)},
                                  {"broadcast.0d", tc({517}, {}, 0)},
                                  {"broadcast.0d_input", tc({}, {517}, 0)},
                                  {"scalar_attr", tc({1029}, {}, 1)},
                                  {"strided", tc({33, 65}, {33, 65}, 2)}};
  };
  return d;
}

// ---- gated ------------------------------------------------------------------------------------

op_descriptor make_gated(const std::string& name, bool gelu) {
  op_descriptor d;
  d.name = name;
  d.family = "gated";
  d.summary = gelu ? "gelu(x[..., :d]) * x[..., d:] for input [..., 2d]"
                   : "silu(x[..., :d]) * x[..., d:] for input [..., 2d]";
  d.inputs = {{"input"}};
  d.outputs = {{"out"}};
  if (gelu) d.attrs = {{"approximate", std::string("none"), "none: erf form; tanh: tanh approximation"}};
  d.dtypes = floats();
  d.check = [gelu](const op_call& c) {
    require_rank(c, c.inputs[0], "input", 1, max_tensor_dims);
    if (c.inputs[0].size(-1) % 2 != 0)
      fail(c, "'input' has shape " + c.inputs[0].shape().str() + "; its last dim must be even (2 * d)");
    if (gelu) tanh_form(c);
  };
  d.infer_outputs = [](const op_call& c) {
    dims s = c.inputs[0].shape();
    s[s.size() - 1] /= 2;
    return std::vector<tensor_spec>{{s, c.inputs[0].type()}};
  };
  d.key_names = {"rows", "d"};
  d.key = [](const op_call& c) {
    std::int64_t half = c.inputs[0].size(-1) / 2;
    return shape_key{{"rows", half ? c.outputs[0].numel() / half : 0}, {"d", half}};
  };
  d.flops = [](const op_call& c) { return 5.0 * static_cast<double>(c.outputs[0].numel()); };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[0].nbytes() + c.outputs[0].nbytes());
  };
  d.reference = [gelu](host_call& h) {
    bool t = gelu && tanh_form(*h.call);
    const auto& in = h.inputs[0];
    auto& out = h.outputs[0];
    std::int64_t dd = in.shape.size() ? in.shape[in.shape.size() - 1] / 2 : 0;
    out.magnitude.resize(out.values.size());
    for (std::size_t i = 0; i < out.values.size(); ++i) {
      std::int64_t r = static_cast<std::int64_t>(i) / dd, j = static_cast<std::int64_t>(i) % dd;
      double x = in.values[r * 2 * dd + j], y = in.values[r * 2 * dd + dd + j];
      double act = gelu ? (t ? gelu_tanh_ref(x) : gelu_ref(x)) : x * sigmoid_ref(x);
      out.values[i] = act * y;
      out.magnitude[i] = std::fabs(x * y);
    }
  };
  d.tol = [gelu](const op_call& c, int) {
    return float_tolerance(c.outputs[0].type(), 10, gelu ? 32 * eps_f32 : 0);
  };
  d.config = elementwise_schema();
  d.implementations = {ew_impl([gelu](const op_call& c) {
    const tensor& x = c.inputs[0];
    int last = x.dim() - 1;
    std::int64_t half = x.size(-1) / 2;
    ew_launch l;
    l.op_define = gelu ? (tanh_form(c) ? "gelu_tanh_mul" : "gelu_mul") : "silu_mul";
    l.a = x.slice(last, 0, half);
    l.b = x.slice(last, half, 2 * half);
    l.out = c.outputs[0];
    return l;
  })};
  auto make = [name](queue& q, const sample_options& o, dims shape, bool strided, attr_map attrs) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = name;
    c.attrs = attrs;
    c.inputs = {strided ? random_strided(q, shape, o.type, rng, -4, 4, o.small_integers)
                        : random_tensor(q, shape, o.type, rng, -4, 4, o.small_integers)};
    allocate_outputs(q, op_registry::instance().get(name), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, {k.at("rows"), 2 * k.at("d")}, false, {});
  };
  d.config_test_shapes = {"rows=1,d=1", "rows=7,d=515"};
  d.test_cases = [make, gelu](dtype) {
    auto tc = [make](dims s, bool strided, attr_map a) {
      return [=](queue& q, const sample_options& o) { return make(q, o, s, strided, a); };
    };
    std::vector<test_case> v = {{"empty", tc({0, 8}, false, {})},
                                {"one", tc({2}, false, {})},
                                {"odd", tc({3, 1030}, false, {})},
                                {"large", tc({64, 8192}, false, {})},
                                {"strided", tc({34, 66}, true, {})}};
    if (gelu) v.push_back({"tanh.odd", tc({5, 1030}, false, {{"approximate", std::string("tanh")}})});
    return v;
  };
  return d;
}

}  // namespace

void register_elementwise_ops(op_registry& r) {
  for (const auto& u : unary_defs) r.add(make_unary(u));
  r.add(make_unary(gelu_def));
  for (const auto& b : binary_defs) r.add(make_binary(b));
  r.add(make_gated("silu_and_mul", false));
  r.add(make_gated("gelu_and_mul", true));
}

}  // namespace prism
