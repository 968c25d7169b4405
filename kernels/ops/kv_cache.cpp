// SPDX-License-Identifier: Apache-2.0
// The decoder's KV-cache ops (kernels/cl/kv_cache.cl). Both take the token positions as a device
// tensor, so a recorded graph replays them for every decode step with only the positions
// changed:
// - qkv_rope_cache: a fused qkv projection output [T, (Hq + 2 Hk) D] -> optional q/k RMSNorm ->
//   RoPE -> query [T, Hq, D], and keys/values written into the cache [2, Hk, S, D] at each
//   token's position (vLLM's rotary_embedding + reshape_and_cache, with Qwen3's q/k norm). One
//   kernel where the unfused chain takes five (two norms, RoPE, two cache copies).
// - kv_cache_attention: query [T, Hq, D] against cache positions 0 .. positions[t] (causal by
//   position, grouped-query), output in row layout [T, Hq * D], ready for o_proj.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/op_support.hpp"
#include "kernels/ptx_forms.hpp"

namespace prism {

using namespace kernels;

namespace {

bool defined_at(const op_call& c, std::size_t i) {
  return c.inputs.size() > i && c.inputs[i].defined();
}

// Heads of a qkv row: D and Hk from the cache, Hq from the row width.
struct qkv_heads {
  std::int64_t T, hq, hk, d, S;
};
qkv_heads heads_of(const op_call& c) {
  const tensor& qkv = c.inputs[0];
  const tensor& cache = c.inputs[3];
  const std::int64_t d = cache.size(3), hk = cache.size(1);
  return {qkv.size(0), qkv.size(1) / d - 2 * hk, hk, d, cache.size(2)};
}

void check_cache(const op_call& c, const tensor& cache, const tensor& like, const char* like_name) {
  require_rank(c, cache, "kv_cache", 4, 4);
  require_same_dtype(c, like, like_name, cache, "kv_cache");
  require_contiguous(c, cache, "kv_cache");
  if (cache.size(0) != 2)
    fail(c, "'kv_cache' has shape " + cache.shape().str() +
                "; expected [2, kv_heads, max_seq, head_dim] (keys, then values)");
  if (cache.size(1) == 0 || cache.size(3) == 0)
    fail(c, "'kv_cache' has shape " + cache.shape().str() + "; kv_heads and head_dim must be > 0");
  if (cache.size(3) > 1024)
    fail(c, "'kv_cache' head_dim " + std::to_string(cache.size(3)) + " is larger than the supported 1024");
}

void check_positions(const op_call& c, const tensor& p, std::int64_t tokens) {
  require_rank(c, p, "positions", 1, 1);
  require_dtype(c, p, "positions", {dtype::i32, dtype::i64});
  if (p.size(0) != tokens)
    fail(c, "'positions' has shape " + p.shape().str() + "; expected [" + std::to_string(tokens) +
                "], one position per token");
}

std::int64_t pow2_at_most(std::int64_t wg, std::int64_t n) {
  std::int64_t w = 1;
  while (w * 2 <= wg && w < n) w *= 2;
  return w;
}

// Positions t0, t0 + 1, ...: distinct, as a decoder writes them (two tokens at one position would
// race for the same cache row).
tensor sample_positions(queue& q, dtype pt, std::int64_t T, std::int64_t first) {
  std::vector<double> pv(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pv[t] = static_cast<double>(first + t);
  std::vector<std::byte> pb(pv.size() * dtype_size(pt));
  encode_values(pt, pv.data(), pv.size(), pb.data());
  return tensor::from_host(q, pb.data(), {T}, pt);
}

tensor sample_cos_sin(queue& q, std::int64_t rows, std::int64_t rot, dtype ft) {
  std::vector<double> cs(static_cast<std::size_t>(rows * rot));
  for (std::int64_t p = 0; p < rows; ++p)
    for (std::int64_t i = 0; i < rot / 2; ++i) {
      const double ang = static_cast<double>(p) *
                         std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rot));
      cs[p * rot + i] = std::cos(ang);
      cs[p * rot + rot / 2 + i] = std::sin(ang);
    }
  std::vector<std::byte> cb(cs.size() * dtype_size(ft));
  encode_values(ft, cs.data(), cs.size(), cb.data());
  return tensor::from_host(q, cb.data(), {rows, rot}, ft);
}

double scale_of(const op_call& c, std::int64_t D) {
  const double s = c.get_f64("scale");
  return s > 0 ? s : 1.0 / std::sqrt(static_cast<double>(D));
}

// The query [T, Hq, D] and the updated cache of a qkv_rope_cache call (also decode_attention's
// first half): double precision, magnitudes for the rotations.
void reference_qkv_rope_cache(host_call& hc, host_tensor& q, host_tensor& kv) {
  const op_call& c = *hc.call;
  const bool neox = c.get_bool("is_neox");
  const double eps = c.get_f64("eps");
  const auto& qkv = hc.inputs[0];
  const auto& pos = hc.inputs[1];
  const auto& cs = hc.inputs[2];
  const auto& cache = hc.inputs[3];
  const host_tensor* qn = hc.inputs.size() > 4 && hc.inputs[4].defined ? &hc.inputs[4] : nullptr;
  const host_tensor* kn = hc.inputs.size() > 5 && hc.inputs[5].defined ? &hc.inputs[5] : nullptr;
  const std::int64_t D = cache.shape[3], hk = cache.shape[1], S = cache.shape[2];
  const std::int64_t T = qkv.shape[0], W = qkv.shape[1], hq = W / D - 2 * hk;
  const std::int64_t rot = cs.shape[1], half = rot / 2, max_pos = cs.shape[0];
  q.values.assign(static_cast<std::size_t>(T * hq * D), 0.0);
  q.magnitude.assign(q.values.size(), 0.0);
  kv.values = cache.values;
  kv.magnitude.assign(kv.values.size(), 0.0);
  std::vector<double> row(static_cast<std::size_t>(D)), out(row.size()), mag(row.size());
  for (std::int64_t t = 0; t < T; ++t) {
    const auto p = static_cast<std::int64_t>(pos.values[t]);
    for (std::int64_t h = 0; h < hq + 2 * hk; ++h) {
      const bool is_q = h < hq, is_v = h >= hq + hk;
      for (std::int64_t i = 0; i < D; ++i) row[i] = qkv.values[t * W + h * D + i];
      const host_tensor* w = is_q ? qn : is_v ? nullptr : kn;
      double scale = 1;
      if (w) {
        double ss = 0;
        for (double v : row) ss += v * v;
        scale = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
        for (std::int64_t i = 0; i < D; ++i) row[i] *= scale * w->values[i];
      }
      for (std::int64_t i = 0; i < D; ++i) {
        out[i] = row[i];
        mag[i] = std::fabs(row[i]);
      }
      if (!is_v && p >= 0 && p < max_pos)
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t i1 = neox ? i : 2 * i, i2 = neox ? i + half : 2 * i + 1;
          const double c0 = cs.values[p * rot + i], s0 = cs.values[p * rot + half + i];
          out[i1] = row[i1] * c0 - row[i2] * s0;
          out[i2] = row[i2] * c0 + row[i1] * s0;
          mag[i1] = mag[i2] = std::fabs(row[i1] * c0) + std::fabs(row[i2] * s0) + std::fabs(row[i2] * c0) +
                              std::fabs(row[i1] * s0);
        }
      if (is_q) {
        for (std::int64_t i = 0; i < D; ++i) {
          q.values[(t * hq + h) * D + i] = out[i];
          q.magnitude[(t * hq + h) * D + i] = mag[i];
        }
      } else if (p >= 0 && p < S) {
        const std::int64_t base = ((is_v ? hk + (h - hq - hk) : h - hq) * S + p) * D;
        for (std::int64_t i = 0; i < D; ++i) {
          kv.values[base + i] = out[i];
          kv.magnitude[base + i] = mag[i];
        }
      }
    }
  }
}

