// SPDX-License-Identifier: Apache-2.0
// The matmul family (mm, bmm, addmm, linear, matmul): descriptors over prism's GEMM kernels,
// kernels/cl/gemm_cpu.cl (register-blocked, no barriers), gemm_gpu.cl (local-memory tiles),
// gemm_gemv.cl (small M, parallel over N and K), for NVIDIA GPUs gemm_nv.cl (FP32 register
// tiles, split-K, small-M) and gemm_mma.cl (tensor cores through inline PTX), and for weights in
// GGUF's block formats (q8_0, q4_0, q4_1; linear and matmul) gemm_quant.cl. Each op owns its
// lowering to the one strided gemm_problem (kernels/gemm_lowering.hpp): kernels, keys, FLOP
// counts, tolerances and the BLAS backends all read that, never the op's name.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "kernels/ops/gemm_shared.hpp"
#include "kernels/ptx_forms.hpp"
#include "prism/error.hpp"
#include "runtime/log.hpp"

namespace prism {
namespace {

using namespace gemm_detail;

enum class variant : std::int64_t { cpu = 0, gpu = 1, gemv = 2, nv = 3, nv_skinny = 4, mma = 5 };
const char* variant_impl(std::int64_t v) {
  switch (v) {
    case 0:
      return "opencl.cpu";
    case 1:
      return "opencl.gpu";
    case 2:
      return "opencl.gemv";
    case 3:
      return "opencl.nv";
    case 4:
      return "opencl.nv_skinny";
    case 5:
      return "opencl.mma";
    default:
      return "?";
  }
}

std::string op_name(const op_call& call) {
  return fmt::format("ops::{}", call.op);
}

[[noreturn]] void bad(const op_call& call, const std::string& msg) {
  throw error(errc::invalid_argument, op_name(call), msg);
}

void check_same_dtype(const op_call& call, const std::vector<std::pair<const char*, const tensor*>>& ts) {
  const tensor* first = ts.front().second;
  for (auto& [name, t] : ts)
    if (t->defined() && t->type() != first->type())
      bad(call, fmt::format(
                    "{} has dtype {} but {} has {}; all operands must share one float dtype (f32, f16, bf16)",
                    name, dtype_name(t->type()), ts.front().first, dtype_name(first->type())));
}

void check_rank(const op_call& call, const char* name, const tensor& t, int rank) {
  if (t.dim() != rank)
    bad(call, fmt::format("{} must be {}-D, got {} with shape {}", name, rank, t.dim(), t.shape().str()));
}

// A bias broadcastable to [m, n] (0-D, [n], [1, n], [m, 1], [m, n]): its strides over (m, n).
std::pair<std::int64_t, std::int64_t> bias_strides(const op_call& call, const tensor& x, std::int64_t m,
                                                   std::int64_t n) {
  if (x.dim() > 2)
    bad(call,
        fmt::format("bias must broadcast to [{}, {}] (at most 2-D), got shape {}", m, n, x.shape().str()));
  std::int64_t sm = 0, sn = 0;
  const std::int64_t want[2] = {m, n};
  for (int i = 0; i < x.dim(); ++i) {
    const int target = 2 - x.dim() + i;
    const std::int64_t size = x.size(i);
    if (size != 1 && size != want[target])
      bad(call, fmt::format("bias shape {} does not broadcast to [{}, {}]; each dim must be 1 or match",
                            x.shape().str(), m, n));
    const std::int64_t stride = size == 1 ? 0 : x.strides()[i];
    (target == 0 ? sm : sn) = stride;
  }
  return {sm, sn};
}

// ---------------------------------------------------------------------------------------------
// op_call -> gemm_problem: one lowering per op

using lowering = gemm_problem (*)(const op_call&);

// The output's strides (outputs are contiguous: check_call), the dtype, and friendly strides
// for size-1 dims, which carry no information.
gemm_problem finish(gemm_problem p, const op_call& call) {
  if (!call.outputs.empty()) p.c = call.outputs[0];
  p.type = p.a.type();
  p.scn = 1;
  p.scm = p.n;
  p.scb = p.m * p.n;
  if (p.k <= 1) p.sak = 1, p.sbk = 1;
  if (p.n <= 1) p.sbn = 1, p.sxn = 0;
  if (p.batch <= 1) p.sab = 0, p.sbb = 0;
  return p;
}

// A [..., k] seen as [M, k]: the leading dims must fold into one row stride, else a_folds is
// false and the kernels read a contiguous copy (fold_rows).
void fold_rows(gemm_problem& p, const tensor& x) {
  const int nd = x.dim();
  p.a = x;
  p.k = x.size(-1);
  p.m = 1;
  for (int i = 0; i + 1 < nd; ++i) p.m *= x.size(i);
  std::int64_t row_stride = p.k;
  int last_nontrivial = -1;
  for (int i = nd - 2; i >= 0; --i) {
    if (x.size(i) == 1) continue;
    if (last_nontrivial < 0)
      row_stride = x.strides()[i];
    else if (x.strides()[i] != x.strides()[last_nontrivial] * x.size(last_nontrivial))
      p.a_folds = false;
    last_nontrivial = i;
  }
  p.sam = p.a_folds ? row_stride : p.k;
  p.sak = x.strides()[nd - 1];
}

gemm_problem lower_mm(const op_call& call) {
  gemm_problem p;
  p.a = call.inputs[0];
  p.b = call.inputs[1];
  p.m = p.a.size(0), p.k = p.a.size(1), p.n = p.b.size(1);
  p.sam = p.a.strides()[0], p.sak = p.a.strides()[1];
  p.sbk = p.b.strides()[0], p.sbn = p.b.strides()[1];
  return finish(p, call);
}

gemm_problem lower_bmm(const op_call& call) {
  gemm_problem p;
  p.a = call.inputs[0];
  p.b = call.inputs[1];
  p.batch = p.a.size(0), p.m = p.a.size(1), p.k = p.a.size(2), p.n = p.b.size(2);
  p.sab = p.a.strides()[0], p.sam = p.a.strides()[1], p.sak = p.a.strides()[2];
  p.sbb = p.b.strides()[0], p.sbk = p.b.strides()[1], p.sbn = p.b.strides()[2];
  return finish(p, call);
}

gemm_problem lower_addmm(const op_call& call) {
  gemm_problem p;
  p.a = call.inputs[1];
  p.b = call.inputs[2];
  p.m = p.a.size(0), p.k = p.a.size(1), p.n = p.b.size(1);
  p.sam = p.a.strides()[0], p.sak = p.a.strides()[1];
  p.sbk = p.b.strides()[0], p.sbn = p.b.strides()[1];
  p.bias = call.inputs[0];
  std::tie(p.sxm, p.sxn) = bias_strides(call, p.bias, p.m, p.n);
  p.alpha = call.get_f64("alpha");
  p.beta = call.get_f64("beta");
  return finish(p, call);
}

gemm_problem lower_linear(const op_call& call) {
  gemm_problem p;
  fold_rows(p, call.inputs[0]);
  p.b = call.inputs[1];  // weight [n, k]: B(k, n) = W[n, k]
  p.n = p.b.size(0);
  p.sbk = p.b.strides()[1], p.sbn = p.b.strides()[0];
  if (call.inputs.size() > 2 && call.inputs[2].defined()) {
    p.bias = call.inputs[2];
    p.sxm = 0, p.sxn = p.bias.size(0) == 1 ? 0 : p.bias.strides()[0];
    p.beta = 1.0;
  }
  if (call.has("activation")) p.activation = parse_gemm_activation(call.get_str("activation"), "ops::linear");
  return finish(p, call);
}

// numpy's matmul for the forms prism serves: 2-D @ 2-D, 3-D @ 3-D (batched), N-D @ 2-D (over
// the leading dims of the left operand).
gemm_problem lower_matmul(const op_call& call) {
  const tensor& a = call.inputs[0];
  const tensor& b = call.inputs[1];
  if (a.dim() == 3 && b.dim() == 3) return lower_bmm(call);
  gemm_problem p;
  fold_rows(p, a);
  p.b = b;
  p.n = b.size(1);
  p.sbk = b.strides()[0], p.sbn = b.strides()[1];
  return finish(p, call);
}

// prism's kernels read A through one row stride: a view whose leading dims do not fold is
// copied first.
gemm_problem for_kernels(queue& q, gemm_problem p) {
  if (p.a_folds) return p;
  p.a = p.a.contiguous(q);
  p.sam = p.k;
  p.sak = 1;
  p.a_folds = true;
  return p;
}

bool k_contiguous(const gemm_problem& p) {
  return p.sak == 1 && p.sbk == 1;
}

// ---------------------------------------------------------------------------------------------
// Config schema

config_schema gemm_schema() {
  config_schema s;
  s.params = {
      {"variant",
       0,
       {0, 1, 2, 3, 4, 5},
       "0 cpu (register-blocked, no barriers), 1 gpu (local-memory tiles), 2 gemv (small M), 3 nv (FP32 "
       "register tiles + split-K; GPUs), 4 nv_skinny (small M; GPUs), 5 mma (tensor cores; NVIDIA)"},
      {"vw", 16, {1, 2, 4, 8, 16}, "cpu: vector width of loads and accumulators"},
      {"rm", 6, {1, 2, 3, 4, 5, 6, 7, 8}, "cpu: rows of C per work-item (clamped to M)"},
      {"rn",
       2,
       {1, 2, 3, 4, 5, 6, 7, 8},
       "cpu: vectors (outer form) or columns (dot form) of C per work-item"},
      {"ku", 1, {1, 2, 4, 8}, "cpu: k-loop unroll of the outer form"},
      {"kc",
       0,
       {0, 128, 256, 512, 1024, 2048},
       "cpu: k-slice per launch for cache blocking (0 = whole K; f32 output only)"},
      {"pk",
       0,
       {0, 1},
       "cpu, outer form (B's rows contiguous, vw > 1): 1 = each work-group holds one column block (lx "
       "1) and first copies its panel of B (the launch's k-slice x rn*vw columns, up to 256 KiB) into "
       "local memory"},
      {"lx", 4, {1, 2, 4, 8, 16, 32, 64, 128, 256}, "cpu: work-group size along N"},
      {"ly", 16, {1, 2, 4, 8, 16, 32, 64, 128, 256}, "cpu: work-group size along M"},
      {"tm", 64, {16, 32, 64, 128, 256}, "gpu, nv, mma: tile rows per work-group"},
      {"tn", 64, {16, 32, 64, 128, 256}, "gpu, nv, mma: tile columns per work-group"},
      {"tk", 16, {4, 8, 16, 32, 64}, "gpu, nv, mma: k-slice staged in local memory"},
      {"wm", 4, {1, 2, 4, 8, 16}, "gpu, nv: rows per work-item"},
      {"wn", 4, {1, 2, 4, 8, 16}, "gpu, nv: columns per work-item"},
      {"gv", 1, {1, 4}, "gpu: 1 strided register block, 4 contiguous block read as float4 from local memory"},
      {"mb", 16, {1, 2, 4, 8, 16}, "gemv: rows per work-group (M <= mb is the case gemv is for)"},
      {"nb", 4, {1, 2, 4, 8}, "gemv: output columns per work-group"},
      {"wg", 64, {32, 64, 128, 256}, "gemv: work-group size (k split)"},
      {"auto",
       0,
       {0, 1},
       "nv: 1 = the shape picks kernel, tiles and split-K (the other nv/mma params unused)"},
      {"sk",
       1,
       {1, 2, 3, 4, 6, 8, 16},
       "nv, mma: split-K factor (partial sums in a workspace, then one reduction)"},
      {"skg",
       0,
       {0, 1, 2, 4},
       "nv: stream-K: 0 = off; g = the grid's last waves' tiles shared by g groups a compute unit, each "
       "taking an even run of their k-iterations (the last group to finish a tile adds the others' "
       "partial sums); excludes sk > 1"},
      {"lsw",
       0,
       {0, 1},
       "nv: 1 = unpadded local slices with swizzled columns (tm and tn multiples of 32, tk 4-32): a "
       "128x256 or 256x128 tile's 16-deep slices then fit 48 KB"},
      {"warps", 4, {1, 2, 4, 8}, "nv_skinny, quantized rows and qmma=1: warps per work-group"},
      {"wpm", 2, {1, 2, 4}, "mma: warps along M"},
      {"wpn", 2, {1, 2, 4}, "mma: warps along N"},
      {"ldsm", 0, {0, 1}, "mma: 1 = fragments through ldmatrix"},
      {"cpa", 0, {0, 1}, "mma: 1 = local tiles filled by cp.async (B k-contiguous only)"},
      {"st", 2, {2, 3, 4, 5, 6}, "mma: local-memory stages with cp.async"},
      {"wgmma",
       0,
       {0, 1},
       "mma: 1 = Hopper wgmma (sm_90a): a warpgroup of 4 warps per 64 rows, operands read from local "
       "memory by the tensor cores (tm 64, 128 or 256, tn 64, 128 or 256, cpa=1; wpm and wpn unused)"},
      {"wgw",
       0,
       {0, 1},
       "mma with wgmma=1: 1 = a slice's wgmma still runs while the next slice's copies are issued (st >= 3; "
       "copies run st-2 slices ahead)"},
      {"tf32",
       0,
       {0, 1},
       "nv, mma: 1 = f32 inputs may use TF32 tensor cores (opt-in; never in a tune space)"},
      {"qrn", 8, {1, 2, 4, 8, 16}, "quantized weights, cpu: weight rows (output columns) per work-item"},
      {"qwg", 1, {1, 2, 4, 8, 16, 32, 64}, "quantized weights, cpu: work-items per work-group"},
      {"qp",
       0,
       {0, 1, 2, 3},
       "quantized weights, rows kernel with qa=1: how a team walks its rows: 0 = 4-byte slots, 4 lanes a "
       "q4 block; 1 = each lane reads a pair of blocks in 32-bit loads (gemm_q_pairs_i8; K a multiple of "
       "64); 2 = each lane reads whole blocks, two a step (gemm_q_blocks_i8); 3 = as 2 with no quantize "
       "launch: each work-group quantizes its activation row into local memory itself (one row a group, "
       "K * 5 / 4 bytes)"},
      quant_unroll_param("quantized weights, rows kernel with qp=2 or 3 (gemm_q_blocks_i8)"),
      {"qmma",
       0,
       {0, 1},
       "quantized weights, rows kernel (variant 4; nv auto picks it for f16/bf16 activations at M >= 2 "
       "where it runs): 1 = gemm_q_mma, the GEMV on tensor cores (mma.sync; 16 weight rows and 8 activation "
       "rows per group, its warps split K; K, the row stride and the offset in whole 8-block chunks)"},
      {"qa",
       0,
       {0, 1, 2},
       "quantized weights, cpu and rows (variant 4, nv auto at M <= 8): activations 0 = float, 1 = int8 "
       "per 32-block (a first kernel quantizes them; integer block dot products, dp4a on NVIDIA); 2 (cpu, "
       "M <= 8) = as 1 with no quantize launch: the first work-group to arrive quantizes the activations "
       "into the queue's workspace while the others wait"},
      {"qx",
       0,
       {0, 1},
       "quantized weights, cpu with qa=1 or 2 (q4_0/q4_1): 1 = the four-block walk through x86's "
       "AVX512-VNNI vpdpbusd, a function of its own called once a work-item's tile of rm x qrn rows; only "
       "on a CPU device whose host has AVX512-VNNI"},
  };
  s.rule = [](const kernel_config& c) -> std::optional<std::string> {
    const auto tm = c.at("tm"), tn = c.at("tn"), wm = c.at("wm"), wn = c.at("wn");
    if (tm % wm != 0) return fmt::format("tm={} must be a multiple of wm={}", tm, wm);
    if (tn % wn != 0) return fmt::format("tn={} must be a multiple of wn={}", tn, wn);
    if (c.at("gv") == 4 && (wm % 4 != 0 || wn % 4 != 0))
      return fmt::format("gv=4 needs wm and wn multiples of 4, got wm={} wn={}", wm, wn);
    if (c.at("variant") == 5 && c.at("wgmma") == 1) {
      if ((tm != 64 && tm != 128 && tm != 256) || (tn != 64 && tn != 128 && tn != 256) || c.at("cpa") != 1)
        return fmt::format(
            "wgmma=1 takes tm 64, 128 or 256 (a warpgroup per 64 rows), tn 64, 128 or 256 and cpa=1; got "
            "tm={} tn={} cpa={}",
            tm, tn, c.at("cpa"));
      if (c.at("wgw") == 1 && c.at("st") < 3)
        return fmt::format("wgw=1 needs st >= 3 (a buffer for the running wgmma), got st={}", c.at("st"));
      return std::nullopt;
    }
    if (c.at("variant") == 5 && (tm % (16 * c.at("wpm")) != 0 || tn % (8 * c.at("wpn")) != 0))
      return fmt::format("mma needs tm % (16*wpm) == 0 and tn % (8*wpn) == 0, got tm={} wpm={} tn={} wpn={}",
                         tm, c.at("wpm"), tn, c.at("wpn"));
    if (c.at("variant") == 5)
      return std::nullopt;  // wm, wn and the work-group rule below are the gpu kernel's
    if ((tm / wm) * (tn / wn) > 1024)
      return fmt::format("gpu work-group (tn/wn)*(tm/wm) = {} exceeds 1024", (tm / wm) * (tn / wn));
    if (c.at("lx") * c.at("ly") > 4096)
      return fmt::format("cpu work-group lx*ly = {} exceeds 4096", c.at("lx") * c.at("ly"));
    if (c.at("variant") == 3 && (wm % 4 != 0 || wn % 4 != 0))
      return fmt::format("nv needs wm and wn multiples of 4, got wm={} wn={}", wm, wn);
    return std::nullopt;
  };
  return s;
}

// ---------------------------------------------------------------------------------------------
// Enqueue

// The store epilogue's activation (kernels/cl/gemm_common.cl); none adds nothing, so the programs
// of plain GEMMs keep their build options.
std::string act_define(const gemm_problem& p) {
  return p.activation == gemm_activation::none ? std::string()
                                               : fmt::format(" -DACT={}", static_cast<int>(p.activation));
}

// gemm_nv's stream-K arguments (STREAMK=1): its partial-sum slots and tile counters (the queue's
// split workspace), and the grid's whole and shared groups (streamk_grid).
struct streamk_launch {
  buffer<float> partials;
  buffer<int> counters;
  gemm_streamk_grid grid;
};

// `accumulate` < 0: the kernel has no accumulate argument (gpu, gemv); 0/1 otherwise (cpu).
// [k0, k0 + kn) is the k-slice to run (kn < 0: all of K). `sk`: gemm_nv built with STREAMK=1.
event launch(queue& q, const gemm_problem& p, const kernel& k, const nd_range& r, int accumulate = -1,
             std::int64_t k0 = 0, std::int64_t kn = -1, streamk_launch* sk = nullptr) {
  const char* op = "gemm";
  const int M = to_int(p.m, op, "M"), N = to_int(p.n, op, "N"), K = to_int(kn < 0 ? p.k : kn, op, "K");
  const float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  const int sam = to_int(p.sam, op, "A row stride"), sak = to_int(p.sak, op, "A column stride");
  const int sbk = to_int(p.sbk, op, "B row stride"), sbn = to_int(p.sbn, op, "B column stride");
  const int scm = to_int(p.scm, op, "C row stride");
  const int sxm = to_int(p.sxm, op, "bias row stride"), sxn = to_int(p.sxn, op, "bias column stride");
  const std::int64_t a_off = p.a.offset() + k0 * p.sak, b_off = p.b.offset() + k0 * p.sbk,
                     c_off = p.c.offset();
  const std::int64_t x_off = p.bias.defined() ? p.bias.offset() : 0;
  auto sa = p.a.storage();
  auto sb = p.b.storage();
  auto sc = p.c.storage();
  auto sx = p.bias.defined() ? p.bias.storage() : p.a.storage();
  return q.submit([&](handler& h) {
    accessor<std::byte> aa(sa, h, read_only);
    accessor<std::byte> ab(sb, h, read_only);
    accessor<std::byte> ac(sc, h, write_only, p.c.byte_extent());
    accessor<std::byte> ax(sx, h, read_only);
    if (sk) {
      accessor<float> aw(sk->partials, h, read_write);
      accessor<int> acnt(sk->counters, h, read_write);
      h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_off, sam, sak, p.sab, ab, b_off, sbk, sbn, p.sbb, ac,
                     c_off, scm, p.scb, ax, x_off, sxm, sxn, p.batch, aw, acnt, sk->grid.whole,
                     sk->grid.shared);
    } else if (accumulate < 0)
      h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_off, sam, sak, p.sab, ab, b_off, sbk, sbn, p.sbb, ac,
                     c_off, scm, p.scb, ax, x_off, sxm, sxn);
    else
      h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_off, sam, sak, p.sab, ab, b_off, sbk, sbn, p.sbb, ac,
                     c_off, scm, p.scb, ax, x_off, sxm, sxn, accumulate);
  });
}

