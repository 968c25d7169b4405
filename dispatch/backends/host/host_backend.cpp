// SPDX-License-Identifier: Apache-2.0
// The host backend, the backend of last resort: OpenBLAS (cblas_sgemm) for f32 calls of ops with
// a GEMM lowering and BLAS-compatible layouts, the op descriptor's double-precision reference
// (run_host) for everything else. On CPU devices operands are mapped (zero copy); on other
// devices they are copied. Blocking, so pretune tries it only where that costs nothing.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/dispatcher.hpp"
#include "prism/error.hpp"
#include "runtime/hash.hpp"
#include "runtime/log.hpp"

namespace prism::dispatch {
namespace {

std::atomic<bool> force_copies{false};

// Host-visible bytes of a tensor's whole storage: mapped on CPU devices, copied otherwise.
class host_storage {
 public:
  host_storage(queue& q, const tensor& t, bool write) : storage_(t.storage()), write_(write) {
    if (q.get_device().is_cpu() && !force_copies.load(std::memory_order_relaxed)) {
      if (write)
        map_rw_ = std::make_unique<host_accessor<std::byte>>(storage_, read_write);
      else
        map_ro_ = std::make_unique<host_accessor<std::byte>>(storage_, read_only);
    } else {
      copy_ = storage_.read();
    }
  }
  ~host_storage() noexcept(false) {
    if (copy_.empty() || !write_) return;
    // Write back only the bytes the GEMM may have written, so other regions of a shared
    // storage (a KV cache, say) written meanwhile by other threads are not clobbered.
    const std::size_t begin = std::min(write_begin_, copy_.size());
    const std::size_t end = std::min(write_end_, copy_.size());
    if (end > begin) storage_.write(std::span<const std::byte>(copy_.data() + begin, end - begin), begin);
  }
  /// The byte range [begin, end) the host code writes (copy mode writes back only that).
  void set_write_range(std::size_t begin, std::size_t end) {
    write_begin_ = begin;
    write_end_ = end;
  }
  float* data() {
    if (map_rw_) return reinterpret_cast<float*>(map_rw_->data());
    if (map_ro_) return reinterpret_cast<float*>(map_ro_->data());
    return reinterpret_cast<float*>(copy_.data());
  }

 private:
  buffer<std::byte> storage_;
  bool write_;
  // unique_ptr rather than optional: GCC 12 warns (falsely) that an optional host_accessor's
  // pointer may be used uninitialized when it is emplaced.
  std::unique_ptr<host_accessor<std::byte>> map_ro_, map_rw_;
  std::vector<std::byte> copy_;
  std::size_t write_begin_ = 0, write_end_ = static_cast<std::size_t>(-1);
};

// Once per process, before the first GEMM: OpenBLAS picks its kernels by the CPU model it knows,
// and a model it does not know gets its oldest ones (see blas_core_advice).
void check_blas_core() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* core = openblas_get_corename();
#if defined(__x86_64__) || defined(__i386__)
    const bool avx2 = __builtin_cpu_supports("avx2"), avx512f = __builtin_cpu_supports("avx512f");
#else
    const bool avx2 = false, avx512f = false;
#endif
    if (auto advice = blas_core_advice(core ? core : "", avx2, avx512f))
      prism::log::get("dispatch")->warn("{}", *advice);
  });
}

event run_openblas(queue& q, const gemm_problem& p, const blas_layout& l) {
  check_blas_core();
  // Operands may share storage (mm(x, x.T)); the output never does (check_call).
  host_storage c_mem(q, p.c, true);
  const std::int64_t c_last =
      l.c.offset + (p.batch - 1) * l.c.batch_stride + (p.m - 1) * l.c.ld + p.n;  // one past C's last element
  c_mem.set_write_range(static_cast<std::size_t>(l.c.offset) * sizeof(float),
                        static_cast<std::size_t>(std::max(c_last, l.c.offset)) * sizeof(float));
  std::optional<host_storage> a_mem, b_mem;
  a_mem.emplace(q, p.a, false);
  const bool b_same = p.b.same_storage(p.a);
  if (!b_same) b_mem.emplace(q, p.b, false);
  const float* a = a_mem->data();
  const float* b = b_same ? a : b_mem->data();
  float* c = c_mem.data();
  float beta = static_cast<float>(p.beta);
  if (p.bias.defined()) {
    // C = bias broadcast over [m, n] (through the lowering's bias strides), then
    // C = alpha*AB + beta*C.
    host_storage bias_host(q, p.bias, false);
    const float* bv = bias_host.data() + p.bias.offset();
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) c[l.c.offset + i * l.c.ld + j] = bv[i * p.sxm + j * p.sxn];
  } else {
    beta = 0.0f;
  }
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    cblas_sgemm(CblasRowMajor, l.a.trans ? CblasTrans : CblasNoTrans, l.b.trans ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(p.m), static_cast<blasint>(p.n), static_cast<blasint>(p.k),
                static_cast<float>(p.alpha), a + l.a.offset + bi * l.a.batch_stride,
                static_cast<blasint>(l.a.ld), b + l.b.offset + bi * l.b.batch_stride,
                static_cast<blasint>(l.b.ld), beta, c + l.c.offset + bi * l.c.batch_stride,
                static_cast<blasint>(l.c.ld));
  }
  return event{};
}

}  // namespace

