// SPDX-License-Identifier: Apache-2.0
// scaled_dot_product_attention: descriptor over the online-softmax kernels in
// kernels/cl/attention.cl (a row per work-item), attention_split.cl (a row per work-group) and
// attention_tiled.cl (query x key tiles for GPUs) (GQA, causal with a KV-cache offset, additive or boolean
// masks, a [batch, keys] padding mask, any of them together, scale).
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/ops/gemm_shared.hpp"
#include "kernels/ptx_forms.hpp"
#include "prism/error.hpp"

namespace prism {
namespace {

using namespace gemm_detail;

constexpr const char* op_id = "ops::scaled_dot_product_attention";
constexpr std::int64_t max_head_dim = 256;  // q and the accumulator live in private memory

[[noreturn]] void bad(const std::string& msg) {
  throw error(errc::invalid_argument, op_id, msg);
}

struct attn_shape {
  std::int64_t b = 0, hq = 0, hkv = 0, lq = 0, lk = 0, d = 0, dv = 0;
};

attn_shape shape_of(const op_call& c) {
  const tensor& q = c.inputs[0];
  const tensor& k = c.inputs[1];
  const tensor& v = c.inputs[2];
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
}

bool has_mask(const op_call& c) {
  return c.inputs.size() > 3 && c.inputs[3].defined();
}
int mask_kind(const op_call& c) {
  if (!has_mask(c)) return 0;
  return c.inputs[3].type() == dtype::boolean ? 2 : 1;
}
bool has_key_mask(const op_call& c) {
  return c.inputs.size() > 4 && c.inputs[4].defined();
}
// The shape key's "mask": attn_mask kind (0 none, 1 additive, 2 bool) + 3 with a key mask.
int mask_key(const op_call& c) {
  return mask_kind(c) + (has_key_mask(c) ? 3 : 0);
}

// Strides of a mask broadcast to [b, hq, lq, lk] (right-aligned, size-1 dims get stride 0).
std::array<std::int64_t, 4> mask_strides(const tensor& m, const attn_shape& s) {
  const std::int64_t want[4] = {s.b, s.hq, s.lq, s.lk};
  std::array<std::int64_t, 4> st{0, 0, 0, 0};
  if (m.dim() > 4 || m.dim() < 1)
    bad(fmt::format("attn_mask must broadcast to [{}, {}, {}, {}] (1-D to 4-D), got shape {}", s.b, s.hq,
                    s.lq, s.lk, m.shape().str()));
  for (int i = 0; i < m.dim(); ++i) {
    const int t = 4 - m.dim() + i;
    if (m.size(i) != 1 && m.size(i) != want[t])
      bad(fmt::format(
          "attn_mask shape {} does not broadcast to [{}, {}, {}, {}]; each dim must be 1 or match",
          m.shape().str(), s.b, s.hq, s.lq, s.lk));
    st[t] = m.size(i) == 1 ? 0 : m.strides()[i];
  }
  return st;
}

void check(const op_call& c) {
  const char* names[3] = {"query", "key", "value"};
  for (int i = 0; i < 3; ++i)
    if (c.inputs[i].dim() != 4)
      bad(fmt::format("{} must be 4-D [batch, heads, seq, head_dim], got shape {}", names[i],
                      c.inputs[i].shape().str()));
  const tensor& q = c.inputs[0];
  const tensor& k = c.inputs[1];
  const tensor& v = c.inputs[2];
  for (int i = 1; i < 3; ++i)
    if (c.inputs[i].type() != q.type())
      bad(fmt::format("{} has dtype {} but query has {}; query, key and value must share one float dtype",
                      names[i], dtype_name(c.inputs[i].type()), dtype_name(q.type())));
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0))
    bad(fmt::format("batch sizes differ: query {}, key {}, value {}", q.shape().str(), k.shape().str(),
                    v.shape().str()));
  if (k.size(1) != v.size(1) || k.size(2) != v.size(2))
    bad(fmt::format("key {} and value {} must agree on heads and sequence length", k.shape().str(),
                    v.shape().str()));
  if (k.size(3) != q.size(3))
    bad(fmt::format("query {} and key {} must have the same head_dim", q.shape().str(), k.shape().str()));
  if (k.size(1) == 0 ? q.size(1) != 0 : q.size(1) % k.size(1) != 0)
    bad(fmt::format("query heads ({}) must be a multiple of key/value heads ({}) (grouped-query attention)",
                    q.size(1), k.size(1)));
  if (q.size(3) < 1) bad(fmt::format("head_dim must be >= 1, got query shape {}", q.shape().str()));
  if (q.size(3) > max_head_dim || v.size(3) > max_head_dim)
    bad(fmt::format("head_dim {} / value dim {} exceeds the supported maximum {}", q.size(3), v.size(3),
                    max_head_dim));
  if (has_mask(c)) {
    const tensor& m = c.inputs[3];
    if (m.type() != dtype::boolean && m.type() != q.type())
      bad(fmt::format("attn_mask has dtype {}; valid: bool (true = attend) or the query dtype {} (additive)",
                      dtype_name(m.type()), dtype_name(q.type())));
    mask_strides(m, shape_of(c));
  }
  if (has_key_mask(c)) {
    const tensor& km = c.inputs[4];
    if (km.type() != dtype::boolean && km.type() != dtype::i32 && km.type() != dtype::i64)
      bad(fmt::format("key_mask has dtype {}; valid: bool, i32 or i64 (nonzero = attend)",
                      dtype_name(km.type())));
    if (km.dim() != 2 || km.size(0) != q.size(0) || km.size(1) != k.size(2))
      bad(fmt::format("key_mask has shape {}; expected [batch, kv_len] = [{}, {}]", km.shape().str(),
                      q.size(0), k.size(2)));
  }
  if (c.get_f64("scale") < 0.0)
    bad(fmt::format("scale must be >= 0 (0 = 1/sqrt(head_dim)), got {}", c.get_f64("scale")));
}