event enqueue_cpu(queue& q, const gemm_problem& p, const kernel_config& c, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const std::int64_t vw = c.at("vw"), rn = c.at("rn"), ku = c.at("ku");
  // Small M (decode): fewer rows per work-item instead of computing clamped duplicates.
  const std::int64_t rm = std::min<std::int64_t>(c.at("rm"), std::max<std::int64_t>(p.m, 1));
  // Form by layout: B rows contiguous -> outer products; A and B both k-contiguous -> dot
  // products; anything else -> outer products with per-lane strided B loads.
  const bool outer = p.sbn == 1 || !k_contiguous(p);
  const std::int64_t gx = ceil_div(p.n, outer ? rn * vw : rn), gy = ceil_div(p.m, rm);
  // K-blocking: each slice's A columns / B rows stay cache-resident across the work-items that
  // share them; slices after the first add into C (f32 only: f16/bf16 C would round per slice).
  // One row block (M <= rm: decode) reuses no B panel across work-items, and its A rows stay in
  // cache whole, so slicing would only add launches and passes over C.
  const std::int64_t kc = c.at("kc");
  const bool sliced = !(kc == 0 || p.k <= kc || gy == 1 || p.c.type() != dtype::f32);
  // pk=1: the group's B panel (a launch's K rows of rn*vw floats) in local memory, where it fits.
  const std::int64_t panel_rows = sliced ? kc : p.k;
  const auto panel_bytes = static_cast<std::uint64_t>(panel_rows * rn * vw * 4);
  const bool pack = c.at("pk") == 1 && p.sbn == 1 && vw > 1 && panel_bytes <= (256 << 10) &&
                    panel_bytes <= q.get_device().local_mem_size();  // sbn == 1: the outer form
  std::string opts = fmt::format("{} -DHAS_BIAS={} -DVW={} -DRM={} -DRN={} -DKU={} -DB_NCONTIG={} {}",
                                 dtype_define(p.c.type()), p.bias.defined() ? 1 : 0, vw, rm, rn, ku,
                                 p.sbn == 1 ? 1 : 0, outer ? "-DFORM_OUTER" : "-DFORM_DOT");
  if (pack) opts += fmt::format(" -DPACK_B={}", panel_rows);
  kernel k = build_kernel(q.get_context(), "gemm_cpu.cl", src, opts + act_define(p), "gemm_cpu");
  // Keep the configured work-group size but do not pad a short dim far past its extent; a packed
  // panel belongs to one column block a group.
  const std::int64_t wg = c.at("lx") * c.at("ly");
  const std::int64_t ly = std::min(c.at("ly"), next_pow2(gy));
  const std::int64_t lx = pack ? 1 : std::min(next_pow2(gx), std::max<std::int64_t>(wg / ly, 1));
  nd_range r(range<3>(ceil_div(gx, lx) * lx, ceil_div(gy, ly) * ly, p.batch), range<3>(lx, ly, 1));
  if (!sliced) return launch(q, p, k, r, 0);
  // accumulate (gemm_cpu.cl): 0/1 first/later slices; with an activation 3 first, 1 middle,
  // 2 last, so it is applied once, to the whole sum.
  const bool act = p.activation != gemm_activation::none;
  event last;
  for (std::int64_t k0 = 0; k0 < p.k; k0 += kc) {
    const bool first = k0 == 0, final_slice = k0 + kc >= p.k;
    const int accumulate = first ? (act ? 3 : 0) : (act && final_slice ? 2 : 1);
    last = launch(q, p, k, r, accumulate, k0, std::min(kc, p.k - k0));
  }
  return last;
}

event enqueue_gpu(queue& q, const gemm_problem& p, const kernel_config& c, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const std::int64_t tm = c.at("tm"), tn = c.at("tn"), tk = c.at("tk"), wm = c.at("wm"), wn = c.at("wn");
  std::string opts = fmt::format(
      "{} -DHAS_BIAS={} -DTM={} -DTN={} -DTK={} -DWM={} -DWN={} -DGV={} -DA_KCONTIG={} -DB_NCONTIG={}",
      dtype_define(p.c.type()), p.bias.defined() ? 1 : 0, tm, tn, tk, wm, wn, c.at("gv"), p.sak == 1 ? 1 : 0,
      p.sbn == 1 ? 1 : 0);
  kernel k = build_kernel(q.get_context(), "gemm_gpu.cl", src, opts + act_define(p), "gemm_gpu");
  const std::int64_t lx = tn / wn, ly = tm / wm;
  nd_range r(range<3>(ceil_div(p.n, tn) * lx, ceil_div(p.m, tm) * ly, p.batch), range<3>(lx, ly, 1));
  return launch(q, p, k, r);
}

event enqueue_gemv(queue& q, const gemm_problem& p, const kernel_config& c, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const std::int64_t mb = std::min<std::int64_t>(c.at("mb"), next_pow2(p.m)), nb = c.at("nb"),
                     wg = c.at("wg");
  std::string opts = fmt::format("{} -DHAS_BIAS={} -DMB={} -DNB={} -DWG={}", dtype_define(p.c.type()),
                                 p.bias.defined() ? 1 : 0, mb, nb, wg);
  kernel k = build_kernel(q.get_context(), "gemm_gemv.cl", src, opts + act_define(p), "gemm_gemv");
  nd_range r(range<3>(ceil_div(p.n, nb) * wg, ceil_div(p.m, mb), p.batch), range<3>(wg, 1, 1));
  return launch(q, p, k, r);
}

// ---------------------------------------------------------------------------------------------
// NVIDIA family: gemm_nv.cl (variant 3 nv: FP32 register tiles and split-K; with auto=1 the shape
// picks the kernel, tiles and split-K; variant 4 nv_skinny: small M) and gemm_mma.cl (variant 5:
// tensor cores through inline PTX). Never on CPU devices; inline PTX only on NVIDIA's platform
// and per form the driver accepts. TF32 for f32 inputs is opt-in (tf32_allowed).

const char* mma_form(dtype t) {
  return t == dtype::f32 ? "mma.m16n8k8.tf32" : t == dtype::f16 ? "mma.m16n8k16.f16" : "mma.m16n8k16.bf16";
}

// TF32 only on request: config tf32=1 (e.g. a route config), the call's allow_tf32 attribute, or
// PRISM_ALLOW_TF32=1.
bool tf32_requested(const op_call& call) {
  if (call.has("allow_tf32") && call.get_bool("allow_tf32")) return true;
  const char* env = std::getenv("PRISM_ALLOW_TF32");
  return env && std::string_view(env) == "1";
}

bool tf32_allowed(const op_call& call, const kernel_config& c) {
  return c.at("tf32") == 1 || tf32_requested(call);
}

std::size_t elem_size(dtype t) {
  return t == dtype::f32 ? 4 : 2;
}

bool whole16(std::int64_t elems, std::size_t es) {
  return (elems * static_cast<std::int64_t>(es)) % 16 == 0;
}

// 16-byte loads along an operand's contiguous dim need its offset, its other stride and its batch
// stride in whole 16-byte units.
bool vec_ok(std::int64_t off, std::int64_t other_stride, std::int64_t batch_stride, std::int64_t batch,
            std::size_t es) {
  return whole16(off, es) && whole16(other_stride, es) && (batch <= 1 || whole16(batch_stride, es));
}

// gemm_nv's layouts: A and B each contiguous along one dim, 16-byte aligned. Sets the defines.
bool nv_layout(const gemm_problem& p, bool& a_kcontig, bool& b_ncontig) {
  const std::size_t es = 4;
  const std::int64_t ao = p.a.offset(), bo = p.b.offset();
  if (p.sak == 1 && vec_ok(ao, p.sam, p.sab, p.batch, es))
    a_kcontig = true;
  else if (p.sam == 1 && vec_ok(ao, p.sak, p.sab, p.batch, es))
    a_kcontig = false;
  else
    return false;
  if (p.sbn == 1 && vec_ok(bo, p.sbk, p.sbb, p.batch, es))
    b_ncontig = true;
  else if (p.sbk == 1 && vec_ok(bo, p.sbn, p.sbb, p.batch, es))
    b_ncontig = false;
  else
    return false;
  return true;
}

bool skinny_layout(const gemm_problem& p) {
  const std::size_t es = elem_size(p.c.type());  // one storage dtype for A, B and C
  return p.sak == 1 && p.sbk == 1 && vec_ok(p.a.offset(), p.sam, p.sab, p.batch, es) &&
         vec_ok(p.b.offset(), p.sbn, p.sbb, p.batch, es);
}

// gemm_mma's layouts: A k-contiguous; B k-contiguous (any) or n-contiguous (not with cp.async).
bool mma_layout(const gemm_problem& p, bool cp_async, bool& b_ncontig) {
  const std::size_t es = elem_size(p.c.type());
  if (!(p.sak == 1 && vec_ok(p.a.offset(), p.sam, p.sab, p.batch, es))) return false;
  const std::int64_t bo = p.b.offset();
  if (p.sbk == 1 && vec_ok(bo, p.sbn, p.sbb, p.batch, es))
    b_ncontig = false;
  else if (!cp_async && p.sbn == 1 && vec_ok(bo, p.sbk, p.sbb, p.batch, es))
    b_ncontig = true;
  else
    return false;
  return true;
}

// gemm_nv.cl's tile: bm x bn of C a group, bk-deep slices, tm x tn a work-item; split-K sk;
// stream-K on streamk groups a compute unit (0: off); lsw: unpadded swizzled slices.
struct nv_tile {
  std::int64_t bm, bn, bk, tm, tn, sk, streamk = 0, lsw = 0;
};

// An explicit variant 3 config's tile (tm, tn, tk, wm, wn, sk, skg, lsw).
nv_tile nv_tile_of(const kernel_config& c) {
  return {c.at("tm"), c.at("tn"), c.at("tk"), c.at("wm"), c.at("wn"), c.at("sk"), c.at("skg"), c.at("lsw")};
}

std::uint64_t nv_local_bytes(const nv_tile& t) {
  return static_cast<std::uint64_t>(2 * t.bk * (t.bm + t.bn + (t.lsw ? 0 : 8)) * 4);
}

