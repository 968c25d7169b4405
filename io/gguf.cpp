// SPDX-License-Identifier: Apache-2.0
// GGUF parsing (bounded: every count and length is checked against the bytes left before use)
// and dequantization of F32, F16, BF16, Q8_0, Q4_0 and Q4_1 blocks.
// Layout: "GGUF", u32 version, u64 tensor count, u64 key count, keys (string, u32 type, value),
// tensor infos (string name, u32 dims, u64 ne[dims], u32 type, u64 offset), padding to
// general.alignment, then the data section.
#include "prism/io/gguf.hpp"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::io {

namespace {

constexpr const char* supported_types = "F32, F16, BF16, Q8_0, Q4_0, Q4_1";
constexpr std::uint64_t max_string_bytes = 1ull << 30;
constexpr std::uint32_t max_tensor_dims = 4;  // GGML_MAX_DIMS

struct type_row {
  gguf_type type;
  const char* name;
  std::uint32_t elements, bytes;
};

constexpr type_row type_table[] = {
    {gguf_type::f32, "F32", 1, 4},
    {gguf_type::f16, "F16", 1, 2},
    {gguf_type::q4_0, "Q4_0", 32, 18},
    {gguf_type::q4_1, "Q4_1", 32, 20},
    {gguf_type::q5_0, "Q5_0", 32, 22},
    {gguf_type::q5_1, "Q5_1", 32, 24},
    {gguf_type::q8_0, "Q8_0", 32, 34},
    {gguf_type::q8_1, "Q8_1", 32, 36},
    {gguf_type::q2_k, "Q2_K", 256, 84},
    {gguf_type::q3_k, "Q3_K", 256, 110},
    {gguf_type::q4_k, "Q4_K", 256, 144},
    {gguf_type::q5_k, "Q5_K", 256, 176},
    {gguf_type::q6_k, "Q6_K", 256, 210},
    {gguf_type::q8_k, "Q8_K", 256, 292},
    {gguf_type::iq2_xxs, "IQ2_XXS", 256, 66},
    {gguf_type::iq2_xs, "IQ2_XS", 256, 74},
    {gguf_type::iq3_xxs, "IQ3_XXS", 256, 98},
    {gguf_type::iq1_s, "IQ1_S", 256, 50},
    {gguf_type::iq4_nl, "IQ4_NL", 32, 18},
    {gguf_type::iq3_s, "IQ3_S", 256, 110},
    {gguf_type::iq2_s, "IQ2_S", 256, 82},
    {gguf_type::iq4_xs, "IQ4_XS", 256, 136},
    {gguf_type::i8, "I8", 1, 1},
    {gguf_type::i16, "I16", 1, 2},
    {gguf_type::i32, "I32", 1, 4},
    {gguf_type::i64, "I64", 1, 8},
    {gguf_type::f64, "F64", 1, 8},
    {gguf_type::iq1_m, "IQ1_M", 256, 56},
    {gguf_type::bf16, "BF16", 1, 2},
    {gguf_type::tq1_0, "TQ1_0", 256, 54},
    {gguf_type::tq2_0, "TQ2_0", 256, 66},
    {gguf_type::mxfp4, "MXFP4", 32, 17},
};

const type_row* find_type(gguf_type t) {
  for (const auto& row : type_table)
    if (row.type == t) return &row;
  return nullptr;
}

const char* value_type_name(gguf_value_type t) {
  static constexpr const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                          "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

// Reads little-endian values from the mapped bytes; every read is bounds-checked.
class reader {
 public:
  reader(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  std::size_t position() const { return pos_; }
  std::size_t left() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw error(errc::config_error, "io::gguf_file", fmt::format("'{}': {} (at byte {})", path_, what, pos_));
  }
  template <class T>
  T scalar(const char* what) {
    if (left() < sizeof(T)) fail(fmt::format("file ends inside {}", what));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const auto n = scalar<std::uint64_t>(what);
    if (n > left() || n > max_string_bytes)
      fail(fmt::format("{} of {} bytes exceeds the {} bytes left", what, n, left()));
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

std::size_t scalar_size(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::u8:
    case gguf_value_type::i8:
    case gguf_value_type::boolean:
      return 1;
    case gguf_value_type::u16:
    case gguf_value_type::i16:
      return 2;
    case gguf_value_type::u32:
    case gguf_value_type::i32:
    case gguf_value_type::f32:
      return 4;
    case gguf_value_type::u64:
    case gguf_value_type::i64:
    case gguf_value_type::f64:
      return 8;
    default:
      return 0;
  }
}

// A scalar of type t as (integer, number).
void read_scalar(reader& r, gguf_value_type t, std::int64_t& integer, double& number,
                 const std::string& key) {
  switch (t) {
    case gguf_value_type::u8:
      integer = r.scalar<std::uint8_t>(key.c_str());
      break;
    case gguf_value_type::i8:
      integer = r.scalar<std::int8_t>(key.c_str());
      break;
    case gguf_value_type::u16:
      integer = r.scalar<std::uint16_t>(key.c_str());
      break;
    case gguf_value_type::i16:
      integer = r.scalar<std::int16_t>(key.c_str());
      break;
    case gguf_value_type::u32:
      integer = r.scalar<std::uint32_t>(key.c_str());
      break;
    case gguf_value_type::i32:
      integer = r.scalar<std::int32_t>(key.c_str());
      break;
    case gguf_value_type::u64:
      integer = static_cast<std::int64_t>(r.scalar<std::uint64_t>(key.c_str()));
      break;
    case gguf_value_type::i64:
      integer = r.scalar<std::int64_t>(key.c_str());
      break;
    case gguf_value_type::boolean: {
      const auto b = r.scalar<std::uint8_t>(key.c_str());
      if (b > 1) r.fail(fmt::format("key '{}': bool value {} is neither 0 nor 1", key, b));
      integer = b;
      break;
    }
    case gguf_value_type::f32:
      number = r.scalar<float>(key.c_str());
      return;
    case gguf_value_type::f64:
      number = r.scalar<double>(key.c_str());
      return;
    default:
      r.fail(fmt::format("key '{}': value type {} is not a scalar", key, static_cast<std::uint32_t>(t)));
  }
  number = static_cast<double>(integer);
}

gguf_value read_value(reader& r, const std::string& key) {
  gguf_value v;
  const auto raw = r.scalar<std::uint32_t>("a value type");
  if (raw > static_cast<std::uint32_t>(gguf_value_type::f64))
    r.fail(fmt::format("key '{}' has value type {}; valid: 0..12", key, raw));
  v.type = static_cast<gguf_value_type>(raw);
  if (v.type == gguf_value_type::string) {
    v.string = r.string(("the string of key '" + key + "'").c_str());
  } else if (v.type == gguf_value_type::array) {
    const auto elem = r.scalar<std::uint32_t>("an array type");
    if (elem > static_cast<std::uint32_t>(gguf_value_type::f64) ||
        elem == static_cast<std::uint32_t>(gguf_value_type::array))
      r.fail(fmt::format("key '{}': array element type {} is not supported; valid: scalars and strings", key,
                         elem));
    v.element_type = static_cast<gguf_value_type>(elem);
    const auto count = r.scalar<std::uint64_t>("an array length");
    const std::size_t min_size = v.element_type == gguf_value_type::string ? 8 : scalar_size(v.element_type);
    if (count > r.left() / min_size)
      r.fail(fmt::format("key '{}': array of {} {} elements exceeds the {} bytes left", key, count,
                         value_type_name(v.element_type), r.left()));
    if (v.element_type == gguf_value_type::string) {
      v.strings.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i)
        v.strings.push_back(r.string(("a string of key '" + key + "'").c_str()));
    } else {
      v.numbers.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i) {
        std::int64_t integer = 0;
        double number = 0;
        read_scalar(r, v.element_type, integer, number, key);
        v.numbers.push_back(number);
      }
    }
  } else {
    read_scalar(r, v.type, v.integer, v.number, key);
  }
  return v;
}

}  // namespace