double scale_of(const op_call& c, std::int64_t d) {
  const double s = c.get_f64("scale");
  return s > 0.0 ? s : 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(d, 1)));
}

// Kernel stride argument: an OpenCL long4.
struct alignas(32) long4_arg {
  std::int64_t v[4];
};
long4_arg strides4(const tensor& t) {
  return {{t.strides()[0], t.strides()[1], t.strides()[2], t.strides()[3]}};
}

config_schema schema() {
  config_schema s;
  s.params = {
      {"variant",
       0,
       {0, 1, 2, 3, 4},
       "0 one query row per work-item (attention.cl), 1 one work-group per row, split over keys "
       "(attention_split.cl), 2 tiled flash attention for GPUs: 128 items per bq x bk tile "
       "(attention_tiled.cl), 3 flash attention on NVIDIA tensor cores for f16/bf16: bq / 16 warps "
       "per bq x bk tile (attention_mma.cl), 4 the same for f32 with 3xTF32 products (f32-class accuracy, "
       "attention_tf32x3.cl)"},
      {"bq",
       16,
       {1, 2, 4, 8, 16, 32, 64, 128},
       "query rows per work-group (variant 0: one per work-item; variant 2: 16, 32 or 64; variants 3 and 4: "
       "32, 64 or 128, 16 per warp)"},
      {"bk",
       16,
       {1, 2, 4, 8, 16, 32, 64},
       "keys scored per online-softmax step (one rescale per block; variant 2: 8, 16 or 32; variant 3: "
       "16, 32 or 64; variant 4: 8, 16 or 32)"},
      {"local", 0, {0, 1}, "1: stage each K/V block in local memory shared by the work-group (GPU)"},
      {"wg", 64, {16, 32, 64, 128, 256}, "variant 1: work-group size (keys per block, output dims per pass)"},
      {"stages",
       1,
       {1, 2},
       "variants 3 and 4: K/V tiles in local memory (2: double-buffered, the next tile's cp.async copies "
       "overlap this tile's math; 1: one of each, V's copy overlapping the scores and the next K's P V "
       "where the device has cp.async)"},
  };
  s.rule = [](const kernel_config& k) -> std::optional<std::string> {
    if (k.at("variant") == 2) {
      if (k.at("bq") < 16 || k.at("bq") > 64)
        return fmt::format("variant 2 takes bq 16, 32 or 64 (16 row groups of bq / 16 rows), got {}",
                           k.at("bq"));
      if (k.at("bk") < 8 || k.at("bk") > 32)
        return fmt::format("variant 2 takes bk 8, 16 or 32 (8 key groups of bk / 8 keys), got {}",
                           k.at("bk"));
    }
    if (k.at("stages") == 2 && k.at("variant") < 3)
      return fmt::format(
          "stages=2 (cp.async double buffering) is variants 3 and 4's; variant {} takes stages=1",
          k.at("variant"));
    if (k.at("variant") == 4) {
      if (k.at("bq") < 32)
        return fmt::format("variant 4 takes bq 32, 64 or 128 (16 query rows a warp), got {}", k.at("bq"));
      if (k.at("bk") < 8 || k.at("bk") > 32)
        return fmt::format("variant 4 takes bk 8, 16 or 32 (mma k-steps of 8 keys), got {}", k.at("bk"));
    }
    if (k.at("variant") == 3) {
      if (k.at("bq") < 32)
        return fmt::format("variant 3 takes bq 32, 64 or 128 (16 query rows a warp), got {}", k.at("bq"));
      if (k.at("bk") < 16)
        return fmt::format("variant 3 takes bk 16, 32 or 64 (mma k-steps of 16 keys), got {}", k.at("bk"));
    }
    return std::nullopt;
  };
  return s;
}

