// SPDX-License-Identifier: Apache-2.0
// Layout and creation ops: copy (strided views, broadcasting source), cast between all dtypes,
// fill, zeros, arange, cat. Copies and casts share kernels/cl/cast.cl.
#include <cmath>
#include <cstdint>

#include "kernels/elementwise_launch.hpp"
#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace kernels {
event copy_into(queue& q, const tensor& src, const tensor& dst) {
  static const kernel_config cfg = elementwise_schema().defaults();
  return launch_cast(q, src, dst, cfg);
}
}  // namespace kernels

namespace {

// The element dtype an attribute names; block-quantized dtypes are weights for linear and matmul
// only, never an element-wise result.
dtype element_dtype(const op_call& c, const std::string& text) {
  dtype t;
  try {
    t = parse_dtype(text);
  } catch (const error& e) {
    fail(c, "attribute 'dtype': " + e.message());
  }
  if (is_quantized(t))
    fail(
        c,
        "attribute 'dtype': " + text +
            " is block-quantized (weights of linear and matmul only); valid: f32, f16, bf16, i32, i64, bool");
  return t;
}

std::vector<dtype> all() {
  return {std::begin(all_dtypes), std::end(all_dtypes)};
}

op_implementation cast_impl(std::function<std::pair<tensor, tensor>(const op_call&)> operands) {
  op_implementation impl;
  impl.name = "opencl.cast";
  impl.kernel_file = "cast.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [operands](queue& q, const op_call& c, const kernel_config& cfg, source_override src) {
    auto [s, d] = operands(c);
    return launch_cast(q, s, d, cfg, src);
  };
  return impl;
}

/// The copy reference: the source broadcast to the output shape, rounded to the output dtype.
void broadcast_copy_ref(const host_tensor& in, host_tensor& out) {
  const int nd = out.shape.size();
  std::vector<std::int64_t> idx(nd, 0);
  for (std::size_t i = 0; i < out.values.size(); ++i) {
    std::int64_t off = 0;
    for (int k = 0; k < in.shape.size(); ++k) {
      std::int64_t c = idx[nd - in.shape.size() + k];
      off = off * in.shape[k] + (in.shape[k] == 1 ? 0 : c);
    }
    out.values[i] = round_to(out.type, in.values[off]);
    for (int k = nd - 1; k >= 0; --k) {
      if (++idx[k] < out.shape[k]) break;
      idx[k] = 0;
    }
  }
}

std::vector<test_case> copy_like_cases(const std::string& op, attr_map attrs, bool strided_out) {
  auto mk = [op, attrs, strided_out](dims shape, int mode) {
    // mode 0: contiguous, 1: strided source, 2: strided destination, 3: broadcast source
    return [=](queue& q, const sample_options& o) {
      std::mt19937_64 rng(o.seed);
      op_call c;
      c.op = op;
      c.attrs = attrs;
      const auto& d = op_registry::instance().get(op);
      if (mode == 3) {
        dims s = shape;
        s[0] = 1;
        c.inputs = {random_tensor(q, s, o.type, rng, -100, 100, o.small_integers)};
      } else {
        c.inputs = {mode == 1 ? random_strided(q, shape, o.type, rng, -100, 100, o.small_integers)
                              : random_tensor(q, shape, o.type, rng, -100, 100, o.small_integers)};
      }
      if (mode == 2 || mode == 3) {
        dtype ot = c.has("dtype") ? parse_dtype(c.get_str("dtype")) : o.type;
        c.outputs = {mode == 2 ? random_strided(q, shape, ot, rng) : tensor::empty(q, shape, ot)};
      } else {
        allocate_outputs(q, d, c);
      }
      return c;
    };
  };
  std::vector<test_case> v = {{"empty", mk({0, 4}, 0)},     {"one", mk({1}, 0)},
                              {"odd", mk({1031}, 0)},       {"large", mk({512, 1031}, 0)},
                              {"strided", mk({33, 65}, 1)}, {"strided1d", mk({301}, 1)}};
  if (strided_out) {
    v.push_back({"strided_out", mk({33, 65}, 2)});
    v.push_back({"broadcast", mk({17, 65}, 3)});
  }
  return v;
}

