// SPDX-License-Identifier: Apache-2.0
// post_attention: the rest of a pre-norm SwiGLU decoder layer after its attention, for decode's
// small M (kernels/cl/gemv_chain.cl):
//   h   = residual + attn o_weight^T
//   out = h + down_weight (silu(n gate^T) * (n up^T)),  n = rms_norm(h, norm_weight, eps)
// with gate_up_weight [2I, H] holding the I gate rows, then the I up rows. The three GEMVs run as
// one launch (config chain=1: work-groups take tickets and wait on the previous stage's count) or
// as three (chain=0); both round h and the activations to the storage dtype as the unfused ops
// (addmm, linear_silu_and_mul, addmm) do. `out` may alias `residual` (decode updates the residual
// stream in place). The three weights may instead be GGUF blocks (q8_0, q4_0 or q4_1, one type for
// all three; a quantized tensor's rows are whole blocks) with the rest in f32, f16 or bf16: weight-only
// quantization, as linear's, the blocks read in place (gemv_chain.cl's QTYPE).
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kernels/op_support.hpp"
#include "kernels/ops/gemm_shared.hpp"
#include "kernels/ptx_forms.hpp"

namespace prism {

using namespace kernels;

namespace {

enum operand { kResidual, kAttn, kOWeight, kNormWeight, kGateUp, kDown };

// The chain's counters sit this many ints apart (a 128-byte line each), so that the groups polling
// one do not queue behind the increments of another (gemv_chain.cl's CTR_STRIDE).
constexpr std::int64_t kCounterStride = 32;
// The counters: ticket, stage 1 done, stage 2 done, groups finished, Q1 done, Q2 done, Q0 done
// (CTR_COUNT).
constexpr std::int64_t kCounters = 7;

// Hidden size H, attention width A, MLP width I.
struct block_dims {
  std::int64_t M, H, A, I;
};

block_dims dims_of(const op_call& c) {
  return {c.inputs[kResidual].size(0), c.inputs[kResidual].size(1), c.inputs[kAttn].size(1),
          c.inputs[kGateUp].size(0) / 2};
}

void check_post_attention(const op_call& c) {
  static const char* const names[] = {"residual",    "attn",           "o_weight",
                                      "norm_weight", "gate_up_weight", "down_weight"};
  const tensor& r = c.inputs[kResidual];
  require_rank(c, r, "residual", 2, 2);
  require_dtype(c, r, "residual", {dtype::f32, dtype::f16, dtype::bf16});
  const dtype wt = c.inputs[kOWeight].type();
  const bool quant = is_quantized(wt);
  for (int i = kAttn; i <= kDown; ++i) {
    const tensor& t = c.inputs[static_cast<std::size_t>(i)];
    const bool weight = i == kOWeight || i == kGateUp || i == kDown;
    if (weight && (quant || is_quantized(t.type()))) {
      if (t.type() != wt)
        fail(c, fmt::format("'{}' is {} and 'o_weight' {}; the three weights take one dtype: {}, or one of "
                            "q8_0, q4_0, q4_1 for all three",
                            names[i], dtype_name(t.type()), dtype_name(wt), dtype_name(r.type())));
    } else {
      require_same_dtype(c, r, "residual", t, names[i]);
    }
    require_rank(c, t, names[i], i == kNormWeight ? 1 : 2, i == kNormWeight ? 1 : 2);
  }
  const auto [M, H, A, I] = dims_of(c);
  const tensor& attn = c.inputs[kAttn];
  const tensor& wo = c.inputs[kOWeight];
  const tensor& g = c.inputs[kNormWeight];
  const tensor& gu = c.inputs[kGateUp];
  const tensor& wd = c.inputs[kDown];
  auto want = [&](const tensor& t, const char* name, const std::string& expected, bool ok) {
    if (!ok)
      fail(c, fmt::format("'{}' has shape {}; expected {} (residual {}, attn {})", name, t.shape().str(),
                          expected, r.shape().str(), attn.shape().str()));
  };
  want(attn, "attn", fmt::format("[{}, A]", M), attn.size(0) == M);
  want(wo, "o_weight", fmt::format("[{}, {}] (hidden, attn width)", H, A),
       wo.size(0) == H && wo.size(1) == A);
  want(g, "norm_weight", fmt::format("[{}]", H), g.size(0) == H);
  want(gu, "gate_up_weight", fmt::format("[2 I, {}]: I gate rows, then I up rows", H),
       gu.size(0) % 2 == 0 && gu.size(0) > 0 && gu.size(1) == H);
  want(wd, "down_weight", fmt::format("[{}, {}] (hidden, I)", H, I), wd.size(0) == H && wd.size(1) == I);
  const double eps = c.get_f64("eps");
  if (!(eps >= 0)) fail(c, "attribute 'eps' must be >= 0; got " + format_attr(eps));
  for (std::int64_t v : {M, H, A, 2 * I})
    if (v > std::numeric_limits<int>::max())
      fail(c,
           fmt::format("sizes beyond 2^31 - 1 are not supported; got residual {}, attn {}, gate_up_weight {}",
                       r.shape().str(), attn.shape().str(), gu.shape().str()));
}

// Double precision, rounding h and the activations to the storage dtype where the kernel stores
// them. Magnitudes: the absolute products of each stage, carried through the next. On block-
// quantized weights stages 2 and 3 (and 1 with qo) may read their activations as int8 per
// 32-block (qa=1), whose error is at most absmax / 254 a block: every stage's magnitude then takes
// each block's largest input magnitude times the block's sum |w| (as reference_rows does for
// linear), which also bounds the sum of |x w| itself.
void reference_post_attention(host_call& hc) {
  const op_call& c = *hc.call;
  const dtype t = c.inputs[kResidual].type();
  const auto [M, H, A, I] = dims_of(c);
  const auto& res = hc.inputs[kResidual].values;
  const auto& attn = hc.inputs[kAttn].values;
  const auto& wo = hc.inputs[kOWeight].values;
  const auto& g = hc.inputs[kNormWeight].values;
  const auto& gu = hc.inputs[kGateUp].values;
  const auto& wd = hc.inputs[kDown].values;
  const double eps = c.get_f64("eps");
  auto& out = hc.outputs[0];
  out.magnitude.assign(out.values.size(), 0.0);
  std::vector<double> h(H), mh(H), n(H), mn(H), a(I), ma(I), xa(A);
  const bool quant = is_quantized(c.inputs[kOWeight].type());
  // sum_k x[k] |w[k]| over K, or with quant sum over blocks of max_block x * sum_block |w|.
  auto weighted = [&](const std::vector<double>& x, const double* w, std::int64_t K) {
    double total = 0;
    for (std::int64_t k0 = 0; k0 < K; k0 += quant ? 32 : 1) {
      double xmax = 0, wsum = 0;
      for (std::int64_t k = k0; k < std::min(K, k0 + (quant ? 32 : 1)); ++k) {
        xmax = std::max(xmax, x[k]);
        wsum += std::fabs(w[k]);
      }
      total += xmax * wsum;
    }
    return total;
  };
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t k = 0; k < A; ++k) xa[k] = std::fabs(attn[m * A + k]);
    for (std::int64_t j = 0; j < H; ++j) {
      double s = res[m * H + j];
      for (std::int64_t k = 0; k < A; ++k) s += attn[m * A + k] * wo[j * A + k];
      // Stage 1 reads int8 activations too with qo: the block form of the magnitude (which
      // bounds the plain sum of |x w|).
      const double mag = std::fabs(res[m * H + j]) + weighted(xa, &wo[j * A], A);
      h[j] = round_to(t, s);
      mh[j] = mag + std::fabs(s);
    }
    double ss = 0;
    for (std::int64_t k = 0; k < H; ++k) ss += h[k] * h[k];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(H) + eps);
    for (std::int64_t k = 0; k < H; ++k) {
      n[k] = h[k] * g[k] * rs;
      mn[k] = std::fabs(n[k]) + mh[k] * std::fabs(g[k]) * rs;
    }
    for (std::int64_t i = 0; i < I; ++i) {
      double gv = 0, uv = 0;
      for (std::int64_t k = 0; k < H; ++k) {
        gv += n[k] * gu[i * H + k];
        uv += n[k] * gu[(I + i) * H + k];
      }
      const double mg = weighted(mn, &gu[i * H], H), mu = weighted(mn, &gu[(I + i) * H], H);
      const double s = gv / (1.0 + std::exp(-gv));
      a[i] = round_to(t, s * uv);
      // d(silu(g) u) = silu'(g) u dg + silu(g) du, |silu'| < 1.1; plus the value's own size.
      ma[i] = 1.1 * std::fabs(uv) * mg + std::fabs(s) * mu + std::fabs(s * uv);
    }
    for (std::int64_t i = 0; i < I; ++i) ma[i] += std::fabs(a[i]);
    for (std::int64_t j = 0; j < H; ++j) {
      double s = h[j];
      for (std::int64_t i = 0; i < I; ++i) s += a[i] * wd[j * I + i];
      out.values[m * H + j] = s;
      out.magnitude[m * H + j] = mh[j] + weighted(ma, &wd[j * I], I);
    }
  }
}

