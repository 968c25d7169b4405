// safetensors reading (mmap) and writing; format: u64 little-endian header length N, N bytes of
// JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
#include "examples/llm/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "prism/error.hpp"

namespace prism::llm {

namespace {

std::size_t dtype_bytes(const std::string& name) {
  if (name == "F64" || name == "I64" || name == "U64") return 8;
  if (name == "F32" || name == "I32" || name == "U32") return 4;
  if (name == "F16" || name == "BF16" || name == "I16" || name == "U16") return 2;
  if (name == "I8" || name == "U8" || name == "BOOL" || name == "F8_E4M3" || name == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

std::int64_t safetensor_view::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<float> safetensor_view::to_floats() const {
  const auto n = static_cast<std::size_t>(numel());
  std::vector<float> out(n);
  if (dtype == "F32") {
    std::memcpy(out.data(), data.data(), n * 4);
  } else if (dtype == "F16" || dtype == "BF16") {
    const bool half = dtype == "F16";
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, data.data() + 2 * i, 2);
      out[i] = half ? half_to_float(bits) : bf16_to_float(bits);
    }
  } else {
    throw error(errc::unsupported, "llm::safetensors",
                fmt::format("tensor '{}' has dtype {}; supported: F32, F16, BF16", name, dtype));
  }
  return out;
}

safetensors_file::safetensors_file(const std::string& path) : path_(path) {
  const char* op = "llm::safetensors_file";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw error(errc::io_error, op, fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw error(errc::io_error, op, fmt::format("cannot stat '{}': {}", path, std::strerror(errno)));
  }
  map_size_ = static_cast<std::size_t>(st.st_size);
  if (map_size_ < 8) {
    ::close(fd);
    throw error(errc::config_error, op,
                fmt::format("'{}' is {} bytes; a safetensors file starts with an 8-byte header length", path,
                            map_size_));
  }
  map_ = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw error(errc::io_error, op, fmt::format("cannot map '{}': {}", path, std::strerror(errno)));
  }
  // From here on, failures must unmap: parse in a lambda and clean up on throw.
  try {
    const auto* base = static_cast<const std::byte*>(map_);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<std::uint8_t>(base[i]);
    if (header_len > map_size_ - 8)
      throw error(errc::config_error, op,
                  fmt::format("'{}': header length {} exceeds the file size {} (not a safetensors file?)",
                              path, header_len, map_size_));
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(reinterpret_cast<const char*>(base + 8),
                                     reinterpret_cast<const char*>(base + 8 + header_len));
    } catch (const nlohmann::json::exception& e) {
      throw error(errc::config_error, op, fmt::format("'{}': header is not valid JSON: {}", path, e.what()));
    }
    if (!header.is_object())
      throw error(errc::config_error, op, fmt::format("'{}': header must be a JSON object", path));
    const std::byte* data = base + 8 + header_len;
    const std::size_t data_size = map_size_ - 8 - header_len;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (it->is_object())
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
      v.dtype = entry["dtype"].get<std::string>();
      const std::size_t elem = dtype_bytes(v.dtype);
      if (elem == 0) throw bad(fmt::format("unknown dtype '{}'", v.dtype));
      for (const auto& d : entry["shape"]) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
          throw bad("shape entries must be integers >= 0");
        v.shape.push_back(d.get<std::int64_t>());
      }
      const auto& off = entry["data_offsets"];
      if (!off.is_array() || off.size() != 2) throw bad("data_offsets must be [begin, end]");
      const auto begin = off[0].get<std::uint64_t>();
      const auto end = off[1].get<std::uint64_t>();
      if (begin > end || end > data_size)
        throw bad(
            fmt::format("data_offsets [{}, {}] outside the data section of {} bytes", begin, end, data_size));
      if (end - begin != static_cast<std::uint64_t>(v.numel()) * elem)
        throw bad(fmt::format("shape {} of {} needs {} bytes, data_offsets give {}",
                              nlohmann::json(v.shape).dump(), v.dtype, v.numel() * elem, end - begin));
      v.data = std::span<const std::byte>(data + begin, end - begin);
      tensors_.emplace(v.name, std::move(v));
    }
  } catch (...) {
    ::munmap(map_, map_size_);
    map_ = nullptr;
    throw;
  }
}

safetensors_file::~safetensors_file() {
  if (map_) ::munmap(map_, map_size_);
}

const safetensor_view& safetensors_file::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw error(errc::not_found, "llm::safetensors_file",
                fmt::format("tensor '{}' is missing from '{}' ({} tensors in the file)", name, path_,
                            tensors_.size()));
  return it->second;
}

std::vector<std::string> safetensors_file::names() const {
  std::vector<std::string> out;
  for (const auto& [name, v] : tensors_) out.push_back(name);
  return out;
}

const char* safetensors_dtype_name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "F32";
    case dtype::f16:
      return "F16";
    case dtype::bf16:
      return "BF16";
    default:
      throw error(errc::invalid_argument, "llm::write_safetensors",
                  fmt::format("dtype {} cannot be written; valid: f32, f16, bf16", dtype_name(t)));
  }
}

void write_safetensors(const std::string& path, const std::vector<safetensor_data>& tensors, dtype type,
                       const std::map<std::string, std::string>& metadata) {
  const char* type_name = safetensors_dtype_name(type);
  const std::size_t elem = dtype_size(type);
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (static_cast<std::size_t>(n) != t.values.size())
      throw error(errc::invalid_argument, "llm::write_safetensors",
                  fmt::format("tensor '{}': shape {} holds {} elements, got {} values", t.name,
                              nlohmann::json(t.shape).dump(), n, t.values.size()));
    header[t.name] = {
        {"dtype", type_name}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * elem}}};
    offset += n * elem;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw error(errc::io_error, "llm::write_safetensors", fmt::format("cannot write '{}'", path));
  std::uint64_t len = text.size();
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  out.write(reinterpret_cast<const char*>(len_bytes), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<char> chunk;
  for (const auto& t : tensors) {
    chunk.resize(t.values.size() * elem);
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      if (type == dtype::f32) {
        std::memcpy(chunk.data() + 4 * i, &t.values[i], 4);
      } else {
        const std::uint16_t bits =
            type == dtype::f16 ? float_to_half(t.values[i]) : float_to_bf16(t.values[i]);
        std::memcpy(chunk.data() + 2 * i, &bits, 2);
      }
    }
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  }
  out.close();
  if (!out) throw error(errc::io_error, "llm::write_safetensors", fmt::format("writing '{}' failed", path));
}

}  // namespace prism::llm