std::optional<std::string> blas_core_advice(std::string_view core, bool cpu_avx2, bool cpu_avx512f) {
  if (!cpu_avx2) return std::nullopt;
  // OpenBLAS's x86 cores whose SGEMM kernels use AVX2 or AVX-512.
  static constexpr std::string_view vector_cores[] = {"haswell",        "zen",      "skylakex", "cooperlake",
                                                      "sapphirerapids", "excavator"};
  std::string lower(core);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (auto v : vector_cores)
    if (lower == v) return std::nullopt;
  const char* want = cpu_avx512f ? "SkylakeX" : "Haswell";
  return fmt::format(
      "host backend: OpenBLAS runs its '{}' kernels on a CPU with {} (this OpenBLAS does not know the CPU's "
      "model), so host GEMMs run several times slower than they could; set OPENBLAS_CORETYPE={} before "
      "starting the program to give it its {} kernels",
      core.empty() ? "unknown" : std::string(core), cpu_avx512f ? "AVX-512" : "AVX2", want, want);
}

namespace testing {
void host_backend_copies(bool on) {
  force_copies.store(on);
}
}  // namespace testing

namespace {

// host is blocking: inside a model each call drains the queue first, which timing the op alone
// does not see. On a GPU that drain idles the device (and host needs transfers); on a CPU
// device host maps buffers without copies and runs on the same cores, so what a drain costs is
// the lost enqueue-ahead: microseconds, negligible against a call of a millisecond or more.
// So unless listed, host is a candidate on CPU devices for calls whose default takes >= 1 ms
// (docs/tuning.md, "When host is a candidate").
class host final : public backend {
 public:
  const char* name() const noexcept override { return "host"; }

  std::vector<op_implementation> implementations(const op_descriptor& d) const override {
    std::vector<op_implementation> out;
    if (d.gemm) {
      auto lower = d.gemm;
      op_implementation blas;
      blas.name = "host.openblas";
      blas.supports = [lower](const device&, const op_call& c,
                              const kernel_config&) -> std::optional<std::string> {
        const gemm_problem p = lower(c);
        if (p.c.type() != dtype::f32) return std::string("openblas: f32 only (the reference serves others)");
        auto layout = blas_layout_of(p);
        if (auto* why = std::get_if<std::string>(&layout)) return "openblas: " + *why;
        return std::nullopt;
      };
      blas.enqueue = [lower](queue& q, const op_call& c, const kernel_config&, source_override) {
        const gemm_problem p = lower(c);
        return run_openblas(q, p, std::get<blas_layout>(blas_layout_of(p)));
      };
      out.push_back(std::move(blas));
    }
    op_implementation ref;
    ref.name = "host.reference";
    const op_descriptor* desc = &d;
    ref.enqueue = [desc](queue& q, const op_call& c, const kernel_config&, source_override) {
      return run_host(q, *desc, c);
    };
    out.push_back(std::move(ref));
    return out;
  }

  kernel_config read_config(const op_descriptor& d, const std::string& text,
                            const vendor_context&) const override {
    if (!text.empty())
      throw error(errc::config_error, "ops::" + d.name,
                  "the host backend takes no config; got '" + text + "'");
    return kernel_config{};
  }

  std::vector<candidate> candidates(const device& dev, const op_descriptor&, dtype, const vendor_context&,
                                    const candidate_options& o) const override {
    const bool wanted =
        o.lists(name()) || (o.backends.empty() && dev.is_cpu() && o.default_ns >= host_min_default_ns);
    if (!wanted) return {};
    return {{name(), "", name()}};
  }

  std::uint64_t source_hash(const op_descriptor&, const vendor_context&, std::uint64_t h) const override {
    return h;
  }
};

}  // namespace

const backend& host_backend() {
  static const host b;
  return b;
}

}  // namespace prism::dispatch