op_descriptor make_copy() {
  op_descriptor d;
  d.name = "copy";
  d.family = "layout";
  d.summary = "out[...] = src (src broadcast to out's shape, any strides on both sides, dtype converted)";
  d.inputs = {{"src"}};
  d.outputs = {{"out"}};
  d.dtypes = all();
  d.strided_outputs_ok = {true};
  d.check = [](const op_call& c) {
    if (c.outputs.empty() || !c.outputs[0].defined()) return;
    const tensor& s = c.inputs[0];
    const tensor& o = c.outputs[0];
    dims b = broadcast_shapes(c, o.shape(), "out", s.shape(), "src");
    if (!(b == o.shape()))
      fail(c, "'src' " + s.shape().str() + " does not broadcast to 'out' " + o.shape().str());
  };
  d.infer_outputs = [](const op_call& c) {
    if (!c.outputs.empty() && c.outputs[0].defined())
      return std::vector<tensor_spec>{{c.outputs[0].shape(), c.outputs[0].type()}};
    return std::vector<tensor_spec>{{c.inputs[0].shape(), c.inputs[0].type()}};
  };
  d.key_names = {"n"};
  d.key = [](const op_call& c) { return shape_key{{"n", c.outputs[0].numel()}}; };
  d.flops = [](const op_call&) { return 0.0; };
  d.bytes = [](const op_call& c) { return static_cast<double>(c.outputs[0].nbytes()) * 2; };
  d.reference = [](host_call& h) { broadcast_copy_ref(h.inputs[0], h.outputs[0]); };
  d.tol = [](const op_call&, int) { return tolerance{}; };
  d.exact_on_small_integers = true;
  d.config = elementwise_schema();
  d.implementations = {cast_impl([](const op_call& c) { return std::make_pair(c.inputs[0], c.outputs[0]); })};
  d.sample = [](queue& q, const shape_key& k, const sample_options& o) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = "copy";
    c.inputs = {random_tensor(q, {k.at("n")}, o.type, rng, -100, 100, o.small_integers)};
    allocate_outputs(q, op_registry::instance().get("copy"), c);
    return c;
  };
  d.config_test_shapes = {"n=1", "n=4099"};
  d.test_cases = [](dtype) { return copy_like_cases("copy", {}, true); };
  return d;
}

op_descriptor make_cast() {
  op_descriptor d;
  d.name = "cast";
  d.family = "layout";
  d.summary =
      "out = input converted to `dtype` (RNE to f16/bf16, truncation + saturation to ints, != 0 to bool)";
  d.inputs = {{"input"}};
  d.outputs = {{"out"}};
  d.attrs = {{"dtype", std::string("f32"), "the output dtype"}};
  d.dtypes = all();
  d.check = [](const op_call& c) { element_dtype(c, c.get_str("dtype")); };
  d.infer_outputs = [](const op_call& c) {
    return std::vector<tensor_spec>{{c.inputs[0].shape(), parse_dtype(c.get_str("dtype"))}};
  };
  d.key_names = {"n"};
  d.key = [](const op_call& c) { return shape_key{{"n", c.inputs[0].numel()}}; };
  d.flops = [](const op_call&) { return 0.0; };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[0].nbytes() + c.outputs[0].nbytes());
  };
  d.reference = [](host_call& h) { broadcast_copy_ref(h.inputs[0], h.outputs[0]); };
  d.tol = [](const op_call&, int) { return tolerance{}; };
  d.config = elementwise_schema();
  d.implementations = {cast_impl([](const op_call& c) { return std::make_pair(c.inputs[0], c.outputs[0]); })};
  d.sample = [](queue& q, const shape_key& k, const sample_options& o) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = "cast";
    // Benchmarks and the tuner time the f32 <-> f16 style conversion: to f16 from f32, else f32.
    c.set("dtype", std::string(o.type == dtype::f32 ? "f16" : "f32"));
    c.inputs = {random_tensor(q, {k.at("n")}, o.type, rng, -100, 100, o.small_integers)};
    allocate_outputs(q, op_registry::instance().get("cast"), c);
    return c;
  };
  d.config_test_shapes = {"n=1", "n=4099"};
  d.test_cases = [](dtype) {
    std::vector<test_case> v;
    for (dtype to : all_dtypes) {
      for (auto& tc : copy_like_cases("cast", {{"dtype", std::string(dtype_name(to))}}, false)) {
        if (tc.shape_class == "large" && to != dtype::f32) continue;  // one large case per source dtype
        tc.shape_class = std::string("to_") + dtype_name(to) + "." + tc.shape_class;
        v.push_back(tc);
      }
    }
    return v;
  };
  return d;
}