tolerance post_attention_tolerance(const op_call& c, int) {
  const auto [M, H, A, I] = dims_of(c);
  const double k = static_cast<double>(std::max({H, A, I}));
  // f32 accumulation over the longest dot; f16/bf16: h and the activations are stored rounded, and
  // a rounding that lands one step away from the reference's moves what reads it by that step.
  const dtype t = c.inputs[kResidual].type();
  const double stored = t == dtype::f32 ? 0.0 : t == dtype::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  // Block-quantized weights: qa=1's int8 activations, absmax / 254 a block (f32 evaluation of
  // the scale and its inverse adds under 2^-20 of it), against the reference's block magnitudes.
  const double int8 = is_quantized(c.inputs[kOWeight].type()) ? (1.0 + std::ldexp(1.0, -10)) / 254.0 : 0.0;
  return tolerance{1.0, 0.0, 0.0, std::ldexp(1.0, -23) * (8.0 + std::sqrt(k)) + stored + int8};
}

// Whether the int8 stages' weight rows are whole block pairs (K and offsets multiples of 64
// weights, so every pair starts 4-byte aligned): gate/up and down always, the o projection with
// stage 1 on int8 activations (qo).
bool whole_block_pairs(std::int64_t H, std::int64_t A, std::int64_t I, const tensor& wo, const tensor& gu,
                       const tensor& wd, bool stage1) {
  return H % 64 == 0 && I % 64 == 0 && gu.offset() % 64 == 0 && wd.offset() % 64 == 0 &&
         (!stage1 || (A % 64 == 0 && wo.offset() % 64 == 0));
}