// Split-K: `k` (built with SPLITK = sk) writes each split's partial sums to its own f32 slab of
// a workspace; `reduce` adds the slabs in a fixed order (deterministic) and applies alpha, beta,
// the bias and the output dtype. The slabs live in the queue's split workspace (kept and grown per
// queue): a fresh 16 MB buffer a call added ~120-150 us to a 126-290 us GEMM on an H200
// (RESULTS.md, "Issue 13, session 31").
event launch_split_k(queue& q, const gemm_problem& p, const kernel& k, const nd_range& r,
                     const kernel& reduce, std::int64_t sk) {
  const std::int64_t slab = p.batch * p.m * p.n;
  gemm_problem part = p;
  auto ws = kernels::split_workspace(q, static_cast<std::size_t>(sk * slab), 1);
  part.c = tensor(ws.first.reinterpret<std::byte>(), dims{sk * slab}, dims{1}, 0, dtype::f32);
  part.scm = p.n;
  part.scb = p.m * p.n;
  launch(q, part, k, r);
  const char* op = "gemm";
  const int M = to_int(p.m, op, "M"), N = to_int(p.n, op, "N"), S = static_cast<int>(sk);
  const float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  const int scm = to_int(p.scm, op, "C row stride");
  const int sxm = to_int(p.sxm, op, "bias row stride"), sxn = to_int(p.sxn, op, "bias column stride");
  const std::int64_t c_off = p.c.offset(), x_off = p.bias.defined() ? p.bias.offset() : 0;
  auto sw = part.c.storage();
  auto sc = p.c.storage();
  auto sx = p.bias.defined() ? p.bias.storage() : part.c.storage();
  nd_range rr(range<3>(ceil_div(p.n, 64) * 64, p.m, p.batch), range<3>(64, 1, 1));
  return q.submit([&](handler& h) {
    accessor<std::byte> aw(sw, h, read_only);
    accessor<std::byte> ac(sc, h, write_only, p.c.byte_extent());
    accessor<std::byte> ax(sx, h, read_only);
    h.parallel_for(rr, reduce, M, N, S, slab, aw, alpha, beta, ac, c_off, scm, p.scb, ax, x_off, sxm, sxn);
  });
}

event enqueue_nv_tiled(queue& q, const gemm_problem& p, const nv_tile& t, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  bool a_kcontig = true, b_ncontig = true;
  if (!nv_layout(p, a_kcontig, b_ncontig))
    throw error(errc::internal, "gemm", "opencl.nv called on a layout it does not support");
  const bool streamk = t.streamk > 0 && t.sk <= 1;
  const std::string opts = fmt::format(
      "-DBM={} -DBN={} -DBK={} -DTM={} -DTN={} -DA_KCONTIG={} -DB_NCONTIG={} -DHAS_BIAS={} -DSPLITK={} "
      "-DLSWZ={} -DSTREAMK={} -DREDUCE",
      t.bm, t.bn, t.bk, t.tm, t.tn, a_kcontig ? 1 : 0, b_ncontig ? 1 : 0, p.bias.defined() ? 1 : 0,
      streamk ? 1 : t.sk, t.lsw ? 1 : 0, streamk ? 1 : 0);
  kernel k = build_kernel(q.get_context(), "gemm_nv.cl", src, opts + act_define(p), "gemm_nv");
  const std::int64_t local = (t.bn / t.tn) * (t.bm / t.tm);
  if (streamk) {
    const std::int64_t tiles = ceil_div(p.m, t.bm) * ceil_div(p.n, t.bn) * p.batch;
    const gemm_streamk_grid g = streamk_grid(
        tiles, ceil_div(p.k, t.bk), t.streamk * std::max<std::int64_t>(q.get_device().compute_units(), 1));
    // Two partial-sum slots a group, a counter a shared tile (zero between launches).
    auto ws = kernels::split_workspace(
        q, static_cast<std::size_t>(std::max<std::int64_t>(2 * g.shared * t.bm * t.bn, 1)),
        static_cast<std::size_t>(std::max<std::int64_t>(tiles - g.whole, 1)));
    streamk_launch sk{ws.first, ws.second, g};
    return launch(q, p, k, nd_range(range<3>((g.whole + g.shared) * local, 1, 1), range<3>(local, 1, 1)), -1,
                  0, -1, &sk);
  }
  nd_range r(range<3>(ceil_div(p.n, t.bn) * local, ceil_div(p.m, t.bm), p.batch * t.sk),
             range<3>(local, 1, 1));
  if (t.sk <= 1) return launch(q, p, k, r);
  return launch_split_k(
      q, p, k, r, build_kernel(q.get_context(), "gemm_nv.cl", src, opts + act_define(p), "gemm_nv_reduce"),
      t.sk);
}

// gemm_nv_skinny's local memory: a 33-float row (32 lanes, padded) per activation row, weight row
// and warp.
std::uint64_t skinny_local_bytes(std::int64_t mb, std::int64_t nb, std::int64_t warps) {
  return static_cast<std::uint64_t>(warps * mb * nb * 33 * 4);
}

event enqueue_nv_skinny(queue& q, const gemm_problem& p, std::int64_t mb, std::int64_t nb, std::int64_t warps,
                        source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const std::string opts = fmt::format("{} -DMB={} -DNB={} -DWARPS={} -DHAS_BIAS={}",
                                       dtype_define(p.c.type()), mb, nb, warps, p.bias.defined() ? 1 : 0);
  kernel k = build_kernel(q.get_context(), "gemm_nv.cl", src, opts + act_define(p), "gemm_nv_skinny");
  nd_range r(range<3>(ceil_div(p.n, nb * warps) * 32 * warps, ceil_div(p.m, mb), p.batch),
             range<3>(32 * warps, 1, 1));
  return launch(q, p, k, r);
}

struct mma_tile_cfg {
  std::int64_t bm, bn, bk, wpm, wpn, ldsm, cpa, st, sk = 1, wgmma = 0, wgw = 0;
  mma_tile_cfg(std::int64_t bm_, std::int64_t bn_, std::int64_t bk_, std::int64_t wpm_, std::int64_t wpn_,
               std::int64_t ldsm_, std::int64_t cpa_, std::int64_t st_, std::int64_t sk_ = 1,
               std::int64_t wgmma_ = 0, std::int64_t wgw_ = 0)
      : bm(bm_),
        bn(bn_),
        bk(bk_),
        wpm(wpm_),
        wpn(wpn_),
        ldsm(ldsm_),
        cpa(cpa_),
        st(st_),
        sk(sk_),
        wgmma(wgmma_),
        wgw(wgmma_ ? wgw_ : 0) {
    if (wgmma) wpm = bm / 16, wpn = 1;  // a warpgroup (4 warps of 16 rows) per 64 rows
  }
  explicit mma_tile_cfg(const kernel_config& c)
      : mma_tile_cfg(c.at("tm"), c.at("tn"), c.at("tk"), c.at("wpm"), c.at("wpn"), c.at("ldsm"), c.at("cpa"),
                     c.at("st"), c.at("sk"), c.at("wgmma"), c.at("wgw")) {}
};

std::uint64_t mma_local_bytes(const mma_tile_cfg& t, dtype dt) {
  const std::int64_t stages = t.cpa ? t.st : 2;
  const std::int64_t row = t.bk * static_cast<std::int64_t>(elem_size(dt)) + (t.wgmma ? 0 : 16);
  return static_cast<std::uint64_t>(stages * (t.bm + t.bn) * row);
}

event enqueue_mma(queue& q, const gemm_problem& p, const mma_tile_cfg& t, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  bool b_ncontig = false;
  if (!mma_layout(p, t.cpa != 0, b_ncontig))
    throw error(errc::internal, "gemm", "opencl.mma called on a layout it does not support");
  const std::string opts = fmt::format(
      "{} -DBM={} -DBN={} -DBK={} -DWARPS_M={} -DWARPS_N={} -DB_NCONTIG={} -DHAS_BIAS={} -DLDSM={} "
      "-DCPASYNC={} "
      "-DSTAGES={} -DSPLITK={} -DREDUCE{}",
      dtype_define(p.c.type()), t.bm, t.bn, t.bk, t.wpm, t.wpn, b_ncontig ? 1 : 0, p.bias.defined() ? 1 : 0,
      t.ldsm, t.cpa, t.cpa ? t.st : 2, t.sk,
      t.wgmma ? fmt::format(" -DWGMMA=1 -DWG_WAIT={} -prism-ptx-target=sm_90a", t.wgw) : std::string());
  kernel k = build_kernel(q.get_context(), "gemm_mma.cl", src, opts + act_define(p), "gemm_mma");
  const std::int64_t threads = 32 * t.wpm * t.wpn;
  nd_range r(range<3>(ceil_div(p.n, t.bn) * threads, ceil_div(p.m, t.bm), p.batch * t.sk),
             range<3>(threads, 1, 1));
  if (t.sk <= 1) return launch(q, p, k, r);
  return launch_split_k(
      q, p, k, r, build_kernel(q.get_context(), "gemm_mma.cl", src, opts + act_define(p), "gemm_mma_reduce"),
      t.sk);
}

// Why the mma kernel cannot serve this call with this tile (nullopt: it can).
std::optional<std::string> mma_unusable(const device& dev, const op_call& call, const gemm_problem& p,
                                        const kernel_config& c, const mma_tile_cfg& t) {
  const dtype dt = p.c.type();
  const ptx_forms& forms = probe_ptx(dev);
  if (!forms.has(mma_form(dt))) return forms.why(mma_form(dt));
  if (t.ldsm && !forms.has("ldmatrix")) return forms.why("ldmatrix");
  if (t.cpa && !forms.has("cp.async")) return forms.why("cp.async");
  if (t.wgmma && !forms.has("wgmma")) return forms.why("wgmma");
  if (t.wgmma && (t.bk * static_cast<std::int64_t>(elem_size(dt))) % 32 != 0)
    return fmt::format("wgmma=1 needs tk * element size a multiple of 32 bytes (a k-step); tk={} with {}",
                       t.bk, dtype_name(dt));
  if (dt == dtype::f32 && !tf32_allowed(call, c))
    return std::string(
        "f32 inputs use TF32 tensor cores only on request (attribute allow_tf32, config tf32=1 or "
        "PRISM_ALLOW_TF32=1)");
  if ((t.bk * static_cast<std::int64_t>(elem_size(dt)) / 4) % 8 != 0)
    return fmt::format("tk={} gives {} words per k-row for {}; an mma step needs a multiple of 8", t.bk,
                       t.bk * static_cast<std::int64_t>(elem_size(dt)) / 4, dtype_name(dt));
  bool b_ncontig = false;
  if (!mma_layout(p, t.cpa != 0, b_ncontig))
    return std::string(
        "layout: needs A k-contiguous and B k- or n-contiguous (k only with cp.async), 16-byte "
        "aligned rows");
  if (mma_local_bytes(t, dt) > dev.local_mem_size())
    return fmt::format("needs local memory {} B > device {} B", mma_local_bytes(t, dt), dev.local_mem_size());
  return std::nullopt;
}

// gemm_gpu / gemm_gemv parameters the nv family falls back to (the pre-existing NVIDIA defaults).
const kernel_config& nv_fallback_config() {
  static const kernel_config c = gemm_schema().complete(
      kernel_config::parse("variant=1,tm=128,tn=128,tk=16,wm=8,wn=8,gv=4,mb=16,nb=4,wg=128"));
  return c;
}

// The shape picks: tiles with enough work-groups to fill the device, split-K when even the
// smallest tiles leave it idle, the small-M kernel for M <= 16. Figures behind the choices:
// benchmarks/RESULTS.md ("NVIDIA GEMM family").
event enqueue_nv_auto(queue& q, const op_call& call, const gemm_problem& p, const kernel_config& c,
                      source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const device dev = q.get_device();
  const std::int64_t cus = std::max<std::int64_t>(dev.compute_units(), 1);
  auto groups = [&](std::int64_t bm, std::int64_t bn) {
    return ceil_div(p.m, bm) * ceil_div(p.n, bn) * p.batch;
  };
  // The small-M kernel first, where nv_skinny_shape takes the shape (kernels/gemm_lowering.hpp).
  if (auto sk = nv_skinny_shape(p.m, p.n, p.k, p.c.type() == dtype::f32);
      sk && skinny_layout(p) && skinny_local_bytes(sk->mb, sk->nb, sk->warps) <= dev.local_mem_size())
    return enqueue_nv_skinny(q, p, sk->mb, sk->nb, sk->warps, src);
  // Tensor cores: 16-bit always, f32 only when TF32 is allowed. With Hopper's wgmma (and
  // cp.async): 128x128 tiles, three stages of 64-byte-deep slices (k 32 in 16 bits, 16 in TF32) when they
  // fill the device, else 64x64 tiles with 128-byte slices (RESULTS.md, "wgmma"). Otherwise mma.sync: 128x128
  // tiles (ldmatrix, two cp.async stages) when they fill the device, else 64x128 with three stages and
  // split-K; B n-contiguous (no cp.async) keeps two register-staged buffers.
  if (p.m > 16) {
    const bool f32 = p.c.type() == dtype::f32;
    const std::int64_t bk = f32 ? 16 : 32;
    bool b_ncontig = false;
    const bool cpa = mma_layout(p, true, b_ncontig);
    if (cpa && probe_ptx(dev).has("wgmma")) {
      const bool fill = groups(128, 128) * 10 >= cus * 9;
      const mma_tile_cfg w = fill ? mma_tile_cfg(128, 128, bk, 0, 0, 0, 1, 3, 1, 1)
                                  : mma_tile_cfg(64, 64, f32 ? 32 : 64, 0, 0, 0, 1, 3, 1, 1);
      if (!mma_unusable(dev, call, p, c, w)) return enqueue_mma(q, p, w, {});
    }
    mma_tile_cfg t{128, 128, bk, 2, 2, 1, cpa ? 1 : 0, 2};
    if (groups(128, 128) * 10 < cus * 9) {
      t.bm = 64, t.st = cpa ? 3 : 2;
      // Split K when even 64x128 tiles leave SMs idle (M ~ 128, N ~ 4096), each split >= 512 deep.
      const std::int64_t g = groups(64, 128);
      t.sk = g * 2 < cus ? 4 : g < cus ? 2 : 1;
      while (t.sk > 1 && p.k / t.sk < 512) t.sk /= 2;
    }
    const auto why = mma_unusable(dev, call, p, c, t);
    if (!why) return enqueue_mma(q, p, t, {});
    if (!f32)
      log::get("kernels")->debug("GEMM {}: no tensor-core path ({}); local-memory tiles", call.op, *why);
  }
  if (p.c.type() != dtype::f32) {
    if (p.m <= 16) return enqueue_gemv(q, p, nv_fallback_config(), {});
    return enqueue_gpu(q, p, nv_fallback_config(), {});
  }
  bool a_kcontig = true, b_ncontig = true;
  if (!nv_layout(p, a_kcontig, b_ncontig)) {
    log::get("kernels")->debug("GEMM {}: operands not 16-byte aligned along a contiguous dim; gemm_gpu.cl",
                               call.op);
    return enqueue_gpu(q, p, nv_fallback_config(), {});
  }
  // The tile by its grid's waves (fp32_gpu_tile); each tile's k-slice and register block.
  const gemm_gpu_tile tile = fp32_gpu_tile(p.m, p.n, p.k, p.batch, cus);
  const std::int64_t tm = tile.bm == 256 ? 16 : 8, tn = tile.bn == 256 ? 16 : 8;
  nv_tile t{tile.bm, tile.bn, tile.bk, tm, tn, tile.splits, tile.streamk, tile.swizzled ? 1 : 0};
  // The 16-deep swizzled slices take 48 KB: a device with less local memory gets 8-deep padded
  // ones (25 KB for 256-wide tiles), and one with less than that the local-memory tiles.
  if (nv_local_bytes(t) > dev.local_mem_size()) t.bk = 8, t.lsw = 0;
  if (nv_local_bytes(t) > dev.local_mem_size()) {
    log::get("kernels")->debug("GEMM {}: {} B of local memory for {}x{} tiles > device {} B; gemm_gpu.cl",
                               call.op, nv_local_bytes(t), t.bm, t.bn, dev.local_mem_size());
    return enqueue_gpu(q, p, nv_fallback_config(), {});
  }
  return enqueue_nv_tiled(q, p, t, src);
}

