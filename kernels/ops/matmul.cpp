// The matmul family (mm, bmm, addmm, linear): descriptors over prism's three GEMM kernels,
// kernels/cl/gemm_cpu.cl (register-blocked, no barriers), gemm_gpu.cl (local-memory tiles) and
// gemm_gemv.cl (small M, parallel over N and K). Every op lowers to one strided gemm_problem.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/ops/gemm_shared.hpp"
#include "prism/error.hpp"

namespace prism {
namespace {

using namespace gemm_detail;

// C[b](m, n) = alpha * sum_k A[b](m, k) * B[b](k, n) + beta * X(m, n), all as element strides.
struct gemm_problem {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  tensor a, b, c, x;  // x: bias, undefined when absent
  std::int64_t sab = 0, sam = 0, sak = 0;
  std::int64_t sbb = 0, sbk = 0, sbn = 0;
  std::int64_t scb = 0, scm = 0;
  std::int64_t sxm = 0, sxn = 0;
  double alpha = 1.0, beta = 1.0;
  std::int64_t a_shift = 0, b_shift = 0;  // element offsets of a k-slice (cpu kc blocking)
};

enum class variant : std::int64_t { cpu = 0, gpu = 1, gemv = 2 };
const char* variant_impl(std::int64_t v) {
  return v == 0 ? "opencl.cpu" : v == 1 ? "opencl.gpu" : v == 2 ? "opencl.gemv" : "?";
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
// op_call -> gemm_problem

gemm_problem lower(queue* q, const op_call& call) {
  gemm_problem p;
  const std::string& op = call.op;
  if (op == "mm" || op == "addmm") {
    const int ia = op == "mm" ? 0 : 1;
    p.a = call.inputs[ia];
    p.b = call.inputs[ia + 1];
    p.m = p.a.size(0), p.k = p.a.size(1), p.n = p.b.size(1);
    p.sam = p.a.strides()[0], p.sak = p.a.strides()[1];
    p.sbk = p.b.strides()[0], p.sbn = p.b.strides()[1];
    if (op == "addmm") {
      p.x = call.inputs[0];
      std::tie(p.sxm, p.sxn) = bias_strides(call, p.x, p.m, p.n);
      p.alpha = call.get_f64("alpha", 1.0);
      p.beta = call.get_f64("beta", 1.0);
    }
  } else if (op == "bmm") {
    p.a = call.inputs[0];
    p.b = call.inputs[1];
    p.batch = p.a.size(0), p.m = p.a.size(1), p.k = p.a.size(2), p.n = p.b.size(2);
    p.sab = p.a.strides()[0], p.sam = p.a.strides()[1], p.sak = p.a.strides()[2];
    p.sbb = p.b.strides()[0], p.sbk = p.b.strides()[1], p.sbn = p.b.strides()[2];
  } else if (op == "linear") {
    p.a = call.inputs[0];
    p.b = call.inputs[1];  // weight [n, k]: B(k, n) = W[n, k]
    const int nd = p.a.dim();
    p.k = p.a.size(-1), p.n = p.b.size(0);
    p.m = 1;
    for (int i = 0; i + 1 < nd; ++i) p.m *= p.a.size(i);
    // The leading dims must collapse into one row stride; otherwise work on a contiguous copy.
    bool collapsible = true;
    std::int64_t row_stride = p.k;
    int last_nontrivial = -1;
    for (int i = nd - 2; i >= 0; --i) {
      if (p.a.size(i) == 1) continue;
      if (last_nontrivial < 0) {
        row_stride = p.a.strides()[i];
      } else if (p.a.strides()[i] != p.a.strides()[last_nontrivial] * p.a.size(last_nontrivial)) {
        collapsible = false;
      }
      last_nontrivial = i;
    }
    if (!collapsible && q) {  // without a queue (keys, counts) only the extents matter
      p.a = p.a.contiguous(*q);
      row_stride = p.k;
    }
    p.sam = row_stride, p.sak = p.a.strides()[nd - 1];
    p.sbk = p.b.strides()[1], p.sbn = p.b.strides()[0];
    if (call.inputs.size() > 2 && call.inputs[2].defined()) {
      p.x = call.inputs[2];
      p.sxm = 0, p.sxn = p.x.size(0) == 1 ? 0 : p.x.strides()[0];
    }
  } else {
    throw error(errc::internal, op_name(call), "not a matmul-family op");
  }
  p.c = call.outputs[0];
  p.scm = p.n;
  p.scb = p.m * p.n;
  // Strides of size-1 dims carry no information: make them the friendliest value.
  if (p.k <= 1) p.sak = 1, p.sbk = 1;
  if (p.n <= 1) p.sbn = 1, p.sxn = 0;
  if (p.batch <= 1) p.sab = 0, p.sbb = 0;
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
       {0, 1, 2},
       "0 cpu (register-blocked, no barriers), 1 gpu (local-memory tiles), 2 gemv (small M)"},
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
      {"lx", 4, {1, 2, 4, 8, 16, 32, 64, 128, 256}, "cpu: work-group size along N"},
      {"ly", 16, {1, 2, 4, 8, 16, 32, 64, 128, 256}, "cpu: work-group size along M"},
      {"tm", 64, {16, 32, 64, 128}, "gpu: tile rows per work-group"},
      {"tn", 64, {16, 32, 64, 128}, "gpu: tile columns per work-group"},
      {"tk", 16, {4, 8, 16, 32}, "gpu: k-slice staged in local memory"},
      {"wm", 4, {1, 2, 4, 8}, "gpu: rows per work-item"},
      {"wn", 4, {1, 2, 4, 8}, "gpu: columns per work-item"},
      {"gv", 1, {1, 4}, "gpu: 1 strided register block, 4 contiguous block read as float4 from local memory"},
      {"mb", 16, {1, 2, 4, 8, 16}, "gemv: rows per work-group (M <= mb is the case gemv is for)"},
      {"nb", 4, {1, 2, 4, 8}, "gemv: output columns per work-group"},
      {"wg", 64, {32, 64, 128, 256}, "gemv: work-group size (k split)"},
  };
  s.rule = [](const kernel_config& c) -> std::optional<std::string> {
    const auto tm = c.at("tm"), tn = c.at("tn"), wm = c.at("wm"), wn = c.at("wn");
    if (tm % wm != 0) return fmt::format("tm={} must be a multiple of wm={}", tm, wm);
    if (tn % wn != 0) return fmt::format("tn={} must be a multiple of wn={}", tn, wn);
    if (c.at("gv") == 4 && (wm % 4 != 0 || wn % 4 != 0))
      return fmt::format("gv=4 needs wm and wn multiples of 4, got wm={} wn={}", wm, wn);
    if ((tm / wm) * (tn / wn) > 1024)
      return fmt::format("gpu work-group (tn/wn)*(tm/wm) = {} exceeds 1024", (tm / wm) * (tn / wn));
    if (c.at("lx") * c.at("ly") > 4096)
      return fmt::format("cpu work-group lx*ly = {} exceeds 4096", c.at("lx") * c.at("ly"));
    return std::nullopt;
  };
  return s;
}

// ---------------------------------------------------------------------------------------------
// Enqueue

std::string dtype_define(dtype t) {
  return fmt::format("-DPRISM_DTYPE={}", t == dtype::f32 ? 0 : t == dtype::f16 ? 1 : 2);
}

// `accumulate` < 0: the kernel has no accumulate argument (gpu, gemv); 0/1 otherwise (cpu).
event launch(queue& q, const gemm_problem& p, const kernel& k, const nd_range& r, int accumulate = -1) {
  const char* op = "gemm";
  const int M = to_int(p.m, op, "M"), N = to_int(p.n, op, "N"), K = to_int(p.k, op, "K");
  const float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  const int sam = to_int(p.sam, op, "A row stride"), sak = to_int(p.sak, op, "A column stride");
  const int sbk = to_int(p.sbk, op, "B row stride"), sbn = to_int(p.sbn, op, "B column stride");
  const int scm = to_int(p.scm, op, "C row stride");
  const int sxm = to_int(p.sxm, op, "bias row stride"), sxn = to_int(p.sxn, op, "bias column stride");
  const std::int64_t a_off = p.a.offset() + p.a_shift, b_off = p.b.offset() + p.b_shift, c_off = p.c.offset();
  const std::int64_t x_off = p.x.defined() ? p.x.offset() : 0;
  auto sa = p.a.storage();
  auto sb = p.b.storage();
  auto sc = p.c.storage();
  auto sx = p.x.defined() ? p.x.storage() : p.a.storage();
  return q.submit([&](handler& h) {
    accessor<std::byte> aa(sa, h, read_only);
    accessor<std::byte> ab(sb, h, read_only);
    accessor<std::byte> ac(sc, h, write_only, p.c.byte_extent());
    accessor<std::byte> ax(sx, h, read_only);
    if (accumulate < 0)
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
  std::string opts = fmt::format("{} -DHAS_BIAS={} -DVW={} -DRM={} -DRN={} -DKU={} -DB_NCONTIG={} {}",
                                 dtype_define(p.c.type()), p.x.defined() ? 1 : 0, vw, rm, rn, ku,
                                 p.sbn == 1 ? 1 : 0, outer ? "-DFORM_OUTER" : "-DFORM_DOT");
  kernel k = build_kernel(q.get_context(), "gemm_cpu.cl", src, opts, "gemm_cpu");
  const std::int64_t gx = ceil_div(p.n, outer ? rn * vw : rn), gy = ceil_div(p.m, rm);
  // Keep the configured work-group size but do not pad a short dim far past its extent.
  const std::int64_t wg = c.at("lx") * c.at("ly");
  const std::int64_t ly = std::min(c.at("ly"), next_pow2(gy));
  const std::int64_t lx = std::min(next_pow2(gx), std::max<std::int64_t>(wg / ly, 1));
  nd_range r(range<3>(ceil_div(gx, lx) * lx, ceil_div(gy, ly) * ly, p.batch), range<3>(lx, ly, 1));
  // K-blocking: each slice's A columns / B rows stay cache-resident across the work-items that
  // share them; slices after the first add into C (f32 only: f16/bf16 C would round per slice).
  const std::int64_t kc = c.at("kc");
  if (kc == 0 || p.k <= kc || p.c.type() != dtype::f32) return launch(q, p, k, r, 0);
  event last;
  for (std::int64_t k0 = 0; k0 < p.k; k0 += kc) {
    gemm_problem slice = p;
    slice.k = std::min(kc, p.k - k0);
    slice.a_shift = k0 * p.sak;
    slice.b_shift = k0 * p.sbk;
    last = launch(q, slice, k, r, k0 > 0 ? 1 : 0);
  }
  return last;
}

event enqueue_gpu(queue& q, const gemm_problem& p, const kernel_config& c, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const std::int64_t tm = c.at("tm"), tn = c.at("tn"), tk = c.at("tk"), wm = c.at("wm"), wn = c.at("wn");
  std::string opts = fmt::format(
      "{} -DHAS_BIAS={} -DTM={} -DTN={} -DTK={} -DWM={} -DWN={} -DGV={} -DA_KCONTIG={} -DB_NCONTIG={}",
      dtype_define(p.c.type()), p.x.defined() ? 1 : 0, tm, tn, tk, wm, wn, c.at("gv"), p.sak == 1 ? 1 : 0,
      p.sbn == 1 ? 1 : 0);
  kernel k = build_kernel(q.get_context(), "gemm_gpu.cl", src, opts, "gemm_gpu");
  const std::int64_t lx = tn / wn, ly = tm / wm;
  nd_range r(range<3>(ceil_div(p.n, tn) * lx, ceil_div(p.m, tm) * ly, p.batch), range<3>(lx, ly, 1));
  return launch(q, p, k, r);
}

event enqueue_gemv(queue& q, const gemm_problem& p, const kernel_config& c, source_override src) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return {};
  const std::int64_t mb = std::min<std::int64_t>(c.at("mb"), next_pow2(p.m)), nb = c.at("nb"),
                     wg = c.at("wg");
  std::string opts = fmt::format("{} -DHAS_BIAS={} -DMB={} -DNB={} -DWG={}", dtype_define(p.c.type()),
                                 p.x.defined() ? 1 : 0, mb, nb, wg);
  kernel k = build_kernel(q.get_context(), "gemm_gemv.cl", src, opts, "gemm_gemv");
  nd_range r(range<3>(ceil_div(p.n, nb) * wg, ceil_div(p.m, mb), p.batch), range<3>(wg, 1, 1));
  return launch(q, p, k, r);
}

std::optional<std::string> variant_mismatch(const kernel_config& c, variant v) {
  if (c.at("variant") != static_cast<std::int64_t>(v))
    return fmt::format("config variant={} selects {}", c.at("variant"), variant_impl(c.at("variant")));
  return std::nullopt;
}

std::optional<std::string> dtype_unsupported(const op_call& call) {
  const dtype t = call.outputs.empty() ? call.inputs[0].type() : call.outputs[0].type();
  if (!is_floating(t)) return fmt::format("dtype {} is not a float dtype (f32, f16, bf16)", dtype_name(t));
  return std::nullopt;
}

std::vector<op_implementation> gemm_implementations() {
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
       [](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         return enqueue_cpu(q, lower(&q, call), c, src);
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
       [](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         return enqueue_gpu(q, lower(&q, call), c, src);
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
       [](queue& q, const op_call& call, const kernel_config& c, source_override src) {
         return enqueue_gemv(q, lower(&q, call), c, src);
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

void reference(host_call& hc) {
  const op_call& call = *hc.call;
  host_tensor& out = hc.outputs[0];
  if (call.op == "mm") {
    const auto& a = hc.inputs[0];
    const auto& b = hc.inputs[1];
    reference_gemm(1, a.shape[0], b.shape[1], a.shape[1], a.values, 0, b.values, 0, false, nullptr, 0, 0, 1,
                   0, out);
  } else if (call.op == "bmm") {
    const auto& a = hc.inputs[0];
    const auto& b = hc.inputs[1];
    const auto m = a.shape[1], k = a.shape[2], n = b.shape[2];
    reference_gemm(a.shape[0], m, n, k, a.values, m * k, b.values, k * n, false, nullptr, 0, 0, 1, 0, out);
  } else if (call.op == "addmm") {
    const auto& x = hc.inputs[0];
    const auto& a = hc.inputs[1];
    const auto& b = hc.inputs[2];
    auto [xm, xn] = host_bias_strides(x);
    reference_gemm(1, a.shape[0], b.shape[1], a.shape[1], a.values, 0, b.values, 0, false, &x, xm, xn,
                   call.get_f64("alpha", 1.0), call.get_f64("beta", 1.0), out);
  } else {  // linear
    const auto& a = hc.inputs[0];
    const auto& w = hc.inputs[1];
    const std::int64_t k = a.shape[a.shape.size() - 1], n = w.shape[0];
    std::int64_t m = 1;
    for (int i = 0; i + 1 < a.shape.size(); ++i) m *= a.shape[i];
    const host_tensor* x = hc.inputs.size() > 2 && hc.inputs[2].defined ? &hc.inputs[2] : nullptr;
    reference_gemm(1, m, n, k, a.values, 0, w.values, 0, true, x, 0, x && x->shape[0] != 1 ? 1 : 0, 1, 1,
                   out);
  }
}

std::int64_t reduction_length(const op_call& call) {
  if (call.op == "mm") return call.inputs[0].size(1);
  if (call.op == "bmm") return call.inputs[0].size(2);
  if (call.op == "addmm") return call.inputs[1].size(1);
  return call.inputs[0].size(-1);
}

// |err| <= 1 ulp of the output dtype (final rounding) + 2^-23 (2 + sqrt(K)) sum_k |a b|: f32
// accumulation error grows like sqrt(K) for any summation order the kernels use.
tolerance gemm_tolerance(const op_call& call, int) {
  const double k = static_cast<double>(reduction_length(call));
  return tolerance{1.0, 0.0, 0.0, std::ldexp(1.0, -23) * (2.0 + std::sqrt(k))};
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
  c.inputs = {random_tensor(q, {key.at("n")}, o.type, o, 3),
              make_operand(q, key.at("m"), key.at("k"), key.get("ta", 0) != 0, o.type, o, 1),
              make_operand(q, key.at("k"), key.at("n"), key.get("tb", 0) != 0, o.type, o, 2)};
  return finish(q, self("addmm"), std::move(c));
}

op_call sample_linear(queue& q, const shape_key& key, const sample_options& o) {
  op_call c{"linear", {}, {}, {}};
  c.inputs = {random_tensor(q, {key.at("m"), key.at("k")}, o.type, o, 1),
              random_tensor(q, {key.at("n"), key.at("k")}, o.type, o, 2),
              random_tensor(q, {key.at("n")}, o.type, o, 3)};
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
  return cases;
}

std::vector<test_case> linear_cases(dtype) {
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
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Descriptors

op_descriptor base(const char* name, const char* summary) {
  op_descriptor d;
  d.name = name;
  d.family = "gemm";
  d.summary = summary;
  d.dtypes = {dtype::f32, dtype::f16, dtype::bf16};
  d.backends = {"opencl", "clblast", "host"};
  d.reference = reference;
  d.tol = gemm_tolerance;
  d.exact_on_small_integers = true;
  d.config = gemm_schema();
  d.implementations = gemm_implementations();
  d.flops = [](const op_call& c) {
    const gemm_problem p = lower(nullptr, c);
    return 2.0 * static_cast<double>(p.batch * p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
  };
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

shape_key mnk_key(const gemm_problem& p, bool with_batch, bool with_layout) {
  shape_key k;
  if (with_batch) k.set("b", p.batch);
  k.set("m", p.m);
  k.set("n", p.n);
  k.set("k", p.k);
  if (with_layout) {
    k.set("ta", p.k > 1 && p.sak != 1 ? 1 : 0);
    k.set("tb", p.n > 1 && p.sbn != 1 ? 1 : 0);
  }
  return k;
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

void register_matmul_ops(op_registry& r) {
  {
    op_descriptor d = base("mm", "matrix product: out[m, n] = input[m, k] @ mat2[k, n] (any strides)");
    d.inputs = {{"input"}, {"mat2"}};
    d.outputs = {{"out"}};
    d.check = [](const op_call& c) {
      check_matrix_pair(c, c.inputs[0], "input", c.inputs[1], "mat2", 2);
      check_same_dtype(c, {{"input", &c.inputs[0]}, {"mat2", &c.inputs[1]}});
    };
    d.infer_outputs = [](const op_call& c) {
      return std::vector<tensor_spec>{{{c.inputs[0].size(0), c.inputs[1].size(1)}, c.inputs[0].type()}};
    };
    d.key = [](const op_call& c) { return mnk_key(lower(nullptr, c), false, true); };
    d.sample = sample_mm;
    // Outer form (b rows contiguous) and the strided-gather path; linear covers the dot form.
    d.config_test_shapes = {"m=37,n=53,k=71,ta=0,tb=0", "m=5,n=70,k=33,ta=1,tb=1"};
    d.test_cases = mm_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d =
        base("bmm", "batched matrix product: out[b] = input[b] @ mat2[b] (any strides, batch stride 0 ok)");
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
    d.key = [](const op_call& c) { return mnk_key(lower(nullptr, c), true, true); };
    d.sample = sample_bmm;
    d.config_test_shapes = {"b=3,m=17,n=29,k=33,ta=0,tb=0"};
    d.test_cases = bmm_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d = base("addmm", "out = beta * input + alpha * (mat1 @ mat2), input broadcast to [m, n]");
    d.inputs = {{"input"}, {"mat1"}, {"mat2"}};
    d.outputs = {{"out"}};
    d.attrs = {{"beta", 1.0, "scale of input (the bias)"}, {"alpha", 1.0, "scale of mat1 @ mat2"}};
    d.check = [](const op_call& c) {
      check_matrix_pair(c, c.inputs[1], "mat1", c.inputs[2], "mat2", 2);
      check_same_dtype(c, {{"mat1", &c.inputs[1]}, {"mat2", &c.inputs[2]}, {"input", &c.inputs[0]}});
      bias_strides(c, c.inputs[0], c.inputs[1].size(0), c.inputs[2].size(1));
    };
    d.infer_outputs = [](const op_call& c) {
      return std::vector<tensor_spec>{{{c.inputs[1].size(0), c.inputs[2].size(1)}, c.inputs[1].type()}};
    };
    d.key = [](const op_call& c) { return mnk_key(lower(nullptr, c), false, true); };
    d.sample = sample_addmm;
    d.config_test_shapes = {"m=23,n=37,k=41,ta=0,tb=0"};
    d.test_cases = addmm_cases;
    r.add(std::move(d));
  }
  {
    op_descriptor d = base("linear", "out[..., n] = input[..., k] @ weight[n, k]^T (+ bias[n])");
    d.inputs = {{"input"}, {"weight"}, {"bias", true}};
    d.outputs = {{"out"}};
    d.check = [](const op_call& c) {
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
      check_same_dtype(c, {{"input", &x}, {"weight", &w}, {"bias", bias ? bias : &x}});
      if (bias && (bias->dim() != 1 || (bias->size(0) != w.size(0) && bias->size(0) != 1)))
        bad(c, fmt::format("bias must be 1-D of size {} (weight's dim 0) or 1, got shape {}", w.size(0),
                           bias->shape().str()));
    };
    d.infer_outputs = [](const op_call& c) {
      dims s = c.inputs[0].shape();
      s[s.size() - 1] = c.inputs[1].size(0);
      return std::vector<tensor_spec>{{s, c.inputs[0].type()}};
    };
    d.key = [](const op_call& c) { return mnk_key(lower(nullptr, c), false, false); };
    d.sample = sample_linear;
    d.config_test_shapes = {"m=3,n=67,k=45"};  // dot form, rows per work-item clamped to M
    d.test_cases = linear_cases;
    r.add(std::move(d));
  }
}

}  // namespace prism