std::string gguf_type_name(gguf_type t) {
  if (const auto* row = find_type(t)) return row->name;
  return fmt::format("type {}", static_cast<std::uint32_t>(t));
}

bool gguf_type_dequantizable(gguf_type t) noexcept {
  return t == gguf_type::f32 || t == gguf_type::f16 || t == gguf_type::bf16 || t == gguf_type::q8_0 ||
         t == gguf_type::q4_0 || t == gguf_type::q4_1;
}

gguf_block_layout gguf_block(gguf_type t) {
  const auto* row = find_type(t);
  if (!row)
    throw error(errc::unsupported, "io::gguf_block",
                fmt::format("unknown ggml type id {}", static_cast<std::uint32_t>(t)));
  return {row->elements, row->bytes};
}

std::int64_t gguf_tensor_info::numel() const {
  // An empty extent makes the tensor empty whatever the others are (the parser bounds the
  // product of the non-empty ones, so this cannot overflow).
  for (auto d : shape)
    if (d == 0) return 0;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

gguf_file::gguf_file(const std::string& path) : gguf_file(std::make_shared<const mapped_file>(path)) {}

gguf_file gguf_file::parse(std::span<const std::byte> bytes, const std::string& label) {
  return gguf_file(std::make_shared<const mapped_file>(bytes, label));
}

gguf_file::gguf_file(std::shared_ptr<const mapped_file> file) : file_(std::move(file)) {
  const auto bytes = file_->bytes();
  reader r(bytes, file_->path());
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0)
    r.fail("does not start with the magic \"GGUF\" (not a GGUF file?)");
  r.scalar<std::uint32_t>("the magic");
  version_ = r.scalar<std::uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    r.fail(fmt::format("GGUF version {} is not supported; valid: 2, 3", version_));
  const auto tensor_count = r.scalar<std::uint64_t>("the tensor count");
  const auto key_count = r.scalar<std::uint64_t>("the key count");
  // A key needs at least 13 bytes (length, type, one byte), a tensor info 24.
  if (key_count > r.left() / 13)
    r.fail(fmt::format("key count {} exceeds what the file can hold", key_count));
  if (tensor_count > r.left() / 24)
    r.fail(fmt::format("tensor count {} exceeds what the file can hold", tensor_count));
  for (std::uint64_t k = 0; k < key_count; ++k) {
    std::string key = r.string("a key");
    if (metadata_.count(key)) r.fail(fmt::format("key '{}' appears twice", key));
    auto value = read_value(r, key);
    metadata_.emplace(std::move(key), std::move(value));
  }
  if (auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
    const auto& a = it->second;
    if (a.type != gguf_value_type::u32 || a.integer == 0 ||
        !std::has_single_bit(static_cast<std::uint64_t>(a.integer)))
      r.fail(fmt::format("general.alignment must be a u32 power of two, got {} {}", value_type_name(a.type),
                         a.integer));
    alignment_ = static_cast<std::uint64_t>(a.integer);
  }
  for (std::uint64_t t = 0; t < tensor_count; ++t) {
    gguf_tensor_info info;
    info.name = r.string("a tensor name");
    if (index_.count(info.name)) r.fail(fmt::format("tensor '{}' appears twice", info.name));
    const auto n_dims = r.scalar<std::uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > max_tensor_dims)
      r.fail(fmt::format("tensor '{}' has {} dimensions; valid: 1..{}", info.name, n_dims, max_tensor_dims));
    std::vector<std::uint64_t> ne(n_dims);
    for (auto& d : ne) d = r.scalar<std::uint64_t>("a tensor extent");
    const auto raw_type = r.scalar<std::uint32_t>("a tensor type");
    info.type = static_cast<gguf_type>(raw_type);
    const auto* row = find_type(info.type);
    if (!row)
      r.fail(fmt::format("tensor '{}' has unknown ggml type id {}; prism reads {}", info.name, raw_type,
                         supported_types));
    info.offset = r.scalar<std::uint64_t>("a tensor offset");
    // Element count bounded by the file size (each element takes at least 1/32 byte).
    // The product of the non-empty extents is bounded too: an empty extent must not hide two
    // huge ones (found by fuzz/gguf: their product overflowed in numel()).
    std::uint64_t extent_product = 1;
    const std::uint64_t limit = static_cast<std::uint64_t>(bytes.size()) * 32 + 32;
    for (auto d : ne) {
      if (d == 0) continue;
      if (extent_product > limit / d)
        r.fail(fmt::format("tensor '{}': extents exceed what the file can hold", info.name));
      extent_product *= d;
    }
    if (ne[0] % row->elements != 0)
      r.fail(fmt::format("tensor '{}': row length {} is not a multiple of the {} block of {}", info.name,
                         ne[0], row->name, row->elements));
    for (auto it = ne.rbegin(); it != ne.rend(); ++it) info.shape.push_back(static_cast<std::int64_t>(*it));
    index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }
  // The data section starts at the next multiple of the alignment.
  const std::uint64_t data_start = (r.position() + alignment_ - 1) / alignment_ * alignment_;
  const std::uint64_t data_size = data_start <= bytes.size() ? bytes.size() - data_start : 0;
  for (auto& info : tensors_) {
    const auto* row = find_type(info.type);
    const std::uint64_t nbytes = static_cast<std::uint64_t>(info.numel()) / row->elements * row->bytes;
    if (info.offset % alignment_ != 0)
      r.fail(fmt::format("tensor '{}': offset {} is not a multiple of the alignment {}", info.name,
                         info.offset, alignment_));
    if (info.offset > data_size || nbytes > data_size - info.offset)
      r.fail(fmt::format("tensor '{}': {} bytes at offset {} run past the data section of {} bytes",
                         info.name, nbytes, info.offset, data_size));
    info.data = bytes.subspan(data_start + info.offset, nbytes);
  }
}

