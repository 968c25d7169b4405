// SPDX-License-Identifier: Apache-2.0
// prism::tensor and prism::dims: strided views over device storage; contiguous() goes through
// the strided copy kernel, host transfers through the runtime's buffer reads/writes.
#include "prism/tensor.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/op_support.hpp"
#include "prism/error.hpp"

namespace prism {

// ---- dims -----------------------------------------------------------------------------------

namespace {
[[noreturn]] void too_many_dims(std::size_t n) {
  throw error(errc::invalid_argument, "dims",
              "a tensor has at most " + std::to_string(max_tensor_dims) + " dims; got " + std::to_string(n));
}
}  // namespace

dims::dims(std::initializer_list<std::int64_t> v)
    : dims(std::span<const std::int64_t>(v.begin(), v.size())) {}
dims::dims(std::span<const std::int64_t> v) {
  if (v.size() > max_tensor_dims) too_many_dims(v.size());
  std::copy(v.begin(), v.end(), v_.begin());
  n_ = static_cast<int>(v.size());
}
void dims::push_back(std::int64_t x) {
  if (n_ == max_tensor_dims) too_many_dims(n_ + 1);
  v_[n_++] = x;
}
void dims::insert(int pos, std::int64_t x) {
  if (n_ == max_tensor_dims) too_many_dims(n_ + 1);
  if (pos < 0 || pos > n_) throw error(errc::invalid_argument, "dims::insert", "position out of range");
  for (int i = n_; i > pos; --i) v_[i] = v_[i - 1];
  v_[pos] = x;
  ++n_;
}
void dims::erase(int pos) {
  if (pos < 0 || pos >= n_) throw error(errc::invalid_argument, "dims::erase", "position out of range");
  for (int i = pos; i + 1 < n_; ++i) v_[i] = v_[i + 1];
  --n_;
}
std::int64_t dims::product() const noexcept {
  std::int64_t p = 1;
  for (int i = 0; i < n_; ++i) p *= v_[i];
  return p;
}
std::string dims::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) s += (i ? ", " : "") + std::to_string(v_[i]);
  return s + "]";
}
bool dims::operator==(const dims& o) const noexcept {
  return n_ == o.n_ && std::equal(v_.begin(), v_.begin() + n_, o.v_.begin());
}

