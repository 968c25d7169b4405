// SPDX-License-Identifier: Apache-2.0
// safetensors reading and writing; format: u64 little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
#include "prism/io/safetensors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "prism/error.hpp"

namespace prism::io {

namespace {

// Header sizes beyond this are refused before parsing: real headers are a few MB at most.
constexpr std::uint64_t max_header_bytes = 256ull << 20;
constexpr std::size_t max_dims = 8;

std::size_t dtype_bytes(const std::string& name) {
  if (name == "F64" || name == "I64" || name == "U64") return 8;
  if (name == "F32" || name == "I32" || name == "U32") return 4;
  if (name == "F16" || name == "BF16" || name == "I16" || name == "U16") return 2;
  if (name == "I8" || name == "U8" || name == "BOOL" || name == "F8_E4M3" || name == "F8_E5M2") return 1;
  return 0;
}

constexpr const char* known_dtypes =
    "F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2";

}  // namespace

std::int64_t safetensor_view::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::optional<prism::dtype> safetensor_view::prism_dtype() const {
  if (dtype == "F32") return prism::dtype::f32;
  if (dtype == "F16") return prism::dtype::f16;
  if (dtype == "BF16") return prism::dtype::bf16;
  if (dtype == "I32") return prism::dtype::i32;
  if (dtype == "I64") return prism::dtype::i64;
  if (dtype == "BOOL") return prism::dtype::boolean;
  return std::nullopt;
}

std::vector<float> safetensor_view::to_floats() const {
  const auto n = static_cast<std::size_t>(numel());
  std::vector<float> out;
  if (dtype == "F32") {
    // One pass over fresh memory (no zero-fill first) when the data is float-aligned.
    const auto* first = reinterpret_cast<const float*>(data.data());
    if (reinterpret_cast<std::uintptr_t>(first) % alignof(float) == 0) {
      out.assign(first, first + n);
    } else {
      out.resize(n);
      if (n) std::memcpy(out.data(), data.data(), n * 4);
    }
  } else if (dtype == "F16" || dtype == "BF16") {
    out.resize(n);
    prism::convert_floats(*prism_dtype(), data.data(), prism::dtype::f32, out.data(), n);
  } else {
    throw error(errc::unsupported, "io::safetensors",
                fmt::format("tensor '{}' has dtype {}; supported as floats: F32, F16, BF16", name, dtype));
  }
  return out;
}

safetensors_file::safetensors_file(const std::string& path)
    : safetensors_file(std::make_shared<const mapped_file>(path)) {}

safetensors_file safetensors_file::parse(std::span<const std::byte> bytes, const std::string& label) {
  return safetensors_file(std::make_shared<const mapped_file>(bytes, label));
}

safetensors_file::safetensors_file(std::shared_ptr<const mapped_file> file) : file_(std::move(file)) {
  const char* op = "io::safetensors_file";
  const auto bytes = file_->bytes();
  const std::string& path = file_->path();
  if (bytes.size() < 8)
    throw error(errc::config_error, op,
                fmt::format("'{}' is {} bytes; a safetensors file starts with an 8-byte header length", path,
                            bytes.size()));
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<std::uint8_t>(bytes[i]);
  if (header_len > bytes.size() - 8 || header_len > max_header_bytes)
    throw error(errc::config_error, op,
                fmt::format("'{}': header length {} exceeds the file size {} or the limit of {} bytes (not a "
                            "safetensors file?)",
                            path, header_len, bytes.size(), max_header_bytes));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data() + 8),
                                   reinterpret_cast<const char*>(bytes.data() + 8 + header_len));
  } catch (const nlohmann::json::exception& e) {
    throw error(errc::config_error, op, fmt::format("'{}': header is not valid JSON: {}", path, e.what()));
  }
  if (!header.is_object())
    throw error(errc::config_error, op, fmt::format("'{}': header must be a JSON object", path));
  const std::byte* data = bytes.data() + 8 + header_len;
  const std::uint64_t data_size = bytes.size() - 8 - header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object())
        throw error(errc::config_error, op, fmt::format("'{}': __metadata__ must be an object", path));
      for (auto m = it->begin(); m != it->end(); ++m)
        metadata_[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    const auto& entry = *it;
    auto bad = [&](const std::string& what) {
      return error(errc::config_error, op, fmt::format("'{}': tensor '{}': {}", path, it.key(), what));
    };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      throw bad("entry needs dtype, shape and data_offsets");
    safetensor_view v;
    v.name = it.key();
    if (!entry["dtype"].is_string()) throw bad("dtype must be a string");
    v.dtype = entry["dtype"].get<std::string>();
    const std::size_t elem = dtype_bytes(v.dtype);
    if (elem == 0) throw bad(fmt::format("unknown dtype '{}'; valid: {}", v.dtype, known_dtypes));
    const auto& shape = entry["shape"];
    if (!shape.is_array() || shape.size() > max_dims)
      throw bad("shape must be an array of at most 8 extents");
    // Element count, bounded by the data size so that no product overflows.
    std::uint64_t numel = 1;
    bool zero = false, too_big = false;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) throw bad("shape entries must be integers >= 0");
      const auto extent = d.get<std::uint64_t>();
      if (extent == 0)
        zero = true;
      else if (numel > data_size / extent)
        too_big = true;
      else
        numel *= extent;
      v.shape.push_back(static_cast<std::int64_t>(std::min<std::uint64_t>(extent, INT64_MAX)));
    }
    if (zero) numel = 0;
    const auto& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad("data_offsets must be [begin, end], integers >= 0");
    const auto begin = off[0].get<std::uint64_t>();
    const auto end = off[1].get<std::uint64_t>();
    if (begin > end || end > data_size)
      throw bad(
          fmt::format("data_offsets [{}, {}] outside the data section of {} bytes", begin, end, data_size));
    if ((too_big && !zero) || end - begin != numel * elem)
      throw bad(
          fmt::format("shape {} of {} needs {} bytes, data_offsets give {}", shape.dump(), v.dtype,
                      too_big && !zero ? std::string("more than the file's") : std::to_string(numel * elem),
                      end - begin));
    v.data = std::span<const std::byte>(data + begin, end - begin);
    tensors_.emplace(v.name, std::move(v));
  }
}