std::optional<std::string> not_on_cpu(const device& dev) {
  if (dev.is_cpu())
    return fmt::format("tuned for GPUs; device '{}' is a CPU (use variant 0 there)", dev.name());
  return std::nullopt;
}

std::optional<std::string> variant_mismatch(const kernel_config& c, variant v) {
  if (c.at("qmma") == 1)
    return std::string("qmma=1 selects gemm_q_mma (opencl.quant), which serves block-quantized weights only");
  if (c.at("variant") != static_cast<std::int64_t>(v))
    return fmt::format("config variant={} selects {}", c.at("variant"), variant_impl(c.at("variant")));
  return std::nullopt;
}

// The block-quantized weight of a call (linear's weight, matmul's other), or null.
const tensor* quantized_weight(const op_call& call) {
  for (const auto& t : call.inputs)
    if (t.defined() && is_quantized(t.type())) return &t;
  return nullptr;
}

std::optional<std::string> dtype_unsupported(const op_call& call) {
  const dtype t = call.outputs.empty() ? call.inputs[0].type() : call.outputs[0].type();
  if (!is_floating(t)) return fmt::format("dtype {} is not a float dtype (f32, f16, bf16)", dtype_name(t));
  if (const tensor* w = quantized_weight(call))
    return fmt::format("weight is {} (block-quantized): opencl.quant serves it", dtype_name(w->type()));
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Weight-only quantized GEMM (gemm_quant.cl). The config's variant picks the kernel family and
// its tile parameters: 0 (cpu) gemm_q_cpu with rm x qrn per work-item and qwg per group; 2 (gemv)
// gemm_q_gemv with mb, nb and wg; 4 (nv_skinny) gemm_q_rows, a 32-item team per nb weight rows,
// warps teams per group, mb activation rows; 1, 5 and 3 (auto=0) gemm_q_tiled with tm, tn, wm,
// wn; 3 with auto=1 lets the shape choose (gemm_q_mma for 16-bit activations at M >= 2 where it
// runs; else M <= 8: rows with mb 8, nb 2, warps 8, the H100 sweep's best; the tiled GEMM above).

enum class qkernel { cpu, gemv, rows, tiled, mma };

struct qplan {
  qkernel kind = qkernel::cpu;
  // cpu: rm, rn, lx, ly; gemv: mb, nb, wg; rows: mb, nb, warps; tiled: tm, tn, wm, wn; mma: warps
  std::int64_t a = 0, b = 0, c = 0, d = 0;
  bool int8_activations = false;  // quantize_rows_q8, then gemm_q_cpu_i8 (cpu) or gemm_q_rows built with QA8
  std::int64_t walk = 0;          // rows with int8 activations: qp (1 gemm_q_pairs_i8, 2 gemm_q_blocks_i8,
                                  // 3 gemm_q_blocks_i8 quantizing its row itself)
  std::int64_t unroll = 2;        // walks 2 and 3: blocks a lane loads a step (qu)
  bool x86_dot = false;           // cpu with int8 activations: the AVX512-VNNI walk (qx=1)
  bool fused = false;             // cpu with int8 activations: no quantize launch (qa=2)
  bool gated = false;             // cpu: gate/up row pairs, silu(gate) * up out (linear_silu_and_mul)
};

// K and the row stride (elements) of a quantized weight: linear's [n, k], or matmul's other, the
// [k, n] transpose of one (its blocks always run along the stride-1 dimension).
std::pair<std::int64_t, std::int64_t> quant_k_and_row(const tensor& w) {
  const int d = w.dim();
  if (d >= 2 && w.strides()[d - 1] != 1) return {w.size(d - 2), w.strides()[d - 1]};
  return {w.size(d - 1), d >= 2 ? w.strides()[d - 2] : w.size(d - 1)};
}

// gemm_q_mma's local memory: per warp, a chunk (8 blocks) of its 16 weight rows, and the 16 x 8
// partial sums of the cross-warp reduction.
std::uint64_t qmma_local_bytes(dtype w, std::int64_t warps) {
  return static_cast<std::uint64_t>(warps * (16 * 8 * static_cast<std::int64_t>(dtype_size(w)) + 16 * 8 * 4));
}

// Why gemm_q_mma cannot run a call (nothing when it can): tensor-core forms the driver rejects,
// int8 activations, or a weight whose K, row stride or offset is not in whole 8-block chunks
// (its 16-byte loads need each row's chunks 16-byte aligned).
std::optional<std::string> qmma_refusal(const device& dev, const tensor& w, dtype act, bool int8) {
  if (int8) return std::string("qmma=1 takes float activations (qa=0)");
  const char* form = act == dtype::f16 ? "mma.m16n8k16.f16" : "mma.m16n8k16.bf16";
  const ptx_forms& forms = probe_ptx(dev);
  if (!forms.has(form)) return forms.why(form);
  const std::int64_t block = static_cast<std::int64_t>(dtype_block_elements(w.type()));
  const auto [k, row] = quant_k_and_row(w);
  if (k % (8 * block) != 0 || row % (8 * block) != 0 || w.offset() % (8 * block) != 0)
    return fmt::format(
        "qmma=1 reads 8-block chunks: K ({}), the weight's row stride ({}) and offset ({}) must be multiples "
        "of {}",
        k, row, w.offset(), 8 * block);
  return std::nullopt;
}

// Whether a config may run gemm_q_mma at m activation rows: qmma=1 on variant 4, or nv auto
// (variant 3, auto=1) for 16-bit float activations at M >= 2. Only then is qmma_refusal asked (it
// probes the driver), so the other kernels' calls pay nothing for it. Auto's choice: on the H100
// gemm_q_mma runs 8 activation rows in about the time of 1 (q8_0 [16384, 4096], bf16, M = 8: 56-62
// us against the rows kernel's 90-94), while at M = 1 the rows kernel is faster (39 against 48),
// and f32 activations, three mma terms each, ran 1.6x slower than it at M = 1 and are not measured
// above (benchmarks/RESULTS.md, "Issue 17, session 16"). Above M = 8 its groups of 8 activation
// rows each read the weights again (from L2 at prefill sizes), and still beat the tiled GEMM, whose
// 64-row tiles run on the CUDA cores: H200, q4_0 [22016, 4096], bf16, M = 16 111 us against 865
// (7.8x), M = 128 620 against 1580 (2.5x); both grow by whole groups of rows (8 against 64), so
// the tiled kernel does not catch up at longer prompts. The 7B q4_0 prefill of 128 tokens went
// 911 -> 2221 tokens/s ("Issue 17, session 42").
bool wants_qmma(const kernel_config& c, std::int64_t m, dtype act) {
  if (c.at("variant") == 4) return c.at("qmma") == 1;
  return c.at("variant") == 3 && c.at("auto") == 1 && c.at("qa") == 0 && m >= 2 && act != dtype::f32;
}

// The quantized kernel a config runs for m activation rows; `auto_mma`: nv auto may take
// gemm_q_mma (wants_qmma, and qmma_refusal has nothing against it), with warps for the K
// chunks (at most 8, a power of two).
qplan plan_quant(const kernel_config& c, std::int64_t m, std::int64_t k, bool auto_mma) {
  switch (c.at("variant")) {
    case 0: {  // at most 16 float16 accumulators: rm shrinks as qrn grows
      qplan pl{qkernel::cpu,
               std::min(c.at("rm"), std::max<std::int64_t>(1, 16 / c.at("qrn"))),
               c.at("qrn"),
               c.at("qwg"),
               1,
               c.at("qa") >= 1};
      pl.x86_dot = c.at("qx") == 1;
      pl.fused = c.at("qa") == 2;
      return pl;
    }
    case 2:
      return {qkernel::gemv, c.at("mb"), c.at("nb"), c.at("wg"), 0};
    case 4:
      if (c.at("qmma") == 1) return {qkernel::mma, c.at("warps"), 0, 0, 0, c.at("qa") == 1};
      return {qkernel::rows,   c.at("mb"), c.at("nb"), c.at("warps"), 0,
              c.at("qa") == 1, c.at("qp"), c.at("qu")};
    case 3:
      if (c.at("auto") == 1) {
        if (auto_mma) {
          std::int64_t warps = 1;
          while (warps < 8 && warps * 2 <= k / 256) warps *= 2;
          return {qkernel::mma, warps, 0, 0, 0};
        }
        return m <= 8 ? qplan{qkernel::rows, 8, 2, 8, 0, c.at("qa") == 1, c.at("qp"), c.at("qu")}
                      : qplan{qkernel::tiled, 64, 64, 4, 4};
      }
      [[fallthrough]];
    default:
      return {qkernel::tiled, c.at("tm"), c.at("tn"), c.at("wm"), c.at("wn")};
  }
}

std::optional<std::string> quant_unsupported(const device& dev, const op_call& call, const kernel_config& c) {
  const tensor* w = quantized_weight(call);
  if (!w)
    return std::string(
        "weight is not block-quantized (q8_0, q4_0, q4_1): the float GEMM implementations serve it");
  const dtype t = call.outputs.empty() ? call.inputs[0].type() : call.outputs[0].type();
  if (!is_floating(t)) return fmt::format("dtype {} is not a float dtype (f32, f16, bf16)", dtype_name(t));
  std::int64_t m = 1;
  for (int i = 0; i + 1 < call.inputs[0].dim(); ++i) m *= call.inputs[0].size(i);
  const bool wants_mma = wants_qmma(c, m, t);
  std::optional<std::string> mma_refused;
  if (wants_mma) mma_refused = qmma_refusal(dev, *w, t, c.at("qa") == 1);
  const qplan pl = plan_quant(c, m, quant_k_and_row(*w).first, wants_mma && !mma_refused);
  if (c.at("qa") == 2 && pl.kind != qkernel::cpu)
    return std::string("qa=2 (no quantize launch) is the CPU kernel's (variant 0); the others take qa=0 or 1");
  std::uint64_t threads = 1, local = 0;
  if (pl.kind == qkernel::mma) {
    if (mma_refused) return mma_refused;
    threads = static_cast<std::uint64_t>(32 * pl.a);
    local = qmma_local_bytes(w->type(), pl.a);
  } else if (pl.kind == qkernel::cpu) {
    if (pl.fused && m > kFusedQuantizeRows)
      return fmt::format(
          "qa=2 has one work-group quantize every activation row while the others wait: M <= {}, got M = {} "
          "(qa=1 quantizes them in a launch of their own)",
          kFusedQuantizeRows, m);
    if (auto why = pl.x86_dot ? gemm_detail::x86_dot_refusal(dev, w->type(), pl.int8_activations)
                              : std::nullopt)
      return why;
    threads = static_cast<std::uint64_t>(pl.c * pl.d);
  } else if (pl.kind == qkernel::gemv) {
    threads = static_cast<std::uint64_t>(pl.c);
    local = static_cast<std::uint64_t>(std::min<std::int64_t>(pl.a, next_pow2(m)) * pl.b * pl.c * 4);
  } else if (pl.kind == qkernel::rows) {
    if (pl.walk != 0 && !pl.int8_activations)
      return fmt::format("qp={} ({}) needs qa=1 (int8 activations)", pl.walk,
                         pl.walk == 1 ? "block pairs" : "a lane per block");
    if (pl.walk == 1) {
      const auto [k, row] = quant_k_and_row(*w);
      if (k % 64 != 0 || row % 64 != 0 || w->offset() % 64 != 0)
        return fmt::format(
            "qp=1 reads block pairs: K ({}), the weight's row stride ({}) and offset ({}) must be "
            "multiples of 64",
            k, row, w->offset());
    }
    threads = static_cast<std::uint64_t>(32 * pl.c);
    // qp=3: one activation row a group, its int8 copy in local memory beside the partial sums.
    local =
        pl.walk == 3
            ? quant_local_walk_bytes(pl.b, pl.c, quant_k_and_row(*w).first)
            : static_cast<std::uint64_t>(std::min<std::int64_t>(pl.a, next_pow2(m)) * pl.b * 32 * pl.c * 4);
  } else {
    threads = static_cast<std::uint64_t>((pl.a / pl.c) * (pl.b / pl.d));
    local = static_cast<std::uint64_t>((pl.a + pl.b + 2) * 32 * 4);
  }
  if (threads > dev.max_work_group_size())
    return fmt::format("work-group of {} items > device maximum {}", threads, dev.max_work_group_size());
  if (local > dev.local_mem_size())
    return fmt::format("needs local memory {} B > device {} B", local, dev.local_mem_size());
  return std::nullopt;
}

// The GEMM with A's rows k-contiguous (the quantized kernels read activations 16 wide).
gemm_problem with_k_rows(queue& q, gemm_problem p) {
  if (p.a_folds && (p.sak == 1 || p.k <= 1)) return p;
  p.a = p.a.contiguous(q);
  p.sam = p.k;
  p.sak = 1;
  p.a_folds = true;
  return p;
}

// qa=1: quantize_rows_q8 writes A as int8 blocks with their scales and sums into a workspace
// (gemm_quant.cl's layout: M*K bytes, then 2*M*K/32 floats), which gemm_q_cpu_i8 reads in A's place.
// With `norm` (rms_norm_linear), each row is RMS-normalized and scaled by the norm weight on the
// way (QNORM: one work-group per row, quantize_norm_group items).
// That workspace's size in floats.
std::int64_t int8_workspace_floats(const gemm_problem& p) {
  return p.m * p.k / 4 + 2 * p.m * (p.k / 32);
}

tensor quantize_activations(queue& q, const gemm_problem& p, const std::string& opts, source_override src,
                            const quant_norm* norm = nullptr) {
  const char* op = "gemm";
  const int M = to_int(p.m, op, "M"), K = to_int(p.k, op, "K"), sam = to_int(p.sam, op, "A row stride");
  const std::int64_t blocks = p.k / 32, a_off = p.a.offset();
  tensor ws = tensor::empty(q, dims{int8_workspace_floats(p)}, dtype::f32);
  const std::int64_t qn = norm ? quantize_norm_group(p.k) : 0;
  kernel quantize = build_kernel(q.get_context(), "gemm_quant.cl", src,
                                 norm ? opts + fmt::format(" -DQNORM={}", qn) : opts, "quantize_rows_q8");
  auto sa = p.a.storage();
  auto sw = ws.storage();
  if (norm) {
    const tensor g = norm->weight.contiguous(q);
    auto sg = g.storage();
    q.submit([&](handler& h) {
      accessor<std::byte> aa(sa, h, read_only);
      accessor<std::byte> aw(sw, h, write_only);
      accessor<std::byte> ag(sg, h, read_only);
      h.parallel_for(nd_range(range<3>(qn, p.m, 1), range<3>(qn, 1, 1)), quantize, M, K, aa, a_off, sam, aw,
                     ag, g.offset(), static_cast<float>(norm->eps));
    });
    return ws;
  }
  q.submit([&](handler& h) {
    accessor<std::byte> aa(sa, h, read_only);
    accessor<std::byte> aw(sw, h, write_only);
    const std::int64_t lx = std::gcd(blocks, std::int64_t{64});
    h.parallel_for(nd_range(range<3>(blocks, p.m, 1), range<3>(lx, 1, 1)), quantize, M, K, aa, a_off, sam,
                   aw);
  });
  return ws;
}

// Every gemm_quant.cl GEMM kernel takes (M, N, K, alpha, beta, A..., W, w_off, swn, C, c_off, scm,
// X, x_off, sxm, sxn); `a_args` are what follows the activations' buffer `a`: (a_off, sam) for
// the float kernels, nothing for gemm_q_cpu_i8's workspace.
// `norm` (the rows kernel built with QNORM_F, gemm_q_cpu_i8 built with QA_FUSED and QNORM): the
// norm weight, its offset and eps follow; then `scratch` (QA_FUSED): the int8 workspace and its
// counters.
struct quant_scratch {
  buffer<float> workspace;
  buffer<int> counters;
};
template <class... AArgs>
event submit_quant(queue& q, const gemm_problem& p, const kernel& k, const nd_range& r,
                   const quant_norm* norm, const quant_scratch* scratch, const tensor& a, AArgs... a_args) {
  const char* op = "gemm";
  const int M = to_int(p.m, op, "M"), N = to_int(p.n, op, "N"), K = to_int(p.k, op, "K");
  const float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  const int scm = to_int(p.scm, op, "C row stride");
  const int sxm = to_int(p.sxm, op, "bias row stride"), sxn = to_int(p.sxn, op, "bias column stride");
  const std::int64_t block = static_cast<std::int64_t>(dtype_block_elements(p.b.type()));
  const std::int64_t w_off = p.b.offset() / block, swn = p.n > 1 ? p.sbn / block : 0;
  const std::int64_t c_off = p.c.offset(), x_off = p.bias.defined() ? p.bias.offset() : 0;
  auto sa = a.storage();
  auto sb = p.b.storage();
  auto sc = p.c.storage();
  auto sx = p.bias.defined() ? p.bias.storage() : p.b.storage();
  const tensor g = norm ? norm->weight.contiguous(q) : tensor{};
  auto sg = norm ? g.storage() : p.b.storage();
  return q.submit([&](handler& h) {
    accessor<std::byte> aa(sa, h, read_only);
    accessor<std::byte> ab(sb, h, read_only);
    accessor<std::byte> ac(sc, h, write_only, p.c.byte_extent());
    accessor<std::byte> ax(sx, h, read_only);
    if (scratch) {
      buffer<float> sw = scratch->workspace;
      buffer<int> sf = scratch->counters;
      accessor<float> aw(sw, h, read_write);
      accessor<int> af(sf, h, read_write);
      if (!norm) {
        h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_args..., ab, w_off, swn, ac, c_off, scm, ax, x_off, sxm,
                       sxn, aw, af);
        return;
      }
      accessor<std::byte> ag(sg, h, read_only);
      h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_args..., ab, w_off, swn, ac, c_off, scm, ax, x_off, sxm,
                     sxn, ag, g.offset(), static_cast<float>(norm->eps), aw, af);
      return;
    }
    if (!norm) {
      h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_args..., ab, w_off, swn, ac, c_off, scm, ax, x_off,
                     sxm, sxn);
      return;
    }
    accessor<std::byte> ag(sg, h, read_only);
    h.parallel_for(r, k, M, N, K, alpha, beta, aa, a_args..., ab, w_off, swn, ac, c_off, scm, ax, x_off, sxm,
                   sxn, ag, g.offset(), static_cast<float>(norm->eps));
  });
}