// What variants 3 and 4 (tensor cores through inline PTX) need beyond their dtype: the PTX forms
// (cp.async too with stages=2), head dims in multiples of `dim_step` up to 128 (fragments live in
// registers), unit head-dim strides with 4-byte query words and 16-byte key / value rows, local
// memory for `stages` K/V tiles, and 2 * bq work-items. The reason, or nullopt.
std::optional<std::string> tensor_core_refusal(const device& dev, const op_call& c, const kernel_config& cfg,
                                               std::initializer_list<const char*> forms,
                                               std::int64_t dim_step) {
  const ptx_forms& ptx = probe_ptx(dev);
  for (const char* form : forms)
    if (!ptx.has(form)) return ptx.why(form);
  if (cfg.at("stages") == 2 && !ptx.has("cp.async")) return ptx.why("cp.async");
  const attn_shape s = shape_of(c);
  if (s.d % dim_step != 0 || s.dv % dim_step != 0 || s.d > 128 || s.dv > 128)
    return fmt::format(
        "variant {} takes head_dim and value dim in multiples of {} up to 128 (mma k-steps, fragments in "
        "registers); got {} and {}",
        cfg.at("variant"), dim_step, s.d, s.dv);
  const std::int64_t esize = static_cast<std::int64_t>(dtype_size(c.inputs[0].type()));
  const char* names[3] = {"query", "key", "value"};
  for (int i = 0; i < 3; ++i) {
    const tensor& x = c.inputs[i];
    const auto& st = x.strides();
    const std::int64_t align = (i == 0 ? 4 : 16) / esize;  // elements per query word / key-value chunk
    if (st[3] != 1 || st[0] % align != 0 || st[1] % align != 0 || st[2] % align != 0 ||
        x.offset() % align != 0)
      return fmt::format(
          "{} needs a unit head-dim stride and its other strides and offset in multiples of {} elements "
          "({}-byte {}); got strides [{}, {}, {}, {}], offset {}",
          names[i], align, align * esize, i == 0 ? "words" : "rows", st[0], st[1], st[2], st[3], x.offset());
  }
  const std::int64_t words = (s.d + s.dv) * esize / 4 + 8;  // a key's K and V row in local memory
  const auto bytes = static_cast<std::uint64_t>(4 * cfg.at("stages") * cfg.at("bk") * words);
  if (bytes > dev.local_mem_size())
    return fmt::format("bk={}, stages={} need {} B of local memory > device {} B", cfg.at("bk"),
                       cfg.at("stages"), bytes, dev.local_mem_size());
  if (static_cast<std::size_t>(2 * cfg.at("bq")) > dev.max_work_group_size())
    return fmt::format("bq={} needs {} work-items per group > device maximum {}", cfg.at("bq"),
                       2 * cfg.at("bq"), dev.max_work_group_size());
  return std::nullopt;
}

// Local memory of variant 2 (attention_tiled.cl): K and V tiles, the weights, and the row-group
// reduction's scratch (unused where warp shuffles build, counted anyway: the check is per device).
std::uint64_t tiled_local_bytes(const attn_shape& s, const kernel_config& cfg) {
  const std::int64_t bq = cfg.at("bq"), bk = cfg.at("bk");
  return static_cast<std::uint64_t>(4 * (bk * (s.d + 4 + s.dv + 4) + bq * (bk + 4) + bq * 8));
}