// ---- fill / zeros / arange ------------------------------------------------------------------

// `zeros`: the fill value is 0 (the op has no `value` attribute).
op_implementation fill_impl(bool arange, bool zeros = false) {
  op_implementation impl;
  impl.name = arange ? "opencl.arange" : "opencl.fill";
  impl.kernel_file = "cast.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [arange, zeros](queue& q, const op_call& c, const kernel_config& cfg,
                                 source_override src) -> event {
    tensor out = c.outputs[0];
    const std::int64_t n = out.numel();
    if (n == 0) return event{};
    const std::int64_t wg = cfg.at("wg"), ept = cfg.at("ept");
    std::string opts = dtype_defines("A", out.type()) + dtype_defines("O", out.type()) + "-DVEC=1 -DEPT=1";
    kernel k = build_kernel(q.get_context(), "cast.cl", src, opts, arange ? "arange_flat" : "fill_flat");
    std::size_t g = round_up(static_cast<std::size_t>((n + ept - 1) / ept), static_cast<std::size_t>(wg));
    nd_range r(range<1>(g), range<1>(static_cast<std::size_t>(wg)));
    const std::int64_t off = out.offset();
    if (arange) {
      const double start = c.get_f64("start"), step = c.get_f64("step");
      const float fs = static_cast<float>(start), ft = static_cast<float>(step);
      const std::int64_t is = static_cast<std::int64_t>(start), it = static_cast<std::int64_t>(step);
      return q.submit([&](handler& h) {
        accessor<std::byte> O(out.storage(), h, access_mode::write, out.byte_extent());
        h.parallel_for(r, k, n, O, off, fs, ft, is, it);
      });
    }
    const double v = zeros ? 0.0 : c.get_f64("value");
    const float fv = static_cast<float>(v);
    // Integer outputs get the value as the dtype stores it (truncated, saturated; bool: != 0).
    const double stored = round_to(out.type(), v);
    const std::int64_t iv = stored >= 9.2233720368547758e18 ? INT64_MAX : static_cast<std::int64_t>(stored);
    return q.submit([&](handler& h) {
      accessor<std::byte> O(out.storage(), h, access_mode::write, out.byte_extent());
      h.parallel_for(r, k, n, O, off, fv, iv);
    });
  };
  return impl;
}

