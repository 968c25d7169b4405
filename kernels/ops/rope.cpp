// SPDX-License-Identifier: Apache-2.0
// rotary_embedding: RoPE in place on query [T, Hq, D] and optional key [T, Hk, D], NeoX or
// GPT-J pairing, cos/sin cache [max_pos, rot_dim] (cos | sin halves) and positions [T] (i32/i64).
#include <cmath>

#include "kernels/op_support.hpp"

namespace prism {

using namespace kernels;

namespace {

bool has_key(const op_call& c) {
  return c.inputs.size() > 2 && c.inputs[2].defined();
}

op_descriptor make_rope() {
  op_descriptor d;
  d.name = "rotary_embedding";
  d.family = "rope";
  d.summary =
      "rotates the first rot_dim dims of each query/key head in place by the cached angle of its position";
  d.inputs = {{"positions"}, {"query"}, {"key", true}, {"cos_sin_cache"}};
  d.outputs = {{"query", false, "query"}, {"key", false, "key"}};
  d.attrs = {{"is_neox", true, "NeoX pairs (i, i + rot/2); false: GPT-J pairs (2i, 2i + 1)"}};
  d.dtypes = {dtype::i32, dtype::i64};  // of `positions`, the first input; query/key are any float
  d.strided_outputs_ok = {true, true};
  d.check = [](const op_call& c) {
    const tensor& p = c.inputs[0];
    const tensor& q = c.inputs[1];
    const tensor& cache = c.inputs[3];
    require_rank(c, p, "positions", 1, 1);
    require_rank(c, q, "query", 3, 3);
    require_dtype(c, q, "query", {dtype::f32, dtype::f16, dtype::bf16});
    require_dtype(c, cache, "cos_sin_cache", {dtype::f32, dtype::f16, dtype::bf16});
    require_rank(c, cache, "cos_sin_cache", 2, 2);
    if (p.size(0) != q.size(0))
      fail(c, "'positions' has shape " + p.shape().str() + " but 'query' has " + q.shape().str() +
                  "; expected one position per token (dim 0)");
    const std::int64_t rot = cache.size(1), D = q.size(2);
    if (rot % 2 != 0 || rot > D || rot == 0)
      fail(c, "'cos_sin_cache' has shape " + cache.shape().str() +
                  "; its dim 1 (rot_dim) must be even, >= 2 and <= head size " + std::to_string(D));
    if (q.strides()[2] != 1 && D > 1)
      fail(c, "'query' must have a contiguous last dim; got strides " + q.strides().str());
    if (has_key(c)) {
      const tensor& k = c.inputs[2];
      require_rank(c, k, "key", 3, 3);
      require_same_dtype(c, q, "query", k, "key");
      if (k.size(0) != q.size(0) || k.size(2) != D)
        fail(c, "'key' has shape " + k.shape().str() + "; expected [" + std::to_string(q.size(0)) + ", Hk, " +
                    std::to_string(D) + "] to match 'query' " + q.shape().str());
      if (k.strides()[2] != 1 && D > 1)
        fail(c, "'key' must have a contiguous last dim; got strides " + k.strides().str());
    }
  };
  d.infer_outputs = [](const op_call& c) {
    std::vector<tensor_spec> v = {{c.inputs[1].shape(), c.inputs[1].type()}};
    v.push_back(has_key(c) ? tensor_spec{c.inputs[2].shape(), c.inputs[2].type()} : tensor_spec{});
    return v;
  };
  d.key_names = {"tokens", "heads", "d", "rot"};
  d.key = [](const op_call& c) {
    const tensor& q = c.inputs[1];
    return shape_key{{"tokens", q.size(0)},
                     {"heads", q.size(1) + (has_key(c) ? c.inputs[2].size(1) : 0)},
                     {"d", q.size(2)},
                     {"rot", c.inputs[3].size(1)}};
  };
  d.flops = [](const op_call& c) {
    const tensor& q = c.inputs[1];
    return 6.0 * static_cast<double>(q.size(0) * (q.size(1) + (has_key(c) ? c.inputs[2].size(1) : 0))) *
           static_cast<double>(c.inputs[3].size(1) / 2);
  };
  d.bytes = [](const op_call& c) {
    const tensor& q = c.inputs[1];
    double rot_part =
        static_cast<double>(c.inputs[3].size(1)) / static_cast<double>(std::max<std::int64_t>(q.size(2), 1));
    double n =
        static_cast<double>(q.nbytes()) + (has_key(c) ? static_cast<double>(c.inputs[2].nbytes()) : 0.0);
    return 2.0 * n * rot_part;
  };
  d.reference = [](host_call& h) {
    const bool neox = h.call->get_bool("is_neox");
    const auto& pos = h.inputs[0];
    const auto& cache = h.inputs[3];
    const std::int64_t rot = cache.shape[1], half = rot / 2, max_pos = cache.shape[0];
    for (int which = 0; which < 2; ++which) {
      const host_tensor& in = h.inputs[which == 0 ? 1 : 2];
      host_tensor& out = h.outputs[which];
      if (!in.defined) continue;
      out.values = in.values;
      out.magnitude.assign(out.values.size(), 0.0);
      const std::int64_t T = in.shape[0], H = in.shape[1], D = in.shape[2];
      for (std::int64_t t = 0; t < T; ++t) {
        std::int64_t p = static_cast<std::int64_t>(pos.values[t]);
        if (p < 0 || p >= max_pos) continue;
        for (std::int64_t hh = 0; hh < H; ++hh)
          for (std::int64_t i = 0; i < half; ++i) {
            std::int64_t i1 = neox ? i : 2 * i, i2 = neox ? i + half : 2 * i + 1;
            std::int64_t base = (t * H + hh) * D;
            double cs = cache.values[p * rot + i], sn = cache.values[p * rot + half + i];
            double x1 = in.values[base + i1], x2 = in.values[base + i2];
            out.values[base + i1] = x1 * cs - x2 * sn;
            out.values[base + i2] = x2 * cs + x1 * sn;
            out.magnitude[base + i1] = out.magnitude[base + i2] =
                std::fabs(x1 * cs) + std::fabs(x2 * sn) + std::fabs(x2 * cs) + std::fabs(x1 * sn);
          }
      }
    }
  };
  d.tol = [](const op_call& c, int) { return float_tolerance(c.inputs[1].type(), 1.0, 2 * eps_f32); };
  config_schema s;
  s.params = {
      {"wg", 128, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}, "work-group size (along heads for variant 1)"},
      {"vec", 4, {1, 2, 4, 8, 16}, "variant 1: vector width of the NeoX pair sweep"},
      {"variant", 0, {0, 1}, "0: one work-item per rotated pair; 1: one work-item per (head, token)"}};
  d.config = s;
  op_implementation impl;
  impl.name = "opencl.rope";
  impl.kernel_file = "rope.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    tensor pos = c.inputs[0].contiguous(q);
    tensor cache = c.inputs[3].contiguous(q);
    tensor qt = c.outputs[0];
    const bool hk_present = has_key(c);
    tensor kt = hk_present ? c.outputs[1] : qt;
    const std::int64_t T = qt.size(0), hq = qt.size(1), hk = hk_present ? kt.size(1) : 0;
    const std::int64_t half = cache.size(1) / 2, max_pos = cache.size(0);
    const std::int64_t items = T * (hq + hk) * half;
    if (items == 0) return event{};
    const std::int64_t wg = cfg.at("wg");
    std::string opts = dtype_defines("A", qt.type()) + dtype_defines("C", cache.type()) +
                       dtype_defines("P", pos.type()) + "-DNEOX=" + (c.get_bool("is_neox") ? "1" : "0") +
                       " -DVEC=" + std::to_string(cfg.at("vec"));
    const bool per_head = cfg.at("variant") == 1;
    kernel k = build_kernel(q.get_context(), "rope.cl", src, opts, per_head ? "rope_per_head" : "rope");
    const std::size_t uwg = static_cast<std::size_t>(wg);
    const nd_range r =
        per_head ? nd_range(range<2>(round_up(static_cast<std::size_t>(hq + hk), uwg),
                                     static_cast<std::size_t>(T)),
                            range<2>(uwg, std::size_t{1}))
                 : nd_range(range<1>(round_up(static_cast<std::size_t>(items), uwg)), range<1>(uwg));
    return q.submit([&](handler& h) {
      accessor<std::byte> P(pos.storage(), h, read_only, pos.byte_extent());
      accessor<std::byte> C(cache.storage(), h, read_only, cache.byte_extent());
      accessor<std::byte> Q(qt.storage(), h, read_write, qt.byte_extent());
      if (hk_present && !kt.same_storage(qt)) {
        accessor<std::byte> K(kt.storage(), h, read_write, kt.byte_extent());
        h.parallel_for(r, k, T, hq, hk, half, max_pos, P, pos.offset(), Q, qt.offset(), qt.strides()[0],
                       qt.strides()[1], K, kt.offset(), kt.strides()[0], kt.strides()[1], C, cache.offset());
      } else {
        h.parallel_for(r, k, T, hq, hk, half, max_pos, P, pos.offset(), Q, qt.offset(), qt.strides()[0],
                       qt.strides()[1], Q, kt.offset(), kt.strides()[0], kt.strides()[1], C, cache.offset());
      }
    });
  };
  d.implementations = {impl};
  // Samples: positions i32 or i64 (the suite's dtype), query/key f32 unless `float_type` in the
  // case says otherwise; a real cos/sin table so values stay realistic.
  auto make = [](queue& q, const sample_options& o, std::int64_t T, std::int64_t hq, std::int64_t hk,
                 std::int64_t D, std::int64_t rot, bool neox, dtype ft, bool fused_qkv) {
    std::mt19937_64 rng(o.seed);
    op_call c;
    c.op = "rotary_embedding";
    c.set("is_neox", neox);
    const std::int64_t max_pos = 64;
    dtype pt = is_floating(o.type) ? dtype::i64 : o.type;
    std::vector<double> pv(static_cast<std::size_t>(T));
    for (auto& v : pv) v = static_cast<double>(rng() % max_pos);
    std::vector<std::byte> pb(pv.size() * dtype_size(pt));
    encode_values(pt, pv.data(), pv.size(), pb.data());
    tensor pos = tensor::from_host(q, pb.data(), {T}, pt);
    std::vector<double> cs(static_cast<std::size_t>(max_pos * rot));
    for (std::int64_t p = 0; p < max_pos; ++p)
      for (std::int64_t i = 0; i < rot / 2; ++i) {
        double ang = static_cast<double>(p) *
                     std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rot));
        cs[p * rot + i] = std::cos(ang);
        cs[p * rot + rot / 2 + i] = std::sin(ang);
      }
    std::vector<std::byte> cb(cs.size() * dtype_size(ft));
    encode_values(ft, cs.data(), cs.size(), cb.data());
    tensor cache = tensor::from_host(q, cb.data(), {max_pos, rot}, ft);
    tensor qt, kt;
    if (fused_qkv) {  // query and key as views of one [T, hq + 2 hk, D] tensor (strided tokens)
      tensor qkv = random_tensor(q, {T, hq + 2 * hk, D}, ft, rng, -2, 2, false);
      qt = qkv.slice(1, 0, hq);
      kt = qkv.slice(1, hq, hq + hk);
    } else {
      qt = random_tensor(q, {T, hq, D}, ft, rng, -2, 2, false);
      kt = hk ? random_tensor(q, {T, hk, D}, ft, rng, -2, 2, false) : tensor();
    }
    c.inputs = {pos, qt, kt, cache};
    allocate_outputs(q, op_registry::instance().get("rotary_embedding"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    std::int64_t heads = k.at("heads");
    return make(q, o, k.at("tokens"), std::max<std::int64_t>(heads / 2, 1), heads / 2, k.at("d"),
                k.get("rot", k.at("d")), true, is_floating(o.type) ? o.type : dtype::f32, false);
  };
  d.config_test_shapes = {"tokens=1,heads=2,d=2,rot=2", "tokens=7,heads=12,d=128,rot=128"};
  d.test_cases = [make](dtype) {
    std::vector<test_case> v;
    for (dtype ft : float_dtypes) {
      auto tc = [make, ft](std::int64_t T, std::int64_t hq, std::int64_t hk, std::int64_t D, std::int64_t rot,
                           bool neox, bool fused) {
        return
            [=](queue& q, const sample_options& o) { return make(q, o, T, hq, hk, D, rot, neox, ft, fused); };
      };
      std::string p = std::string(dtype_name(ft)) + ".";
      v.push_back({p + "empty", tc(0, 4, 2, 64, 64, true, false)});
      v.push_back({p + "one", tc(1, 1, 0, 2, 2, true, false)});
      v.push_back({p + "neox.odd", tc(5, 3, 1, 80, 48, true, false)});
      v.push_back({p + "gptj.odd", tc(5, 3, 1, 80, 48, false, false)});
      v.push_back({p + "fused_qkv_strided", tc(9, 4, 2, 64, 64, true, true)});
      if (ft == dtype::f32) v.push_back({p + "large", tc(256, 32, 8, 128, 128, true, false)});
    }
    return v;
  };
  return d;
}

}  // namespace

void register_rope_ops(op_registry& r) {
  r.add(make_rope());
}

}  // namespace prism