dims contiguous_strides(const dims& shape) {
  dims s;
  std::int64_t acc = 1;
  for (int i = 0; i < shape.size(); ++i) s.push_back(0);
  for (int i = shape.size() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

// ---- construction ---------------------------------------------------------------------------

namespace {
void check_shape(const dims& shape, const char* op) {
  for (auto e : shape)
    if (e < 0) throw error(errc::invalid_argument, op, "negative extent in shape " + shape.str());
}

// A block-quantized view holds whole blocks: its last dim is contiguous and a multiple of the
// block, and every other stride and the offset land on block starts.
void check_blocks(const dims& shape, const dims& strides, std::int64_t offset, dtype t) {
  const auto block = static_cast<std::int64_t>(dtype_block_elements(t));
  const int last = shape.size() - 1;
  bool ok = last >= 0 && shape[last] % block == 0 && (strides[last] == 1 || shape[last] == 1) &&
            offset % block == 0;
  for (int d = 0; ok && d < last; ++d) ok = shape[d] == 1 || strides[d] % block == 0;
  if (!ok)
    throw error(errc::invalid_argument, "tensor",
                std::string(dtype_name(t)) + " view " + shape.str() + " strides " + strides.str() + " +" +
                    std::to_string(offset) +
                    " does not hold whole blocks: the last dim must be contiguous "
                    "and a multiple of " +
                    std::to_string(block) + " elements, other strides and the offset multiples of " +
                    std::to_string(block));
}
}  // namespace

tensor::tensor(buffer<std::byte> storage, const dims& shape, const dims& strides, std::int64_t offset,
               dtype t)
    : storage_(std::move(storage)), shape_(shape), strides_(strides), offset_(offset), dtype_(t) {
  if (shape.size() != strides.size())
    throw error(errc::invalid_argument, "tensor",
                "shape " + shape.str() + " and strides " + strides.str() + " differ in rank");
  check_shape(shape, "tensor");
  if (offset < 0) throw error(errc::invalid_argument, "tensor", "negative offset " + std::to_string(offset));
  if (is_quantized(t) && numel() > 0) check_blocks(shape, strides, offset, t);
  if (storage_ && numel() > 0) {
    std::int64_t lo = offset, hi = offset;
    for (int d = 0; d < shape.size(); ++d) {
      std::int64_t ext = (shape[d] - 1) * strides[d];
      (ext < 0 ? lo : hi) += ext;
    }
    std::int64_t cap = static_cast<std::int64_t>(storage_.size() / dtype_size(t) * dtype_block_elements(t));
    if (lo < 0 || hi >= cap)
      throw error(errc::invalid_argument, "tensor",
                  "view " + shape.str() + " strides " + strides.str() + " +" + std::to_string(offset) +
                      " reaches elements [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "] outside storage of " + std::to_string(cap) + " " + dtype_name(t) + " elements");
  }
}

byte_range tensor::byte_extent() const noexcept {
  const std::size_t es = dtype_size(dtype_);
  const auto block = static_cast<std::int64_t>(dtype_block_elements(dtype_));
  if (numel() <= 0) return {static_cast<std::size_t>(offset_ / block) * es, 0};
  std::int64_t lo = offset_, hi = offset_;
  for (int d = 0; d < shape_.size(); ++d) {
    std::int64_t ext = (shape_[d] - 1) * strides_[d];
    (ext < 0 ? lo : hi) += ext;
  }
  return {static_cast<std::size_t>(lo / block) * es,
          static_cast<std::size_t>(hi / block - lo / block + 1) * es};
}

tensor tensor::empty(const queue& q, const dims& shape, dtype t) {
  check_shape(shape, "tensor::empty");
  // OpenCL has no zero-sized buffers: empty tensors still own one element of storage.
  std::size_t n = std::max(dtype_storage_bytes(t, shape.product()), dtype_size(t));
  buffer<std::byte> b(q.get_context(), n);
  return tensor(std::move(b), shape, contiguous_strides(shape), 0, t);
}

tensor tensor::from_host(const queue& q, const void* bytes, const dims& shape, dtype t) {
  tensor out = empty(q, shape, t);
  if (out.numel() > 0) detail::buffer_write(*out.storage_.get_impl(), 0, out.nbytes(), bytes);
  return out;
}

tensor tensor::wrap_host(const queue& q, void* data, const dims& shape, const dims& strides, dtype t,
                         std::shared_ptr<const void> owner) {
  if (shape.size() != strides.size())
    throw error(errc::invalid_argument, "tensor::wrap_host",
                "shape " + shape.str() + " and strides " + strides.str() + " differ in rank");
  check_shape(shape, "tensor::wrap_host");
  const std::size_t elem = dtype_size(t);
  if (reinterpret_cast<std::uintptr_t>(data) % elem != 0)
    throw error(errc::invalid_argument, "tensor::wrap_host",
                std::string("host memory is not aligned to the ") + std::to_string(elem) +
                    "-byte elements of " + dtype_name(t) + " (valid: an address that is a multiple of " +
                    std::to_string(elem) + ")");
  // The storage spans the elements the view can reach: [lo, hi] around element [0, ..., 0].
  std::int64_t lo = 0, hi = 0;
  if (shape.product() > 0)
    for (int d = 0; d < shape.size(); ++d) {
      std::int64_t ext = (shape[d] - 1) * strides[d];
      (ext < 0 ? lo : hi) += ext;
    }
  if (shape.product() == 0)
    return tensor(buffer<std::byte>::wrap_host(q.get_context(), nullptr, 0, std::move(owner)), shape, strides,
                  0, t);
  // The storage starts at the lowest element, rounded down to 128 bytes (the base address
  // alignment CPU drivers such as PoCL need to use the memory in place; they copy otherwise).
  // 128 divides the page size, so the bytes before the element are on the element's own page.
  constexpr std::uintptr_t base_align = 128;
  auto* first = static_cast<std::byte*>(data) + lo * static_cast<std::int64_t>(elem);
  auto* base = reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(first) & ~(base_align - 1));
  const std::int64_t lead = (first - base) / static_cast<std::int64_t>(elem);
  const std::size_t bytes =
      static_cast<std::size_t>(first - base) + static_cast<std::size_t>(hi - lo + 1) * elem;
  auto storage = buffer<std::byte>::wrap_host(q.get_context(), base, bytes, std::move(owner));
  return tensor(std::move(storage), shape, strides, lead - lo, t);
}

tensor tensor::from_floats(const queue& q, std::span<const float> values, const dims& shape, dtype t) {
  if (static_cast<std::int64_t>(values.size()) != shape.product())
    throw error(errc::invalid_argument, "tensor::from_floats",
                std::to_string(values.size()) + " values for shape " + shape.str() + " (" +
                    std::to_string(shape.product()) + " elements)");
  std::vector<double> v(values.begin(), values.end());
  std::vector<std::byte> bytes(dtype_storage_bytes(t, shape.product()));
  kernels::encode_values(t, v.data(), v.size(), bytes.data());
  return from_host(q, bytes.data(), shape, t);
}

// ---- queries --------------------------------------------------------------------------------

std::int64_t tensor::size(int d) const {
  int n = dim();
  if (d < -n || d >= n)
    throw error(errc::invalid_argument, "tensor::size",
                "dim " + std::to_string(d) + " out of range for rank " + std::to_string(n));
  return shape_[d < 0 ? d + n : d];
}

bool tensor::is_contiguous() const noexcept {
  std::int64_t expect = 1;
  for (int d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (shape_[d] == 0) return true;
    if (strides_[d] != expect) return false;
    expect *= shape_[d];
  }
  return true;
}

std::string tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_.str() + " strides " + strides_.str() + " +" +
         std::to_string(offset_);
}