// The chained kernel's local memory: a column of (mb * nb * 2 + mb) partial sums per item.
std::int64_t local_bytes(const kernel_config& k) {
  return (k.at("mb") * k.at("nb") * 2 + k.at("mb")) * k.at("wg") * 4;
}

// Output units a task covers: nb (variants 0 and 1), nb per warp of 32 (variant 2).
std::int64_t units_per_task(std::int64_t variant, std::int64_t nb, std::int64_t wg) {
  return variant == 2 ? wg / 32 * nb : nb;
}

// qb's whole-block stages: variant 2, 32 units (one block) a task, in qw1 (stage 1) or qw2
// (stage 2) warps of 32 / warps units each.
constexpr std::int64_t kWholeBlockVariant = 2, kWholeBlockUnits = 32, kWholeBlockWarps = 4;  // qw's default
kernel_config whole_block_shape(kernel_config k, std::int64_t warps) {
  k.set("variant", kWholeBlockVariant);
  k.set("nb", kWholeBlockUnits / warps);
  k.set("wg", 32 * warps);
  return k;
}
// The larger of the whole-block stages' local memory (qb=1: both; qb=2: stage 2's).
std::int64_t whole_block_local_bytes(const kernel_config& k) {
  if (k.at("qb") == 0) return 0;
  const std::int64_t two = local_bytes(whole_block_shape(k, k.at("qw2")));
  return k.at("qb") == 1 ? std::max(two, local_bytes(whole_block_shape(k, k.at("qw1")))) : two;
}