// The shortest rows (K) that the CPU int8 walk prefetches further ahead for (Q_PF_FAR). At
// K = 1536 that prefetch with x86's dot-product extensions lost 0.07-0.11 of the read for q4_0 on
// an AVX-512 EPYC (benchmarks/RESULTS.md, "Issue 17, session 40").
constexpr std::int64_t kLongRowK = 2048;

// The quantized GEMM of plan `pl` (plan_quant's, or enqueue_quant_norm_linear's qp=3 group).
event enqueue_planned(queue& q, const gemm_problem& p, const qplan& pl, source_override src,
                      const quant_norm* norm) {
  // A norm rides the int8 quantization (qa=1), or the rows kernel's float loads (QNORM_F).
  if (norm && !pl.int8_activations && pl.kind != qkernel::rows)
    throw error(errc::internal, "ops::rms_norm_linear",
                "a norm needs int8 activations (qa=1) or the rows kernel (variant 4); this plan has neither");
  std::string opts = fmt::format("{} -DQTYPE={} -DHAS_BIAS={}", dtype_define(p.c.type()),
                                 qtype_define(p.b.type()), p.bias.defined() ? 1 : 0);
  if (pl.gated && pl.kind != qkernel::cpu)
    throw error(errc::internal, "ops::linear_silu_and_mul", "a gate/up pair runs on the CPU kernel only");
  const char* name = "gemm_q_cpu";
  nd_range r(range<3>(1, 1, 1), range<3>(1, 1, 1));
  if (pl.kind == qkernel::cpu) {
    // Gate/up pairs (Q_GATED): the int8 walk takes a work-item's pl.b gate rows, then their up
    // rows (RN = Q_PAIRS = pl.b); the float one a single pair's two rows together (RN = 2).
    const std::int64_t rm = std::min<std::int64_t>(pl.a, p.m),
                       rn = pl.gated && !pl.int8_activations ? 2 : pl.b,
                       pairs = pl.gated ? (pl.int8_activations ? pl.b : 1) : 0;
    opts += fmt::format(" -DRM={} -DRN={}", rm, rn);
    if (pl.gated) opts += fmt::format(" -DQ_GATED=1 -DQ_PAIRS={}", pairs);
    const std::int64_t gx = pl.gated ? ceil_div(p.n / 2, pairs) : ceil_div(p.n, rn), gy = ceil_div(p.m, rm);
    const std::int64_t lx = std::min(next_pow2(gx), pl.c);
    r = nd_range(range<3>(ceil_div(gx, lx) * lx, gy, 1), range<3>(lx, 1, 1));
    // The group's size in the CPU kernel's program (reqd_work_group_size): PoCL builds a
    // work-group function per local size either way, and the program then names the shape it
    // runs. Not in the quantize kernel's options (its program serves every group size).
    const std::string group = fmt::format(" -DQ_LX={}", lx);
    if (pl.int8_activations) {
      opts += " -DQA8";
      // Long rows prefetch further ahead (Q_PF_FAR). x86's dot-product extensions (qx=1) are a
      // tuned key: their walk is a call (it cannot be inlined into PoCL's work-group function), and
      // at K = 4096 the q4_0 GEMV went from 0.57 to 0.61 of the read with them on a 2-core Xeon
      // (benchmarks/RESULTS.md, "Issue 17, session 39"), q4_1 gained 12-17% and q4_0 lost 4-6% on
      // a 2-core EPYC, and on PoCL 5.0 with 16 cores q4_0 lost 1.6-1.8x ("Issue 17, session 40").
      if (p.k >= kLongRowK) opts += " -DQ_PF_FAR=1";
      if (pl.x86_dot) opts += x86_dot_defines(q.get_device());
      if (pl.fused) {  // qa=2: the kernel's first work-group quantizes A into the queue's workspace
        opts += " -DQA_FUSED=1";
        if (norm) opts += fmt::format(" -DQNORM={}", quantize_norm_group(p.k));
        const auto [ws, counters] =
            kernels::split_workspace(q, static_cast<std::size_t>(int8_workspace_floats(p)), 3);
        const quant_scratch scratch{ws, counters};
        return submit_quant(
            q, p, build_kernel(q.get_context(), "gemm_quant.cl", src, opts + group, "gemm_q_cpu_i8"), r, norm,
            &scratch, p.a, p.a.offset(), to_int(p.sam, "gemm", "A row stride"));
      }
      const tensor ws = quantize_activations(q, p, opts, src, norm);
      return submit_quant(q, p,
                          build_kernel(q.get_context(), "gemm_quant.cl", src, opts + group, "gemm_q_cpu_i8"),
                          r, nullptr, nullptr, ws);
    }
    opts += group;
  } else if (pl.kind == qkernel::gemv) {
    const std::int64_t mb = std::min<std::int64_t>(pl.a, next_pow2(p.m));
    opts += fmt::format(" -DMB={} -DNB={} -DWG={}", mb, pl.b, pl.c);
    name = "gemm_q_gemv";
    r = nd_range(range<3>(ceil_div(p.n, pl.b) * pl.c, ceil_div(p.m, mb), 1), range<3>(pl.c, 1, 1));
  } else if (pl.kind == qkernel::rows) {
    const bool local_q = pl.int8_activations && pl.walk == 3;  // one activation row a group
    const std::int64_t mb = local_q ? 1 : std::min<std::int64_t>(pl.a, next_pow2(p.m)), wg = 32 * pl.c;
    // Activation rows read 4 elements per load: 16-byte (f32) or 8-byte (16-bit) aligned when the
    // offset and the row stride are multiples of 4 elements (buffers themselves are aligned).
    const bool vec4 =
        p.a.offset() % 4 == 0 && (p.m == 1 || p.sam % 4 == 0) && (!norm || norm->weight.offset() % 4 == 0);
    opts += fmt::format(" -DMB={} -DNB={} -DWARPS={} -DA_VEC4={}", mb, pl.b, pl.c, vec4 ? 1 : 0);
    if (norm && !pl.int8_activations) opts += " -DQNORM_F=1";
    name = "gemm_q_rows";
    r = nd_range(range<3>(ceil_div(p.n, pl.b * pl.c) * wg, ceil_div(p.m, mb), 1), range<3>(wg, 1, 1));
    if (local_q) {  // gemm_q_blocks_i8 built with QL_K: float rows in, no quantize launch
      opts += fmt::format(" -DQA8 -DQ_DP4A={} -DQPAIR=2 -DQB_UNROLL={} -DQL_K={} -DQL_NORM={}",
                          probe_ptx(q.get_device()).has("dp4a") ? 1 : 0, pl.unroll, p.k, norm ? 1 : 0);
      // NVIDIA: the epilogue's sums in warp shuffles, no barrier (q_rows_finish_shfl).
      if (probe_ptx(q.get_device()).has("shfl")) opts += " -DLANE_SHFL=1";
      return submit_quant(q, p, build_kernel(q.get_context(), "gemm_quant.cl", src, opts, "gemm_q_blocks_i8"),
                          r, norm, nullptr, p.a, p.a.offset(), to_int(p.sam, "gemm", "A row stride"));
    }
    if (pl.int8_activations) {
      opts += fmt::format(" -DQA8 -DQ_DP4A={} -DQPAIR={}", probe_ptx(q.get_device()).has("dp4a") ? 1 : 0,
                          pl.walk);
      if (pl.walk == 2) opts += fmt::format(" -DQB_UNROLL={}", pl.unroll);
      static const char* const walks[3] = {"gemm_q_rows", "gemm_q_pairs_i8", "gemm_q_blocks_i8"};
      const tensor ws = quantize_activations(q, p, opts, src, norm);
      return submit_quant(q, p, build_kernel(q.get_context(), "gemm_quant.cl", src, opts, walks[pl.walk]), r,
                          nullptr, nullptr, ws);
    }
  } else if (pl.kind == qkernel::mma) {
    const bool vec4 = p.a.offset() % 4 == 0 && (p.m == 1 || p.sam % 4 == 0);
    opts += fmt::format(" -DQMMA -DQM_WARPS={} -DA_VEC4={}", pl.a, vec4 ? 1 : 0);
    name = "gemm_q_mma";
    r = nd_range(range<3>(ceil_div(p.n, 16) * 32 * pl.a, ceil_div(p.m, 8), 1), range<3>(32 * pl.a, 1, 1));
  } else {
    opts += fmt::format(" -DTM={} -DTN={} -DWM={} -DWN={}", pl.a, pl.b, pl.c, pl.d);
    name = "gemm_q_tiled";
    const std::int64_t lx = pl.b / pl.d, ly = pl.a / pl.c;
    r = nd_range(range<3>(ceil_div(p.n, pl.b) * lx, ceil_div(p.m, pl.a) * ly, 1), range<3>(lx, ly, 1));
  }
  kernel k = build_kernel(q.get_context(), "gemm_quant.cl", src, opts, name);
  const std::int64_t a_off = p.a.offset();
  return submit_quant(q, p, k, r, norm, nullptr, p.a, a_off, to_int(p.sam, "gemm", "A row stride"));
}

event enqueue_quant(queue& q, const gemm_problem& p0, const kernel_config& c, source_override src,
                    const quant_norm* norm = nullptr) {
  if (p0.m == 0 || p0.n == 0 || p0.batch == 0) return {};
  const gemm_problem p = with_k_rows(q, p0);
  const bool auto_mma =
      wants_qmma(c, p.m, p.c.type()) && !qmma_refusal(q.get_device(), p.b, p.c.type(), c.at("qa") == 1);
  return enqueue_planned(q, p, plan_quant(c, p.m, p.k, auto_mma), src, norm);
}