const gguf_value& gguf_file::value(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end())
    throw error(errc::not_found, "io::gguf_file", fmt::format("'{}' has no metadata key '{}'", path(), key));
  return it->second;
}

namespace {
[[noreturn]] void wrong_kind(const std::string& path, const std::string& key, const gguf_value& v,
                             const char* expected) {
  throw error(
      errc::config_error, "io::gguf_file",
      fmt::format("'{}': metadata key '{}' is {}{}, expected {}", path, key, value_type_name(v.type),
                  v.type == gguf_value_type::array ? fmt::format(" of {}", value_type_name(v.element_type))
                                                   : std::string(),
                  expected));
}
bool is_integer(gguf_value_type t) {
  return t != gguf_value_type::f32 && t != gguf_value_type::f64 && t != gguf_value_type::string &&
         t != gguf_value_type::array && t != gguf_value_type::boolean;
}
}  // namespace

std::string gguf_file::get_string(const std::string& key) const {
  const auto& v = value(key);
  if (v.type != gguf_value_type::string) wrong_kind(path(), key, v, "a string");
  return v.string;
}

std::int64_t gguf_file::get_int(const std::string& key) const {
  const auto& v = value(key);
  if (!is_integer(v.type)) wrong_kind(path(), key, v, "an integer");
  return v.integer;
}