config_schema post_attention_schema() {
  config_schema s;
  s.params = {
      {"variant",
       0,
       {0, 1, 2},
       "0: a work-group splits each task's K (GPUs); 1: one work-item per nb output units, K swept "
       "vw-wide (CPUs; three launches); 2: each warp of 32 items owns nb units, its lanes split K "
       "(GPUs; warp shuffles on NVIDIA)"},
      {"chain", 1, {0, 1}, "variants 0, 2: 1 = the three GEMVs in one launch (tickets), 0 = three launches"},
      {"vw", 8, {1, 2, 4, 8, 16}, "variant 1: vector width along K"},
      {"mb", 1, {1, 2, 4, 8}, "input rows per task (M <= mb is the case it is for)"},
      {"nb", 4, {1, 2, 4, 8}, "output units (rows, or gate/up row pairs) per task"},
      {"wg", 128, {8, 16, 32, 64, 128, 256}, "work-group size: the items that split a task's K"},
      {"pf",
       0,
       {0, 1},
       "variants 0 and 2 with chain=1 on 16-byte-aligned float weight rows: 1 = each item loads "
       "its first weight steps (up to 256 bytes) before it waits for the stage before, 0 = after "
       "the wait (on the H200 at qwen3-0.6b's shape 1 cost 3-6% of bf16 decode: fewer groups resident)"},
      {"qa",
       0,
       {0, 1},
       "block-quantized weights, variants 0 and 2: 1 = stages 2 and 3 read int8 activations (the norm's "
       "output and the gated activations quantized per 32-block by two added steps; dp4a on NVIDIA; "
       "chained on GPUs, five launches with chain=0), 0 = float activations"},
      {"qp",
       0,
       {0, 1},
       "qa=1: 1 = gate/up and down read weight block pairs in 32-bit loads where their rows are whole "
       "pairs (hidden and MLP widths and the weights' offsets multiples of 64; 4-byte slots otherwise), "
       "0 = 4-byte slots in 16-bit loads"},
      {"qo",
       0,
       {0, 1, 2},
       "qa=1: stage 1 (the o projection) on int8 activations too: 1 = the attention output quantized "
       "per 32-block by a step of its own before it (six launches with chain=0), 2 = each stage-1 task "
       "quantizes its rows into local memory (no step; block pairs, qp=1, only: where the widths or the "
       "weights' offsets are not multiples of 64, qo=1's step serves it); 0 = stage 1 reads the float "
       "attention output"},
      {"qf",
       0,
       {0, 1},
       "qa=1: 1 = the quantize steps run inside stages 1 and 2, block by block (the task that completes a "
       "32-block of h or of the activations quantizes it): three launches with chain=0, no quantize tasks "
       "chained; 0 = two quantize steps of their own"},
      {"qb",
       0,
       {0, 1, 2},
       "qf=1 with chain=0: stages run as tasks of whole 32-blocks (variant 2, 32 units a task in qw1 / qw2 "
       "warps), each quantizing its own blocks after a group barrier, with no block counters or "
       "fences: 1 = stages 1 and 2, 2 = stage 2 (gate/up) only; the other stages and the step Q0 keep "
       "variant, nb and wg. 0 = every stage takes variant, nb and wg, and the task that completes a block "
       "(by its counter) quantizes it"},
      {"qw1",
       kWholeBlockWarps,
       {4, 8, 16},
       "qb=1: warps of a stage-1 (o projection) whole-block task: 4 = 8 units a warp in 128-item groups, "
       "8 = 4 units in 256, 16 = 2 units in 512 (more warps resident for the stage's H / 32 tasks)"},
      {"qw2", kWholeBlockWarps, {4, 8, 16}, "qb=1 or 2: the same for stage 2's (gate/up) whole-block tasks"}};
  s.rule = [](const kernel_config& k) -> std::optional<std::string> {
    if (k.at("variant") == 1 && k.at("chain") == 1)
      return "variant 1 (one work-item per unit) runs the three stages as three launches: chain must be 0";
    if (k.at("variant") == 2 && k.at("wg") % 32 != 0)
      return "variant 2 runs warps of 32 items: wg must be a multiple of 32";
    if (k.at("variant") == 1 && k.at("qa") == 1)
      return "qa=1 (int8 activations) runs on variants 0 and 2; variant 1 reads float activations";
    if (k.at("qp") == 1 && k.at("qa") == 0) return "qp=1 (block pairs) needs qa=1 (int8 activations)";
    if (k.at("qo") != 0 && k.at("qa") == 0) return "qo=1 or 2 (int8 stage 1) needs qa=1 (int8 activations)";
    if (k.at("qo") == 2 && k.at("qp") != 1)
      return "qo=2 (stage 1 quantized in local memory) walks block pairs: qp must be 1";
    if (k.at("qf") == 1 && k.at("qa") == 0)
      return "qf=1 (quantize inside the stages) needs qa=1 (int8 activations)";
    if (k.at("qb") != 0 && (k.at("qf") == 0 || k.at("chain") == 1))
      return "qb=1 or 2 (stages in whole-block tasks) needs qf=1 and chain=0 (three launches)";
    if (local_bytes(k) > 32768)
      return "(mb * nb * 2 + mb) * wg * 4 bytes of local memory must stay <= 32 KiB";
    if (k.at("qw1") != kWholeBlockWarps && k.at("qb") != 1)
      return "qw1 shapes stage 1's whole-block tasks: it needs qb=1 (keep qw1=4 otherwise)";
    if (k.at("qw2") != kWholeBlockWarps && k.at("qb") == 0)
      return "qw2 shapes stage 2's whole-block tasks: it needs qb=1 or 2 (keep qw2=4 otherwise)";
    if (whole_block_local_bytes(k) > 32768)
      return "qb=1 or 2 runs its stages at nb=32/qw, wg=32*qw: (mb * nb * 2 + mb) * wg * 4 bytes of local "
             "memory must stay <= 32 KiB (mb <= 2)";
    return std::nullopt;
  };
  return s;
}