event enqueue(queue& q, const op_call& c, const kernel_config& cfg, source_override src, int variant) {
  const attn_shape s = shape_of(c);
  if (s.b == 0 || s.hq == 0 || s.lq == 0 || s.dv == 0) return {};
  const tensor& out = c.outputs[0];
  const int mk = mask_kind(c);
  const bool km = has_key_mask(c);
  const std::string km_opts =
      !km ? std::string(" -DKEY_MASK=0")
          : fmt::format(" -DKEY_MASK=1 -DKM_T={}", c.inputs[4].type() == dtype::boolean ? "uchar"
                                                   : c.inputs[4].type() == dtype::i32   ? "int"
                                                                                        : "long");
  const int dt = out.type() == dtype::f32 ? 0 : out.type() == dtype::f16 ? 1 : 2;
  const int causal = c.get_bool("is_causal") ? 1 : 0;
  const std::int64_t bq = std::min(cfg.at("bq"), next_pow2(s.lq)), wg = cfg.at("wg");
  kernel k;
  nd_range r;
  if (variant >= 3) {
    // Tensor cores: bq / 16 warps of 16 query rows (f32 calls take the 3xTF32 kernel).
    const std::int64_t bm = cfg.at("bq");
    const std::string name = variant == 3 ? "attention_mma" : "attention_tf32x3";
    const std::string opts = fmt::format(
        "-DPRISM_DTYPE={} -DD={} -DDV={} -DNW={} -DBN={} -DSTAGES={} -DCP_ASYNC={} -DCAUSAL={} -DMASK_KIND={}{}",
        dt, s.d, s.dv, bm / 16, cfg.at("bk"), cfg.at("stages"), probe_ptx(q.get_device()).has("cp.async") ? 1 : 0,
        causal, mk, km_opts);
    k = build_kernel(q.get_context(), name + ".cl", src, opts, name);
    r = nd_range(range<3>(ceil_div(s.lq, bm) * (bm * 2), s.hq, s.b), range<3>(bm * 2, 1, 1));
  } else if (variant == 2) {
    const std::int64_t bm = cfg.at("bq");
    const std::string opts = fmt::format(
        "-DPRISM_DTYPE={} -DD={} -DDV={} -DBM={} -DBN={} -DCAUSAL={} -DMASK_KIND={} -DLANE_SHFL={}{}", dt,
        s.d, s.dv, bm, cfg.at("bk"), causal, mk, probe_ptx(q.get_device()).has("shfl") ? 1 : 0, km_opts);
    k = build_kernel(q.get_context(), "attention_tiled.cl", src, opts, "attention_tiled");
    r = nd_range(range<3>(ceil_div(s.lq, bm) * 128, s.hq, s.b), range<3>(128, 1, 1));
  } else if (variant == 1) {
    const std::string opts =
        fmt::format("-DPRISM_DTYPE={} -DD={} -DDV={} -DWG={} -DCAUSAL={} -DMASK_KIND={}{}", dt, s.d, s.dv, wg,
                    causal, mk, km_opts);
    k = build_kernel(q.get_context(), "attention_split.cl", src, opts, "attention_split");
    r = nd_range(range<3>(s.lq * wg, s.hq, s.b), range<3>(wg, 1, 1));
  } else {
    // Vectors along the head dim where the layout allows (private path only).
    int vw = 1;
    const bool unit =
        c.inputs[0].strides()[3] == 1 && c.inputs[1].strides()[3] == 1 && c.inputs[2].strides()[3] == 1;
    if (!cfg.at("local") && unit)
      for (int w : {16, 8, 4})
        if (s.d % w == 0 && s.dv % w == 0) {
          vw = w;
          break;
        }
    const std::string opts = fmt::format(
        "-DPRISM_DTYPE={} -DD={} -DDV={} -DBQ={} -DBK={} -DUSE_LOCAL={} -DCAUSAL={} -DMASK_KIND={} -DVW={}{}",
        dt, s.d, s.dv, bq, cfg.at("bk"), cfg.at("local"), causal, mk, vw, km_opts);
    k = build_kernel(q.get_context(), "attention.cl", src, opts, "attention");
    r = nd_range(range<3>(ceil_div(s.lq, bq) * bq, s.hq, s.b), range<3>(bq, 1, 1));
  }

  const int hq = to_int(s.hq, "scaled_dot_product_attention", "query heads");
  const int hkv = to_int(s.hkv, "scaled_dot_product_attention", "key heads");
  const int lq = to_int(s.lq, "scaled_dot_product_attention", "query length");
  const int lk = to_int(s.lk, "scaled_dot_product_attention", "key length");
  const float scale = static_cast<float>(scale_of(c, s.d));
  const tensor& tq = c.inputs[0];
  const tensor& tk = c.inputs[1];
  const tensor& tv = c.inputs[2];
  const long4_arg sq = strides4(tq), sk = strides4(tk), sv = strides4(tv), so = strides4(out);
  long4_arg sm{{0, 0, 0, 0}};
  std::int64_t m_off = 0;
  if (mk) {
    auto st = mask_strides(c.inputs[3], s);
    sm = {{st[0], st[1], st[2], st[3]}};
    m_off = c.inputs[3].offset();
  }
  const std::int64_t q_off = tq.offset(), k_off = tk.offset(), v_off = tv.offset(), o_off = out.offset();
  auto bq_buf = tq.storage();
  auto bk_buf = tk.storage();
  auto bv_buf = tv.storage();
  auto bo_buf = out.storage();
  auto bm_buf = mk ? c.inputs[3].storage() : tq.storage();
  const tensor& tkm = km ? c.inputs[4] : tq;  // bound, never read without KEY_MASK
  const std::int64_t km_off = tkm.offset(), skb = km ? tkm.strides()[0] : 0, skt = km ? tkm.strides()[1] : 0;
  auto bkm_buf = tkm.storage();
  return q.submit([&](handler& h) {
    accessor<std::byte> aq(bq_buf, h, read_only, tq.byte_extent());
    accessor<std::byte> ak(bk_buf, h, read_only, tk.byte_extent());
    accessor<std::byte> av(bv_buf, h, read_only, tv.byte_extent());
    accessor<std::byte> ao(bo_buf, h, write_only, out.byte_extent());
    accessor<std::byte> am(bm_buf, h, read_only, mk ? c.inputs[3].byte_extent() : tq.byte_extent());
    accessor<std::byte> akm(bkm_buf, h, read_only, tkm.byte_extent());
    h.parallel_for(r, k, hq, hkv, lq, lk, scale, aq, q_off, sq, ak, k_off, sk, av, v_off, sv, ao, o_off, so,
                   am, m_off, sm, akm, km_off, skb, skt);
  });
}

