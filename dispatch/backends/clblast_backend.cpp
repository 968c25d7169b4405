// The clblast backend: CLBlast's Gemm / GemmStridedBatched on prism's context and queue through
// interop::enqueue_native, with parameter sets applied by clblast::OverrideParameters.
#include "dispatch/backends/clblast_backend.hpp"

#include <clblast.h>
#include <clblast_half.h>

#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/backends/gemm_problem.hpp"
#include "kernels/op_support.hpp"
#include "prism/error.hpp"
#include "prism/interop/opencl.hpp"

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

std::optional<std::string> supports(const device& dev, const op_call& call) {
  if (!is_gemm_family(call.op)) return "clblast serves mm, bmm, addmm, linear only";
  const dtype t = call.outputs.at(0).type();
  if (t == dtype::bf16) return std::string("clblast: bf16 not supported");
  if (t == dtype::f16 && !dev.has_fp16()) return std::string("clblast: f16 needs cl_khr_fp16");
  if (t != dtype::f32 && t != dtype::f16) return fmt::format("clblast: {} not supported", dtype_name(t));
  auto p = make_gemm_problem(call);
  if (auto* why = std::get_if<std::string>(&p)) return "clblast: " + *why;
  const auto& g = std::get<gemm_problem>(p);
  if (g.bias && call.op != "linear" && call.op != "addmm") return std::string("clblast: unexpected bias");
  if (g.k == 0 && g.m > 0 && g.n > 0)
    return std::string("clblast: k=0 (CLBlast rejects empty inner dimensions)");
  return std::nullopt;
}

namespace {

template <class T>
cl_event enqueue_gemm(interop::native_handle& nh, const gemm_problem& p, cl_mem a, cl_mem b, cl_mem c,
                      device_params& dp, const kernel_config& params) {
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
    beta = static_cast<float>(p.bias ? p.beta : 0.0);
  } else {
    alpha = FloatToHalf(static_cast<float>(p.alpha));
    beta = FloatToHalf(static_cast<float>(p.bias ? p.beta : 0.0));
  }
  auto ta = p.a.trans ? Transpose::kYes : Transpose::kNo;
  auto tb = p.b.trans ? Transpose::kYes : Transpose::kNo;
  if (p.batch == 1) {
    st = ::clblast::Gemm<T>(Layout::kRowMajor, ta, tb, p.m, p.n, p.k, alpha, a, p.a.offset, p.a.ld, b,
                            p.b.offset, p.b.ld, beta, c, p.c.offset, p.c.ld, &cq, &ev);
  } else {
    st = ::clblast::GemmStridedBatched<T>(Layout::kRowMajor, ta, tb, p.m, p.n, p.k, alpha, a, p.a.offset,
                                          p.a.ld, p.a.batch_stride, b, p.b.offset, p.b.ld, p.b.batch_stride,
                                          beta, c, p.c.offset, p.c.ld, p.c.batch_stride, p.batch, &cq, &ev);
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

event run(queue& q, const op_call& call, const kernel_config& params) {
  if (auto why = supports(q.get_device(), call)) throw error(errc::unsupported, "ops::" + call.op, *why);
  auto p = std::get<gemm_problem>(make_gemm_problem(call));
  tensor out = call.outputs[0];
  if (p.bias) {
    // C starts as the bias broadcast to the output (beta scales it inside the GEMM).
    kernels::copy_into(q, *p.bias, out);
  }
  if (p.m == 0 || p.n == 0) return event{};
  const cl_device_id id = interop::native(q.get_device())();
  tensor a = *p.a.t, b = *p.b.t;
  // The native command runs inside submit(); prism retains the event it returns, so this
  // function drops CLBlast's own reference afterwards.
  cl_event produced = nullptr;
  event done = q.submit([&](handler& h) {
    accessor<std::byte> acc_a(a.storage(), h, read_only, a.byte_extent());
    accessor<std::byte> acc_b(b.storage(), h, read_only, b.byte_extent());
    accessor<std::byte> acc_c(out.storage(), h, p.bias ? access_mode::read_write : access_mode::write,
                              out.byte_extent());
    interop::enqueue_native(
        h, [p, acc_a, acc_b, acc_c, id, params, &produced](interop::native_handle& nh) -> cl_event {
          std::lock_guard lock(mutex());
          auto& dp = params_for(id, p.type);
          if (p.type == dtype::f16)
            produced = enqueue_gemm<cl_half>(nh, p, nh.mem(acc_a), nh.mem(acc_b), nh.mem(acc_c), dp, params);
          else
            produced = enqueue_gemm<float>(nh, p, nh.mem(acc_a), nh.mem(acc_b), nh.mem(acc_c), dp, params);
          return produced;
        });
  });
  if (produced) clReleaseEvent(produced);
  return done;
}

switch_stats switching_statistics() {
  std::lock_guard lock(mutex());
  return stats();
}

}  // namespace clblast

std::vector<implementation> clblast_implementations(const op_descriptor& d) {
  if (!is_gemm_family(d.name)) return {};
  implementation i;
  i.backend = "clblast";
  i.name = d.name == "bmm" ? "clblast.gemm_strided_batched" : "clblast.gemm";
  i.supports = [](const device& dev, const op_call& c, const kernel_config&) {
    return clblast::supports(dev, c);
  };
  i.enqueue = [](queue& q, const op_call& c, const kernel_config& cfg, source_override) {
    return clblast::run(q, c, cfg);
  };
  return {i};
}

config_reader clblast_config_reader(const op_descriptor&) {
  return {[](const std::string& text, const vendor_profile*) { return clblast::parse_parameters(text); }};
}

}  // namespace prism::dispatch
