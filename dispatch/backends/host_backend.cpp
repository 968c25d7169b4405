// The host backend: OpenBLAS (cblas_sgemm) for f32 GEMM-family calls with BLAS-compatible
// layouts, the op descriptor's double-precision reference (run_host) for everything else.
// On CPU devices operands are mapped (zero copy); on other devices they are copied.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/backends/gemm_problem.hpp"
#include "prism/error.hpp"

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

event run_openblas(queue& q, const op_call& call, const gemm_problem& p) {
  // Operands may share storage (mm(x, x.T)); the output never does (check_call).
  host_storage c_mem(q, call.outputs[0], true);
  const std::int64_t c_last =
      p.c.offset + (p.batch - 1) * p.c.batch_stride + (p.m - 1) * p.c.ld + p.n;  // one past C's last element
  c_mem.set_write_range(static_cast<std::size_t>(p.c.offset) * sizeof(float),
                        static_cast<std::size_t>(std::max(c_last, p.c.offset)) * sizeof(float));
  std::optional<host_storage> a_mem, b_mem, bias_mem;
  a_mem.emplace(q, *p.a.t, false);
  const bool b_same = p.b.t->same_storage(*p.a.t);
  if (!b_same) b_mem.emplace(q, *p.b.t, false);
  const float* a = a_mem->data();
  const float* b = b_same ? a : b_mem->data();
  float* c = c_mem.data();
  float beta = static_cast<float>(p.beta);
  if (p.bias) {
    // C = bias broadcast (read through its strides), then C = alpha*AB + beta*C.
    host_storage bias_host(q, *p.bias, false);
    const tensor& bias = *p.bias;
    const float* bv = bias_host.data();
    const int bd = bias.dim();
    const std::int64_t rows = p.m, cols = p.n;
    // bias broadcasts against [rows, cols]: use its last two strides (0 for broadcast dims).
    std::int64_t bs_c = bd >= 1 && bias.size(-1) != 1 ? bias.strides()[bd - 1] : 0;
    std::int64_t bs_r = bd >= 2 && bias.size(-2) != 1 ? bias.strides()[bd - 2] : 0;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        c[p.c.offset + i * p.c.ld + j] = bv[bias.offset() + i * bs_r + j * bs_c];
  } else {
    beta = 0.0f;
  }
  for (std::int64_t bi = 0; bi < p.batch; ++bi) {
    cblas_sgemm(CblasRowMajor, p.a.trans ? CblasTrans : CblasNoTrans, p.b.trans ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(p.m), static_cast<blasint>(p.n), static_cast<blasint>(p.k),
                static_cast<float>(p.alpha), a + p.a.offset + bi * p.a.batch_stride,
                static_cast<blasint>(p.a.ld), b + p.b.offset + bi * p.b.batch_stride,
                static_cast<blasint>(p.b.ld), beta, c + p.c.offset + bi * p.c.batch_stride,
                static_cast<blasint>(p.c.ld));
  }
  return event{};
}

}  // namespace

namespace testing {
void host_backend_copies(bool on) {
  force_copies.store(on);
}
}  // namespace testing

std::vector<implementation> host_implementations(const op_descriptor& d) {
  std::vector<implementation> out;
  const op_descriptor* desc = &d;
  if (is_gemm_family(d.name)) {
    implementation blas;
    blas.backend = "host";
    blas.name = "host.openblas";
    blas.supports = [](const device&, const op_call& c, const kernel_config&) -> std::optional<std::string> {
      if (c.outputs.at(0).type() != dtype::f32)
        return std::string("openblas: f32 only (the reference serves others)");
      auto p = make_gemm_problem(c);
      if (auto* why = std::get_if<std::string>(&p)) return "openblas: " + *why;
      return std::nullopt;
    };
    blas.enqueue = [](queue& q, const op_call& c, const kernel_config&, source_override) {
      auto p = make_gemm_problem(c);
      return run_openblas(q, c, std::get<gemm_problem>(p));
    };
    out.push_back(std::move(blas));
  }
  implementation ref;
  ref.backend = "host";
  ref.name = "host.reference";
  ref.enqueue = [desc](queue& q, const op_call& c, const kernel_config&, source_override) {
    return run_host(q, *desc, c);
  };
  out.push_back(std::move(ref));
  return out;
}

config_reader host_config_reader(const op_descriptor& d) {
  std::string op = d.name;
  return {[op](const std::string& text, const vendor_profile*) {
    if (!text.empty())
      throw error(errc::config_error, "ops::" + op, "the host backend takes no config; got '" + text + "'");
    return kernel_config{};
  }};
}

}  // namespace prism::dispatch
