// SPDX-License-Identifier: Apache-2.0
// Internal helpers shared by op descriptors: value encoding, shape rules, errors, iteration
// spaces, random samples, config schemas and tolerance scaling.
#include "kernels/op_support.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

namespace prism::kernels {

namespace {
template <class I>
I saturate(double v) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

}  // namespace

void decode_values(dtype t, const void* bytes, std::size_t n, double* out) {
  const auto* b = static_cast<const unsigned char*>(bytes);
  if (is_quantized(t)) {  // whole blocks; a trailing partial block reads its leading elements
    double block[32];
    for (std::size_t i = 0; i < n; i += 32) {
      dequantize_block(t, b + i / 32 * dtype_size(t), block);
      std::copy(block, block + std::min<std::size_t>(32, n - i), out + i);
    }
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case dtype::f32: {
        float f;
        std::memcpy(&f, b + 4 * i, 4);
        out[i] = f;
        break;
      }
      case dtype::f16: {
        std::uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        out[i] = half_to_float(h);
        break;
      }
      case dtype::bf16: {
        std::uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        out[i] = bf16_to_float(h);
        break;
      }
      case dtype::i32: {
        std::int32_t v;
        std::memcpy(&v, b + 4 * i, 4);
        out[i] = v;
        break;
      }
      case dtype::i64: {
        std::int64_t v;
        std::memcpy(&v, b + 8 * i, 8);
        out[i] = static_cast<double>(v);
        break;
      }
      case dtype::boolean:
        out[i] = b[i] ? 1.0 : 0.0;
        break;
      default:  // quantized: handled above
        break;
    }
  }
}

void encode_values(dtype t, const double* in, std::size_t n, void* bytes) {
  auto* b = static_cast<unsigned char*>(bytes);
  if (is_quantized(t)) {  // whole blocks; a trailing partial block is padded with zeros
    float block[32];
    for (std::size_t i = 0; i < n; i += 32) {
      std::fill(block, block + 32, 0.0f);
      for (std::size_t j = 0; j < 32 && i + j < n; ++j) block[j] = static_cast<float>(in[i + j]);
      quantize_block(t, block, b + i / 32 * dtype_size(t));
    }
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case dtype::f32: {
        float f = static_cast<float>(in[i]);
        std::memcpy(b + 4 * i, &f, 4);
        break;
      }
      case dtype::f16: {
        std::uint16_t h = float_to_half(static_cast<float>(in[i]));
        std::memcpy(b + 2 * i, &h, 2);
        break;
      }
      case dtype::bf16: {
        std::uint16_t h = float_to_bf16(static_cast<float>(in[i]));
        std::memcpy(b + 2 * i, &h, 2);
        break;
      }
      case dtype::i32: {
        auto v = saturate<std::int32_t>(in[i]);
        std::memcpy(b + 4 * i, &v, 4);
        break;
      }
      case dtype::i64: {
        auto v = saturate<std::int64_t>(in[i]);
        std::memcpy(b + 8 * i, &v, 8);
        break;
      }
      case dtype::boolean:
        b[i] = in[i] != 0 ? 1 : 0;
        break;
      default:  // quantized: handled above
        break;
    }
  }
}

double round_to(dtype t, double v) {
  if (is_quantized(t)) return v;  // a block's rounding depends on its neighbours
  unsigned char buf[8];
  double out;
  encode_values(t, &v, 1, buf);
  decode_values(t, buf, 1, &out);
  return out;
}