std::vector<op_implementation> gemm_implementations(lowering lower) {
  std::vector<op_implementation> impls;
  impls.push_back(
      {"opencl.cpu", "gemm_cpu.cl",
       [](const device& dev, const op_call& call, const kernel_config& c) -> std::optional<std::string> {
         if (auto r = variant_mismatch(c, variant::cpu)) return r;
         if (auto r = dtype_unsupported(call)) return r;
         const auto wg = static_cast<std::size_t>(c.at("lx") * c.at("ly"));
         if (wg > dev.max_work_group_size())
           return fmt::format("work-group lx*ly = {} > device maximum {}", wg, dev.max_work_group_size());
         return std::nullopt;
       },
       [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         return enqueue_cpu(q, for_kernels(q, lower(call)), c, src);
       }});
  impls.push_back(
      {"opencl.gpu", "gemm_gpu.cl",
       [](const device& dev, const op_call& call, const kernel_config& c) -> std::optional<std::string> {
         if (auto r = variant_mismatch(c, variant::gpu)) return r;
         if (auto r = dtype_unsupported(call)) return r;
         const auto threads = static_cast<std::size_t>((c.at("tm") / c.at("wm")) * (c.at("tn") / c.at("wn")));
         if (threads > dev.max_work_group_size())
           return fmt::format("work-group (tm/wm)*(tn/wn) = {} > device maximum {}", threads,
                              dev.max_work_group_size());
         const auto local = static_cast<std::uint64_t>((c.at("tm") + c.at("tn") + (c.at("gv") == 4 ? 8 : 2)) *
                                                       c.at("tk") * 4);
         if (local > dev.local_mem_size())
           return fmt::format("needs local memory {} B > device {} B", local, dev.local_mem_size());
         return std::nullopt;
       },
       [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         return enqueue_gpu(q, for_kernels(q, lower(call)), c, src);
       }});
  impls.push_back(
      {"opencl.gemv", "gemm_gemv.cl",
       [](const device& dev, const op_call& call, const kernel_config& c) -> std::optional<std::string> {
         if (auto r = variant_mismatch(c, variant::gemv)) return r;
         if (auto r = dtype_unsupported(call)) return r;
         if (static_cast<std::size_t>(c.at("wg")) > dev.max_work_group_size())
           return fmt::format("work-group wg = {} > device maximum {}", c.at("wg"),
                              dev.max_work_group_size());
         const auto local = static_cast<std::uint64_t>(c.at("mb") * c.at("nb") * c.at("wg") * 4);
         if (local > dev.local_mem_size())
           return fmt::format("needs local memory {} B > device {} B", local, dev.local_mem_size());
         return std::nullopt;
       },
       [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         return enqueue_gemv(q, for_kernels(q, lower(call)), c, src);
       }});
  // NVIDIA family. An explicit config that a call's dtype or layout cannot use runs the auto
  // choice instead (same results, logged at debug); the device itself is checked here.
  impls.push_back(
      {"opencl.nv", "gemm_nv.cl",
       [](const device& dev, const op_call& call, const kernel_config& c) -> std::optional<std::string> {
         if (auto r = variant_mismatch(c, variant::nv)) return r;
         if (auto r = dtype_unsupported(call)) return r;
         const nv_tile t = nv_tile_of(c);
         if (c.at("auto") == 0) {
           if (t.lsw && (t.bm % 32 || t.bn % 32 || (t.bk != 4 && t.bk != 8 && t.bk != 16 && t.bk != 32)))
             return fmt::format(
                 "lsw=1 needs tm and tn multiples of 32 and tk 4, 8, 16 or 32 (tm={}, tn={}, tk={})", t.bm,
                 t.bn, t.bk);
           if (t.streamk && t.sk > 1)
             return fmt::format("skg={} (stream-K) and sk={} (split-K) exclude each other", t.streamk, t.sk);
         }
         if (auto r = not_on_cpu(dev)) return r;
         if (c.at("auto") == 1) return std::nullopt;
         const auto threads = static_cast<std::size_t>((t.bm / t.tm) * (t.bn / t.tn));
         if (threads > dev.max_work_group_size())
           return fmt::format("work-group (tm/wm)*(tn/wn) = {} > device maximum {}", threads,
                              dev.max_work_group_size());
         if (nv_local_bytes(t) > dev.local_mem_size())
           return fmt::format("needs local memory {} B > device {} B", nv_local_bytes(t),
                              dev.local_mem_size());
         return std::nullopt;
       },
       [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         const gemm_problem p = for_kernels(q, lower(call));
         bool a_kcontig = true, b_ncontig = true;
         if (c.at("auto") == 1 || p.c.type() != dtype::f32 || !nv_layout(p, a_kcontig, b_ncontig))
           return enqueue_nv_auto(q, call, p, c, src);
         return enqueue_nv_tiled(q, p, nv_tile_of(c), src);
       }});
  impls.push_back(
      {"opencl.nv_skinny", "gemm_nv.cl",
       [](const device& dev, const op_call& call, const kernel_config& c) -> std::optional<std::string> {
         if (auto r = variant_mismatch(c, variant::nv_skinny)) return r;
         if (auto r = dtype_unsupported(call)) return r;
         if (auto r = not_on_cpu(dev)) return r;
         if (static_cast<std::size_t>(32 * c.at("warps")) > dev.max_work_group_size())
           return fmt::format("work-group 32*warps = {} > device maximum {}", 32 * c.at("warps"),
                              dev.max_work_group_size());
         const std::uint64_t local = skinny_local_bytes(c.at("mb"), c.at("nb"), c.at("warps"));
         if (local > dev.local_mem_size())
           return fmt::format("needs local memory {} B > device {} B", local, dev.local_mem_size());
         return std::nullopt;
       },
       [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         const gemm_problem p = for_kernels(q, lower(call));
         if (!skinny_layout(p)) return enqueue_nv_auto(q, call, p, c, src);
         return enqueue_nv_skinny(q, p, c.at("mb"), c.at("nb"), c.at("warps"), src);
       }});
  impls.push_back(
      {"opencl.mma", "gemm_mma.cl",
       [](const device& dev, const op_call& call, const kernel_config& c) -> std::optional<std::string> {
         if (auto r = variant_mismatch(c, variant::mma)) return r;
         if (auto r = dtype_unsupported(call)) return r;
         const dtype dt = call.outputs.empty() ? call.inputs[0].type() : call.outputs[0].type();
         const ptx_forms& forms = probe_ptx(dev);
         if (!forms.has(mma_form(dt))) return forms.why(mma_form(dt));
         if (c.at("ldsm") == 1 && !forms.has("ldmatrix")) return forms.why("ldmatrix");
         if (c.at("cpa") == 1 && !forms.has("cp.async")) return forms.why("cp.async");
         if (c.at("wgmma") == 1 && !forms.has("wgmma")) return forms.why("wgmma");
         const mma_tile_cfg t(c);
         if (static_cast<std::size_t>(32 * t.wpm * t.wpn) > dev.max_work_group_size())
           return fmt::format("work-group 32*wpm*wpn = {} > device maximum {}", 32 * t.wpm * t.wpn,
                              dev.max_work_group_size());
         // f32 without a TF32 request runs the FP32 kernels instead, which need no such room.
         if ((dt != dtype::f32 || tf32_allowed(call, c)) && mma_local_bytes(t, dt) > dev.local_mem_size())
           return fmt::format("needs local memory {} B > device {} B", mma_local_bytes(t, dt),
                              dev.local_mem_size());
         return std::nullopt;
       },
       [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         const gemm_problem p = for_kernels(q, lower(call));
         const mma_tile_cfg t(c);
         if (auto why = mma_unusable(q.get_device(), call, p, c, t)) {
           log::get("kernels")->debug("GEMM {}: mma config not usable here ({}); auto choice", call.op, *why);
           return enqueue_nv_auto(q, call, p, c, {});
         }
         return enqueue_mma(q, p, t, src);
       }});
  impls.push_back({"opencl.quant", "gemm_quant.cl", quant_unsupported,
                   [lower](queue& q, const op_call& call, const kernel_config& c, source_override src) {
                     return enqueue_quant(q, lower(call), c, src);
                   }});
  return impls;
}

// ---------------------------------------------------------------------------------------------
// Host reference (double) and tolerance

// Row-major logical values: a [batch, m, k], b [batch, k, n] (or [n, k] when b_nk), bias
// broadcast over [m, n] by (xm, xn) strides into x's logical values.
void reference_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                    const std::vector<double>& a, std::int64_t a_batch_stride, const std::vector<double>& b,
                    std::int64_t b_batch_stride, bool b_nk, const host_tensor* x, std::int64_t xm,
                    std::int64_t xn, double alpha, double beta, host_tensor& out) {
  out.values.assign(static_cast<std::size_t>(batch * m * n), 0.0);
  out.magnitude.assign(out.values.size(), 0.0);
  for (std::int64_t bt = 0; bt < batch; ++bt)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          const double av = a[bt * a_batch_stride + i * k + kk];
          const double bv = b_nk ? b[bt * b_batch_stride + j * k + kk] : b[bt * b_batch_stride + kk * n + j];
          sum += av * bv;
          mag += std::fabs(av * bv);
        }
        double v = alpha * sum, vm = std::fabs(alpha) * mag;
        if (x) {
          const double xv = x->values[i * xm + j * xn];
          v += beta * xv;
          vm += std::fabs(beta * xv);
        }
        const std::size_t o = static_cast<std::size_t>((bt * m + i) * n + j);
        out.values[o] = v;
        out.magnitude[o] = vm;
      }
}

// Logical (row-major) strides of a bias host tensor broadcast to [m, n].
std::pair<std::int64_t, std::int64_t> host_bias_strides(const host_tensor& x) {
  const int nd = x.shape.size();
  std::int64_t xm = 0, xn = 0;
  if (nd >= 1 && x.shape[nd - 1] != 1) xn = 1;
  if (nd == 2 && x.shape[0] != 1) xm = x.shape[1];
  return {xm, xn};
}

// One reference per op, on the logical (row-major) host values.
void reference_mm(host_call& hc) {
  const auto& a = hc.inputs[0];
  const auto& b = hc.inputs[1];
  reference_gemm(1, a.shape[0], b.shape[1], a.shape[1], a.values, 0, b.values, 0, false, nullptr, 0, 0, 1, 0,
                 hc.outputs[0]);
}

void reference_bmm(host_call& hc) {
  const auto& a = hc.inputs[0];
  const auto& b = hc.inputs[1];
  const auto m = a.shape[1], k = a.shape[2], n = b.shape[2];
  reference_gemm(a.shape[0], m, n, k, a.values, m * k, b.values, k * n, false, nullptr, 0, 0, 1, 0,
                 hc.outputs[0]);
}

void reference_addmm(host_call& hc) {
  const auto& x = hc.inputs[0];
  const auto& a = hc.inputs[1];
  const auto& b = hc.inputs[2];
  auto [xm, xn] = host_bias_strides(x);
  reference_gemm(1, a.shape[0], b.shape[1], a.shape[1], a.values, 0, b.values, 0, false, &x, xm, xn,
                 hc.call->get_f64("alpha"), hc.call->get_f64("beta"), hc.outputs[0]);
}

// x [..., k] as [m, k] rows times w ([n, k] when w_nk, else [k, n]), plus an optional bias [n].
void reference_rows(host_call& hc, bool w_nk) {
  const auto& a = hc.inputs[0];
  const auto& w = hc.inputs[1];
  const std::int64_t k = a.shape[a.shape.size() - 1], n = w_nk ? w.shape[0] : w.shape[1];
  std::int64_t m = 1;
  for (int i = 0; i + 1 < a.shape.size(); ++i) m *= a.shape[i];
  const host_tensor* x = hc.inputs.size() > 2 && hc.inputs[2].defined ? &hc.inputs[2] : nullptr;
  reference_gemm(1, m, n, k, a.values, 0, w.values, 0, w_nk, x, 0, x && x->shape[0] != 1 ? 1 : 0, 1, 1,
                 hc.outputs[0]);
  if (quantized_weight(*hc.call) && k % 32 == 0) {
    // The error scale of int8 activations (gemm_tolerance): sum over 32-blocks of k of
    // max_block |a| * sum_block |w| (+ |bias|); it bounds sum |a w| from above.
    host_tensor& out = hc.outputs[0];
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double mag = 0;
        for (std::int64_t kb = 0; kb < k; kb += 32) {
          double amax = 0, wsum = 0;
          for (std::int64_t kk = kb; kk < kb + 32; ++kk) {
            amax = std::max(amax, std::fabs(a.values[i * k + kk]));
            wsum += std::fabs(w_nk ? w.values[j * k + kk] : w.values[kk * n + j]);
          }
          mag += amax * wsum;
        }
        if (x) mag += std::fabs(x->values[x->shape[0] != 1 ? j : 0]);
        out.magnitude[static_cast<std::size_t>(i * n + j)] = mag;
      }
  }
}

// With an activation: y = act(v); its slope is at most 1.13 (GELU) / 1.1 (SiLU), so the error of v
// carries over scaled by 1.2, and the f32 evaluation of erf / tanh / exp adds a few ulps of |v|.
void reference_linear(host_call& hc) {
  reference_rows(hc, true);
  const auto act = parse_gemm_activation(hc.call->get_str("activation"), "ops::linear");
  if (act == gemm_activation::none) return;
  host_tensor& out = hc.outputs[0];
  for (std::size_t i = 0; i < out.values.size(); ++i) {
    out.magnitude[i] = 1.2 * out.magnitude[i] + 8.0 * std::fabs(out.values[i]);
    out.values[i] = apply_gemm_activation(act, out.values[i]);
  }
}

void reference_matmul(host_call& hc) {
  if (hc.inputs[0].shape.size() == 3 && hc.inputs[1].shape.size() == 3)
    reference_bmm(hc);
  else
    reference_rows(hc, false);
}

// |err| <= 1 ulp of the output dtype (final rounding) + 2^-23 (2 + sqrt(K)) sum_k |a b|: f32
// accumulation error grows like sqrt(K) for any summation order the kernels use. With TF32
// allowed each product may also lose 2^-9 of itself (two inputs cut to 10 mantissa bits).
std::function<tolerance(const op_call&, int)> gemm_tolerance(lowering lower) {
  return [lower](const op_call& call, int) {
    const double k = static_cast<double>(lower(call).k);
    // A block-quantized weight adds one rounding per block (d * (a . q)), and the CPU kernels may
    // quantize the activations to int8 per 32-block as llama.cpp does (config qa=1): a = d q + e
    // with d = absmax / 127 and |e| <= d / 2 (rounding to nearest; f32 evaluation of d, 1/d and
    // a/d adds under 2^-20 of it), so a block's error is at most absmax / 254 * sum |w|. The
    // reference's magnitude is then sum_blocks absmax * sum |w| (reference_rows), which also
    // bounds sum |a w| for the f32 term.
    if (quantized_weight(call)) {
      const double f32 = std::ldexp(1.0, -23) * (4.0 + std::sqrt(k));
      return tolerance{1.0, 0.0, 0.0, f32 + (1.0 + std::ldexp(1.0, -10)) / 254.0};
    }
    const double f32 = std::ldexp(1.0, -23) * (2.0 + std::sqrt(k));
    return tolerance{1.0, 0.0, 0.0, tf32_requested(call) ? f32 + std::ldexp(1.0, -9) : f32};
  };
}

// ---------------------------------------------------------------------------------------------
// Shape keys, samples, suite cases

tensor make_operand(queue& q, std::int64_t rows, std::int64_t cols, bool trans, dtype t,
                    const sample_options& o, std::uint64_t salt) {
  if (trans) return random_tensor(q, {cols, rows}, t, o, salt).transpose(0, 1);
  return random_tensor(q, {rows, cols}, t, o, salt);
}

tensor make_batched(queue& q, std::int64_t batch, std::int64_t rows, std::int64_t cols, bool trans, dtype t,
                    const sample_options& o, std::uint64_t salt) {
  if (trans) return random_tensor(q, {batch, cols, rows}, t, o, salt).transpose(1, 2);
  return random_tensor(q, {batch, rows, cols}, t, o, salt);
}

op_call finish(queue& q, const op_descriptor& d, op_call call) {
  allocate_outputs(q, d, call);
  return call;
}

const op_descriptor& self(const char* name) {
  return op_registry::instance().get(name);
}

op_call sample_mm(queue& q, const shape_key& key, const sample_options& o) {
  op_call c{"mm", {}, {}, {}};
  c.inputs = {make_operand(q, key.at("m"), key.at("k"), key.get("ta", 0) != 0, o.type, o, 1),
              make_operand(q, key.at("k"), key.at("n"), key.get("tb", 0) != 0, o.type, o, 2)};
  return finish(q, self("mm"), std::move(c));
}

op_call sample_bmm(queue& q, const shape_key& key, const sample_options& o) {
  op_call c{"bmm", {}, {}, {}};
  c.inputs = {make_batched(q, key.at("b"), key.at("m"), key.at("k"), key.get("ta", 0) != 0, o.type, o, 1),
              make_batched(q, key.at("b"), key.at("k"), key.at("n"), key.get("tb", 0) != 0, o.type, o, 2)};
  return finish(q, self("bmm"), std::move(c));
}

op_call sample_addmm(queue& q, const shape_key& key, const sample_options& o) {
  op_call c{"addmm", {}, {}, {}};
  if (is_quantized(o.type)) {
    // mat2 is the transpose of a quantized [n, k] weight (blocks along k), and the input the
    // residual [m, n]: decode's o / down projection with its add, the form a model records.
    if (key.get("ta", 0) != 0 || key.get("tb", 0) != 1)
      throw error(errc::invalid_argument, "ops::addmm",
                  fmt::format("a {} mat2 is the transpose of a quantized [n, k] weight: the key needs "
                              "ta=0 and tb=1, got {}",
                              dtype_name(o.type), key.str()));
    const dtype at = gemm_detail::sample_activation_type("addmm", o, key.at("k"));
    c.inputs = {random_tensor(q, {key.at("m"), key.at("n")}, at, o, 3),
                random_tensor(q, {key.at("m"), key.at("k")}, at, o, 1),
                random_tensor(q, {key.at("n"), key.at("k")}, o.type, o, 2).transpose(0, 1)};
    return finish(q, self("addmm"), std::move(c));
  }
  c.inputs = {random_tensor(q, {key.at("n")}, o.type, o, 3),
              make_operand(q, key.at("m"), key.at("k"), key.get("ta", 0) != 0, o.type, o, 1),
              make_operand(q, key.at("k"), key.at("n"), key.get("tb", 0) != 0, o.type, o, 2)};
  return finish(q, self("addmm"), std::move(c));
}