op_descriptor make_fill(const std::string& name) {
  const bool zeros = name == "zeros";
  op_descriptor d;
  d.name = name;
  d.family = "layout";
  d.summary = zeros ? "out = 0" : "out = value";
  d.outputs = {{"out"}};
  d.attrs = {{"shape", std::vector<std::int64_t>{}, "output shape (absent: the given output's)", true},
             {"dtype", std::string("f32"), "output dtype (absent: the given output's)", true}};
  if (!zeros) d.attrs.push_back({"value", 0.0, "the fill value"});
  d.dtypes = all();
  d.check = [](const op_call& c) {
    const bool has_output = !c.outputs.empty() && c.outputs[0].defined();
    if (!has_output && !(c.has("shape") && c.has("dtype")))
      fail(c, "without an output the attributes 'shape' and 'dtype' are required; got " +
                  (c.attrs.empty() ? std::string("none") : format_attrs(c.attrs)));
    if (c.has("dtype")) element_dtype(c, c.get_str("dtype"));
    if (c.has("shape"))
      for (auto e : c.get_ints("shape"))
        if (e < 0) fail(c, "attribute 'shape' has a negative extent");
  };
  d.infer_outputs = [](const op_call& c) {
    const tensor* out = !c.outputs.empty() && c.outputs[0].defined() ? &c.outputs[0] : nullptr;
    auto s = c.has("shape") || !out ? c.get_ints("shape") : out->shape().to_vector();
    return std::vector<tensor_spec>{{dims(std::span<const std::int64_t>(s)),
                                     c.has("dtype") || !out ? parse_dtype(c.get_str("dtype")) : out->type()}};
  };
  d.key_names = {"n"};
  d.key = [](const op_call& c) { return shape_key{{"n", c.outputs[0].numel()}}; };
  d.flops = [](const op_call&) { return 0.0; };
  d.bytes = [](const op_call& c) { return static_cast<double>(c.outputs[0].nbytes()); };
  d.reference = [zeros](host_call& h) {
    double v = zeros ? 0.0 : h.call->get_f64("value");
    for (auto& x : h.outputs[0].values) x = round_to(h.outputs[0].type, v);
  };
  d.tol = [](const op_call&, int) { return tolerance{}; };
  d.config = elementwise_schema();
  d.implementations = {fill_impl(false, zeros)};
  auto make = [name, zeros](queue& q, dims shape, dtype t, double v) {
    op_call c;
    c.op = name;
    c.set("shape", shape.to_vector()).set("dtype", std::string(dtype_name(t)));
    if (!zeros) c.set("value", v);
    allocate_outputs(q, op_registry::instance().get(name), c);
    // Poison the output so a kernel that writes nothing fails.
    std::vector<double> poison(static_cast<std::size_t>(c.outputs[0].numel()), 7.0);
    std::vector<std::byte> bytes(c.outputs[0].nbytes());
    encode_values(t, poison.data(), poison.size(), bytes.data());
    write_logical(q, c.outputs[0], bytes);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, {k.at("n")}, o.type, 2.5);
  };
  d.config_test_shapes = {"n=1", "n=4099"};
  d.test_cases = [make](dtype) {
    auto tc = [make](dims s, double v) {
      return [=](queue& q, const sample_options& o) { return make(q, s, o.type, v); };
    };
    return std::vector<test_case>{{"empty", tc({0}, 1.5)},
                                  {"one", tc({1}, -3.25)},
                                  {"odd", tc({3, 1031}, 1e30)},
                                  {"large", tc({1 << 20}, -0.1)}};
  };
  return d;
}