// kv_cache_attention over host tensors (also decode_attention's second half).
void reference_attention(const host_tensor& qt, const host_tensor& cache, const host_tensor& pos,
                         double scale, host_tensor& o) {
  const std::int64_t T = qt.shape[0], hq = qt.shape[1], D = qt.shape[2];
  const std::int64_t hk = cache.shape[1], S = cache.shape[2];
  o.values.assign(static_cast<std::size_t>(T * hq * D), 0.0);
  o.magnitude.assign(o.values.size(), 0.0);
  std::vector<double> p(static_cast<std::size_t>(S));
  for (std::int64_t t = 0; t < T; ++t) {
    const auto pt = static_cast<std::int64_t>(pos.values[t]);
    const std::int64_t L = pt < 0 ? 0 : std::min(pt + 1, S);
    for (std::int64_t h = 0; h < hq; ++h) {
      const std::int64_t kvh = h / (hq / hk);
      double mx = -INFINITY;
      for (std::int64_t j = 0; j < L; ++j) {
        double dot = 0;
        for (std::int64_t i = 0; i < D; ++i)
          dot += qt.values[(t * hq + h) * D + i] * cache.values[(kvh * S + j) * D + i];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < L; ++j) {
        p[j] = std::exp(p[j] - mx);
        sum += p[j];
      }
      for (std::int64_t i = 0; i < D; ++i) {
        double acc = 0, mag = 0;
        for (std::int64_t j = 0; j < L; ++j) {
          const double v = cache.values[((hk + kvh) * S + j) * D + i];
          acc += p[j] * v;
          mag += p[j] * std::fabs(v);
        }
        const std::size_t idx = static_cast<std::size_t>((t * hq + h) * D + i);
        o.values[idx] = sum > 0 ? acc / sum : 0.0;
        o.magnitude[idx] = sum > 0 ? mag / sum : 0.0;
      }
    }
  }
}

// The rules of a qkv_rope_cache-style call (qkv, positions, cos_sin_cache, kv_cache, q_norm,
// k_norm; attribute eps).
void check_qkv_call(const op_call& c) {
  const tensor& qkv = c.inputs[0];
  require_rank(c, qkv, "qkv", 2, 2);
  require_dtype(c, qkv, "qkv", {dtype::f32, dtype::f16, dtype::bf16});
  if (qkv.strides()[1] != 1 && qkv.size(1) > 1)
    fail(c, "'qkv' must have a contiguous last dim; got strides " + qkv.strides().str());
  const tensor& cache = c.inputs[3];
  check_cache(c, cache, qkv, "qkv");
  const std::int64_t D = cache.size(3), hk = cache.size(1);
  if (qkv.size(1) % D != 0 || qkv.size(1) / D <= 2 * hk)
    fail(c, fmt::format("'qkv' has shape {}; its rows must hold (heads + 2 * {} kv heads) * {} values "
                        "(head_dim and kv heads from 'kv_cache' {}), with heads >= 1",
                        qkv.shape().str(), hk, D, cache.shape().str()));
  const std::int64_t hq = qkv.size(1) / D - 2 * hk;
  if (hq % hk != 0)
    fail(c, fmt::format("'qkv' holds {} query heads for {} kv heads; query heads must be a multiple of kv "
                        "heads (grouped-query attention)",
                        hq, hk));
  check_positions(c, c.inputs[1], qkv.size(0));
  const tensor& cs = c.inputs[2];
  require_rank(c, cs, "cos_sin_cache", 2, 2);
  require_dtype(c, cs, "cos_sin_cache", {dtype::f32, dtype::f16, dtype::bf16});
  const std::int64_t rot = cs.size(1);
  if (rot % 2 != 0 || rot == 0 || rot > D)
    fail(c, "'cos_sin_cache' has shape " + cs.shape().str() +
                "; its dim 1 (rot_dim) must be even, >= 2 and <= head_dim " + std::to_string(D));
  for (std::size_t i : {std::size_t{4}, std::size_t{5}}) {
    if (!defined_at(c, i)) continue;
    const char* name = i == 4 ? "q_norm" : "k_norm";
    const tensor& w = c.inputs[i];
    require_dtype(c, w, name, {dtype::f32, dtype::f16, dtype::bf16});
    if (w.dim() != 1 || w.size(0) != D)
      fail(c, std::string("'") + name + "' has shape " + w.shape().str() + "; expected [" +
                  std::to_string(D) + "] (head_dim)");
  }
  if (defined_at(c, 4) && defined_at(c, 5))
    require_same_dtype(c, c.inputs[4], "q_norm", c.inputs[5], "k_norm");
  const double eps = c.get_f64("eps");
  if (!(eps >= 0)) fail(c, "attribute 'eps' must be >= 0; got " + format_attr(eps));
}

// ---- qkv_rope_cache ------------------------------------------------------------------------