// Double-precision reference; magnitude = sum_j p_j |v_j| / sum_j p_j (the scale of the output).
void reference(host_call& hc) {
  const op_call& c = *hc.call;
  const host_tensor& q = hc.inputs[0];
  const host_tensor& k = hc.inputs[1];
  const host_tensor& v = hc.inputs[2];
  const host_tensor* m = hc.inputs.size() > 3 && hc.inputs[3].defined ? &hc.inputs[3] : nullptr;
  const host_tensor* km = hc.inputs.size() > 4 && hc.inputs[4].defined ? &hc.inputs[4] : nullptr;
  const std::int64_t B = q.shape[0], Hq = q.shape[1], Lq = q.shape[2], D = q.shape[3];
  const std::int64_t Hkv = k.shape[1], Lk = k.shape[2], DV = v.shape[3];
  const bool causal = c.get_bool("is_causal");
  const double scale = scale_of(c, D);
  // Row-major strides of the mask's logical values, broadcast to [B, Hq, Lq, Lk].
  std::int64_t ms[4] = {0, 0, 0, 0};
  if (m) {
    const int nd = m->shape.size();
    std::int64_t stride = 1;
    for (int i = nd - 1; i >= 0; --i) {
      ms[4 - nd + i] = m->shape[i] == 1 ? 0 : stride;
      stride *= m->shape[i];
    }
  }
  const bool bool_mask = m && m->type == dtype::boolean;
  host_tensor& o = hc.outputs[0];
  o.values.assign(static_cast<std::size_t>(B * Hq * Lq * DV), 0.0);
  o.magnitude.assign(o.values.size(), 0.0);
  std::vector<double> p(static_cast<std::size_t>(Lk));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hq; ++h) {
      const std::int64_t hk = h / (Hq / Hkv);
      for (std::int64_t i = 0; i < Lq; ++i) {
        double mx = -INFINITY;
        for (std::int64_t j = 0; j < Lk; ++j) {
          double s = -INFINITY;
          if ((!causal || j <= Lk - Lq + i) && (!km || km->values[b * Lk + j] != 0.0)) {
            double dot = 0;
            for (std::int64_t d = 0; d < D; ++d)
              dot += q.values[((b * Hq + h) * Lq + i) * D + d] * k.values[((b * Hkv + hk) * Lk + j) * D + d];
            s = dot * scale;
            if (m) {
              const double mv = m->values[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]];
              if (bool_mask)
                s = mv != 0.0 ? s : -INFINITY;
              else
                s += mv;
            }
          }
          p[j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (std::int64_t j = 0; j < Lk; ++j) {
          p[j] = mx == -INFINITY ? 0.0 : std::exp(p[j] - mx);
          sum += p[j];
        }
        for (std::int64_t d = 0; d < DV; ++d) {
          double acc = 0, mag = 0;
          for (std::int64_t j = 0; j < Lk; ++j) {
            const double vv = v.values[((b * Hkv + hk) * Lk + j) * DV + d];
            acc += p[j] * vv;
            mag += p[j] * std::fabs(vv);
          }
          const std::size_t idx = static_cast<std::size_t>(((b * Hq + h) * Lq + i) * DV + d);
          o.values[idx] = sum > 0 ? acc / sum : 0.0;
          o.magnitude[idx] = sum > 0 ? mag / sum : 0.0;
        }
      }
    }
}