op_call sample_linear(queue& q, const shape_key& key, const sample_options& o) {
  op_call c{"linear", {}, {}, {}};
  const dtype at = gemm_detail::sample_activation_type("linear", o, key.at("k"));
  c.inputs = {random_tensor(q, {key.at("m"), key.at("k")}, at, o, 1),
              random_tensor(q, {key.at("n"), key.at("k")}, o.type, o, 2),
              random_tensor(q, {key.at("n")}, at, o, 3)};
  return finish(q, self("linear"), std::move(c));
}

test_case keyed(std::string shape_class, const char* op, std::string key) {
  return {std::move(shape_class), [op, key](queue& q, const sample_options& o) {
            return self(op).sample(q, shape_key::parse(key), o);
          }};
}

std::vector<test_case> mm_cases(dtype) {
  std::vector<test_case> cases = {
      keyed("empty", "mm", "m=0,n=5,k=3,ta=0,tb=0"),      keyed("empty", "mm", "m=3,n=4,k=0,ta=0,tb=0"),
      keyed("one", "mm", "m=1,n=1,k=1,ta=0,tb=0"),        keyed("odd", "mm", "m=37,n=53,k=71,ta=0,tb=0"),
      keyed("large", "mm", "m=96,n=160,k=256,ta=0,tb=0"), keyed("strided", "mm", "m=19,n=35,k=40,ta=1,tb=1"),
      keyed("strided", "mm", "m=21,n=33,k=45,ta=0,tb=1"),
  };
  // A column-sliced B (column stride 2): neither k- nor n-contiguous.
  cases.push_back({"strided", [](queue& q, const sample_options& o) {
                     op_call c{"mm", {}, {}, {}};
                     c.inputs = {random_tensor(q, {13, 29}, o.type, o, 1),
                                 random_tensor(q, {29, 46}, o.type, o, 2).slice(1, 0, 46, 2)};
                     return finish(q, self("mm"), std::move(c));
                   }});
  return cases;
}

std::vector<test_case> bmm_cases(dtype) {
  std::vector<test_case> cases = {
      keyed("empty", "bmm", "b=0,m=3,n=4,k=5,ta=0,tb=0"),
      keyed("one", "bmm", "b=1,m=1,n=1,k=1,ta=0,tb=0"),
      keyed("odd", "bmm", "b=3,m=17,n=29,k=33,ta=0,tb=0"),
      keyed("strided", "bmm", "b=2,m=9,n=20,k=24,ta=1,tb=1"),
  };
  // Broadcast: one B shared by every batch (batch stride 0).
  cases.push_back({"broadcast", [](queue& q, const sample_options& o) {
                     op_call c{"bmm", {}, {}, {}};
                     c.inputs = {random_tensor(q, {4, 11, 19}, o.type, o, 1),
                                 random_tensor(q, {1, 19, 23}, o.type, o, 2).expand({4, 19, 23})};
                     return finish(q, self("bmm"), std::move(c));
                   }});
  return cases;
}

std::vector<test_case> addmm_cases(dtype) {
  std::vector<test_case> cases = {
      keyed("empty", "addmm", "m=3,n=4,k=0,ta=0,tb=0"),
      keyed("one", "addmm", "m=1,n=1,k=1,ta=0,tb=0"),
      keyed("odd", "addmm", "m=23,n=37,k=41,ta=0,tb=0"),
  };
  // Bias as a [m, 1] column and as a full [m, n], with alpha and beta.
  cases.push_back({"broadcast", [](queue& q, const sample_options& o) {
                     op_call c{"addmm", {}, {}, {}};
                     c.inputs = {random_tensor(q, {10, 1}, o.type, o, 3),
                                 random_tensor(q, {10, 21}, o.type, o, 1),
                                 random_tensor(q, {21, 18}, o.type, o, 2)};
                     c.set("alpha", 2.0).set("beta", 0.5);
                     return finish(q, self("addmm"), std::move(c));
                   }});
  cases.push_back({"strided", [](queue& q, const sample_options& o) {
                     op_call c{"addmm", {}, {}, {}};
                     c.inputs = {random_tensor(q, {18, 10}, o.type, o, 3).transpose(0, 1),
                                 random_tensor(q, {21, 10}, o.type, o, 1).transpose(0, 1),
                                 random_tensor(q, {21, 18}, o.type, o, 2)};
                     c.set("beta", -1.0);
                     return finish(q, self("addmm"), std::move(c));
                   }});
  // A block-quantized mat2 (a quantized linear weight [n, k], transposed) with the residual as the
  // input: decode's o/down projection with its add. M = 1 (the decode GEMV) and M = 3.
  for (auto [name, wt, m] :
       {std::tuple{"q4_0_residual", dtype::q4_0, 1}, std::tuple{"q8_0_residual", dtype::q8_0, 3},
        std::tuple{"q4_1_residual", dtype::q4_1, 1}}) {
    cases.push_back({name, [wt, m](queue& q, const sample_options& o) {
                       op_call c{"addmm", {}, {}, {}};
                       c.inputs = {random_tensor(q, {m, 40}, o.type, o, 3),
                                   random_tensor(q, {m, 96}, o.type, o, 1),
                                   random_tensor(q, {40, 96}, wt, o, 2).transpose(0, 1)};
                       return finish(q, self("addmm"), std::move(c));
                     }});
  }
  return cases;
}

// A quantized weight [n, k] (k whole blocks) with activations in `at`: M = 1 (decode), small M,
// large M (prefill), a 3-D input, and a weight that is a row slice of a larger one.
std::vector<test_case> quant_linear_cases() {
  std::vector<test_case> cases = {
      keyed("one", "linear", "m=1,n=1,k=32"),
      keyed("decode", "linear", "m=1,n=75,k=160"),
      keyed("odd", "linear", "m=5,n=67,k=96"),
      keyed("large", "linear", "m=64,n=192,k=256"),
  };
  cases.push_back({"broadcast", [](queue& q, const sample_options& o) {
                     op_call c{"linear", {}, {}, {}};
                     c.inputs = {random_tensor(q, {2, 3, 64}, dtype::f32, o, 1),
                                 random_tensor(q, {9, 64}, o.type, o, 2), tensor()};
                     return finish(q, self("linear"), std::move(c));
                   }});
  cases.push_back({"strided", [](queue& q, const sample_options& o) {
                     op_call c{"linear", {}, {}, {}};
                     c.inputs = {random_tensor(q, {2, 6, 64}, dtype::f32, o, 1).slice(1, 0, 6, 2),
                                 random_tensor(q, {20, 64}, o.type, o, 2).slice(0, 3, 14),
                                 random_tensor(q, {11}, dtype::f32, o, 3)};
                     return finish(q, self("linear"), std::move(c));
                   }});
  return cases;
}

std::vector<test_case> linear_cases(dtype t) {
  if (is_quantized(t)) return quant_linear_cases();
  std::vector<test_case> cases = {
      keyed("one", "linear", "m=1,n=1,k=1"),
      keyed("odd", "linear", "m=5,n=67,k=45"),
      keyed("large", "linear", "m=64,n=192,k=256"),
  };
  cases.push_back({"empty", [](queue& q, const sample_options& o) {
                     op_call c{"linear", {}, {}, {}};
                     c.inputs = {random_tensor(q, {2, 0, 8}, o.type, o, 1),
                                 random_tensor(q, {6, 8}, o.type, o, 2), tensor()};
                     return finish(q, self("linear"), std::move(c));
                   }});
  // 3-D input without bias; and a non-collapsible view (a slice along the middle dim).
  cases.push_back({"broadcast", [](queue& q, const sample_options& o) {
                     op_call c{"linear", {}, {}, {}};
                     c.inputs = {random_tensor(q, {2, 3, 20}, o.type, o, 1),
                                 random_tensor(q, {9, 20}, o.type, o, 2), tensor()};
                     return finish(q, self("linear"), std::move(c));
                   }});
  cases.push_back({"strided", [](queue& q, const sample_options& o) {
                     op_call c{"linear", {}, {}, {}};
                     c.inputs = {random_tensor(q, {2, 6, 20}, o.type, o, 1).slice(1, 0, 6, 2),
                                 random_tensor(q, {20, 9}, o.type, o, 2).transpose(0, 1),
                                 random_tensor(q, {9}, o.type, o, 3)};
                     return finish(q, self("linear"), std::move(c));
                   }});
  // Activation epilogues (an encoder's FFN): K = 600 runs PoCL's default kc = 512 as two slices,
  // so the activation must wait for the last one; 3-D input, with and without bias.
  for (const char* act : {"gelu", "gelu_tanh", "silu"})
    cases.push_back({act, [act](queue& q, const sample_options& o) {
                       const bool bias = std::string_view(act) != "silu";
                       op_call c{"linear", {}, {}, {}};
                       c.inputs = {random_tensor(q, {2, 3, 600}, o.type, o, 1),
                                   random_tensor(q, {37, 600}, o.type, o, 2),
                                   bias ? random_tensor(q, {37}, o.type, o, 3) : tensor()};
                       c.set("activation", std::string(act));
                       return finish(q, self("linear"), std::move(c));
                     }});
  return cases;
}

op_call sample_matmul(queue& q, const shape_key& key, const sample_options& o) {
  op_call c{"matmul", {}, {}, {}};
  const std::int64_t b = key.get("b", 1);
  if (is_quantized(o.type)) {  // other: the transpose of a quantized [n, k] weight
    const dtype at = gemm_detail::sample_activation_type("matmul", o, key.at("k"));
    c.inputs = {make_operand(q, key.at("m"), key.at("k"), false, at, o, 1),
                random_tensor(q, {key.at("n"), key.at("k")}, o.type, o, 2).transpose(0, 1)};
    return finish(q, self("matmul"), std::move(c));
  }
  if (b == 1)
    c.inputs = {make_operand(q, key.at("m"), key.at("k"), key.get("ta", 0) != 0, o.type, o, 1),
                make_operand(q, key.at("k"), key.at("n"), key.get("tb", 0) != 0, o.type, o, 2)};
  else
    c.inputs = {make_batched(q, b, key.at("m"), key.at("k"), key.get("ta", 0) != 0, o.type, o, 1),
                make_batched(q, b, key.at("k"), key.at("n"), key.get("tb", 0) != 0, o.type, o, 2)};
  return finish(q, self("matmul"), std::move(c));
}

std::vector<test_case> matmul_cases(dtype t) {
  if (is_quantized(t)) {
    std::vector<test_case> cases = {keyed("one", "matmul", "m=1,n=5,k=64"),
                                    keyed("odd", "matmul", "m=7,n=37,k=96")};
    cases.push_back({"broadcast", [](queue& q, const sample_options& o) {
                       op_call c{"matmul", {}, {}, {}};
                       c.inputs = {random_tensor(q, {2, 3, 64}, dtype::f32, o, 1),
                                   random_tensor(q, {9, 64}, o.type, o, 2).transpose(0, 1)};
                       return finish(q, self("matmul"), std::move(c));
                     }});
    return cases;
  }
  std::vector<test_case> cases = {
      keyed("odd", "matmul", "b=1,m=19,n=23,k=29,ta=0,tb=1"),
      keyed("strided", "matmul", "b=2,m=9,n=20,k=24,ta=1,tb=0"),
  };
  // N-D @ 2-D over the leading dims, and a 1-D vector on the left.
  cases.push_back(
      {"broadcast", [](queue& q, const sample_options& o) {
         op_call c{"matmul", {}, {}, {}};
         c.inputs = {random_tensor(q, {2, 3, 20}, o.type, o, 1), random_tensor(q, {20, 9}, o.type, o, 2)};
         return finish(q, self("matmul"), std::move(c));
       }});
  cases.push_back({"one", [](queue& q, const sample_options& o) {
                     op_call c{"matmul", {}, {}, {}};
                     c.inputs = {random_tensor(q, {7}, o.type, o, 1), random_tensor(q, {7, 5}, o.type, o, 2)};
                     return finish(q, self("matmul"), std::move(c));
                   }});
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Descriptors

op_descriptor base(const char* name, const char* summary, lowering lower, void (*ref)(host_call&)) {
  op_descriptor d;
  d.name = name;
  d.family = "gemm";
  d.summary = summary;
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.gemm = lower;
  d.reference = ref;
  d.tol = gemm_tolerance(lower);
  d.exact_on_small_integers = true;
  d.config = gemm_schema();
  d.implementations = gemm_implementations(lower);
  d.attrs = {{"allow_tf32", false,
              "f32 inputs may use TF32 tensor cores (NVIDIA; inputs keep 10 mantissa bits, like PyTorch's "
              "allow_tf32)"}};
  d.flops = [lower](const op_call& c) { return gemm_flops(lower(c)); };
  d.bytes = [](const op_call& c) {
    double b = 0;
    for (auto& t : c.inputs)
      if (t.defined()) b += static_cast<double>(t.nbytes());
    for (auto& t : c.outputs)
      if (t.defined()) b += static_cast<double>(t.nbytes());
    return b;
  };
  return d;
}

// A block-quantized weight operand: 2-D with its blocks along k (dim k_dim, contiguous), the
// activations a float dtype.
void check_quantized_weight(const op_call& call, const tensor& w, const char* name, int k_dim) {
  if (!is_floating(call.inputs[0].type()))
    bad(call, fmt::format("input has dtype {}; a {} {} takes f32, f16 or bf16 activations",
                          dtype_name(call.inputs[0].type()), dtype_name(w.type()), name));
  const auto block = static_cast<std::int64_t>(dtype_block_elements(w.type()));
  const bool whole_blocks = w.dim() == 2 && w.strides()[k_dim] == 1 && w.size(k_dim) % block == 0 &&
                            w.offset() % block == 0 &&
                            (w.size(1 - k_dim) <= 1 || w.strides()[1 - k_dim] % block == 0);
  if (!whole_blocks)
    bad(call, fmt::format("{} {} must be a 2-D {} with its blocks of 32 along k (dim {}): k contiguous, a "
                          "multiple of 32, starting on a block; got shape {} strides {} offset {}",
                          name, w.str(), dtype_name(w.type()), k_dim, w.shape().str(), w.strides().str(),
                          w.offset()));
}

void check_matrix_pair(const op_call& call, const tensor& a, const char* an, const tensor& b, const char* bn,
                       int rank) {
  check_rank(call, an, a, rank);
  check_rank(call, bn, b, rank);
  if (a.size(-1) != b.size(-2))
    bad(call,
        fmt::format("{} {} and {} {} cannot be multiplied: {}'s last dim ({}) must equal {}'s dim {} ({})",
                    an, a.shape().str(), bn, b.shape().str(), an, a.size(-1), bn, rank - 2, b.size(-2)));
  if (rank == 3 && a.size(0) != b.size(0))
    bad(call, fmt::format("{} {} and {} {} have different batch sizes ({} vs {}); expand one explicitly", an,
                          a.shape().str(), bn, b.shape().str(), a.size(0), b.size(0)));
}

}  // namespace