op_implementation chain_implementation() {
  op_implementation impl;
  impl.name = "opencl.gemv_chain";
  impl.kernel_file = "gemv_chain.cl";
  impl.supports = [](const device& dev, const op_call& c,
                     const kernel_config& cfg) -> std::optional<std::string> {
    if (auto r = check_wg(dev, cfg.at("wg"))) return r;
    for (const char* key : {"qw1", "qw2"})
      if (cfg.at("qb") != 0 && cfg.at(key) != kWholeBlockWarps)
        if (auto r = check_wg(dev, 32 * cfg.at(key))) return fmt::format("{}={}: {}", key, cfg.at(key), *r);
    if (cfg.at("qa") == 1) {
      const dtype wt = c.inputs[kOWeight].type();
      if (!is_quantized(wt))
        return fmt::format(
            "qa=1 quantizes activations for block-quantized weights (q8_0, q4_0, q4_1); "
            "the weights are {}",
            dtype_name(wt));
      if (cfg.at("chain") == 1 && dev.is_cpu())
        return std::string(
            "qa=1 runs chained on GPUs only (CPU devices build the chain without a branch "
            "on the stage); chain=0 runs it as five launches");
    }
    std::int64_t qo_local = 0;  // qo=2: stage 1's int8 rows, their scales and scaled sums
    if (cfg.at("qa") == 1 && cfg.at("qo") == 2) {
      const auto [M, H, A, I] = dims_of(c);
      if (whole_block_pairs(H, A, I, c.inputs[kOWeight], c.inputs[kGateUp], c.inputs[kDown], true))
        qo_local = std::min<std::int64_t>(cfg.at("mb"), M) * A * 5 / 4;  // else qo=1 serves it (enqueue)
    }
    const auto local =
        static_cast<std::uint64_t>(std::max(local_bytes(cfg), whole_block_local_bytes(cfg)) + qo_local);
    if (local > dev.local_mem_size())
      return fmt::format("needs {} bytes of local memory; the device has {}", local, dev.local_mem_size());
    return std::nullopt;
  };
  impl.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override src) -> event {
    const auto [M, H, A, I] = dims_of(c);
    if (M == 0) return event{};
    tensor res = c.inputs[kResidual].contiguous(q);
    tensor attn = c.inputs[kAttn].contiguous(q);
    tensor wo = c.inputs[kOWeight].contiguous(q);
    tensor g = c.inputs[kNormWeight].contiguous(q);
    tensor gu = c.inputs[kGateUp].contiguous(q);
    tensor wd = c.inputs[kDown].contiguous(q);
    tensor out = c.outputs[0];
    const std::int64_t mb = std::min<std::int64_t>(cfg.at("mb"), M), nb = cfg.at("nb"), wg = cfg.at("wg");
    const bool rows = cfg.at("variant") == 1;
    const bool chain = !rows && cfg.at("chain") == 1;
    const auto es = static_cast<std::int64_t>(dtype_size(res.type()));
    auto aligned = [&](const tensor& t) { return (t.offset() * es) % 16 == 0; };
    // Block-quantized weights: their offsets and row strides go to the kernel in bytes.
    const bool quant = is_quantized(wo.type());
    const auto qbytes = static_cast<std::int64_t>(dtype_size(wo.type()));
    auto w_units = [&](std::int64_t elements) { return quant ? elements / 32 * qbytes : elements; };
    // 16-byte loads when every row that a stage reads starts 16-byte aligned (float weights).
    const bool vec16 = !rows && !quant && (A * es) % 16 == 0 && (H * es) % 16 == 0 && (I * es) % 16 == 0 &&
                       aligned(attn) && aligned(wo) && aligned(g) && aligned(gu) && aligned(wd) &&
                       aligned(out) && (out.strides()[0] * es) % 16 == 0;
    const bool warps = cfg.at("variant") == 2;
    const ptx_forms& forms = probe_ptx(q.get_device());
    const bool qa8 = quant && cfg.at("qa") == 1;
    const bool qf = qa8 && cfg.at("qf") == 1;
    // qo=2 walks stage 1's rows as block pairs from local memory; where the rows are not whole pairs,
    // qo=1's quantize step serves it, as the slot walk serves qp=1.
    const std::int64_t qo = !qa8 ? 0
                            : cfg.at("qo") == 2 && !whole_block_pairs(H, A, I, wo, gu, wd, true)
                                ? 1
                                : cfg.at("qo");
    // qp=1: block pairs where the int8 stages' weight rows are whole pairs, else the 16-bit slot walk.
    const bool pairs = qa8 && cfg.at("qp") == 1 && whole_block_pairs(H, A, I, wo, gu, wd, qo != 0);
    // The chain's fences and loads through inline PTX where they build; qf's block counters take the
    // same fences in the three-launch form.
    const bool ptx = (chain || qf) && forms.has("fence");
    // Weight steps an item loads before its stage's wait (gemv_chain.cl's PF_STEPS): as many as the
    // longest stage has, within 256 bytes of pieces (2 nb a step) an item. CPU devices wait before
    // the task starts (CHAIN_UNIFORM), so there the same loads gain nothing but run the same code.
    std::int64_t pf_steps = 0;
    if (chain && vec16 && cfg.at("pf") == 1) {
      const std::int64_t step = (warps ? 32 : wg) * (16 / es);
      const std::int64_t piece = res.type() == dtype::f16 ? 32 : 16;  // f16 converts at the load
      pf_steps = std::min((std::max({A, H, I}) + step - 1) / step,
                          std::max<std::int64_t>(1, 256 / (piece * 2 * nb)));
    }
    // A stage's build defines at its shape (variant, nb, wg): qb gives stage 2, or 1 and 2, their own.
    auto defines = [&](std::int64_t variant, std::int64_t snb, std::int64_t swg) {
      return fmt::format(
          "{} -DHAS_BIAS=0 -DMB={} -DNB={} -DWG={} -DVW={} -DVEC16={} -DCHAIN={} -DCHAIN_PTX={} -DVARIANT={} "
          "-DLANE_SHFL={} -DCHAIN_UNIFORM={} -DCTR_STRIDE={} -DPF_STEPS={}{}{}",
          gemm_detail::dtype_define(res.type()), mb, snb, swg, rows ? cfg.at("vw") : 1, vec16 ? 1 : 0,
          chain ? 1 : 0, ptx ? 1 : 0, variant, !rows && forms.has("shfl") ? 1 : 0,
          q.get_device().is_cpu() ? 1 : 0, kCounterStride, pf_steps,
          quant ? fmt::format(" -DQTYPE={}", gemm_detail::qtype_define(wo.type())) : std::string(),
          qa8 ? fmt::format(" -DQA8 -DQ_DP4A={} -DQ_PAIRS={} -DQF={} -DQO={}{}", forms.has("dp4a") ? 1 : 0,
                            pairs ? 1 : 0, qf ? 1 : 0, qo,
                            qo == 2 ? fmt::format(" -DQO_K={}", A) : std::string())
              : std::string());
    };
    const std::string base = defines(cfg.at("variant"), nb, wg);
    // The activations' scratch rows (storage dtype, row stride I), with qa=1 their int8 forms
    // (gemv_chain.cl's QA8 layout: the bytes of n, a and with qo the attention output, a scale and a
    // scaled sum a block, h's blocks' sums of squares), and the chain's counters (with qf then a
    // counter per 32-block of h and of the activations).
    const std::int64_t qa_floats =
        qa8 ? M * (H / 4 + I / 4 + 3 * (H / 32) + 2 * (I / 32) + (qo == 1 ? A / 4 + 2 * (A / 32) : 0)) : 0;
    const std::int64_t counters = kCounters * kCounterStride + (qf ? M * (H / 32 + I / 32) : 0);
    auto ws =
        split_workspace(q, static_cast<std::size_t>(M * I + qa_floats), static_cast<std::size_t>(counters));
    const std::int64_t row_blocks = (M + mb - 1) / mb;
    // A stage's tasks over F output units at upt units a task.
    auto tasks = [&](std::int64_t F, std::int64_t upt) { return (F + upt - 1) / upt * row_blocks; };
    const std::int64_t upt = units_per_task(cfg.at("variant"), nb, wg);
    const std::int64_t t1 = tasks(H, upt), t2 = tasks(I, upt);
    // qb: stage 2 (qb=2), or stages 1 and 2 (qb=1), as whole-block tasks (whole_block_shape).
    const std::int64_t qb = qf && !chain ? cfg.at("qb") : 0;
    // qa=1's quantize steps, a group per wg blocks of a row (chain=0: a launch each, between the
    // stages'): Q1 and Q2, none with qf, whose stages quantize their blocks; Q0 with qo.
    const bool steps = qa8 && !qf;
    auto per_row = [&](std::int64_t n) { return M * ((n / 32 + wg - 1) / wg); };
    const std::int64_t nq0 = qo == 1 ? per_row(A) : 0, nq1 = steps ? per_row(H) : 0,
                       nq2 = steps ? per_row(I) : 0;
    const auto uwg = static_cast<std::size_t>(wg);
    const float eps = static_cast<float>(c.get_f64("eps"));
    // Variant 1: one item per nb units of one row (the stage's units, rounded up to wg).
    auto rows_range = [&](std::int64_t units) {
      return nd_range(range<2>(round_up(static_cast<std::size_t>((units + nb - 1) / nb), uwg),
                               static_cast<std::size_t>(M)),
                      range<2>(uwg, std::size_t{1}));
    };
    auto launch = [&](int stage, std::int64_t groups) {
      const bool own = (qb == 1 && stage == 1) || (qb != 0 && stage == 2);  // at whole_block_shape
      std::size_t swg = uwg;
      std::string defs = base;
      if (own) {
        const std::int64_t warps = stage == 1 ? cfg.at("qw1") : cfg.at("qw2");
        const kernel_config whole = whole_block_shape(cfg, warps);
        swg = static_cast<std::size_t>(whole.at("wg"));
        defs = defines(kWholeBlockVariant, whole.at("nb"), whole.at("wg"));
      }
      // gemv_chain.cl names each unchained stage's kernel by its stage (kernel tables time them apart).
      kernel k = build_kernel(q.get_context(), "gemv_chain.cl", src,
                              chain ? defs : defs + fmt::format(" -DSTAGE={}", stage),
                              rows    ? std::string("post_attention_rows")
                              : chain ? std::string("post_attention_block")
                                      : fmt::format("post_attention_stage{}", stage));
      const nd_range r = rows ? rows_range(stage == 2 ? I : H)
                              : nd_range(range<2>(swg * static_cast<std::size_t>(groups), std::size_t{1}),
                                         range<2>(swg, std::size_t{1}));
      return q.submit([&](handler& h) {
        accessor<std::byte> R(res.storage(), h, read_only, res.byte_extent());
        accessor<std::byte> X(attn.storage(), h, read_only, attn.byte_extent());
        accessor<std::byte> WO(wo.storage(), h, read_only, wo.byte_extent());
        accessor<std::byte> G(g.storage(), h, read_only, g.byte_extent());
        accessor<std::byte> GU(gu.storage(), h, read_only, gu.byte_extent());
        accessor<std::byte> WD(wd.storage(), h, read_only, wd.byte_extent());
        accessor<std::byte> O(out.storage(), h, read_write, out.byte_extent());
        accessor<float> S(ws.first, h, read_write);
        accessor<int> C(ws.second, h, read_write);
        // Variant 1's stages read only their own operands (stage 1: the residual, attention output
        // and o weight; 2: h in out, the norm weight, gate/up and the scratch rows; 3: the scratch
        // rows and down weight), the others go as NULL: each buffer argument costs PoCL ~0.3 us of
        // every enqueue. The chained and warp forms read Scratch and Ctr in every stage.
        auto used = [&](int s) { return !rows || stage == s; };
        h.parallel_for(r, k, static_cast<int>(M), static_cast<int>(H), static_cast<int>(A),
                       static_cast<int>(I), buffer_if<std::byte>{R, used(1)}, res.offset(),
                       static_cast<int>(res.strides()[0]), buffer_if<std::byte>{X, used(1)}, attn.offset(),
                       static_cast<int>(attn.strides()[0]), buffer_if<std::byte>{WO, used(1)},
                       w_units(wo.offset()), static_cast<int>(w_units(wo.strides()[0])),
                       buffer_if<std::byte>{G, used(2)}, g.offset(), eps, buffer_if<std::byte>{GU, used(2)},
                       w_units(gu.offset()), static_cast<int>(w_units(gu.strides()[0])),
                       buffer_if<std::byte>{WD, used(3)}, w_units(wd.offset()),
                       static_cast<int>(w_units(wd.strides()[0])), O, out.offset(),
                       static_cast<int>(out.strides()[0]), buffer_if<float>{S, !rows || stage != 1},
                       buffer_if<int>{C, !rows});
      });
    };
    if (chain) return launch(0, 2 * t1 + t2 + nq0 + nq1 + nq2);
    if (qo == 1) launch(10, nq0);
    launch(1, qb == 1 ? tasks(H, kWholeBlockUnits) : t1);
    if (steps) launch(12, nq1);
    launch(2, qb != 0 ? tasks(I, kWholeBlockUnits) : t2);
    if (steps) launch(23, nq2);
    return launch(3, t1);
  };
  return impl;
}