double gguf_file::get_float(const std::string& key) const {
  const auto& v = value(key);
  if (v.type != gguf_value_type::f32 && v.type != gguf_value_type::f64 && !is_integer(v.type))
    wrong_kind(path(), key, v, "a number");
  return v.number;
}

bool gguf_file::get_bool(const std::string& key) const {
  const auto& v = value(key);
  if (v.type != gguf_value_type::boolean) wrong_kind(path(), key, v, "a bool");
  return v.integer != 0;
}

const std::vector<std::string>& gguf_file::get_strings(const std::string& key) const {
  const auto& v = value(key);
  if (v.type != gguf_value_type::array || v.element_type != gguf_value_type::string)
    wrong_kind(path(), key, v, "an array of strings");
  return v.strings;
}

const std::vector<double>& gguf_file::get_numbers(const std::string& key) const {
  const auto& v = value(key);
  if (v.type != gguf_value_type::array || v.element_type == gguf_value_type::string)
    wrong_kind(path(), key, v, "an array of numbers");
  return v.numbers;
}

const gguf_tensor_info& gguf_file::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    throw error(errc::not_found, "io::gguf_file",
                fmt::format("tensor '{}' is missing from '{}' ({} tensors in the file)", name, path(),
                            tensors_.size()));
  return tensors_[it->second];
}

