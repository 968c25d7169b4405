// SPDX-License-Identifier: Apache-2.0
// The clblast backend: CLBlast's Gemm / GemmStridedBatched on prism's context and queue through
// interop::enqueue_native, for every op with a GEMM lowering; parameter sets applied by
// clblast::OverrideParameters, and generated for pretune under CLBlast's own tuner constraints.
#include <clblast.h>
#include <clblast_half.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/backends/clblast/clblast_backend.hpp"
#include "kernels/op_support.hpp"
#include "prism/error.hpp"
#include "prism/interop/opencl.hpp"
#include "runtime/hash.hpp"

namespace prism::dispatch {
namespace clblast {
namespace {

struct device_params {
  cl_device_id id = nullptr;
  ::clblast::Precision precision{};
  kernel_config defaults;
  std::string applied;  // canonical text of the set applied last ("" = defaults, never overridden)
  bool overridden = false;
};

std::mutex& mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<device_params>& params_cache() {
  static auto* v = new std::vector<device_params>;
  return *v;
}
switch_stats& stats() {
  static auto* s = new switch_stats;
  return *s;
}

::clblast::Precision precision_of(dtype t) {
  return t == dtype::f16 ? ::clblast::Precision::kHalf : ::clblast::Precision::kSingle;
}

std::string status_name(::clblast::StatusCode s) {
  return fmt::format("CLBlast status {}", static_cast<int>(s));
}

// Caller holds mutex().
device_params& params_for(cl_device_id id, dtype t) {
  auto prec = precision_of(t);
  for (auto& p : params_cache())
    if (p.id == id && p.precision == prec) return p;
  device_params p;
  p.id = id;
  p.precision = prec;
  for (const auto& [kernel, names] : gemm_parameter_names()) {
    std::unordered_map<std::string, size_t> values;
    auto st = ::clblast::RetrieveParameters(id, kernel, prec, values);
    if (st != ::clblast::StatusCode::kSuccess)
      throw error(errc::opencl_error, "clblast::RetrieveParameters",
                  fmt::format("{} for kernel {}", status_name(st), kernel));
    for (const auto& n : names) {
      auto it = values.find(n);
      if (it != values.end()) p.defaults.set(n, static_cast<std::int64_t>(it->second));
    }
  }
  params_cache().push_back(p);
  return params_cache().back();
}

// Applies `params` over the defaults unless that set is already in force. Caller holds mutex().
bool apply(device_params& dp, const kernel_config& params) {
  const std::string text = params.str();
  if (text == dp.applied && (dp.overridden || text.empty())) {
    ++stats().skipped;
    return false;
  }
  kernel_config full = dp.defaults;
  for (const auto& [n, v] : params.items()) full.set(n, v);
  for (const auto& [kernel, names] : gemm_parameter_names()) {
    std::unordered_map<std::string, size_t> values;
    for (const auto& n : names)
      if (auto v = full.find(n)) values[n] = static_cast<size_t>(*v);
    if (values.size() != names.size()) continue;  // kernel CLBlast does not know for this precision
    auto st = ::clblast::OverrideParameters(dp.id, kernel, dp.precision, values);
    if (st != ::clblast::StatusCode::kSuccess)
      throw error(errc::config_error, "clblast::OverrideParameters",
                  fmt::format("{} for kernel {} with '{}'", status_name(st), kernel, text));
  }
  dp.applied = text;
  dp.overridden = true;
  ++stats().applied;
  return true;
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& gemm_parameter_names() {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"Xgemm",
       {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC", "NWG", "SA", "SB", "STRM",
        "STRN", "VWM", "VWN"}},
      {"XgemmDirect",
       {"KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD"}},
      {"GemmRoutine", {"XGEMM_MIN_INDIRECT_SIZE"}},
  };
  return names;
}

kernel_config default_parameters(const device& dev, dtype t) {
  std::lock_guard lock(mutex());
  return params_for(interop::native(dev)(), t).defaults;
}

kernel_config parse_parameters(const std::string& text) {
  if (text.empty()) return {};
  auto cfg = kernel_config::parse(text);
  for (const auto& [n, v] : cfg.items()) {
    bool known = false;
    for (const auto& [kernel, names] : gemm_parameter_names())
      known = known || std::find(names.begin(), names.end(), n) != names.end();
    if (!known) {
      std::string valid;
      for (const auto& [kernel, names] : gemm_parameter_names())
        for (const auto& x : names) valid += (valid.empty() ? "" : ", ") + x;
      throw error(errc::config_error, "clblast config",
                  "unknown CLBlast parameter '" + n + "'; valid: " + valid);
    }
    if (v < 0) throw error(errc::config_error, "clblast config", fmt::format("{}={} must be >= 0", n, v));
  }
  return cfg;
}

std::optional<std::string> supports(const device& dev, const gemm_problem& p) {
  const dtype t = p.c.type();
  if (t == dtype::bf16) return std::string("clblast: bf16 not supported");
  if (t == dtype::f16 && !dev.has_fp16()) return std::string("clblast: f16 needs cl_khr_fp16");
  if (t != dtype::f32 && t != dtype::f16) return fmt::format("clblast: {} not supported", dtype_name(t));
  auto layout = blas_layout_of(p);
  if (auto* why = std::get_if<std::string>(&layout)) return "clblast: " + *why;
  if (p.k == 0 && p.m > 0 && p.n > 0)
    return std::string("clblast: k=0 (CLBlast rejects empty inner dimensions)");
  return std::nullopt;
}

namespace {

template <class T>
cl_event enqueue_gemm(interop::native_handle& nh, const gemm_problem& p, const blas_layout& l, cl_mem a,
                      cl_mem b, cl_mem c, device_params& dp, const kernel_config& params) {
  cl_command_queue cq = nh.queue();
  if (nh.wait_count()) {
    cl_int err = clEnqueueBarrierWithWaitList(cq, nh.wait_count(), nh.wait_events(), nullptr);
    if (err != CL_SUCCESS)
      throw error(errc::opencl_error, "clEnqueueBarrierWithWaitList", "clblast wait", err);
  }
  using ::clblast::Layout;
  using ::clblast::Transpose;
  const bool switched = apply(dp, params);
  auto t0 = std::chrono::steady_clock::now();
  cl_event ev = nullptr;
  ::clblast::StatusCode st;
  T alpha, beta;
  if constexpr (std::is_same_v<T, float>) {
    alpha = static_cast<float>(p.alpha);
    beta = static_cast<float>(p.bias.defined() ? p.beta : 0.0);
  } else {
    alpha = FloatToHalf(static_cast<float>(p.alpha));
    beta = FloatToHalf(static_cast<float>(p.bias.defined() ? p.beta : 0.0));
  }
  auto ta = l.a.trans ? Transpose::kYes : Transpose::kNo;
  auto tb = l.b.trans ? Transpose::kYes : Transpose::kNo;
  if (p.batch == 1) {
    st = ::clblast::Gemm<T>(Layout::kRowMajor, ta, tb, p.m, p.n, p.k, alpha, a, l.a.offset, l.a.ld, b,
                            l.b.offset, l.b.ld, beta, c, l.c.offset, l.c.ld, &cq, &ev);
  } else {
    st = ::clblast::GemmStridedBatched<T>(Layout::kRowMajor, ta, tb, p.m, p.n, p.k, alpha, a, l.a.offset,
                                          l.a.ld, l.a.batch_stride, b, l.b.offset, l.b.ld, l.b.batch_stride,
                                          beta, c, l.c.offset, l.c.ld, l.c.batch_stride, p.batch, &cq, &ev);
  }
  if (switched)
    stats().first_call_after_apply_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (st != ::clblast::StatusCode::kSuccess)
    throw error(errc::opencl_error, p.batch == 1 ? "clblast::Gemm" : "clblast::GemmStridedBatched",
                fmt::format("{} for m={} n={} k={} batch={}", status_name(st), p.m, p.n, p.k, p.batch));
  return ev;
}

}  // namespace

event run(queue& q, const gemm_problem& p, const kernel_config& params) {
  if (auto why = supports(q.get_device(), p)) throw error(errc::unsupported, "clblast", *why);
  const blas_layout l = std::get<blas_layout>(blas_layout_of(p));
  tensor out = p.c;
  const bool has_bias = p.bias.defined();
  // C starts as the bias broadcast to the output (beta scales it inside the GEMM).
  if (has_bias) kernels::copy_into(q, p.bias, out);
  if (p.m == 0 || p.n == 0) return event{};
  const cl_device_id id = interop::native(q.get_device())();
  tensor a = p.a, b = p.b;
  // The native command runs inside submit(); prism retains the event it returns, so this
  // function drops CLBlast's own reference afterwards.
  cl_event produced = nullptr;
  event done = q.submit([&](handler& h) {
    accessor<std::byte> acc_a(a.storage(), h, read_only, a.byte_extent());
    accessor<std::byte> acc_b(b.storage(), h, read_only, b.byte_extent());
    accessor<std::byte> acc_c(out.storage(), h, has_bias ? access_mode::read_write : access_mode::write,
                              out.byte_extent());
    interop::enqueue_native(
        h, [p, l, acc_a, acc_b, acc_c, id, params, &produced](interop::native_handle& nh) -> cl_event {
          std::lock_guard lock(mutex());
          auto& dp = params_for(id, p.type);
          if (p.type == dtype::f16)
            produced =
                enqueue_gemm<cl_half>(nh, p, l, nh.mem(acc_a), nh.mem(acc_b), nh.mem(acc_c), dp, params);
          else
            produced = enqueue_gemm<float>(nh, p, l, nh.mem(acc_a), nh.mem(acc_b), nh.mem(acc_c), dp, params);
          return produced;
        });
  });
  if (produced) clReleaseEvent(produced);
  return done;
}

std::vector<std::string> parameter_sets(const device& dev, dtype type) {
  const std::size_t elem = type == dtype::f16 ? 2 : 4;
  const std::uint64_t local_mem = dev.local_mem_size();
  const std::size_t max_wg = dev.max_work_group_size();
  std::vector<std::string> out;
  // Xgemm (indirect: pads/transposes into tiles first). Thread tile MDIMC x NDIMC, each thread
  // computing (MWG/MDIMC) x (NWG/NDIMC) values with vector widths VWM/VWN.
  for (int mwg : {32, 64, 128})
    for (int nwg : {32, 64, 128})
      for (int kwg : {16, 32})
        for (int mdimc : {8, 16})
          for (int ndimc : {8, 16})
            for (int vwm : {2, 4})
              for (int vwn : {2, 4})
                for (int s : {0, 1}) {
                  const int mdima = mdimc, ndimb = ndimc, kwi = 2;
                  if (mwg % (mdimc * vwm) || nwg % (ndimc * vwn) || mwg % (mdima * vwm) ||
                      nwg % (ndimb * vwn))
                    continue;
                  if (kwg % ((mdimc * ndimc) / mdima) || kwg % ((mdimc * ndimc) / ndimb) || kwg % kwi)
                    continue;
                  if (static_cast<std::size_t>(mdimc * ndimc) > max_wg) continue;
                  if (static_cast<std::uint64_t>(s * kwg * (mwg + nwg)) * elem > local_mem) continue;
                  // Keep per-thread register tiles moderate (<= 64 accumulators).
                  if ((mwg / mdimc) * (nwg / ndimc) > 64) continue;
                  out.push_back(
                      fmt::format("GEMMK=0,KREG=1,KWG={},KWI={},MDIMA={},MDIMC={},MWG={},NDIMB={},NDIMC={},"
                                  "NWG={},SA={},SB={},"
                                  "STRM=0,STRN=0,VWM={},VWN={},XGEMM_MIN_INDIRECT_SIZE=1",
                                  kwg, kwi, mdima, mdimc, mwg, ndimb, ndimc, nwg, s, s, vwm, vwn));
                }
  // XgemmDirect (no helper kernels; good for small or skinny problems).
  for (int wgd : {8, 16, 32, 64})
    for (int mdimcd : {8, 16})
      for (int ndimcd : {8, 16})
        for (int vwmd : {1, 2, 4})
          for (int vwnd : {1, 2, 4}) {
            const int mdimad = mdimcd, ndimbd = ndimcd, kwid = 2;
            if (wgd % (mdimcd * vwmd) || wgd % (ndimcd * vwnd) || wgd % (mdimad * vwmd) ||
                wgd % (ndimbd * vwnd))
              continue;
            if (wgd % ((mdimcd * ndimcd) / mdimad) || wgd % ((mdimcd * ndimcd) / ndimbd) || wgd % kwid)
              continue;
            if (static_cast<std::size_t>(mdimcd * ndimcd) > max_wg) continue;
            if (static_cast<std::uint64_t>(2 * wgd * (wgd + 1)) * elem > local_mem) continue;
            out.push_back(fmt::format(
                "KWID={},MDIMAD={},MDIMCD={},NDIMBD={},NDIMCD={},PADA=1,PADB=1,VWMD={},VWND={},WGD={},"
                "XGEMM_MIN_INDIRECT_SIZE=100000",
                kwid, mdimad, mdimcd, ndimbd, ndimcd, vwmd, vwnd, wgd));
          }
  return out;
}

switch_stats switching_statistics() {
  std::lock_guard lock(mutex());
  return stats();
}

}  // namespace clblast

namespace {

template <class T>
std::vector<T> pick(std::vector<T> all, const candidate_options& o, std::uint64_t salt) {
  if (o.pick == strategy::exhaustive || o.max_per_backend == 0 || all.size() <= o.max_per_backend) return all;
  // Keep the first entry (the library's own default comes first), sample the rest.
  std::vector<T> rest(all.begin() + 1, all.end());
  std::mt19937_64 rng(o.seed ^ salt);
  std::shuffle(rest.begin(), rest.end(), rng);
  rest.resize(o.max_per_backend - 1);
  // Back into generation order so that runs are readable.
  std::vector<T> out{all.front()};
  for (auto& a : all)
    if (std::find(rest.begin(), rest.end(), a) != rest.end()) out.push_back(a);
  return out;
}

class clblast_gemm final : public backend {
 public:
  const char* name() const noexcept override { return "clblast"; }