// Random operands: activations and weights in [-1, 1] (the weights scaled by 1/sqrt(K), as a
// trained layer's are, so that h and the output stay of the residual's size); the norm weight in
// [0.5, 1.5].
op_call make_call(queue& q, const sample_options& o, std::int64_t M, std::int64_t H, std::int64_t A,
                  std::int64_t I, bool alias) {
  std::mt19937_64 rng(o.seed);
  // A block-quantized o.type is the weights' (activations o.act), as linear's samples take it.
  const dtype t = is_floating(o.type) ? o.type : o.act;
  const dtype wt = is_quantized(o.type) ? o.type : t;
  auto w = [&](std::int64_t rows, std::int64_t k) {
    const double s = 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1)));
    return random_tensor(q, {rows, k}, wt, rng, -s, s, false);
  };
  op_call c;
  c.op = "post_attention";
  c.inputs = {random_tensor(q, {M, H}, t, rng, -1, 1, false),
              random_tensor(q, {M, A}, t, rng, -1, 1, false),
              w(H, A),
              random_tensor(q, {H}, t, rng, 0.5, 1.5, false),
              w(2 * I, H),
              w(H, I)};
  c.attrs["eps"] = 1e-6;
  if (alias)
    c.outputs = {c.inputs[kResidual]};
  else
    allocate_outputs(q, op_registry::instance().get("post_attention"), c);
  return c;
}