op_descriptor make_arange() {
  op_descriptor d;
  d.name = "arange";
  d.family = "layout";
  d.summary = "out[i] = start + i * step for i in [0, ceil((end - start) / step))";
  d.outputs = {{"out"}};
  d.attrs = {{"start", 0.0, "first value"},
             {"end", 0.0, "exclusive bound"},
             {"step", 1.0, "increment (non-zero)"},
             {"dtype", std::string("i64"), "output dtype"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16, dtype::i32, dtype::i64};
  auto count = [](const op_call& c) -> std::int64_t {
    double start = c.get_f64("start"), end = c.get_f64("end"), step = c.get_f64("step");
    double n = std::ceil((end - start) / step);
    return n > 0 ? static_cast<std::int64_t>(n) : 0;
  };
  d.check = [](const op_call& c) {
    double step = c.get_f64("step");
    if (step == 0 || !std::isfinite(step))
      fail(c, "attribute 'step' must be finite and non-zero; got " + format_attr(step));
    if (!std::isfinite(c.get_f64("start")) || !std::isfinite(c.get_f64("end")))
      fail(c, "attributes 'start' and 'end' must be finite");
    element_dtype(c, c.get_str("dtype"));
  };
  d.infer_outputs = [count](const op_call& c) {
    return std::vector<tensor_spec>{{dims{count(c)}, parse_dtype(c.get_str("dtype"))}};
  };
  d.key_names = {"n"};
  d.key = [](const op_call& c) { return shape_key{{"n", c.outputs[0].numel()}}; };
  d.flops = [](const op_call& c) { return static_cast<double>(c.outputs[0].numel()); };
  d.bytes = [](const op_call& c) { return static_cast<double>(c.outputs[0].nbytes()); };
  d.reference = [](host_call& h) {
    double start = h.call->get_f64("start"), step = h.call->get_f64("step");
    auto& out = h.outputs[0];
    bool ints = !is_floating(out.type);
    for (std::size_t i = 0; i < out.values.size(); ++i)
      out.values[i] =
          ints ? static_cast<double>(static_cast<std::int64_t>(start) +
                                     static_cast<std::int64_t>(i) * static_cast<std::int64_t>(step))
               : static_cast<double>(static_cast<float>(start) +
                                     static_cast<float>(i) * static_cast<float>(step));
  };
  // start + i*step is computed in f32 on the device (one rounding for i*step, one for the add,
  // unless contracted to an fma): 1 ulp of f32 covers it, then the storage rounding.
  d.tol = [](const op_call& c, int) { return float_tolerance(c.outputs[0].type(), 1.0); };
  d.config = elementwise_schema();
  d.implementations = {fill_impl(true)};
  auto make = [](queue& q, double start, double end, double step, dtype t) {
    op_call c;
    c.op = "arange";
    c.set("start", start).set("end", end).set("step", step).set("dtype", std::string(dtype_name(t)));
    allocate_outputs(q, op_registry::instance().get("arange"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, 0, static_cast<double>(k.at("n")), 1, o.type);
  };
  d.config_test_shapes = {"n=1", "n=4099"};
  d.test_cases = [make](dtype) {
    auto tc = [make](double a, double b, double s) {
      return [=](queue& q, const sample_options& o) { return make(q, a, b, s, o.type); };
    };
    return std::vector<test_case>{{"empty", tc(3, 3, 1)},
                                  {"one", tc(5, 6, 1)},
                                  {"odd", tc(-7, 1024, 3)},
                                  {"negative_step", tc(10, -10, -2)},
                                  {"large", tc(0, 1 << 16, 1)}};
  };
  return d;
}

// ---- cat --------------------------------------------------------------------------------------

op_descriptor make_cat() {
  op_descriptor d;
  d.name = "cat";
  d.family = "layout";
  d.summary = "concatenation of tensors along `dim` (same dtype, equal other dims; strided inputs allowed)";
  d.inputs = {{"tensors"}};
  d.variadic_inputs = true;
  d.outputs = {{"out"}};
  d.attrs = {{"dim", std::int64_t{0}, "the concatenation dim"}};
  d.dtypes = all();
  d.check = [](const op_call& c) {
    const tensor& t0 = c.inputs[0];
    int dim = normalize_dim(c, c.get_int("dim"), t0.dim());
    for (std::size_t i = 1; i < c.inputs.size(); ++i) {
      const tensor& t = c.inputs[i];
      std::string nm = "tensors" + std::to_string(i);
      require_same_dtype(c, t0, "tensors0", t, nm);
      bool ok = t.dim() == t0.dim();
      for (int k = 0; ok && k < t.dim(); ++k)
        if (k != dim && t.shape()[k] != t0.shape()[k]) ok = false;
      if (!ok)
        fail(c, "'" + nm + "' has shape " + t.shape().str() + " but 'tensors0' has " + t0.shape().str() +
                    "; all dims except dim " + std::to_string(dim) + " must match");
    }
  };
  d.infer_outputs = [](const op_call& c) {
    dims s = c.inputs[0].shape();
    int dim = normalize_dim(c, c.get_int("dim"), s.size());
    if (s.size() == 0) fail(c, "cannot concatenate 0-d tensors");
    s[dim] = 0;
    for (const auto& t : c.inputs) s[dim] += t.shape()[dim];
    return std::vector<tensor_spec>{{s, c.inputs[0].type()}};
  };
  d.key_names = {"inputs", "n"};
  d.key = [](const op_call& c) {
    return shape_key{{"inputs", static_cast<std::int64_t>(c.inputs.size())}, {"n", c.outputs[0].numel()}};
  };
  d.flops = [](const op_call&) { return 0.0; };
  d.bytes = [](const op_call& c) { return 2.0 * static_cast<double>(c.outputs[0].nbytes()); };
  d.reference = [](host_call& h) {
    int dim = static_cast<int>(h.call->get_int("dim"));
    auto& out = h.outputs[0];
    if (dim < 0) dim += out.shape.size();
    std::int64_t inner = 1, outer = 1;
    for (int k = dim + 1; k < out.shape.size(); ++k) inner *= out.shape[k];
    for (int k = 0; k < dim; ++k) outer *= out.shape[k];
    std::int64_t pos = 0;
    for (const auto& in : h.inputs) {
      std::int64_t len = in.shape[dim];
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < len * inner; ++j)
          out.values[(o * out.shape[dim] + pos) * inner + j] = in.values[o * len * inner + j];
      pos += len;
    }
  };
  d.tol = [](const op_call&, int) { return tolerance{}; };
  d.config = elementwise_schema();
  op_implementation impl;
  impl.name = "opencl.cat";
  impl.kernel_file = "cast.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) {
    // One converting copy per input into its slice of the output (in-order per output buffer).
    const tensor& out = c.outputs[0];
    int dim = normalize_dim(c, c.get_int("dim"), out.dim());
    std::int64_t pos = 0;
    event last;
    for (const auto& t : c.inputs) {
      std::int64_t len = t.shape()[dim];
      if (len > 0 && t.numel() > 0) last = launch_cast(q, t, out.slice(dim, pos, pos + len), cfg, src);
      pos += len;
    }
    return last;
  };
  d.implementations = {impl};
  auto make = [](queue& q, const sample_options& o, std::vector<dims> shapes, int dim, bool strided) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = "cat";
    c.set("dim", std::int64_t{dim});
    for (std::size_t i = 0; i < shapes.size(); ++i)
      c.inputs.push_back(strided && i == 0
                             ? random_strided(q, shapes[i], o.type, rng, -100, 100, o.small_integers)
                             : random_tensor(q, shapes[i], o.type, rng, -100, 100, o.small_integers));
    allocate_outputs(q, op_registry::instance().get("cat"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    std::int64_t parts = std::max<std::int64_t>(k.get("inputs", 2), 1);
    std::vector<dims> shapes(static_cast<std::size_t>(parts),
                             dims{std::max<std::int64_t>(k.at("n") / parts, 1)});
    return make(q, o, shapes, 0, false);
  };
  d.config_test_shapes = {"inputs=2,n=2", "inputs=3,n=4098"};
  d.test_cases = [make](dtype) {
    auto tc = [make](std::vector<dims> s, int dim, bool strided) {
      return [=](queue& q, const sample_options& o) { return make(q, o, s, dim, strided); };
    };
    return std::vector<test_case>{{"empty", tc({{0, 3}, {0, 3}}, 0, false)},
                                  {"one", tc({{1}}, 0, false)},
                                  {"odd", tc({{5, 7}, {5, 0}, {5, 13}}, 1, false)},
                                  {"large", tc({{300, 1024}, {212, 1024}}, 0, false)},
                                  {"last_dim_negative", tc({{3, 4, 5}, {3, 4, 2}}, -1, false)},
                                  {"strided", tc({{33, 65}, {33, 7}}, 1, true)}};
  };
  return d;
}

}  // namespace

void register_layout_ops(op_registry& r) {
  r.add(make_copy());
  r.add(make_cast());
  r.add(make_fill("fill"));
  r.add(make_fill("zeros"));
  r.add(make_arange());
  r.add(make_cat());
}

}  // namespace prism