const safetensor_view& safetensors_file::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw error(errc::not_found, "io::safetensors_file",
                fmt::format("tensor '{}' is missing from '{}' ({} tensors in the file)", name, path(),
                            tensors_.size()));
  return it->second;
}

std::vector<std::string> safetensors_file::names() const {
  std::vector<std::string> out;
  for (const auto& [name, v] : tensors_) out.push_back(name);
  return out;
}

namespace {

// Makes a range of the mapping resident and mapped now, so a load is done when it returns
// (reading a cold file included) rather than at the first kernel's page faults: one
// MADV_POPULATE_READ (Linux 5.14), else a read of one byte per page.
void populate(const std::byte* p, std::size_t bytes) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
  if (::madvise(const_cast<std::byte*>(p), bytes, MADV_POPULATE_READ) == 0) return;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  volatile std::byte sink{};
  for (std::size_t i = 0; i < bytes; i += page) sink = p[i];
  (void)sink;
}

}  // namespace

namespace {

// Fresh memory faulted in now by one MADV_POPULATE_WRITE (Linux 5.14) over the whole pages in
// [p, p + bytes); nothing when the kernel lacks it (the first writes fault it in instead).
void prefault_write(std::byte* p, std::size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t last = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(page - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

// One piece of a conversion: `n` elements of `from` at `in` (the file's mapping) to `out`.
struct conversion {
  const std::byte* in;
  prism::dtype from;
  std::byte* out;
  std::size_t n;
};

// Converts every piece to `to` (prism::convert_floats) on every core. The pieces lie in rising
// order in one fresh allocation, whose page faults cost more than the conversion: the output is
// cut into one contiguous range per thread (at 2 MiB boundaries), so the threads take the faults
// side by side, and each thread faults 1-2 MiB in one MADV_POPULATE_WRITE (no trap per page)
// right before converting into it, while those pages are still in the cache.
void convert_all(const std::vector<conversion>& pieces, prism::dtype to) {
  if (pieces.empty()) return;
  const std::size_t out_size = dtype_size(to);
  const std::byte* base = pieces.front().out;
  const auto end_of = [&](const conversion& c) {
    return static_cast<std::size_t>(c.out - base) + c.n * out_size;
  };
  const std::size_t total = end_of(pieces.back());
  constexpr std::size_t grain = std::size_t{2} << 20;
  const std::size_t threads =
      std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), (total + grain - 1) / grain);
  const std::size_t per = (total / std::max<std::size_t>(threads, 1) + grain - 1) / grain * grain;
  auto work = [&](std::size_t first, std::size_t last) {  // output bytes [first, last) from base
    for (const conversion& c : pieces) {
      const auto begin = static_cast<std::size_t>(c.out - base), end = end_of(c);
      const std::size_t lo = std::max(begin, first), hi = std::min(end, last);
      if (lo >= hi) continue;
      const std::size_t e0 = (lo - begin) / out_size, e1 = (hi - begin) / out_size;
      constexpr std::size_t step = std::size_t{1} << 19;  // elements per fault-and-convert step
      for (std::size_t e = e0; e < e1; e += step) {
        const std::size_t m = std::min(step, e1 - e);
        prefault_write(c.out + e * out_size, m * out_size);
        prism::convert_floats(c.from, c.in + e * dtype_size(c.from), to, c.out + e * out_size, m);
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t)
    if (t * per < total) pool.emplace_back(work, t * per, std::min(total, (t + 1) * per));
  work(0, threads > 1 ? std::min(total, per) : total);
  for (auto& th : pool) th.join();
}

// Throws unless `v` can load as `target`; returns whether that is a conversion.
bool check_loadable(const safetensor_view& v, std::optional<prism::dtype> as, const std::string& path) {
  const auto own = v.prism_dtype();
  if (!as && !own)
    throw error(
        errc::unsupported, "io::safetensors load",
        fmt::format("'{}': tensor '{}' has dtype {}, which prism has no type for; valid: F32, F16, BF16, "
                    "I32, I64, BOOL",
                    path, v.name, v.dtype));
  const prism::dtype target = as.value_or(*own);
  if (own && *own == target) return false;
  if (!is_floating(target) || !own || !is_floating(*own))
    throw error(errc::unsupported, "io::safetensors load",
                fmt::format("'{}': tensor '{}' of dtype {} cannot be loaded as {}; conversions are between "
                            "F32, F16 and BF16",
                            path, v.name, v.dtype, dtype_name(target)));
  return true;
}

tensor load_view(const queue& q, const safetensor_view& v, std::optional<prism::dtype> as,
                 const std::string& path) {
  const bool convert = check_loadable(v, as, path);
  const prism::dtype target = as.value_or(v.prism_dtype().value_or(prism::dtype::f32));
  const dims shape(std::span<const std::int64_t>(v.shape));
  if (!convert) return tensor::from_host(q, v.data.data(), shape, target);
  std::vector<std::byte> converted(static_cast<std::size_t>(v.numel()) * dtype_size(target));
  convert_all({{v.data.data(), *v.prism_dtype(), converted.data(), static_cast<std::size_t>(v.numel())}},
              target);
  return tensor::from_host(q, converted.data(), shape, target);
}

// Contiguous strides of a shape.
dims contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = strides.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return dims(std::span<const std::int64_t>(strides));
}

}  // namespace

tensor safetensors_file::load(const queue& q, const std::string& name, std::optional<prism::dtype> as) const {
  return load_view(q, get(name), as, path());
}

std::map<std::string, tensor> safetensors_file::load_all(const queue& q, std::optional<prism::dtype> as,
                                                         cpu_placement place) const {
  return load_named(q, names(), as, place);
}

std::map<std::string, tensor> safetensors_file::load_named(const queue& q,
                                                           const std::vector<std::string>& names,
                                                           std::optional<prism::dtype> as,
                                                           cpu_placement place) const {
  std::map<std::string, tensor> out;
  const std::byte* file_begin = file_->bytes().data();
  std::vector<const safetensor_view*> selected;
  for (const auto& name : names) {
    const safetensor_view& v = get(name);
    check_loadable(v, as, path());  // every error before any work
    selected.push_back(&v);
  }
  // The tensors that load as stored, at offsets their element size divides: one buffer over
  // the byte range they span, one copy into it, a view each.
  std::vector<const safetensor_view*> shared;
  // The tensors that convert: one host allocation, each converted straight from the mapping to
  // its offset there, which becomes the buffer (CPU devices) or is copied to it once.
  std::vector<const safetensor_view*> converted;
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (const safetensor_view* v : selected) {
    if (v->numel() == 0) continue;
    const auto own = v->prism_dtype();
    if (own && as && *as != *own) {
      converted.push_back(v);
      continue;
    }
    const auto begin = static_cast<std::uint64_t>(v->data.data() - file_begin);
    if (!own || begin % dtype_size(*own) != 0) continue;
    shared.push_back(v);
    lo = std::min(lo, begin);
    hi = std::max<std::uint64_t>(hi, begin + v->data.size());
  }
  const std::uint64_t max_alloc = q.get_device().max_mem_alloc_size();
  if (!shared.empty()) {
    lo &= ~std::uint64_t{7};  // every element size divides 8, so views keep whole-element offsets
    if (hi - lo > max_alloc) shared.clear();
  }
  if (!shared.empty()) {
    // CPU devices, placement mapped: the buffer is the file's private mapping itself, from the
    // page holding the first byte (no copy; kernels' writes copy the page, the file never
    // changes). Otherwise one buffer and one copy of the range.
    buffer<std::byte> storage;
    std::byte* map = place == cpu_placement::mapped ? file_->mapping() : nullptr;
    if (map) {
      const std::uint64_t page_lo = lo & ~static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE) - 1);
      storage = buffer<std::byte>::over_host(q.get_context(), map + page_lo, hi - page_lo, file_);
      if (storage) {
        lo = page_lo;
        populate(map + page_lo, hi - page_lo);
      }
    }
    if (!storage) {
      storage = tensor::empty(q, dims{static_cast<std::int64_t>(hi - lo)}, prism::dtype::boolean).storage();
      storage.write(std::span<const std::byte>(file_begin + lo, hi - lo));
    }
    for (const safetensor_view* v : shared) {
      const prism::dtype t = *v->prism_dtype();
      const auto offset = static_cast<std::int64_t>(
          (static_cast<std::uint64_t>(v->data.data() - file_begin) - lo) / dtype_size(t));
      out.emplace(v->name, tensor(storage, dims(std::span<const std::int64_t>(v->shape)),
                                  contiguous_strides(v->shape), offset, t));
    }
  }
  if (!converted.empty()) {
    const prism::dtype t = *as;
    constexpr std::uint64_t align = 64;
    std::vector<std::uint64_t> offsets;
    std::uint64_t total = 0;
    for (const safetensor_view* v : converted) {
      offsets.push_back(total);
      total += (static_cast<std::uint64_t>(v->numel()) * dtype_size(t) + align - 1) / align * align;
    }
    const auto add_views = [&](const buffer<std::byte>& storage) {
      for (std::size_t i = 0; i < converted.size(); ++i) {
        const safetensor_view* v = converted[i];
        out.emplace(v->name, tensor(storage, dims(std::span<const std::int64_t>(v->shape)),
                                    contiguous_strides(v->shape),
                                    static_cast<std::int64_t>(offsets[i] / dtype_size(t)), t));
      }
    };
    if (total <= max_alloc && place == cpu_placement::copied && q.get_device().type() == device_type::cpu) {
      // Copied: converted straight into prism's own buffer (huge pages from 32 MiB,
      // PRISM_HUGE_PAGES), through a map, which on CPU devices is that memory itself.
      auto storage = tensor::empty(q, dims{static_cast<std::int64_t>(total)}, prism::dtype::boolean).storage();
      {
        host_accessor<std::byte> view(storage, discard_write);
        std::vector<conversion> pieces;
        for (std::size_t i = 0; i < converted.size(); ++i)
          pieces.push_back({converted[i]->data.data(), *converted[i]->prism_dtype(), view.data() + offsets[i],
                            static_cast<std::size_t>(converted[i]->numel())});
        convert_all(pieces, t);
      }
      add_views(storage);
    } else if (total <= max_alloc) {
      const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
      void* raw = std::aligned_alloc(page, (total + page - 1) / page * page);
      if (!raw)
        throw error(errc::out_of_memory, "io::safetensors load_all",
                    fmt::format("'{}': cannot allocate {} bytes to convert {} tensors to {}", path(), total,
                                converted.size(), dtype_name(t)));
      std::shared_ptr<std::byte> host(static_cast<std::byte*>(raw), [](std::byte* p) { std::free(p); });
      // No MADV_HUGEPAGE: on the dev VM (Firecracker, free page reporting) huge pages come from
      // blocks the host has taken back, and a load took 0.1 s or 1-2 s by chance (RESULTS.md).
      std::vector<conversion> pieces;
      for (std::size_t i = 0; i < converted.size(); ++i)
        pieces.push_back({converted[i]->data.data(), *converted[i]->prism_dtype(), host.get() + offsets[i],
                          static_cast<std::size_t>(converted[i]->numel())});
      convert_all(pieces, t);
      auto storage = buffer<std::byte>::over_host(q.get_context(), host.get(), total, host);
      if (!storage) {
        storage = tensor::empty(q, dims{static_cast<std::int64_t>(total)}, prism::dtype::boolean).storage();
        storage.write(std::span<const std::byte>(host.get(), total));
      }
      add_views(storage);
    }
  }
  for (const safetensor_view* v : selected)
    if (!out.count(v->name)) out.emplace(v->name, load_view(q, *v, as, path()));
  return out;
}