op_descriptor make_post_attention_op() {
  op_descriptor d;
  d.name = "post_attention";
  d.family = "gated_gemv";
  d.summary =
      "h = residual + attn o_weight^T; out = h + down(silu(n gate^T) * (n up^T)), n = rms_norm(h): a "
      "pre-norm "
      "SwiGLU layer after attention, three GEMVs in one launch (small M)";
  d.inputs = {{"residual"}, {"attn"}, {"o_weight"}, {"norm_weight"}, {"gate_up_weight"}, {"down_weight"}};
  d.attrs = {{"eps", 1e-6, "added to the mean square"}};
  d.outputs = {{"out"}};
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1};
  d.check = check_post_attention;
  d.infer_outputs = [](const op_call& c) {
    return std::vector<tensor_spec>{{c.inputs[kResidual].shape(), c.inputs[kResidual].type()}};
  };
  d.key_names = {"m", "h", "a", "i"};
  d.key = [](const op_call& c) {
    const auto [M, H, A, I] = dims_of(c);
    return shape_key{{"m", M}, {"h", H}, {"a", A}, {"i", I}};
  };
  d.flops = [](const op_call& c) {
    const auto [M, H, A, I] = dims_of(c);
    return 2.0 * static_cast<double>(M) * static_cast<double>(H * A + 3 * H * I);
  };
  d.bytes = [](const op_call& c) {
    double b = static_cast<double>(c.outputs[0].nbytes());
    for (const auto& t : c.inputs) b += static_cast<double>(t.nbytes());
    return b;
  };
  d.reference = reference_post_attention;
  d.tol = post_attention_tolerance;
  d.config = post_attention_schema();
  d.implementations = {chain_implementation()};
  d.sample = [](queue& q, const shape_key& k, const sample_options& o) {
    return make_call(q, o, k.at("m"), k.at("h"), k.at("a"), k.at("i"), false);
  };
  d.config_test_shapes = {"m=1,h=40,a=24,i=56", "m=3,h=96,a=128,i=200"};
  d.test_cases = [](dtype t) {
    auto tc = [](std::int64_t M, std::int64_t H, std::int64_t A, std::int64_t I, bool alias) {
      return [=](queue& q, const sample_options& o) { return make_call(q, o, M, H, A, I, alias); };
    };
    if (is_quantized(t))  // whole blocks along every K (A, H, I); M = 1 (decode), small M, 17 rows
      return std::vector<test_case>{{"empty", tc(0, 32, 32, 32, false)},
                                    {"one", tc(1, 32, 32, 32, false)},
                                    {"decode_in_place", tc(1, 256, 512, 672, true)},
                                    {"odd", tc(5, 96, 64, 160, false)},
                                    {"large_m", tc(17, 64, 64, 96, false)}};
    return std::vector<test_case>{{"empty", tc(0, 8, 8, 8, false)},
                                  {"one", tc(1, 1, 1, 1, false)},
                                  {"decode_in_place", tc(1, 256, 512, 688, true)},
                                  {"odd", tc(5, 37, 61, 301, false)},
                                  {"large_m", tc(17, 64, 64, 96, false)}};
  };
  return d;
}

}  // namespace

void register_post_attention_ops(op_registry& r) {
  r.add(make_post_attention_op());
}

}  // namespace prism
