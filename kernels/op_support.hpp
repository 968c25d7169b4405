// SPDX-License-Identifier: Apache-2.0
// Internal helpers shared by op descriptors (kernels/ops/*.cpp): value encoding, shape rules,
// error builders, random samples, launch geometry and descriptor fragments.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/runtime/handler.hpp"

namespace prism::kernels {

// ---- values --------------------------------------------------------------------------------

/// Storage bytes <-> double (ints by value, bool 0/1; encode truncates toward zero and
/// saturates for ints, NaN -> 0; RNE for f16/bf16).
void decode_values(dtype t, const void* bytes, std::size_t n, double* out);
void encode_values(dtype t, const double* in, std::size_t n, void* bytes);
/// The value `v` becomes once stored as `t` (the rounding a device store performs).
double round_to(dtype t, double v);
/// Writes logical row-major storage-format bytes into a possibly strided view.
void write_logical(queue& q, const tensor& t, const std::vector<std::byte>& bytes);

// ---- errors --------------------------------------------------------------------------------

[[noreturn]] void fail(const op_call& c, const std::string& message);
/// Normalises a possibly negative dim; throws naming the op, the attribute and the valid range.
int normalize_dim(const op_call& c, std::int64_t d, int ndim, const std::string& what = "dim");
/// NumPy broadcast of two shapes; throws naming both arguments and shapes.
dims broadcast_shapes(const op_call& c, const dims& a, const std::string& a_name, const dims& b,
                      const std::string& b_name);
void require_dtype(const op_call& c, const tensor& t, const std::string& name,
                   std::initializer_list<dtype> valid);
void require_same_dtype(const op_call& c, const tensor& a, const std::string& a_name, const tensor& b,
                        const std::string& b_name);
void require_rank(const op_call& c, const tensor& t, const std::string& name, int min_rank, int max_rank);
void require_contiguous(const op_call& c, const tensor& t, const std::string& name);

// ---- strided launch geometry ---------------------------------------------------------------

/// A long8 kernel argument (64 bytes, like cl_long8).
struct alignas(64) long8_arg {
  std::int64_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
};

/// Iteration space shared by up to 3 operands after broadcasting, with adjacent dims merged
/// where every operand is contiguous across them and size-1 dims dropped.
struct nd_iter {
  int ndim = 0;
  long8_arg shape;
  long8_arg strides[3];
  std::int64_t numel = 0;
  /// True when every operand is flat (ndim <= 1 and stride 1, or stride 0 = broadcast scalar).
  bool flat() const;
  bool operand_contiguous(int i) const { return ndim == 0 || (ndim == 1 && strides[i].v[0] == 1); }
  bool operand_scalar(int i) const;
};
/// `shape` is the iteration shape; each operand gives its strides over it (0 for broadcast dims;
/// an operand with fewer dims is aligned right).
nd_iter make_iter(const dims& shape, const std::vector<const tensor*>& operands);

/// Global size for `items` work-items rounded up to `wg`, at least one group.
std::size_t round_up(std::size_t items, std::size_t wg);

/// Common supports() check: wg within the device / kernel limit.
std::optional<std::string> check_wg(const device& dev, std::int64_t wg);

// ---- samples --------------------------------------------------------------------------------

/// Deterministic values in [lo, hi] (or small integers in [-4, 4] when small_integers) for a
/// new contiguous tensor.
tensor random_tensor(queue& q, const dims& shape, dtype t, std::mt19937_64& rng, double lo = -2,
                     double hi = 2, bool small_integers = false);
/// A strided view of a new random tensor: shape `shape`, made by transposing the last two dims
/// of a contiguous [.., b, a] tensor (rank >= 2), or by slicing every other element (rank 1).
tensor random_strided(queue& q, const dims& shape, dtype t, std::mt19937_64& rng, double lo = -2,
                      double hi = 2, bool small_integers = false);

// ---- descriptor fragments -------------------------------------------------------------------

/// The elementwise config schema: wg (work-group size), vec (vector width), ept (vectors per
/// work-item).
config_schema elementwise_schema();
/// Row-kernel schema: wg, vec, variant (0: work-group per row, 1: work-item per row; with
/// `streaming`, 2: variant 1 with non-temporal output stores, for PoCL/clang CPU devices only).
config_schema row_schema(bool streaming = false);

/// Tolerance for f32-computed results: `f32_ulps` ulps in f32, rescaled for f16/bf16 outputs
/// (1 ulp of the storage type for the final rounding plus the f32 error); `mag_eps` passes on.
tolerance float_tolerance(dtype out, double f32_ulps, double mag_eps = 0, double atol = 0);

/// A split kernel's workspace on queue q: float partials (at least `floats`) and int counters (at
/// least `counters`, zero between launches: each launch's last group zeroes the ones it used),
/// kept per queue and grown on demand, so that a call allocates and uploads nothing (eager decode
/// calls it every layer of every token). decode_attention's chunk partials, post_attention's
/// chained stages and the GPU GEMMs' split-K slabs take it; successive calls are ordered by their
/// accessors (read_write), so no op may hold it across a call of another that takes it. The last
/// 8 queues keep theirs; an evicted workspace lives on in the commands that use it. A call
/// recorded into a graph gets a workspace of its own, which the graph owns (a cached one could be
/// evicted and destroyed while the graph still replays it).
std::pair<buffer<float>, buffer<int>> split_workspace(const queue& q, std::size_t floats,
                                                      std::size_t counters);

inline constexpr double eps_f32 = 1.0 / 16777216.0;  ///< 2^-24: unit roundoff of f32

}  // namespace prism::kernels

namespace prism::kernels {
/// Copies (and converts) `src` into the view `dst` (same shape, or `src` broadcastable to it)
/// with the cast kernel and the default config. Used by tensor::contiguous and cat.
event copy_into(queue& q, const tensor& src, const tensor& dst);
}  // namespace prism::kernels