void write_logical(queue& q, const tensor& t, const std::vector<std::byte>& bytes) {
  if (t.numel() == 0) return;
  const std::size_t es = dtype_size(t.type());
  auto& impl = *t.storage().get_impl();
  if (t.is_contiguous()) {
    detail::buffer_write(impl, static_cast<std::size_t>(t.offset()) * es, bytes.size(), bytes.data());
    return;
  }
  // Read-modify-write of the span the view covers (keeps elements between strides intact).
  std::int64_t lo = t.offset(), hi = t.offset();
  for (int d = 0; d < t.dim(); ++d) {
    std::int64_t ext = (t.shape()[d] - 1) * t.strides()[d];
    (ext < 0 ? lo : hi) += ext;
  }
  std::vector<std::byte> span(static_cast<std::size_t>(hi - lo + 1) * es);
  detail::buffer_read(impl, static_cast<std::size_t>(lo) * es, span.size(), span.data());
  std::vector<std::int64_t> idx(t.dim(), 0);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::int64_t off = t.offset() - lo;
    for (int d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
    std::memcpy(span.data() + off * es, bytes.data() + i * es, es);
    for (int d = t.dim() - 1; d >= 0; --d) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  detail::buffer_write(impl, static_cast<std::size_t>(lo) * es, span.size(), span.data());
}

// ---- errors ---------------------------------------------------------------------------------

void fail(const op_call& c, const std::string& message) {
  throw error(errc::invalid_argument, "ops::" + c.op, message);
}

int normalize_dim(const op_call& c, std::int64_t d, int ndim, const std::string& what) {
  int n = std::max(ndim, 1);
  if (d < -n || d >= n)
    fail(c, what + " " + std::to_string(d) + " is out of range for a tensor of rank " + std::to_string(ndim) +
                "; valid: [" + std::to_string(-n) + ", " + std::to_string(n - 1) + "]");
  return static_cast<int>(d < 0 ? d + n : d);
}

dims broadcast_shapes(const op_call& c, const dims& a, const std::string& a_name, const dims& b,
                      const std::string& b_name) {
  int n = std::max(a.size(), b.size());
  dims out;
  for (int i = 0; i < n; ++i) {
    int ia = a.size() - n + i, ib = b.size() - n + i;
    std::int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
    if (x != y && x != 1 && y != 1)
      fail(c, "cannot broadcast '" + a_name + "' " + a.str() + " with '" + b_name + "' " + b.str() +
                  ": dim " + std::to_string(i) + " is " + std::to_string(x) + " vs " + std::to_string(y) +
                  " (sizes must match or be 1, aligned from the right)");
    out.push_back(x == 1 ? y : x);
  }
  return out;
}

void require_dtype(const op_call& c, const tensor& t, const std::string& name,
                   std::initializer_list<dtype> valid) {
  if (std::find(valid.begin(), valid.end(), t.type()) != valid.end()) return;
  std::string v;
  for (auto d : valid) v += (v.empty() ? "" : ", ") + std::string(dtype_name(d));
  fail(c, "'" + name + "' has dtype " + dtype_name(t.type()) + "; valid: " + v);
}

void require_same_dtype(const op_call& c, const tensor& a, const std::string& a_name, const tensor& b,
                        const std::string& b_name) {
  if (a.type() != b.type())
    fail(c, "'" + b_name + "' has dtype " + dtype_name(b.type()) + " but '" + a_name + "' has " +
                dtype_name(a.type()) + "; they must match");
}

void require_rank(const op_call& c, const tensor& t, const std::string& name, int min_rank, int max_rank) {
  if (t.dim() < min_rank || t.dim() > max_rank)
    fail(c, "'" + name + "' has shape " + t.shape().str() + " (rank " + std::to_string(t.dim()) +
                "); expected rank " +
                (min_rank == max_rank ? std::to_string(min_rank)
                                      : std::to_string(min_rank) + ".." + std::to_string(max_rank)));
}

void require_contiguous(const op_call& c, const tensor& t, const std::string& name) {
  if (!t.is_contiguous())
    fail(c,
         "'" + name + "' must be contiguous; got shape " + t.shape().str() + " strides " + t.strides().str());
}

// ---- iteration ------------------------------------------------------------------------------

bool nd_iter::operand_scalar(int i) const {
  for (int d = 0; d < ndim; ++d)
    if (strides[i].v[d] != 0) return false;
  return true;
}

bool nd_iter::flat() const {
  if (ndim > 1) return false;
  for (int i = 0; i < 3; ++i)
    if (ndim == 1 && strides[i].v[0] != 1 && strides[i].v[0] != 0) return false;
  return true;
}

nd_iter make_iter(const dims& shape, const std::vector<const tensor*>& operands) {
  const int n = shape.size();
  const int k = static_cast<int>(operands.size());
  std::vector<std::int64_t> sh(shape.begin(), shape.end());
  std::vector<std::vector<std::int64_t>> st(k, std::vector<std::int64_t>(n, 0));
  for (int o = 0; o < k; ++o) {
    const tensor* t = operands[o];
    if (!t || !t->defined()) continue;
    for (int d = 0; d < t->dim(); ++d) {
      int od = n - t->dim() + d;
      if (od >= 0) st[o][od] = t->shape()[d] == 1 ? 0 : t->strides()[d];
    }
  }
  // Drop size-1 dims, then merge d into d+1 where every operand is contiguous across them.
  std::vector<std::int64_t> msh;
  std::vector<std::vector<std::int64_t>> mst(k);
  for (int d = 0; d < n; ++d) {
    if (sh[d] == 1) continue;
    if (!msh.empty()) {
      bool merge = true;
      for (int o = 0; o < k; ++o)
        if (mst[o].back() != st[o][d] * sh[d]) merge = false;
      if (merge) {
        msh.back() *= sh[d];
        for (int o = 0; o < k; ++o) mst[o].back() = st[o][d];
        continue;
      }
    }
    msh.push_back(sh[d]);
    for (int o = 0; o < k; ++o) mst[o].push_back(st[o][d]);
  }
  nd_iter it;
  it.numel = shape.product();
  it.ndim = static_cast<int>(msh.size());
  if (it.ndim > max_tensor_dims) throw error(errc::internal, "make_iter", "rank above 8");
  for (int d = 0; d < it.ndim; ++d) {
    it.shape.v[d] = msh[d];
    for (int o = 0; o < k; ++o) it.strides[o].v[d] = mst[o][d];
  }
  return it;
}

std::size_t round_up(std::size_t items, std::size_t wg) {
  if (items == 0) items = 1;
  return (items + wg - 1) / wg * wg;
}

std::optional<std::string> check_wg(const device& dev, std::int64_t wg) {
  if (static_cast<std::uint64_t>(wg) > dev.max_work_group_size())
    return "work-group size " + std::to_string(wg) + " > device maximum " +
           std::to_string(dev.max_work_group_size());
  return std::nullopt;
}

// ---- samples --------------------------------------------------------------------------------

tensor random_tensor(queue& q, const dims& shape, dtype t, std::mt19937_64& rng, double lo, double hi,
                     bool small_integers) {
  std::vector<double> v(static_cast<std::size_t>(shape.product()));
  if (t == dtype::boolean) {
    for (auto& x : v) x = static_cast<double>(rng() & 1);
  } else if (small_integers || (!is_floating(t) && !is_quantized(t))) {
    std::int64_t a = small_integers ? -4 : static_cast<std::int64_t>(std::ceil(lo));
    std::int64_t b = small_integers ? 4 : static_cast<std::int64_t>(std::floor(hi));
    if (b < a) b = a;
    std::uniform_int_distribution<std::int64_t> dist(a, b);
    for (auto& x : v) x = static_cast<double>(dist(rng));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (auto& x : v) x = dist(rng);
  }
  std::vector<std::byte> bytes(dtype_storage_bytes(t, static_cast<std::int64_t>(v.size())));
  encode_values(t, v.data(), v.size(), bytes.data());
  return tensor::from_host(q, bytes.data(), shape, t);
}

tensor random_strided(queue& q, const dims& shape, dtype t, std::mt19937_64& rng, double lo, double hi,
                      bool small_integers) {
  if (shape.size() >= 2) {
    dims base = shape;
    std::swap(base[base.size() - 1], base[base.size() - 2]);
    return random_tensor(q, base, t, rng, lo, hi, small_integers)
        .transpose(shape.size() - 2, shape.size() - 1);
  }
  dims base = shape;
  if (base.size() == 1) base[0] = base[0] * 2;
  tensor full = random_tensor(q, base, t, rng, lo, hi, small_integers);
  return base.size() == 1 ? full.slice(0, 0, base[0], 2) : full;
}

// ---- fragments ------------------------------------------------------------------------------

config_schema elementwise_schema() {
  config_schema s;
  s.params = {{"wg", 256, {32, 64, 128, 256, 512, 1024}, "work-group size"},
              {"vec", 4, {1, 2, 4, 8, 16}, "vector width of loads/stores on the flat path"},
              {"ept", 1, {1, 2, 4, 8, 16}, "vectors per work-item (grid-stride) on the flat path"}};
  return s;
}

config_schema row_schema(bool streaming) {
  config_schema s;
  s.params = {{"wg", 256, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, "work-group size"},
              {"vec", 4, {1, 2, 4, 8, 16}, "vector width of row loads"},
              {"variant",
               0,
               {0, 1},
               "0: one work-group per row with a local-memory tree (GPUs); 1: one work-item per row, "
               "sequential vector sweeps, no barriers (CPUs)"}};
  if (streaming) {
    // Clang's __builtin_nontemporal_store: only PoCL's tune_configs list this variant.
    s.params[2].allowed.push_back(2);
    s.params[2].help += "; 2: variant 1 with non-temporal output stores (PoCL CPUs: no read-for-ownership)";
  }
  return s;
}

tolerance float_tolerance(dtype out, double f32_ulps, double mag_eps, double atol) {
  tolerance t;
  t.magnitude_eps = mag_eps;
  t.atol = atol;
  if (out == dtype::f32) {
    t.ulps = f32_ulps;
  } else {
    // 1 ulp of the storage type covers the final rounding of a near-correct f32 value; the f32
    // error is added relative to the result (f32 ulp = 2^-23 relative at most).
    t.ulps = 1;
    t.rtol = f32_ulps * 2 * eps_f32;
  }
  return t;
}

std::pair<buffer<float>, buffer<int>> split_workspace(const queue& q, std::size_t floats, std::size_t heads) {
  if (q.is_recording()) {
    const std::vector<int> zeros(heads, 0);
    return {buffer<float>(q.get_context(), floats), buffer<int>(q.get_context(), zeros.data(), heads)};
  }
  constexpr std::size_t kMaxQueues = 8;
  struct entry {
    std::uint64_t queue_id;
    buffer<float> partials;
    buffer<int> counters;
  };
  static std::mutex mu;
  static auto* cache = new std::vector<entry>();  // most recent last; never destroyed: no OpenCL at exit
  std::lock_guard lock(mu);
  auto it = std::find_if(cache->begin(), cache->end(), [&](const entry& e) { return e.queue_id == q.id(); });
  if (it == cache->end() || it->partials.size() < floats || it->counters.size() < heads) {
    const std::size_t nf = it == cache->end() ? floats : std::max(floats, it->partials.size());
    const std::size_t nh = it == cache->end() ? heads : std::max(heads, it->counters.size());
    const std::vector<int> zeros(nh, 0);
    entry e{q.id(), buffer<float>(q.get_context(), nf), buffer<int>(q.get_context(), zeros.data(), nh)};
    if (it != cache->end()) cache->erase(it);
    if (cache->size() == kMaxQueues) cache->erase(cache->begin());
    cache->push_back(std::move(e));
  } else {
    std::rotate(it, it + 1, cache->end());
  }
  return {cache->back().partials, cache->back().counters};
}

}  // namespace prism::kernels