// Score errors (f32 dots of length D, exp) perturb the weights relatively; the output error is
// then bounded by that relative error times the weighted |v|, plus the final rounding.
tolerance tol(const op_call& c, int) {
  const attn_shape s = shape_of(c);
  double eps = std::ldexp(1.0, -23) * (16.0 + 2.0 * std::sqrt(static_cast<double>(s.lk)) +
                                       2.0 * std::sqrt(static_cast<double>(s.d)));
  // 16-bit storage: the tensor-core variant rounds each softmax weight to the storage dtype for
  // P @ V (as FlashAttention does), a relative error of up to one unit roundoff per weight.
  const dtype t = c.inputs[0].type();
  if (t == dtype::bf16) eps += std::ldexp(1.0, -8);
  if (t == dtype::f16) eps += std::ldexp(1.0, -11);
  return tolerance{1.0, 0.0, 0.0, eps};
}

// Sample: contiguous [b, h, l, d] tensors; "causal" and "mask" (0 none, 1 additive, 2 bool; +3:
// with a key padding mask)
// from the key. Values in [-1, 1], so softmax weights stay well conditioned.
op_call sample(queue& q, const shape_key& key, const sample_options& o0) {
  sample_options o = o0;
  o.small_integers = false;  // exp has no exact small-integer regime
  const std::int64_t b = key.at("b"), hq = key.at("hq"), hkv = key.get("hkv", hq), lq = key.at("lq"),
                     lk = key.at("lk"), d = key.at("d"), dv = key.get("dv", d);
  op_call c{"scaled_dot_product_attention", {}, {}, {}};
  c.inputs = {random_tensor(q, {b, hq, lq, d}, o.type, o, 1), random_tensor(q, {b, hkv, lk, d}, o.type, o, 2),
              random_tensor(q, {b, hkv, lk, dv}, o.type, o, 3), tensor(), tensor()};
  const std::int64_t mk = key.get("mask", 0) % 3;
  if (key.get("mask", 0) >= 3) {
    // Padding at the end of each sequence; the first keeps every key.
    std::mt19937_64 rng(o.seed + 78);
    std::vector<float> keep(static_cast<std::size_t>(b * lk));
    for (std::int64_t i = 0; i < b; ++i) {
      const std::int64_t len = i == 0 ? lk : lk - static_cast<std::int64_t>(rng() % (lk / 2 + 1));
      for (std::int64_t j = 0; j < lk; ++j) keep[i * lk + j] = j < len ? 1.0f : 0.0f;
    }
    c.inputs[4] = tensor::from_floats(q, keep, {b, lk}, b % 2 == 0 ? dtype::boolean : dtype::i64);
  }
  if (mk == 1) {
    c.inputs[3] = random_tensor(q, {lq, lk}, o.type, o, 4);
  } else if (mk == 2) {
    std::mt19937_64 rng(o.seed + 77);
    std::vector<float> bits(static_cast<std::size_t>(lq * lk));
    for (auto& x : bits) x = (rng() % 4) != 0 ? 1.0f : 0.0f;
    c.inputs[3] = tensor::from_floats(q, bits, {lq, lk}, dtype::boolean);
  }
  c.set("is_causal", key.get("causal", 0) != 0);
  allocate_outputs(q, op_registry::instance().get("scaled_dot_product_attention"), c);
  return c;
}

// What each variant needs of a call beyond its config's variant and a float dtype: the reason
// it refuses, or nullopt.
std::optional<std::string> flash_needs(const device& dev, const op_call& c, const kernel_config& cfg) {
  if (static_cast<std::size_t>(cfg.at("bq")) > dev.max_work_group_size())
    return fmt::format("bq={} > device maximum work-group size {}", cfg.at("bq"), dev.max_work_group_size());
  if (cfg.at("local")) {
    const attn_shape s = shape_of(c);
    const auto bytes = static_cast<std::uint64_t>(cfg.at("bk") * (s.d + s.dv) * 4);
    if (bytes > dev.local_mem_size())
      return fmt::format("local=1 needs {} B of local memory > device {} B", bytes, dev.local_mem_size());
  }
  return std::nullopt;
}

std::optional<std::string> split_needs(const device& dev, const op_call& c, const kernel_config& cfg) {
  if (static_cast<std::size_t>(cfg.at("wg")) > dev.max_work_group_size())
    return fmt::format("wg={} > device maximum work-group size {}", cfg.at("wg"), dev.max_work_group_size());
  const auto bytes = static_cast<std::uint64_t>((shape_of(c).d + 2 * cfg.at("wg")) * 4);
  if (bytes > dev.local_mem_size())
    return fmt::format("needs {} B of local memory > device {} B", bytes, dev.local_mem_size());
  return std::nullopt;
}