safetensors_checkpoint::safetensors_checkpoint(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  const char* op = "io::safetensors_checkpoint";
  if (!fs::is_directory(path)) {
    shards_.emplace_back(path);
  } else if (fs::exists(fs::path(path) / "model.safetensors.index.json")) {
    const auto index_path = (fs::path(path) / "model.safetensors.index.json").string();
    std::ifstream in(index_path);
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw error(errc::config_error, op, fmt::format("'{}' is not valid JSON: {}", index_path, e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw error(errc::config_error, op, fmt::format("'{}' has no \"weight_map\" object", index_path));
    std::map<std::string, std::size_t> shard_of_file;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it->is_string())
        throw error(errc::config_error, op,
                    fmt::format("'{}': weight_map[\"{}\"] must be a file name", index_path, it.key()));
      const auto file = it->get<std::string>();
      if (file.find('/') != std::string::npos || file == "..")
        throw error(errc::config_error, op,
                    fmt::format("'{}': shard '{}' of tensor '{}' must be a file in the same folder",
                                index_path, file, it.key()));
      auto [pos, added] = shard_of_file.emplace(file, shards_.size());
      if (added) shards_.emplace_back((fs::path(path) / file).string());
      if (!shards_[pos->second].contains(it.key()))
        throw error(
            errc::config_error, op,
            fmt::format("'{}' puts tensor '{}' in '{}', which does not hold it", index_path, it.key(), file));
      where_[it.key()] = pos->second;
    }
    return;
  } else if (fs::exists(fs::path(path) / "model.safetensors")) {
    shards_.emplace_back((fs::path(path) / "model.safetensors").string());
  } else {
    throw error(errc::not_found, op,
                fmt::format("'{}' holds neither model.safetensors nor model.safetensors.index.json", path));
  }
  for (const auto& name : shards_[0].names()) where_[name] = 0;
}