// ---- views ----------------------------------------------------------------------------------

namespace {
int norm_dim(int d, int n, const char* op) {
  int m = std::max(n, 1);
  if (d < -m || d >= m)
    throw error(errc::invalid_argument, op,
                "dim " + std::to_string(d) + " out of range for rank " + std::to_string(n) + "; valid: [" +
                    std::to_string(-m) + ", " + std::to_string(m - 1) + "]");
  return d < 0 ? d + m : d;
}
}  // namespace

tensor tensor::transpose(int d0, int d1) const {
  d0 = norm_dim(d0, dim(), "tensor::transpose");
  d1 = norm_dim(d1, dim(), "tensor::transpose");
  tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.strides_[d0], t.strides_[d1]);
  return t;
}

tensor tensor::permute(const dims& order) const {
  if (order.size() != dim())
    throw error(errc::invalid_argument, "tensor::permute",
                "order " + order.str() + " must name each of the " + std::to_string(dim()) + " dims once");
  tensor t = *this;
  std::vector<bool> used(dim(), false);
  for (int i = 0; i < dim(); ++i) {
    int d = norm_dim(static_cast<int>(order[i]), dim(), "tensor::permute");
    if (used[d])
      throw error(errc::invalid_argument, "tensor::permute",
                  "order " + order.str() + " repeats dim " + std::to_string(d));
    used[d] = true;
    t.shape_[i] = shape_[d];
    t.strides_[i] = strides_[d];
  }
  return t;
}