std::optional<std::string> tiled_needs(const device& dev, const op_call& c, const kernel_config& cfg) {
  const attn_shape s = shape_of(c);
  if (s.d % 4 != 0 || s.dv % 4 != 0)
    return fmt::format("head_dim {} and value dim {} must be multiples of 4 (4 dims per load)", s.d, s.dv);
  const char* names[3] = {"query", "key", "value"};
  for (int i = 0; i < 3; ++i)
    if (c.inputs[i].strides()[3] != 1)
      return fmt::format("{} has head-dim stride {}; variant 2 reads 4 contiguous dims per load", names[i],
                         c.inputs[i].strides()[3]);
  if (dev.max_work_group_size() < 128)
    return fmt::format("needs 128 work-items per group > device maximum {}", dev.max_work_group_size());
  const auto bytes = tiled_local_bytes(s, cfg);
  if (bytes > dev.local_mem_size())
    return fmt::format("bq={}, bk={} need {} B of local memory > device {} B", cfg.at("bq"), cfg.at("bk"),
                       bytes, dev.local_mem_size());
  return std::nullopt;
}

std::optional<std::string> mma_needs(const device& dev, const op_call& c, const kernel_config& cfg) {
  const dtype t = c.inputs[0].type();
  if (t != dtype::f16 && t != dtype::bf16)
    return fmt::format("variant 3 runs f16 and bf16 on tensor cores, not {}", dtype_name(t));
  return tensor_core_refusal(
      dev, c, cfg, {t == dtype::f16 ? "mma.m16n8k16.f16" : "mma.m16n8k16.bf16", "ldmatrix", "shfl"}, 16);
}

std::optional<std::string> tf32x3_needs(const device& dev, const op_call& c, const kernel_config& cfg) {
  const dtype t = c.inputs[0].type();
  if (t != dtype::f32)
    return fmt::format("variant 4 runs f32 on tensor cores (3xTF32), not {}; 16-bit dtypes take variant 3",
                       dtype_name(t));
  return tensor_core_refusal(dev, c, cfg, {"mma.m16n8k8.tf32", "shfl"}, 8);
}

// The kernels, indexed by the config's `variant` (the schema's help says what each is).
struct variant_spec {
  const char* impl;
  const char* file;
  std::optional<std::string> (*needs)(const device&, const op_call&, const kernel_config&);
};
constexpr variant_spec variants[] = {
    {"opencl.flash", "attention.cl", flash_needs},
    {"opencl.split", "attention_split.cl", split_needs},
    {"opencl.tiled", "attention_tiled.cl", tiled_needs},
    {"opencl.mma", "attention_mma.cl", mma_needs},
    {"opencl.tf32x3", "attention_tf32x3.cl", tf32x3_needs},
};

test_case keyed(std::string shape_class, std::string key) {
  return {std::move(shape_class), [key](queue& q, const sample_options& o) {
            return op_registry::instance()
                .get("scaled_dot_product_attention")
                .sample(q, shape_key::parse(key), o);
          }};
}

std::vector<test_case> cases(dtype) {
  std::vector<test_case> v = {
      keyed("empty", "b=1,hq=2,hkv=2,lq=0,lk=4,d=8,causal=0,mask=0"),
      keyed("empty", "b=1,hq=2,hkv=1,lq=3,lk=0,d=8,causal=0,mask=0"),
      keyed("one", "b=1,hq=1,hkv=1,lq=1,lk=1,d=1,causal=0,mask=0"),
      // GQA, causal prefill with odd sizes.
      keyed("odd", "b=2,hq=4,hkv=2,lq=7,lk=7,d=24,causal=1,mask=0"),
      // Decode with a KV cache: q rows are the last lq positions.
      keyed("odd", "b=1,hq=4,hkv=1,lq=3,lk=37,d=24,causal=1,mask=0"),
      keyed("large", "b=1,hq=4,hkv=4,lq=64,lk=64,d=64,causal=1,mask=0"),
      keyed("broadcast", "b=2,hq=2,hkv=2,lq=5,lk=9,d=16,causal=0,mask=1"),
      keyed("broadcast", "b=2,hq=2,hkv=2,lq=5,lk=9,d=16,causal=1,mask=2"),
      // Encoder batches: a padding mask, alone and with causal + an additive mask together.
      keyed("padding", "b=3,hq=2,hkv=2,lq=6,lk=6,d=16,causal=0,mask=3"),
      keyed("padding", "b=2,hq=4,hkv=2,lq=7,lk=7,d=16,causal=1,mask=4"),
  };
  // [b, l, h, d] storage viewed as [b, h, l, d] (the usual projection layout), explicit scale.
  v.push_back({"strided", [](queue& q, const sample_options& o0) {
                 sample_options o = o0;
                 o.small_integers = false;
                 op_call c{"scaled_dot_product_attention", {}, {}, {}};
                 c.inputs = {random_tensor(q, {2, 6, 4, 16}, o.type, o, 1).transpose(1, 2),
                             random_tensor(q, {2, 10, 2, 16}, o.type, o, 2).transpose(1, 2),
                             random_tensor(q, {2, 10, 2, 12}, o.type, o, 3).transpose(1, 2), tensor(),
                             tensor()};
                 c.set("scale", 0.3).set("is_causal", false);
                 allocate_outputs(q, op_registry::instance().get("scaled_dot_product_attention"), c);
                 return c;
               }});
  return v;
}

}  // namespace