  std::vector<op_implementation> implementations(const op_descriptor& d) const override {
    if (!d.gemm) return {};
    auto lower = d.gemm;
    op_implementation i;
    i.name = "clblast.gemm";
    i.supports = [lower](const device& dev, const op_call& c, const kernel_config&) {
      return clblast::supports(dev, lower(c));
    };
    i.enqueue = [lower](queue& q, const op_call& c, const kernel_config& cfg, source_override) {
      return clblast::run(q, lower(c), cfg);
    };
    return {i};
  }

  kernel_config read_config(const op_descriptor& d, const std::string& text,
                            const vendor_context&) const override {
    try {
      return clblast::parse_parameters(text);
    } catch (const prism::error& e) {
      throw error(errc::config_error, "ops::" + d.name, e.message());
    }
  }

  std::vector<candidate> candidates(const device& dev, const op_descriptor& d, dtype type,
                                    const vendor_context&, const candidate_options& o) const override {
    if (!d.gemm || (!o.backends.empty() && !o.lists(name()))) return {};
    if (type != dtype::f32 && type != dtype::f16) return {};
    std::vector<std::string> sets{""};  // CLBlast's own parameters for the device
    for (auto& s : clblast::parameter_sets(dev, type)) sets.push_back(s);
    // CLBlast's kernels are written for GPUs: on a CPU device a few sets are enough to know.
    candidate_options co = o;
    if (dev.is_cpu() && co.max_per_backend > 0)
      co.max_per_backend = std::max<std::size_t>(2, co.max_per_backend / 4);
    std::vector<candidate> out;
    for (const auto& s : pick(sets, co, 0x636c626c6173ULL))
      out.push_back({name(), s,
                     s.empty()
                         ? "clblast defaults"
                         : (s.find("WGD=") != std::string::npos ? "clblast XgemmDirect" : "clblast Xgemm")});
    return out;
  }

  std::uint64_t source_hash(const op_descriptor&, const vendor_context&, std::uint64_t h) const override {
    return hash::fnv1a64("CLBlast 1.5", h);
  }
};

}  // namespace

const backend& clblast_backend() {
  static const clblast_gemm b;
  return b;
}

}  // namespace prism::dispatch