tensor tensor::slice(int d, std::int64_t start, std::int64_t end, std::int64_t step) const {
  d = norm_dim(d, dim(), "tensor::slice");
  if (step < 1)
    throw error(errc::invalid_argument, "tensor::slice", "step must be >= 1; got " + std::to_string(step));
  std::int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  tensor t = *this;
  t.shape_[d] = (end - start + step - 1) / step;
  if (t.shape_[d] > 0) t.offset_ += start * strides_[d];
  t.strides_[d] *= step;
  return t;
}

tensor tensor::select(int d, std::int64_t index) const {
  d = norm_dim(d, dim(), "tensor::select");
  if (index < -shape_[d] || index >= shape_[d])
    throw error(errc::invalid_argument, "tensor::select",
                "index " + std::to_string(index) + " out of range for dim " + std::to_string(d) +
                    " of size " + std::to_string(shape_[d]));
  if (index < 0) index += shape_[d];
  tensor t = *this;
  t.offset_ += index * strides_[d];
  t.shape_.erase(d);
  t.strides_.erase(d);
  return t;
}

tensor tensor::reshape(const dims& shape) const {
  dims target = shape;
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0)
        throw error(errc::invalid_argument, "tensor::reshape", "more than one -1 in " + shape.str());
      infer = i;
    } else if (target[i] < 0) {
      throw error(errc::invalid_argument, "tensor::reshape", "negative extent in " + shape.str());
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      throw error(errc::invalid_argument, "tensor::reshape",
                  "cannot infer -1 in " + shape.str() + " for " + shape_.str());
    target[infer] = numel() / known;
  }
  if (target.product() != numel())
    throw error(errc::invalid_argument, "tensor::reshape",
                "shape " + target.str() + " has " + std::to_string(target.product()) +
                    " elements; the tensor " + shape_.str() + " has " + std::to_string(numel()));
  tensor t = *this;
  t.shape_ = target;
  if (is_contiguous()) {
    t.strides_ = contiguous_strides(target);
    return t;
  }
  // Chunks of old dims that are contiguous among themselves map onto runs of new dims (the
  // PyTorch view rule); a run that would straddle two chunks needs a copy.
  dims ns = target;
  int view_d = target.size() - 1;
  std::int64_t chunk_base = strides_[dim() - 1];
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (int td = dim() - 1; td >= 0; --td) {
    tensor_numel *= shape_[td];
    if (td == 0 || (shape_[td - 1] != 1 && strides_[td - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        ns[view_d] = view_numel * chunk_base;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) goto fail;
      if (td > 0) {
        chunk_base = strides_[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) goto fail;
  t.strides_ = ns;
  return t;
fail:
  throw error(errc::invalid_argument, "tensor::reshape",
              "view " + shape_.str() + " strides " + strides_.str() + " cannot be reshaped to " +
                  target.str() + " without a copy; call contiguous() first");
}

tensor tensor::unsqueeze(int d) const {
  int n = dim();
  if (d < -(n + 1) || d > n)
    throw error(errc::invalid_argument, "tensor::unsqueeze",
                "dim " + std::to_string(d) + " out of range; valid: [" + std::to_string(-(n + 1)) + ", " +
                    std::to_string(n) + "]");
  if (d < 0) d += n + 1;
  tensor t = *this;
  std::int64_t st = d < n ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(d, 1);
  t.strides_.insert(d, st);
  return t;
}

tensor tensor::squeeze(int d) const {
  d = norm_dim(d, dim(), "tensor::squeeze");
  if (shape_[d] != 1)
    throw error(errc::invalid_argument, "tensor::squeeze",
                "dim " + std::to_string(d) + " has size " + std::to_string(shape_[d]) +
                    "; only size-1 dims can be squeezed");
  tensor t = *this;
  t.shape_.erase(d);
  t.strides_.erase(d);
  return t;
}

tensor tensor::expand(const dims& shape) const {
  if (shape.size() < dim())
    throw error(errc::invalid_argument, "tensor::expand",
                "cannot expand " + shape_.str() + " to fewer dims " + shape.str());
  tensor t = *this;
  t.shape_ = shape;
  t.strides_ = dims();
  int lead = shape.size() - dim();
  for (int i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      t.strides_.push_back(0);
      continue;
    }
    std::int64_t have = shape_[i - lead];
    if (have == shape[i]) {
      t.strides_.push_back(strides_[i - lead]);
    } else if (have == 1) {
      t.strides_.push_back(0);
    } else {
      throw error(errc::invalid_argument, "tensor::expand",
                  "cannot expand " + shape_.str() + " to " + shape.str() + ": dim " + std::to_string(i) +
                      " is " + std::to_string(have) + " (only size-1 dims broadcast)");
    }
  }
  return t;
}

// ---- copies ---------------------------------------------------------------------------------

tensor tensor::contiguous(queue& q) const {
  if (is_contiguous()) return *this;
  if (is_quantized(dtype_))
    throw error(errc::unsupported, "tensor::contiguous",
                "cannot copy the " + std::string(dtype_name(dtype_)) + " view " + str() +
                    ": block-quantized tensors are copied only as whole contiguous tensors");
  tensor out = empty(q, shape_, dtype_);
  kernels::copy_into(q, *this, out);
  return out;
}

std::vector<std::byte> tensor::to_host(queue& q) const {
  const std::size_t es = dtype_size(dtype_);
  std::vector<std::byte> out(nbytes());
  if (numel() == 0) return out;
  auto& impl = *storage_.get_impl();
  const auto block = static_cast<std::int64_t>(dtype_block_elements(dtype_));
  if (is_contiguous()) {
    detail::buffer_read(impl, static_cast<std::size_t>(offset_ / block) * es, out.size(), out.data());
    return out;
  }
  if (block > 1) {  // whole-block rows: one read per row of the view
    const std::int64_t row = shape_[dim() - 1];
    if (row % block != 0 || (row > 1 && strides_[dim() - 1] != 1))
      throw error(errc::unsupported, "tensor::to_host",
                  "the " + std::string(dtype_name(dtype_)) + " view " + str() +
                      " does not hold whole blocks along its last dim; read it with that dim last");
    const std::size_t row_bytes = dtype_storage_bytes(dtype_, row);
    std::vector<std::int64_t> idx(dim(), 0);
    for (std::int64_t r = 0; r < numel() / row; ++r) {
      std::int64_t off = offset_;
      for (int d = 0; d + 1 < dim(); ++d) off += idx[d] * strides_[d];
      detail::buffer_read(impl, static_cast<std::size_t>(off / block) * es, row_bytes,
                          out.data() + static_cast<std::size_t>(r) * row_bytes);
      for (int d = dim() - 2; d >= 0; --d) {
        if (++idx[d] < shape_[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }
  std::int64_t lo = offset_, hi = offset_;
  for (int d = 0; d < dim(); ++d) {
    std::int64_t ext = (shape_[d] - 1) * strides_[d];
    (ext < 0 ? lo : hi) += ext;
  }
  std::vector<std::byte> span(static_cast<std::size_t>(hi - lo + 1) * es);
  detail::buffer_read(impl, static_cast<std::size_t>(lo) * es, span.size(), span.data());
  std::vector<std::int64_t> idx(dim(), 0);
  for (std::int64_t i = 0; i < numel(); ++i) {
    std::int64_t off = offset_ - lo;
    for (int d = 0; d < dim(); ++d) off += idx[d] * strides_[d];
    std::memcpy(out.data() + i * es, span.data() + off * es, es);
    for (int d = dim() - 1; d >= 0; --d) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<float> tensor::to_floats(queue& q) const {
  auto bytes = to_host(q);
  std::vector<double> v(static_cast<std::size_t>(numel()));
  kernels::decode_values(dtype_, bytes.data(), v.size(), v.data());
  return {v.begin(), v.end()};
}

}  // namespace prism