const safetensor_view& safetensors_checkpoint::get(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end())
    throw error(errc::not_found, "io::safetensors_checkpoint",
                fmt::format("tensor '{}' is missing from '{}' ({} tensors in {} file(s))", name, path_,
                            where_.size(), shards_.size()));
  return shards_[it->second].get(name);
}

std::vector<std::string> safetensors_checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : where_) out.push_back(name);
  return out;
}

tensor safetensors_checkpoint::load(const queue& q, const std::string& name,
                                    std::optional<prism::dtype> as) const {
  auto it = where_.find(name);
  if (it == where_.end()) get(name);  // throws the not_found error
  return shards_[it->second].load(q, name, as);
}

std::map<std::string, tensor> safetensors_checkpoint::load_all(const queue& q, std::optional<prism::dtype> as,
                                                               cpu_placement place) const {
  return load_named(q, names(), as, place);
}

std::map<std::string, tensor> safetensors_checkpoint::load_named(const queue& q,
                                                                 const std::vector<std::string>& names,
                                                                 std::optional<prism::dtype> as,
                                                                 cpu_placement place) const {
  std::vector<std::vector<std::string>> per_shard(shards_.size());
  for (const auto& name : names) {
    auto it = where_.find(name);
    if (it == where_.end()) get(name);  // throws the not_found error
    per_shard[it->second].push_back(name);
  }
  std::map<std::string, tensor> out;
  for (std::size_t i = 0; i < shards_.size(); ++i)
    if (!per_shard[i].empty()) out.merge(shards_[i].load_named(q, per_shard[i], as, place));
  return out;
}