// The attention kernels read a cache row 16 bytes per load when every row starts 16-byte
// aligned (the offset and a row of D elements both whole 16-byte units).
// 1 when a call gives both q_norm and k_norm (inputs 4 and 5), else 0: part of the shape key.
std::int64_t qk_norm_of(const op_call& c) {
  return defined_at(c, 4) && defined_at(c, 5) ? 1 : 0;
}

bool krow16(const tensor& cache, std::int64_t d) {
  const auto es = static_cast<std::int64_t>(dtype_size(cache.type()));
  return is_floating(cache.type()) && (d * es) % 16 == 0 && (cache.offset() * es) % 16 == 0;
}

std::string krow16_define(const tensor& cache, std::int64_t d) {
  return fmt::format(" -DKROW16={}", krow16(cache, d) ? 1 : 0);
}

// Variant 3 reads 16-bit rows of 128 dims two a warp (kv_cache.cl's HALF_ROWS): 16 bytes a lane.
bool half_rows(const tensor& cache, std::int64_t d) {
  return krow16(cache, d) && d == 128 && dtype_size(cache.type()) == 2;
}

op_descriptor make_qkv_rope_cache() {
  op_descriptor d;
  d.name = "qkv_rope_cache";
  d.family = "kv_cache";
  d.summary =
      "fused qkv rows -> optional q/k RMSNorm -> RoPE -> query [T, Hq, D]; keys and values written "
      "into the KV cache [2, Hk, S, D] at each token's position";
  d.inputs = {{"qkv"}, {"positions"}, {"cos_sin_cache"}, {"kv_cache"}, {"q_norm", true}, {"k_norm", true}};
  d.outputs = {{"query"}, {"kv_cache", false, "kv_cache"}};
  d.attrs = {{"eps", 1e-6, "added to the mean square of the q/k norms"},
             {"is_neox", true, "NeoX pairs (i, i + rot/2); false: GPT-J pairs (2i, 2i + 1)"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = check_qkv_call;
  d.infer_outputs = [](const op_call& c) {
    const auto h = heads_of(c);
    return std::vector<tensor_spec>{{{h.T, h.hq, h.d}, c.inputs[0].type()},
                                    {c.inputs[3].shape(), c.inputs[3].type()}};
  };
  // qk_norm (0/1): whether q_norm/k_norm are given; pretune's sample follows it, so a model
  // without qk-norm is tuned as it calls the op.
  d.key_names = {"tokens", "heads", "kv_heads", "d", "qk_norm"};
  d.key = [](const op_call& c) {
    const auto h = heads_of(c);
    return shape_key{
        {"tokens", h.T}, {"heads", h.hq}, {"kv_heads", h.hk}, {"d", h.d}, {"qk_norm", qk_norm_of(c)}};
  };
  d.flops = [](const op_call& c) {
    const auto h = heads_of(c);
    return 10.0 * static_cast<double>(h.T * (h.hq + h.hk) * h.d);
  };
  d.bytes = [](const op_call& c) {
    const auto h = heads_of(c);
    return 2.0 * static_cast<double>(h.T * (h.hq + 2 * h.hk) * h.d * dtype_size(c.inputs[0].type()));
  };
  d.reference = [](host_call& hc) { reference_qkv_rope_cache(hc, hc.outputs[0], hc.outputs[1]); };
  d.tol = [](const op_call& c, int output) {
    // The norm's mean square carries ~D u relative error; RoPE two products and a sum.
    const double D = static_cast<double>(c.inputs[3].size(3));
    return float_tolerance(output == 0 ? c.inputs[0].type() : c.inputs[3].type(), 2.0, (D + 8) * 2 * eps_f32);
  };
  config_schema s;
  s.params = {{"wg", 64, {16, 32, 64, 128, 256}, "work-group size (items per head row)"}};
  d.config = s;
  op_implementation impl;
  impl.name = "opencl.qkv_rope_cache";
  impl.kernel_file = "kv_cache.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const auto h = heads_of(c);
    if (h.T == 0) return event{};
    tensor qkv = c.inputs[0];
    tensor pos = c.inputs[1].contiguous(q);
    tensor cs = c.inputs[2].contiguous(q);
    tensor cache = c.outputs[1];
    tensor out = c.outputs[0];
    const bool has_qn = defined_at(c, 4), has_kn = defined_at(c, 5);
    tensor qn = has_qn ? c.inputs[4].contiguous(q) : tensor();
    tensor kn = has_kn ? c.inputs[5].contiguous(q) : tensor();
    const dtype wt = has_qn ? qn.type() : has_kn ? kn.type() : dtype::f32;
    const std::int64_t wg = pow2_at_most(cfg.at("wg"), h.d);
    const std::string opts =
        "-DQKV_ROPE_CACHE " + dtype_defines("A", qkv.type()) + dtype_defines("K", cache.type()) +
        dtype_defines("W", wt) + dtype_defines("C", cs.type()) + dtype_defines("P", pos.type()) +
        fmt::format("-DD={} -DROT={} -DWG={} -DNEOX={} -DHAS_QN={} -DHAS_KN={}", h.d, cs.size(1), wg,
                    c.get_bool("is_neox") ? 1 : 0, has_qn ? 1 : 0, has_kn ? 1 : 0);
    kernel k = build_kernel(q.get_context(), "kv_cache.cl", src, opts, "qkv_rope_cache");
    const auto uwg = static_cast<std::size_t>(wg);
    const nd_range r(range<2>(uwg * static_cast<std::size_t>(h.hq + h.hk), static_cast<std::size_t>(h.T)),
                     range<2>(uwg, std::size_t{1}));
    // Absent norm weights: bind `qkv` (never read; HAS_QN / HAS_KN are 0).
    tensor qnb = has_qn ? qn : qkv;
    tensor knb = has_kn ? kn : qkv;
    const float eps = static_cast<float>(c.get_f64("eps"));
    return q.submit([&](handler& hd) {
      accessor<std::byte> X(qkv.storage(), hd, read_only, qkv.byte_extent());
      accessor<std::byte> P(pos.storage(), hd, read_only, pos.byte_extent());
      accessor<std::byte> C(cs.storage(), hd, read_only, cs.byte_extent());
      accessor<std::byte> O(out.storage(), hd, write_only, out.byte_extent());
      accessor<std::byte> KV(cache.storage(), hd, read_write, cache.byte_extent());
      accessor<std::byte> QN(qnb.storage(), hd, read_only, qnb.byte_extent());
      accessor<std::byte> KN(knb.storage(), hd, read_only, knb.byte_extent());
      hd.parallel_for(r, k, h.hq, h.hk, h.S, cs.size(0), X, qkv.offset(), qkv.strides()[0], P, pos.offset(),
                      C, cs.offset(), O, out.offset(), KV, cache.offset(), QN, qnb.offset(), KN, knb.offset(),
                      eps);
    });
  };
  d.implementations = {impl};
  auto make = [](queue& q, const sample_options& o, std::int64_t T, std::int64_t hq, std::int64_t hk,
                 std::int64_t D, std::int64_t rot, bool norms, bool neox, bool strided_rows) {
    std::mt19937_64 rng(o.seed);
    const dtype ft = is_floating(o.type) ? o.type : dtype::f32;
    op_call c;
    c.op = "qkv_rope_cache";
    c.set("is_neox", neox);
    const std::int64_t S = T + 5, W = (hq + 2 * hk) * D;
    tensor qkv = strided_rows ? random_tensor(q, {T, W + 3}, ft, rng, -2, 2, false).slice(1, 0, W)
                              : random_tensor(q, {T, W}, ft, rng, -2, 2, false);
    tensor cache = random_tensor(q, {2, hk, S, D}, ft, rng, -1, 1, false);
    c.inputs = {qkv,
                sample_positions(q, dtype::i64, T, 3),
                sample_cos_sin(q, S + 3, rot, ft),
                cache,
                norms ? random_tensor(q, {D}, ft, rng, 0.5, 1.5, false) : tensor(),
                norms ? random_tensor(q, {D}, ft, rng, 0.5, 1.5, false) : tensor()};
    allocate_outputs(q, op_registry::instance().get("qkv_rope_cache"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    return make(q, o, k.at("tokens"), k.at("heads"), k.get("kv_heads", k.at("heads")), k.at("d"), k.at("d"),
                k.get("qk_norm", 1) != 0, true, false);
  };
  d.config_test_shapes = {"tokens=1,heads=2,kv_heads=1,d=8", "tokens=3,heads=4,kv_heads=2,d=128"};
  d.test_cases = [make](dtype) {
    auto tc = [make](std::int64_t T, std::int64_t hq, std::int64_t hk, std::int64_t D, std::int64_t rot,
                     bool norms, bool neox, bool strided) {
      return [=](queue& q, const sample_options& o) {
        return make(q, o, T, hq, hk, D, rot, norms, neox, strided);
      };
    };
    return std::vector<test_case>{{"empty", tc(0, 4, 2, 64, 64, true, true, false)},
                                  {"one", tc(1, 2, 1, 8, 8, false, true, false)},
                                  {"qk_norm", tc(1, 16, 8, 128, 128, true, true, false)},
                                  {"gptj.partial_rot", tc(5, 6, 2, 80, 48, false, false, true)},
                                  {"prefill", tc(33, 8, 4, 64, 64, true, true, false)}};
  };
  return d;
}

// ---- kv_cache_attention --------------------------------------------------------------------

op_descriptor make_kv_cache_attention() {
  op_descriptor d;
  d.name = "kv_cache_attention";
  d.family = "kv_cache";
  d.summary =
      "attention of query [T, Hq, D] over KV-cache positions 0 .. positions[t] (causal by position, "
      "grouped-query); output [T, Hq * D]";
  d.inputs = {{"query"}, {"kv_cache"}, {"positions"}};
  d.outputs = {{"out"}};
  d.attrs = {{"scale", 0.0, "score scale; 0: 1 / sqrt(head_dim)"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = [](const op_call& c) {
    const tensor& qt = c.inputs[0];
    require_rank(c, qt, "query", 3, 3);
    require_dtype(c, qt, "query", {dtype::f32, dtype::f16, dtype::bf16});
    if (qt.strides()[2] != 1 && qt.size(2) > 1)
      fail(c, "'query' must have a contiguous last dim; got strides " + qt.strides().str());
    const tensor& cache = c.inputs[1];
    check_cache(c, cache, qt, "query");
    if (cache.size(3) != qt.size(2))
      fail(c, "'kv_cache' has shape " + cache.shape().str() + " but 'query' has " + qt.shape().str() +
                  "; their head_dim (last dims) must match");
    if (qt.size(1) == 0 || qt.size(1) % cache.size(1) != 0)
      fail(c, fmt::format("'query' has {} heads and 'kv_cache' {} kv heads; query heads must be a positive "
                          "multiple of kv heads (grouped-query attention)",
                          qt.size(1), cache.size(1)));
    check_positions(c, c.inputs[2], qt.size(0));
    const double s = c.get_f64("scale");
    if (!(s >= 0)) fail(c, "attribute 'scale' must be >= 0 (0: 1 / sqrt(head_dim)); got " + format_attr(s));
  };
  d.infer_outputs = [](const op_call& c) {
    const tensor& qt = c.inputs[0];
    return std::vector<tensor_spec>{{{qt.size(0), qt.size(1) * qt.size(2)}, qt.type()}};
  };
  // The work grows with the cache length the tokens see, which the host does not know (it is on
  // the device): keys by the cache's capacity.
  d.key_names = {"tokens", "heads", "kv_heads", "d", "max_seq"};
  d.key = [](const op_call& c) {
    const tensor& qt = c.inputs[0];
    const tensor& cache = c.inputs[1];
    return shape_key{{"tokens", qt.size(0)},
                     {"heads", qt.size(1)},
                     {"kv_heads", cache.size(1)},
                     {"d", qt.size(2)},
                     {"max_seq", cache.size(2)}};
  };
  d.flops = [](const op_call& c) {
    const tensor& qt = c.inputs[0];
    return 4.0 * static_cast<double>(qt.numel()) * static_cast<double>(c.inputs[1].size(2));
  };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[1].nbytes() + 2 * c.inputs[0].nbytes());
  };
  d.reference = [](host_call& hc) {
    reference_attention(hc.inputs[0], hc.inputs[1], hc.inputs[2], scale_of(*hc.call, hc.inputs[0].shape[2]),
                        hc.outputs[0]);
  };
  d.tol = [](const op_call& c, int) {
    const double L = static_cast<double>(c.inputs[1].size(2)), D = static_cast<double>(c.inputs[0].size(2));
    return tolerance{1.0, 0.0, 0.0, std::ldexp(1.0, -23) * (16.0 + 2.0 * std::sqrt(L) + 2.0 * std::sqrt(D))};
  };
  config_schema s;
  s.params = {{"wg", 64, {16, 32, 64, 128, 256}, "work-group size: keys per chunk of the online softmax"}};
  d.config = s;
  op_implementation impl;
  impl.name = "opencl.kv_cache_attention";
  impl.kernel_file = "kv_cache.cl";
  impl.supports = [](const device& dev, const op_call&, const kernel_config& cfg) {
    return check_wg(dev, cfg.at("wg"));
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    tensor qt = c.inputs[0];
    tensor cache = c.inputs[1];
    tensor pos = c.inputs[2].contiguous(q);
    tensor out = c.outputs[0];
    const std::int64_t T = qt.size(0), hq = qt.size(1), D = qt.size(2);
    if (T == 0) return event{};
    const std::int64_t wg = cfg.at("wg");
    const std::string opts = "-DKV_CACHE_ATTENTION " + dtype_defines("A", qt.type()) +
                             dtype_defines("K", cache.type()) + dtype_defines("P", pos.type()) +
                             fmt::format("-DD={} -DWG={} -DACC_N={}", D, wg, (D + wg - 1) / wg) +
                             krow16_define(cache, D);
    kernel k = build_kernel(q.get_context(), "kv_cache.cl", src, opts, "kv_cache_attention");
    const auto uwg = static_cast<std::size_t>(wg);
    const nd_range r(range<2>(uwg * static_cast<std::size_t>(hq), static_cast<std::size_t>(T)),
                     range<2>(uwg, std::size_t{1}));
    const float scale = static_cast<float>(scale_of(c, D));
    return q.submit([&](handler& h) {
      accessor<std::byte> Q(qt.storage(), h, read_only, qt.byte_extent());
      accessor<std::byte> KV(cache.storage(), h, read_only, cache.byte_extent());
      accessor<std::byte> P(pos.storage(), h, read_only, pos.byte_extent());
      accessor<std::byte> O(out.storage(), h, write_only, out.byte_extent());
      h.parallel_for(r, k, hq, cache.size(1), cache.size(2), scale, Q, qt.offset(), qt.strides()[0],
                     qt.strides()[1], KV, cache.offset(), P, pos.offset(), O, out.offset());
    });
  };
  d.implementations = {impl};
  auto make = [](queue& q, const sample_options& o, std::int64_t T, std::int64_t hq, std::int64_t hk,
                 std::int64_t D, std::int64_t S, std::int64_t first, bool strided_query) {
    std::mt19937_64 rng(o.seed);
    const dtype ft = is_floating(o.type) ? o.type : dtype::f32;
    op_call c;
    c.op = "kv_cache_attention";
    tensor qt = strided_query ? random_tensor(q, {T, hq + 3, D}, ft, rng, -1, 1, false).slice(1, 1, hq + 1)
                              : random_tensor(q, {T, hq, D}, ft, rng, -1, 1, false);
    c.inputs = {qt, random_tensor(q, {2, hk, S, D}, ft, rng, -1, 1, false),
                sample_positions(q, dtype::i64, T, first)};
    allocate_outputs(q, op_registry::instance().get("kv_cache_attention"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    const std::int64_t S = k.at("max_seq"), T = k.at("tokens");
    return make(q, o, T, k.at("heads"), k.get("kv_heads", k.at("heads")), k.at("d"), S,
                std::max<std::int64_t>(S - T, 0), false);
  };
  d.config_test_shapes = {"tokens=1,heads=2,kv_heads=1,d=8,max_seq=5",
                          "tokens=2,heads=4,kv_heads=2,d=128,max_seq=300"};
  d.test_cases = [make](dtype) {
    auto tc = [make](std::int64_t T, std::int64_t hq, std::int64_t hk, std::int64_t D, std::int64_t S,
                     std::int64_t first, bool strided) {
      return [=](queue& q, const sample_options& o) { return make(q, o, T, hq, hk, D, S, first, strided); };
    };
    return std::vector<test_case>{{"empty", tc(0, 4, 2, 64, 16, 0, false)},
                                  {"one", tc(1, 1, 1, 8, 1, 0, false)},
                                  {"decode.gqa", tc(1, 16, 8, 128, 200, 150, false)},
                                  {"decode.odd", tc(1, 6, 2, 80, 97, 96, true)},
                                  {"prefill", tc(17, 8, 4, 64, 40, 10, false)}};
  };
  return d;
}

// ---- decode_attention ----------------------------------------------------------------------

/// Variant 2 keeps G query heads' scores, softmax state and outputs per work-item: at most this many.
constexpr std::int64_t kMaxGroupedHeads = 8;
/// Variant 3: cache rows a warp holds in flight in each pass of its loops (kv_cache.cl's KU).
constexpr std::int64_t kLaneRows = 8;

/// Variant 3's scratch in floats: the normalized rows before RoPE, then the chunk's scores, then
/// the warps' value sums.
std::int64_t lanes_scratch(std::int64_t d, std::int64_t group, std::int64_t wg, std::int64_t chunk) {
  return std::max({group * chunk, (wg / 32) * group * d, (group + 1) * d});
}

/// Variant 3's local memory in bytes: part, qs, kr, vr, the scratch, the running max, sum and scale per
/// head, the lane-sum scratch (a value an item with warp shuffles, `group` without: kv_cache.cl's
/// LANES_RED) and the last-group flag.
std::int64_t lanes_local_bytes(std::int64_t d, std::int64_t group, std::int64_t wg, std::int64_t chunk,
                               bool shfl) {
  const std::int64_t red = (shfl ? 1 : group) * wg;
  return 4 * (3 * d + wg + red + group * d + lanes_scratch(d, group, wg, chunk) + 3 * group) + 4;
}

/// Variant 3's query heads per work-group: the largest divisor of the kv head's group that is at
/// most kMaxGroupedHeads (a group of 16 runs as two blocks of 8, a prime group one head a block).
std::int64_t lanes_block(std::int64_t group) {
  std::int64_t g = std::min(group, kMaxGroupedHeads);
  while (group % g != 0) --g;
  return g;
}

std::optional<std::string> lanes_support(const device& dev, std::int64_t d, std::int64_t group,
                                         std::int64_t wg, std::int64_t chunk) {
  if (wg % 32 != 0)
    return fmt::format("variant=3 runs warps of 32 items: wg must be a multiple of 32 (32 .. 256); wg={}",
                       wg);
  if (d > 256)
    return fmt::format("variant=3 holds a row in a warp's registers: d must be at most 256; d={}", d);
  // As for variant 2: with more items than dims, PoCL 3.1 builds the kernel wrong (the new
  // position's cache rows came out wrong in the op suite's d=128, wg=256 case). GPUs run it.
  if (dev.is_cpu() && wg > d)
    return fmt::format(
        "variant=3 on a CPU device needs wg <= d (PoCL builds it wrong otherwise); wg={}, d={}", wg, d);
  const std::int64_t g = lanes_block(group);
  const bool shfl = probe_ptx(dev).has("shfl");
  const auto local = static_cast<std::uint64_t>(lanes_local_bytes(d, g, wg, chunk, shfl));
  if (local > dev.local_mem_size())
    return fmt::format(
        "variant=3 needs {} bytes of local memory here (wg={}, chunk={}, {} query heads a group); the "
        "device has {}",
        local, wg, chunk, g, dev.local_mem_size());
  return std::nullopt;
}

op_descriptor make_decode_attention() {
  op_descriptor d;
  d.name = "decode_attention";
  d.family = "kv_cache";
  d.summary =
      "one decode token: qkv row -> optional q/k RMSNorm -> RoPE -> k/v into the KV cache -> attention "
      "over cache positions 0 .. position -> [1, Hq * D] (qkv_rope_cache + kv_cache_attention in one kernel)";
  d.inputs = {{"qkv"}, {"positions"}, {"cos_sin_cache"}, {"kv_cache"}, {"q_norm", true}, {"k_norm", true}};
  d.outputs = {{"out"}, {"kv_cache", false, "kv_cache"}};
  d.attrs = {{"eps", 1e-6, "added to the mean square of the q/k norms"},
             {"is_neox", true, "NeoX pairs (i, i + rot/2); false: GPT-J pairs (2i, 2i + 1)"},
             {"scale", 0.0, "score scale; 0: 1 / sqrt(head_dim)"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = [](const op_call& c) {
    check_qkv_call(c);
    if (c.inputs[0].size(0) != 1)
      fail(c, "'qkv' has shape " + c.inputs[0].shape().str() +
                  "; decode_attention takes one token (a [1, ...] row): several tokens of one sequence see "
                  "each other's keys, use qkv_rope_cache and kv_cache_attention for them");
    const double s = c.get_f64("scale");
    if (!(s >= 0)) fail(c, "attribute 'scale' must be >= 0 (0: 1 / sqrt(head_dim)); got " + format_attr(s));
  };
  d.infer_outputs = [](const op_call& c) {
    const auto h = heads_of(c);
    return std::vector<tensor_spec>{{{h.T, h.hq * h.d}, c.inputs[0].type()},
                                    {c.inputs[3].shape(), c.inputs[3].type()}};
  };
  d.key_names = {"heads", "kv_heads", "d", "max_seq", "qk_norm"};
  d.key = [](const op_call& c) {
    const auto h = heads_of(c);
    return shape_key{
        {"heads", h.hq}, {"kv_heads", h.hk}, {"d", h.d}, {"max_seq", h.S}, {"qk_norm", qk_norm_of(c)}};
  };
  d.flops = [](const op_call& c) {
    const auto h = heads_of(c);
    return 4.0 * static_cast<double>(h.hq * h.d * h.S);
  };
  d.bytes = [](const op_call& c) {
    return static_cast<double>(c.inputs[3].nbytes() + 2 * c.inputs[0].nbytes());
  };
  d.reference = [](host_call& hc) {
    const auto h = heads_of(*hc.call);
    host_tensor query;
    query.defined = true;
    query.shape = {h.T, h.hq, h.d};
    query.type = hc.inputs[0].type;
    reference_qkv_rope_cache(hc, query, hc.outputs[1]);
    // The kernel reads the query and the new k/v as stored values: round them as storage would.
    for (auto& v : query.values) v = round_to(query.type, v);
    for (auto& v : hc.outputs[1].values) v = round_to(hc.outputs[1].type, v);
    reference_attention(query, hc.outputs[1], hc.inputs[1], scale_of(*hc.call, h.d), hc.outputs[0]);
  };
  d.tol = [](const op_call& c, int output) {
    const double D = static_cast<double>(c.inputs[3].size(3)), L = static_cast<double>(c.inputs[3].size(2));
    if (output == 1) return float_tolerance(c.inputs[3].type(), 2.0, (D + 8) * 2 * eps_f32);
    // The query's norm/rotation error (~D u) enters the scores, then as attention's own.
    return tolerance{1.0, 0.0, 0.0,
                     std::ldexp(1.0, -23) * (16.0 + 2.0 * std::sqrt(L) + 2.0 * std::sqrt(D) + 2 * D)};
  };
  config_schema s;
  s.params = {
      {"variant",
       0,
       {0, 1, 2, 3},
       "0: a work-group per query head, its items splitting each step's keys (GPUs); 1: one work-item "
       "per query head walking the keys with no barriers (CPUs: wg and chunk do not apply); 2: as 0, "
       "with one work-group per kv head serving all its query heads, each key and value read once "
       "(GPUs, grouped-query attention with at most 8 query heads per kv head); 3: flash decoding, "
       "a work-group per key chunk and block of up to 8 query heads of one kv head, each warp of 32 "
       "items reading whole key and value rows, one coalesced load per item (GPUs; needs chunk > 0, "
       "wg a multiple of 32, d up to 256)"},
      {"wg",
       64,
       {16, 32, 64, 128, 256},
       "variants 0 and 2: work-group size, keys per step of the online softmax; 3: work-group size, "
       "wg / 32 warps"},
      {"chunk",
       0,
       {0, 16, 32, 64, 128, 256, 512},
       "variants 0, 2 and 3: keys per work-group, split over the cache's capacity, the last group of "
       "each head (variant 2: kv head; 3: block of query heads) combining (GPUs: more groups in flight); "
       "0: one group per head (not variant 3)"},
      {"hr",
       0,
       {0, 1},
       "variant 3 on f16/bf16 caches of 128 dims with 16-byte-aligned rows (one row a warp elsewhere): "
       "1 = each warp reads two key or value rows at a time, 16 bytes a lane, each score summed over "
       "16 lanes; 0 = one row at a time, 8 bytes a lane"},
      {"ra",
       0,
       {0, 1},
       "variant 3 where a chunk takes more than one pass of its warps (chunk > wg / 32 x 8 rows, x 2 "
       "with hr=1): 1 = the first pass's key and value rows are loaded as soon as the position is "
       "known, ahead of the norms and RoPE, and the later passes' in their loops; 0 = each pass loads "
       "its rows in its loop. A chunk of one pass always loads ahead"},
      {"sp",
       0,
       {0, 8, 16, 32, 64, 128},
       "variant 3: at most this many work-groups along the keys of each block of query heads, each "
       "taking a run of consecutive chunks of the visible keys that it merges online, the next "
       "chunk's first rows loaded during the current one's softmax and values (a long sequence is "
       "read by a few groups with rows in flight, a short one still one chunk a group); 0 = one "
       "group per chunk of the cache's capacity"}};
  s.rule = [](const kernel_config& k) -> std::optional<std::string> {
    if (k.at("variant") == 1 && k.at("chunk") != 0)
      return "chunk=" + std::to_string(k.at("chunk")) +
             " needs variant=0 (variant=1 walks all keys in one item)";
    if (k.at("variant") == 3 && k.at("chunk") == 0)
      return std::string("variant=3 splits the keys into chunks: it needs chunk > 0 (16 .. 512)");
    if (k.at("hr") == 1 && k.at("variant") != 3)
      return "hr=1 (two cache rows a warp) is variant 3's; variant=" + std::to_string(k.at("variant")) +
             " reads rows otherwise";
    if (k.at("ra") == 1 && k.at("variant") != 3)
      return "ra=1 (the first pass's rows loaded ahead) is variant 3's; variant=" +
             std::to_string(k.at("variant")) + " has no passes of rows";
    if (k.at("sp") != 0 && k.at("variant") != 3)
      return "sp=" + std::to_string(k.at("sp")) +
             " (groups merging runs of chunks) is variant 3's; variant=" + std::to_string(k.at("variant")) +
             " takes one chunk a group";
    return std::nullopt;
  };
  d.config = s;
  op_implementation impl;
  impl.name = "opencl.decode_attention";
  impl.kernel_file = "kv_cache.cl";
  impl.supports = [](const device& dev, const op_call& c,
                     const kernel_config& cfg) -> std::optional<std::string> {
    if (auto r = check_wg(dev, cfg.at("wg"))) return r;
    if (cfg.at("variant") < 2) return std::nullopt;
    const auto h = heads_of(c);
    const std::int64_t group = h.hq / h.hk;
    if (cfg.at("variant") == 3) return lanes_support(dev, h.d, group, cfg.at("wg"), cfg.at("chunk"));
    // Every item holds output dims: with more items than dims, PoCL 3.1 builds this kernel wrong
    // (the second query head's outputs are lost; found by the op suite's d=8 case).
    if (cfg.at("wg") > h.d)
      return fmt::format("variant=2 needs wg <= d (every item holds output dims); wg={}, d={}", cfg.at("wg"),
                         h.d);
    if (group > kMaxGroupedHeads)
      return fmt::format("variant=2 serves at most {} query heads per kv head; this call has {} / {} = {}",
                         kMaxGroupedHeads, h.hq, h.hk, group);
    // row, part, qs, kr, vr, ps, red (floats) and the last-group flag.
    const auto local =
        static_cast<std::uint64_t>(4 * (3 * h.d + cfg.at("wg") + group * h.d + 2 * group * cfg.at("wg")) + 4);
    if (local > dev.local_mem_size())
      return fmt::format("variant=2 needs {} bytes of local memory here; the device has {}", local,
                         dev.local_mem_size());
    return std::nullopt;
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const auto h = heads_of(c);
    tensor qkv = c.inputs[0];
    tensor pos = c.inputs[1].contiguous(q);
    tensor cs = c.inputs[2].contiguous(q);
    tensor cache = c.outputs[1];
    tensor out = c.outputs[0];
    const bool has_qn = defined_at(c, 4), has_kn = defined_at(c, 5);
    tensor qn = has_qn ? c.inputs[4].contiguous(q) : qkv;
    tensor kn = has_kn ? c.inputs[5].contiguous(q) : qkv;
    const dtype wt = has_qn ? qn.type() : has_kn ? kn.type() : dtype::f32;
    const bool rows = cfg.at("variant") == 1, lanes = cfg.at("variant") == 3;
    const bool grouped = cfg.at("variant") == 2 || lanes;
    const std::int64_t wg = rows ? 1 : cfg.at("wg"), chunk = rows ? 0 : cfg.at("chunk");
    // Grouped: query heads a work-group serves (variant 3: a divisor of the kv head's group).
    const std::int64_t group = lanes ? lanes_block(h.hq / h.hk) : grouped ? h.hq / h.hk : 0;
    // Groups along the keys: one per chunk of the capacity, at most sp with variant 3's sp (each
    // then takes a run of chunks; the kernel divides the visible ones among them).
    std::int64_t splits = chunk > 0 ? std::max<std::int64_t>((h.S + chunk - 1) / chunk, 1) : 1;
    if (lanes && cfg.at("sp") > 0) splits = std::min(splits, cfg.at("sp"));
    // The split kernel's partials and counters: variant 3 always takes them (one chunk: one split).
    const bool split = lanes || splits > 1;
    // Variant 3: two rows a warp (hr), and the first pass's rows ahead only where a chunk takes
    // more than one pass of wg / 32 warps x kLaneRows rows (x 2 with hr); else ra=1 builds as ra=0.
    const bool hr = lanes && cfg.at("hr") == 1 && half_rows(cache, h.d);
    const bool ra = lanes && cfg.at("ra") == 1 && chunk > wg / 32 * kLaneRows * (hr ? 2 : 1);
    const std::string opts =
        "-DDECODE_ATTENTION " + dtype_defines("A", qkv.type()) + dtype_defines("K", cache.type()) +
        dtype_defines("W", wt) + dtype_defines("C", cs.type()) + dtype_defines("P", pos.type()) +
        fmt::format(
            "-DD={} -DROT={} -DWG={} -DNEOX={} -DHAS_QN={} -DHAS_KN={} -DACC_N={} -DSPLIT={} -DCHUNK={} "
            "-DROWS={} "
            "-DGROUPED={}",
            h.d, cs.size(1), wg, c.get_bool("is_neox") ? 1 : 0, has_qn ? 1 : 0, has_kn ? 1 : 0,
            (h.d + wg - 1) / wg, split ? 1 : 0, std::max<std::int64_t>(chunk, 1), rows ? 1 : 0, group) +
        krow16_define(cache, h.d) +
        (lanes ? fmt::format(" -DLANES=1 -DKU={} -DSCRATCH={} -DLANE_SHFL={} -DHALF_ROWS={} -DRA={}",
                             kLaneRows, lanes_scratch(h.d, group, wg, chunk),
                             probe_ptx(q.get_device()).has("shfl") ? 1 : 0, hr ? 1 : 0, ra ? 1 : 0)
               : std::string());
    kernel k = build_kernel(q.get_context(), "kv_cache.cl", src, opts,
                            rows      ? "decode_attention_rows"
                            : lanes   ? "decode_attention_lanes"
                            : grouped ? "decode_attention_grouped"
                                      : "decode_attention");
    const auto uwg = static_cast<std::size_t>(wg);
    // Rows: one item per query head, each in its own group so that the heads spread over threads.
    // Grouped: one group per kv head (variant 3: per block of `group` query heads).
    const std::int64_t groups0 = lanes ? h.hq / group : grouped ? h.hk : h.hq;
    const nd_range r(range<2>(uwg * static_cast<std::size_t>(groups0), static_cast<std::size_t>(splits)),
                     range<2>(uwg, std::size_t{1}));
    const float scale = static_cast<float>(scale_of(c, h.d)), eps = static_cast<float>(c.get_f64("eps"));
    // Split: the partials and per-head counters (zero: each launch's last group resets its own).
    // Unsplit, the kernel never reads them: no workspace is allocated on that (CPU) path.
    std::optional<buffer<float>> partials;
    std::optional<buffer<int>> counters;
    if (split) {
      // D + 2 floats a split (variant 3: D + 4, rows kept 16-byte aligned).
      auto ws = split_workspace(q, static_cast<std::size_t>(h.hq * splits * (h.d + 4)),
                                static_cast<std::size_t>(h.hq));
      partials.emplace(std::move(ws.first));
      counters.emplace(std::move(ws.second));
    }
    return q.submit([&](handler& hd) {
      accessor<std::byte> X(qkv.storage(), hd, read_only, qkv.byte_extent());
      accessor<std::byte> P(pos.storage(), hd, read_only, pos.byte_extent());
      accessor<std::byte> C(cs.storage(), hd, read_only, cs.byte_extent());
      accessor<std::byte> KV(cache.storage(), hd, read_write, cache.byte_extent());
      accessor<std::byte> QN(qn.storage(), hd, read_only, qn.byte_extent());
      accessor<std::byte> KN(kn.storage(), hd, read_only, kn.byte_extent());
      accessor<std::byte> O(out.storage(), hd, write_only, out.byte_extent());
      if (rows) {
        hd.parallel_for(r, k, h.hq, h.hk, h.S, cs.size(0), scale, eps, X, qkv.offset(), P, pos.offset(), C,
                        cs.offset(), KV, cache.offset(), QN, qn.offset(), KN, kn.offset(), O, out.offset());
      } else if (split) {
        accessor<float> PT(*partials, hd, read_write);
        accessor<int> CT(*counters, hd, read_write);
        hd.parallel_for(r, k, h.hq, h.hk, h.S, cs.size(0), scale, eps, X, qkv.offset(), P, pos.offset(), C,
                        cs.offset(), KV, cache.offset(), QN, qn.offset(), KN, kn.offset(), O, out.offset(),
                        PT, CT);
      } else {
        hd.parallel_for(r, k, h.hq, h.hk, h.S, cs.size(0), scale, eps, X, qkv.offset(), P, pos.offset(), C,
                        cs.offset(), KV, cache.offset(), QN, qn.offset(), KN, kn.offset(), O, out.offset(), X,
                        X);
      }
    });
  };
  d.implementations = {impl};
  auto make = [](queue& q, const sample_options& o, std::int64_t hq, std::int64_t hk, std::int64_t D,
                 std::int64_t rot, std::int64_t S, std::int64_t p, bool norms, bool neox) {
    std::mt19937_64 rng(o.seed);
    const dtype ft = is_floating(o.type) ? o.type : dtype::f32;
    op_call c;
    c.op = "decode_attention";
    c.set("is_neox", neox);
    c.inputs = {random_tensor(q, {1, (hq + 2 * hk) * D}, ft, rng, -2, 2, false),
                sample_positions(q, dtype::i64, 1, p),
                sample_cos_sin(q, S + 3, rot, ft),
                random_tensor(q, {2, hk, S, D}, ft, rng, -1, 1, false),
                norms ? random_tensor(q, {D}, ft, rng, 0.5, 1.5, false) : tensor(),
                norms ? random_tensor(q, {D}, ft, rng, 0.5, 1.5, false) : tensor()};
    allocate_outputs(q, op_registry::instance().get("decode_attention"), c);
    return c;
  };
  d.sample = [make](queue& q, const shape_key& k, const sample_options& o) {
    // A cache two thirds full: a mid-sequence step (and, split, some groups past the length).
    const std::int64_t S = k.at("max_seq");
    return make(q, o, k.at("heads"), k.get("kv_heads", k.at("heads")), k.at("d"), k.at("d"), S, 2 * S / 3,
                k.get("qk_norm", 1) != 0, true);
  };
  d.config_test_shapes = {"heads=2,kv_heads=1,d=8,max_seq=5", "heads=4,kv_heads=2,d=128,max_seq=300"};
  d.test_cases = [make](dtype) {
    auto tc = [make](std::int64_t hq, std::int64_t hk, std::int64_t D, std::int64_t rot, std::int64_t S,
                     std::int64_t p, bool norms, bool neox) {
      return [=](queue& q, const sample_options& o) { return make(q, o, hq, hk, D, rot, S, p, norms, neox); };
    };
    return std::vector<test_case>{{"first", tc(2, 1, 8, 8, 4, 0, false, true)},
                                  {"qk_norm.gqa", tc(16, 8, 128, 128, 200, 150, true, true)},
                                  {"gptj.partial_rot", tc(6, 2, 80, 48, 97, 96, false, false)},
                                  {"past_end", tc(4, 2, 64, 64, 40, 45, true, true)}};
  };
  return d;
}

}  // namespace

void register_kv_cache_ops(op_registry& r) {
  r.add(make_qkv_rope_cache());
  r.add(make_kv_cache_attention());
  r.add(make_decode_attention());
}

}  // namespace prism