void gguf_dequantize(gguf_type type, std::span<const std::byte> blocks, std::span<float> out) {
  auto f16 = [&](std::size_t at) {
    std::uint16_t bits;
    std::memcpy(&bits, blocks.data() + at, 2);
    return half_to_float(bits);
  };
  auto u8 = [&](std::size_t at) { return static_cast<std::uint8_t>(blocks[at]); };
  const std::size_t n = out.size();
  const auto layout = gguf_block(type);
  if (n % layout.elements != 0 || blocks.size() < n / layout.elements * layout.bytes)
    throw error(errc::invalid_argument, "io::gguf_dequantize",
                fmt::format("{} elements of {} need {} whole blocks of {} bytes, got {} bytes", n,
                            gguf_type_name(type), (n + layout.elements - 1) / layout.elements, layout.bytes,
                            blocks.size()));
  switch (type) {
    case gguf_type::f32:
      if (n) std::memcpy(out.data(), blocks.data(), 4 * n);
      return;
    case gguf_type::f16:
      prism::convert_floats(prism::dtype::f16, blocks.data(), prism::dtype::f32, out.data(), n);
      return;
    case gguf_type::bf16:
      prism::convert_floats(prism::dtype::bf16, blocks.data(), prism::dtype::f32, out.data(), n);
      return;
    case gguf_type::q8_0:  // {f16 d; i8 q[32]}: x = d * q
      for (std::size_t b = 0; b < n / 32; ++b) {
        const std::size_t at = b * 34;
        const float d = f16(at);
        for (std::size_t j = 0; j < 32; ++j)
          out[b * 32 + j] = d * static_cast<float>(static_cast<std::int8_t>(u8(at + 2 + j)));
      }
      return;
    case gguf_type::q4_0:  // {f16 d; u8 q[16]}: low nibbles are elements 0..15, high 16..31; x = d * (q - 8)
      for (std::size_t b = 0; b < n / 32; ++b) {
        const std::size_t at = b * 18;
        const float d = f16(at);
        for (std::size_t j = 0; j < 16; ++j) {
          const auto q = u8(at + 2 + j);
          out[b * 32 + j] = d * static_cast<float>((q & 0xF) - 8);
          out[b * 32 + j + 16] = d * static_cast<float>((q >> 4) - 8);
        }
      }
      return;
    case gguf_type::q4_1:  // {f16 d; f16 m; u8 q[16]}: x = d * q + m
      for (std::size_t b = 0; b < n / 32; ++b) {
        const std::size_t at = b * 20;
        const float d = f16(at), m = f16(at + 2);
        for (std::size_t j = 0; j < 16; ++j) {
          const auto q = u8(at + 4 + j);
          out[b * 32 + j] = d * static_cast<float>(q & 0xF) + m;
          out[b * 32 + j + 16] = d * static_cast<float>(q >> 4) + m;
        }
      }
      return;
    default:
      throw error(
          errc::unsupported, "io::gguf_dequantize",
          fmt::format("type {} cannot be dequantized; supported: {}", gguf_type_name(type), supported_types));
  }
}

std::vector<float> gguf_file::dequantize(const std::string& name) const {
  const auto& info = get(name);
  if (!gguf_type_dequantizable(info.type))
    throw error(errc::unsupported, "io::gguf_file",
                fmt::format("'{}': tensor '{}' is {}, which prism does not dequantize; supported: {}", path(),
                            name, gguf_type_name(info.type), supported_types));
  std::vector<float> out(static_cast<std::size_t>(info.numel()));
  gguf_dequantize(info.type, info.data, out);
  return out;
}

std::optional<prism::dtype> gguf_prism_dtype(gguf_type t) noexcept {
  switch (t) {
    case gguf_type::f32:
      return prism::dtype::f32;
    case gguf_type::f16:
      return prism::dtype::f16;
    case gguf_type::bf16:
      return prism::dtype::bf16;
    case gguf_type::q8_0:
      return prism::dtype::q8_0;
    case gguf_type::q4_0:
      return prism::dtype::q4_0;
    case gguf_type::q4_1:
      return prism::dtype::q4_1;
    default:
      return std::nullopt;
  }
}

tensor gguf_file::load(const queue& q, const std::string& name, prism::dtype as) const {
  const auto& info = get(name);
  if (!is_floating(as) && !is_quantized(as))
    throw error(
        errc::invalid_argument, "io::gguf_file::load",
        fmt::format("tensor '{}': target dtype {} is not a float or block-quantized type; valid: f32, "
                    "f16, bf16, q8_0, q4_0, q4_1",
                    name, dtype_name(as)));
  const dims shape(std::span<const std::int64_t>(info.shape));
  if (is_quantized(as) && (info.shape.empty() || info.shape.back() % 32 != 0))
    throw error(
        errc::invalid_argument, "io::gguf_file::load",
        fmt::format("'{}': tensor '{}' of shape {} cannot be stored as {}: its last dim is not a multiple "
                    "of the 32-element block",
                    path(), name, shape.str(), dtype_name(as)));
  // The file's own encoding: the bytes go to the device as they are (blocks stay quantized).
  if (gguf_prism_dtype(info.type) == as) {
    if (info.data.size() < dtype_storage_bytes(as, info.numel()))
      throw error(errc::config_error, "io::gguf_file::load",
                  fmt::format("'{}': tensor '{}' ({} {}) has {} bytes; its blocks need {}", path(), name,
                              gguf_type_name(info.type), shape.str(), info.data.size(),
                              dtype_storage_bytes(as, info.numel())));
    return tensor::from_host(q, info.data.data(), shape, as);
  }
  const auto values = dequantize(name);
  return tensor::from_floats(q, values, shape, as);
}

}  // namespace prism::io