void register_attention_ops(op_registry& r) {
  op_descriptor d;
  d.name = "scaled_dot_product_attention";
  d.family = "attention";
  d.summary =
      "softmax(scale * query @ key^T + mask) @ value, online softmax; GQA, causal (KV-cache offset), "
      "additive/bool mask, [batch, keys] padding mask (any together)";
  d.inputs = {{"query"}, {"key"}, {"value"}, {"attn_mask", true}, {"key_mask", true}};
  d.outputs = {{"out"}};
  d.strided_outputs_ok = {true};  // the kernels write through the output's strides ([B, T, H] heads)
  d.attrs = {{"is_causal", false, "query i attends keys j <= kv_len - q_len + i"},
             {"scale", 0.0, "score scale; 0 = 1/sqrt(head_dim)"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.check = check;
  d.infer_outputs = [](const op_call& c) {
    const tensor& q = c.inputs[0];
    return std::vector<tensor_spec>{{{q.size(0), q.size(1), q.size(2), c.inputs[2].size(3)}, q.type()}};
  };
  d.key_names = {"b", "hq", "hkv", "lq", "lk", "d", "dv", "causal", "mask"};
  d.key = [](const op_call& c) {
    const attn_shape s = shape_of(c);
    return shape_key{
        {"b", s.b},           {"hq", s.hq}, {"hkv", s.hkv}, {"lq", s.lq},
        {"lk", s.lk},         {"d", s.d},   {"dv", s.dv},   {"causal", c.get_bool("is_causal") ? 1 : 0},
        {"mask", mask_key(c)}};
  };
  d.flops = [](const op_call& c) {
    // Scores and weighted values over the keys each query row sees (under is_causal, row i of
    // lq sees lk - lq + i + 1 of them).
    const attn_shape s = shape_of(c);
    double pairs = static_cast<double>(s.lq) * static_cast<double>(s.lk);
    if (c.get_bool("is_causal") && s.lk >= s.lq)
      pairs = static_cast<double>(s.lq) * static_cast<double>(s.lk - s.lq) +
              0.5 * static_cast<double>(s.lq) * static_cast<double>(s.lq + 1);
    return 2.0 * static_cast<double>(s.b * s.hq) * pairs * static_cast<double>(s.d + s.dv);
  };
  d.bytes = [](const op_call& c) {
    double b = 0;
    for (auto& t : c.inputs)
      if (t.defined()) b += static_cast<double>(t.nbytes());
    return b + static_cast<double>(c.outputs[0].nbytes());
  };
  d.reference = reference;
  d.tol = tol;
  d.config = schema();
  for (int v = 0; v < static_cast<int>(std::size(variants)); ++v)
    d.implementations.push_back(
        {variants[v].impl, variants[v].file,
         [v](const device& dev, const op_call& c, const kernel_config& cfg) -> std::optional<std::string> {
           const std::int64_t want = cfg.at("variant");
           if (want != v)
             return fmt::format("config variant={} selects {}", want,
                                want >= 0 && want < static_cast<std::int64_t>(std::size(variants))
                                    ? variants[want].impl
                                    : "none");
           if (!is_floating(c.inputs[0].type()))
             return fmt::format("dtype {} is not a float dtype", dtype_name(c.inputs[0].type()));
           return variants[v].needs(dev, c, cfg);
         },
         [v](queue& q, const op_call& c, const kernel_config& cfg, source_override src) {
           return enqueue(q, c, cfg, src, v);
         }});
  d.sample = sample;
  d.config_test_shapes = {"b=1,hq=4,hkv=2,lq=5,lk=11,d=16,dv=16,causal=1,mask=0"};
  d.test_cases = cases;
  r.add(std::move(d));
}

}  // namespace prism