dtype gemm_detail::sample_activation_type(const char* op, const sample_options& o, std::int64_t k) {
  const dtype t = o.type;
  if (!is_quantized(t)) return t;
  if (k % 32 != 0)
    throw error(errc::invalid_argument, fmt::format("ops::{}", op),
                fmt::format("a {} weight needs k to be a multiple of 32 (its blocks run along k), got k={}",
                            dtype_name(t), k));
  if (o.act != dtype::f32 && o.act != dtype::f16 && o.act != dtype::bf16)
    throw error(errc::invalid_argument, fmt::format("ops::{}", op),
                fmt::format("a {} weight's activations are f32, f16 or bf16, got {}", dtype_name(t),
                            dtype_name(o.act)));
  return o.act;
}

std::optional<std::string> gemm_detail::x86_dot_refusal(const device& dev, dtype w, bool int8) {
  if (!int8) return std::string("qx=1 (the AVX512-VNNI walk) needs qa=1 (int8 activations)");
  if (w != dtype::q4_0 && w != dtype::q4_1)
    return fmt::format("qx=1 (the AVX512-VNNI walk) takes q4_0 or q4_1 weights, got {}", dtype_name(w));
  if (x86_dot_defines(dev)[0] == '\0')
    return std::string(
        "qx=1 (the AVX512-VNNI walk) needs a CPU device on an x86 host with AVX512-VNNI and AVX512-BW");
  return std::nullopt;
}

event gemm_detail::enqueue_quant_norm_linear(queue& q, const tensor& x, const quant_norm* norm,
                                             const tensor& weight, const tensor& bias, const tensor& out,
                                             bool cpu, bool int8, source_override src,
                                             const quant_walk& walk) {
  // GPU float activations: one weight row per 32-item team. H200, q4_0 weights, bf16 decode
  // (the qkv projections): against nb 2 the rows kernel's time fell 1102-1111 -> 1037 us a token at
  // llama-2-7b and 326-332 -> 292 at qwen3-0.6b (tokens/s +1.3% and +3.5%); nb 4 lost 6-30%
  // (benchmarks/RESULTS.md, "Issue 17, session 23"). GPU int8 activations (the nvidia route for q4
  // weights at K >= 4096): one row per team too, the dp4a walk 636-639 -> 591-595 us a token at
  // llama-2-7b q4_0 against nb 2 (tokens/s +1.1%; "Issue 17, session 24").
  // One kernel shape per device kind; the activations' form (qa) is the only difference within it.
  static const auto with_qa = [](const char* shape, int qa, int qp = 0) {
    return gemm_schema().complete(kernel_config::parse(fmt::format("{},qa={},qp={}", shape, qa, qp)));
  };
  static const char* const shapes[2] = {"variant=4,mb=8,nb=1,warps=8,qmma=0", "variant=0,rm=1,qrn=1,qwg=32"};
  static const kernel_config configs[2][2] = {{with_qa(shapes[0], 0), with_qa(shapes[0], 1)},
                                              {with_qa(shapes[1], 0), with_qa(shapes[1], 1)}};
  // The GPU int8 form with a lane per block (qp=2, gemm_q_blocks_i8), and the same walk quantizing
  // its row itself (qp=3: one row a group, the group's shape from walk: the config's nb and wg).
  static const kernel_config blocks_walk = with_qa(shapes[0], 1, 2);
  const bool gpu_walk = !cpu && int8 && (walk.qp == 2 || walk.qp == 3);
  const kernel_config& cfg = gpu_walk ? blocks_walk : configs[cpu ? 1 : 0][int8 ? 1 : 0];
  // The int8 quantization and the GPU rows kernel's float loads take the norm in-line; the CPU
  // float kernel reads rows the norm wrote first.
  const bool inline_norm = int8 || !cpu;
  tensor a = x;
  if (!inline_norm && norm) {
    const tensor xc = x.contiguous(q), g = norm->weight.contiguous(q);
    a = tensor::empty(q, xc.shape(), xc.type());
    const std::int64_t qn = quantize_norm_group(xc.size(1));
    kernel k = build_kernel(q.get_context(), "gemm_quant.cl", src,
                            fmt::format("{} -DQTYPE={} -DHAS_BIAS=0 -DQNORM={}", dtype_define(xc.type()),
                                        qtype_define(weight.type()), qn),
                            "quant_norm_rows");
    auto sx = xc.storage();
    auto sy = a.storage();
    auto sg = g.storage();
    q.submit([&](handler& h) {
      accessor<std::byte> ax(sx, h, read_only);
      accessor<std::byte> ay(sy, h, write_only);
      accessor<std::byte> ag(sg, h, read_only);
      h.parallel_for(nd_range(range<3>(qn, xc.size(0), 1), range<3>(qn, 1, 1)), k,
                     to_int(xc.size(0), "rms_norm_linear", "M"), to_int(xc.size(1), "rms_norm_linear", "K"),
                     ax, xc.offset(), to_int(xc.size(1), "rms_norm_linear", "K"), ay, ag, g.offset(),
                     static_cast<float>(norm->eps));
    });
  }
  op_call lin{"linear", {a, weight, bias}, {out}, {}};
  lin.attrs["activation"] = std::string("none");
  gemm_problem p = with_k_rows(q, lower_linear(lin));
  if (walk.gated) p.scm = out.strides()[0];  // out is [m, n / 2]
  // qp=3: one activation row a group of walk.wg / 32 teams of walk.nb rows; qp=2: blocks_walk's plan.
  qplan pl = gpu_walk && walk.qp == 3 ? qplan{qkernel::rows, 1, walk.nb, walk.wg / 32, 0, true, 3}
                                      : plan_quant(cfg, p.m, p.k, false);
  if (gpu_walk) pl.unroll = walk.unroll;
  if (cpu) {  // the config's shape: nb weight rows (gate/up pairs) a work-item, wg items a group
    pl.b = walk.nb;
    pl.c = walk.wg;
  }
  pl.x86_dot = cpu && int8 && walk.x86_dot;
  pl.fused = cpu && int8 && walk.fused;
  pl.gated = walk.gated;
  return enqueue_planned(q, p, pl, src, inline_norm ? norm : nullptr);
}

void register_matmul_ops(op_registry& r) {
  {
    op_descriptor d = base("mm", "matrix product: out[m, n] = input[m, k] @ mat2[k, n] (any strides)",
                           lower_mm, reference_mm);
    d.inputs = {{"input"}, {"mat2"}};
    d.outputs = {{"out"}};
    d.check = [](const op_call& c) {
      check_matrix_pair(c, c.inputs[0], "input", c.inputs[1], "mat2", 2);
      check_same_dtype(c, {{"input", &c.inputs[0]}, {"mat2", &c.inputs[1]}});
    };
    d.infer_outputs = [](const op_call& c) {
      return std::vector<tensor_spec>{{{c.inputs[0].size(0), c.inputs[1].size(1)}, c.inputs[0].type()}};
    };
    d.key_names = {"m", "n", "k", "ta", "tb"};
    d.nearest_splits = {{"m", 16}};  // small-M kernels (GEMV, skinny) below, tiles above
    d.key = [](const op_call& c) { return gemm_key(lower_mm(c), false, true); };
    d.sample = sample_mm;
    // Outer form (b rows contiguous) and the strided-gather path; linear covers the dot form.
    d.config_test_shapes = {"m=37,n=53,k=71,ta=0,tb=0", "m=5,n=70,k=33,ta=1,tb=1"};
    d.test_cases = mm_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d =
        base("bmm", "batched matrix product: out[b] = input[b] @ mat2[b] (any strides, batch stride 0 ok)",
             lower_bmm, reference_bmm);
    d.inputs = {{"input"}, {"mat2"}};
    d.outputs = {{"out"}};
    d.check = [](const op_call& c) {
      check_matrix_pair(c, c.inputs[0], "input", c.inputs[1], "mat2", 3);
      check_same_dtype(c, {{"input", &c.inputs[0]}, {"mat2", &c.inputs[1]}});
    };
    d.infer_outputs = [](const op_call& c) {
      return std::vector<tensor_spec>{
          {{c.inputs[0].size(0), c.inputs[0].size(1), c.inputs[1].size(2)}, c.inputs[0].type()}};
    };
    d.key_names = {"b", "m", "n", "k", "ta", "tb"};
    d.nearest_splits = {{"m", 16}};  // small-M kernels (GEMV, skinny) below, tiles above
    d.key = [](const op_call& c) { return gemm_key(lower_bmm(c), true, true); };
    d.sample = sample_bmm;
    d.config_test_shapes = {"b=3,m=17,n=29,k=33,ta=0,tb=0"};
    d.test_cases = bmm_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d = base("addmm", "out = beta * input + alpha * (mat1 @ mat2), input broadcast to [m, n]",
                           lower_addmm, reference_addmm);
    d.inputs = {{"input"}, {"mat1"}, {"mat2"}};
    d.outputs = {{"out"}};
    d.attrs.push_back({"beta", 1.0, "scale of input (the bias)"});
    d.attrs.push_back({"alpha", 1.0, "scale of mat1 @ mat2"});
    d.check = [](const op_call& c) {
      check_matrix_pair(c, c.inputs[1], "mat1", c.inputs[2], "mat2", 2);
      // A block-quantized mat2 (blocks along k: a quantized linear weight's transpose) serves
      // decode's projection with the residual added in its epilogue.
      if (is_quantized(c.inputs[2].type())) {
        check_quantized_weight(c, c.inputs[2], "mat2", 0);
        check_same_dtype(c, {{"mat1", &c.inputs[1]}, {"input", &c.inputs[0]}});
      } else {
        check_same_dtype(c, {{"mat1", &c.inputs[1]}, {"mat2", &c.inputs[2]}, {"input", &c.inputs[0]}});
      }
      bias_strides(c, c.inputs[0], c.inputs[1].size(0), c.inputs[2].size(1));
    };
    d.infer_outputs = [](const op_call& c) {
      return std::vector<tensor_spec>{{{c.inputs[1].size(0), c.inputs[2].size(1)}, c.inputs[1].type()}};
    };
    d.key_names = {"m", "n", "k", "ta", "tb"};
    d.nearest_splits = {{"m", 16}};  // small-M kernels (GEMV, skinny) below, tiles above
    d.key = [](const op_call& c) { return gemm_key(lower_addmm(c), false, true); };
    d.sample = sample_addmm;
    d.config_test_shapes = {"m=23,n=37,k=41,ta=0,tb=0"};
    d.test_cases = addmm_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d = base("linear", "out[..., n] = act(input[..., k] @ weight[n, k]^T (+ bias[n]))",
                           lower_linear, reference_linear);
    d.inputs = {{"input"}, {"weight"}, {"bias", true}};
    d.outputs = {{"out"}};
    d.attrs.push_back(
        {"activation", std::string("none"),
         "applied in the GEMM's store epilogue after the bias: none, gelu (erf), gelu_tanh, silu"});
    d.check = [](const op_call& c) {
      parse_gemm_activation(c.get_str("activation"), "ops::linear");
      const tensor& x = c.inputs[0];
      const tensor& w = c.inputs[1];
      if (x.dim() < 1) bad(c, fmt::format("input must be at least 1-D, got shape {}", x.shape().str()));
      check_rank(c, "weight", w, 2);
      if (x.size(-1) != w.size(1))
        bad(c,
            fmt::format(
                "input {} and weight {} do not match: input's last dim ({}) must equal weight's dim 1 ({})",
                x.shape().str(), w.shape().str(), x.size(-1), w.size(1)));
      const tensor* bias = c.inputs.size() > 2 && c.inputs[2].defined() ? &c.inputs[2] : nullptr;
      if (is_quantized(w.type())) {
        check_quantized_weight(c, w, "weight", 1);
        check_same_dtype(c, {{"input", &x}, {"bias", bias ? bias : &x}});
      } else {
        check_same_dtype(c, {{"input", &x}, {"weight", &w}, {"bias", bias ? bias : &x}});
      }
      if (bias && (bias->dim() != 1 || (bias->size(0) != w.size(0) && bias->size(0) != 1)))
        bad(c, fmt::format("bias must be 1-D of size {} (weight's dim 0) or 1, got shape {}", w.size(0),
                           bias->shape().str()));
    };
    d.infer_outputs = [](const op_call& c) {
      dims s = c.inputs[0].shape();
      s[s.size() - 1] = c.inputs[1].size(0);
      return std::vector<tensor_spec>{{s, c.inputs[0].type()}};
    };
    d.key_names = {"m", "n", "k"};
    d.nearest_splits = {{"m", 16}};  // small-M kernels (GEMV, skinny) below, tiles above
    d.key = [](const op_call& c) { return gemm_key(lower_linear(c), false, false); };
    d.sample = sample_linear;
    // The suite's dtypes: f32, f16 and bf16 operands, then a q8_0, q4_0 or q4_1 weight with f32
    // activations (gemm_quant.cl; tests/ops/quant_test.cpp covers f16/bf16 activations).
    d.dtypes = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1};
    d.config_test_shapes = {"m=3,n=67,k=45"};  // dot form, rows per work-item clamped to M
    d.test_cases = linear_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d = base("matmul",
                           "numpy matmul: input[m, k] @ other[k, n], input[b, m, k] @ other[b, k, n], or "
                           "input[..., k] @ other[k, n] over the leading dims",
                           lower_matmul, reference_matmul);
    d.inputs = {{"input"}, {"other"}};
    d.outputs = {{"out"}};
    d.check = [](const op_call& c) {
      const tensor& a = c.inputs[0];
      const tensor& b = c.inputs[1];
      if (is_quantized(b.type())) {
        check_quantized_weight(c, b, "other", 0);
        if (a.dim() < 1 || a.size(-1) != b.size(0))
          bad(c,
              fmt::format("input {} and other {} cannot be multiplied: input's last dim must equal other's "
                          "dim 0 ({})",
                          a.shape().str(), b.shape().str(), b.size(0)));
        return;
      }
      if (a.dim() == 3 && b.dim() == 3) {
        check_matrix_pair(c, a, "input", b, "other", 3);
      } else if (a.dim() >= 1 && b.dim() == 2) {
        if (a.size(-1) != b.size(0))
          bad(c, fmt::format("input {} and other {} cannot be multiplied: input's last dim ({}) must equal "
                             "other's dim 0 ({})",
                             a.shape().str(), b.shape().str(), a.size(-1), b.size(0)));
      } else {
        bad(c, fmt::format("supports input[..., k] @ other[k, n] (other 2-D) and 3-D @ 3-D (batched); got "
                           "{} @ {}",
                           a.shape().str(), b.shape().str()));
      }
      check_same_dtype(c, {{"input", &a}, {"other", &b}});
    };
    d.infer_outputs = [](const op_call& c) {
      const tensor& a = c.inputs[0];
      const tensor& b = c.inputs[1];
      if (a.dim() == 3 && b.dim() == 3)
        return std::vector<tensor_spec>{{{a.size(0), a.size(1), b.size(2)}, a.type()}};
      dims s = a.shape();
      s[s.size() - 1] = b.size(1);
      return std::vector<tensor_spec>{{s, a.type()}};
    };
    d.key_names = {"b", "m", "n", "k", "ta", "tb"};
    d.nearest_splits = {{"m", 16}};  // small-M kernels (GEMV, skinny) below, tiles above
    d.key = [](const op_call& c) { return gemm_key(lower_matmul(c), true, true); };
    d.sample = sample_matmul;
    d.dtypes = {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1};
    d.config_test_shapes = {"b=1,m=19,n=23,k=29,ta=0,tb=0"};
    d.test_cases = matmul_cases;
    r.add(std::move(d));
  }
}

}  // namespace prism