const char* safetensors_dtype_name(prism::dtype t) {
  switch (t) {
    case prism::dtype::f32:
      return "F32";
    case prism::dtype::f16:
      return "F16";
    case prism::dtype::bf16:
      return "BF16";
    default:
      throw error(errc::invalid_argument, "io::write_safetensors",
                  fmt::format("dtype {} cannot be written; valid: f32, f16, bf16", dtype_name(t)));
  }
}

void write_safetensors(const std::string& path, const std::vector<safetensor_data>& tensors,
                       prism::dtype type, const std::map<std::string, std::string>& metadata) {
  const char* type_name = safetensors_dtype_name(type);
  const std::size_t elem = dtype_size(type);
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (static_cast<std::size_t>(n) != t.values.size())
      throw error(errc::invalid_argument, "io::write_safetensors",
                  fmt::format("tensor '{}': shape {} holds {} elements, got {} values", t.name,
                              nlohmann::json(t.shape).dump(), n, t.values.size()));
    header[t.name] = {
        {"dtype", type_name}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * elem}}};
    offset += n * elem;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw error(errc::io_error, "io::write_safetensors", fmt::format("cannot write '{}'", path));
  std::uint64_t len = text.size();
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  out.write(reinterpret_cast<const char*>(len_bytes), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<char> chunk;
  for (const auto& t : tensors) {
    chunk.resize(t.values.size() * elem);
    prism::convert_floats(prism::dtype::f32, t.values.data(), type, chunk.data(), t.values.size());
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  }
  out.close();
  if (!out) throw error(errc::io_error, "io::write_safetensors", fmt::format("writing '{}' failed", path));
}

}  // namespace prism::io
