// SPDX-License-Identifier: Apache-2.0
// GGUF: a file built byte by byte here, read back (metadata, shapes, dequantized values of every
// supported type), and the errors of broken or unsupported files.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "prism/error.hpp"
#include "prism/io/gguf.hpp"
#include "prism/runtime.hpp"

namespace prism::io {
namespace {

// Builds GGUF v3 bytes.
struct gguf_builder {
  std::vector<std::byte> header, data;
  std::uint64_t keys = 0, tensors = 0;
  std::vector<std::byte> infos;

  template <class T>
  static void put(std::vector<std::byte>& out, T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
  static void put_string(std::vector<std::byte>& out, const std::string& s) {
    put<std::uint64_t>(out, s.size());
    for (char c : s) out.push_back(static_cast<std::byte>(c));
  }
  void key_u32(const std::string& k, std::uint32_t v) {
    put_string(header, k);
    put<std::uint32_t>(header, 4);
    put(header, v);
    ++keys;
  }
  void key_f32(const std::string& k, float v) {
    put_string(header, k);
    put<std::uint32_t>(header, 6);
    put(header, v);
    ++keys;
  }
  void key_string(const std::string& k, const std::string& v) {
    put_string(header, k);
    put<std::uint32_t>(header, 8);
    put_string(header, v);
    ++keys;
  }
  void key_strings(const std::string& k, const std::vector<std::string>& v) {
    put_string(header, k);
    put<std::uint32_t>(header, 9);
    put<std::uint32_t>(header, 8);
    put<std::uint64_t>(header, v.size());
    for (const auto& s : v) put_string(header, s);
    ++keys;
  }
  void tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type,
              const std::vector<std::byte>& bytes) {
    while (data.size() % 32) data.push_back(std::byte{0});
    put_string(infos, name);
    put<std::uint32_t>(infos, static_cast<std::uint32_t>(ne.size()));
    for (auto d : ne) put<std::uint64_t>(infos, d);
    put<std::uint32_t>(infos, type);
    put<std::uint64_t>(infos, data.size());
    data.insert(data.end(), bytes.begin(), bytes.end());
    ++tensors;
  }
  std::vector<std::byte> build() const {
    std::vector<std::byte> out;
    for (char c : std::string("GGUF")) out.push_back(static_cast<std::byte>(c));
    put<std::uint32_t>(out, 3);
    put<std::uint64_t>(out, tensors);
    put<std::uint64_t>(out, keys);
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), infos.begin(), infos.end());
    while (out.size() % 32) out.push_back(std::byte{0});
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
};

template <class T>
void append(std::vector<std::byte>& out, T v) {
  gguf_builder::put(out, v);
}

template <class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const prism::error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Gguf, ReadsMetadataShapesAndEveryDequantizedType) {
  gguf_builder b;
  b.key_string("general.architecture", "llama");
  b.key_u32("llama.block_count", 2);
  b.key_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  b.key_strings("tokenizer.ggml.tokens", {"a", "b", "<s>"});
  // F32 [2, 3] (ne = {3, 2}).
  std::vector<std::byte> f32;
  for (int i = 0; i < 6; ++i) append(f32, static_cast<float>(i) - 2.5f);
  b.tensor("f32", {3, 2}, 0, f32);
  // F16 and BF16 [4].
  std::vector<std::byte> f16, bf16;
  const float halves[] = {1.0f, -2.0f, 0.5f, 1024.0f};
  for (float v : halves) append(f16, float_to_half(v)), append(bf16, float_to_bf16(v));
  b.tensor("f16", {4}, 1, f16);
  b.tensor("bf16", {4}, 30, bf16);
  // Q8_0, one block: d = 0.5, q = -16 .. 15.
  std::vector<std::byte> q8;
  append(q8, float_to_half(0.5f));
  for (int j = 0; j < 32; ++j) append(q8, static_cast<std::int8_t>(j - 16));
  b.tensor("q8_0", {32}, 8, q8);
  // Q4_0: d = 2; byte j holds element j (low nibble) and j + 16 (high nibble).
  std::vector<std::byte> q40;
  append(q40, float_to_half(2.0f));
  for (int j = 0; j < 16; ++j) append(q40, static_cast<std::uint8_t>((j & 0xF) | ((15 - j) << 4)));
  b.tensor("q4_0", {32}, 2, q40);
  // Q4_1: d = 0.25, m = -1.
  std::vector<std::byte> q41;
  append(q41, float_to_half(0.25f));
  append(q41, float_to_half(-1.0f));
  for (int j = 0; j < 16; ++j) append(q41, static_cast<std::uint8_t>(j | (j << 4)));
  b.tensor("q4_1", {32}, 3, q41);
  // A K-quant: parsed, its raw blocks reachable, but not dequantized.
  b.tensor("q4_k", {256}, 12, std::vector<std::byte>(144));
  const auto bytes = b.build();

  const auto f = gguf_file::parse(bytes, "test.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "<s>"}));
  EXPECT_EQ(f.get("f32").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(f.dequantize("f32"), (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(f.dequantize("f16"), (std::vector<float>{1.0f, -2.0f, 0.5f, 1024.0f}));
  EXPECT_EQ(f.dequantize("bf16"), (std::vector<float>{1.0f, -2.0f, 0.5f, 1024.0f}));
  const auto q8v = f.dequantize("q8_0");
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q8v[j], 0.5f * static_cast<float>(j - 16)) << j;
  const auto q40v = f.dequantize("q4_0");
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(q40v[j], 2.0f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(q40v[j + 16], 2.0f * static_cast<float>(15 - j - 8)) << j;
  }
  const auto q41v = f.dequantize("q4_1");
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(q41v[j], 0.25f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(q41v[j + 16], 0.25f * static_cast<float>(j) - 1.0f) << j;
  }
  EXPECT_EQ(f.get("q4_k").type, gguf_type::q4_k);
  EXPECT_EQ(f.get("q4_k").data.size(), 144u);
  const auto text = error_text([&] { f.dequantize("q4_k"); });
  EXPECT_NE(text.find("tensor 'q4_k' is Q4_K"), std::string::npos) << text;
  EXPECT_NE(text.find("supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1"), std::string::npos) << text;
  EXPECT_NE(error_text([&] { f.get_int("general.architecture"); }).find("is string, expected an integer"),
            std::string::npos);
  EXPECT_NE(error_text([&] { f.get_string("nope"); }).find("no metadata key 'nope'"), std::string::npos);
  EXPECT_NE(error_text([&] { f.get("missing"); }).find("'missing' is missing"), std::string::npos);
}

// Q8_0/Q4_0/Q4_1 tensors load as prism's own block dtypes byte for byte; other float targets
// dequantize, other quantized targets requantize; rows that are not whole blocks are refused.
TEST(Gguf, LoadsQuantizedTensorsKeepingTheirBlocks) {
  gguf_builder b;
  b.key_string("general.architecture", "llama");
  std::vector<std::byte> q40;
  for (int row = 0; row < 2; ++row) {
    append(q40, float_to_half(row ? 0.5f : 2.0f));
    for (int j = 0; j < 16; ++j) append(q40, static_cast<std::uint8_t>((j & 0xF) | ((15 - j) << 4)));
  }
  b.tensor("w", {32, 2}, 2, q40);
  std::vector<std::byte> f32;
  for (int i = 0; i < 6; ++i) append(f32, static_cast<float>(i));
  b.tensor("f32", {3, 2}, 0, f32);
  const auto bytes = b.build();
  const auto f = gguf_file::parse(bytes, "test.gguf");
  EXPECT_EQ(gguf_prism_dtype(gguf_type::q4_1), dtype::q4_1);
  EXPECT_FALSE(gguf_prism_dtype(gguf_type::q4_k).has_value());
  static auto* q = new queue();
  const tensor kept = f.load(*q, "w", dtype::q4_0);
  EXPECT_EQ(kept.type(), dtype::q4_0);
  EXPECT_EQ(kept.shape(), (dims{2, 32}));
  EXPECT_EQ(kept.nbytes(), 36u);
  EXPECT_TRUE(kept.to_host(*q) == q40);
  const auto floats = f.load(*q, "w", dtype::f32).to_floats(*q);
  EXPECT_EQ(kept.to_floats(*q), floats);
  EXPECT_EQ(floats[32 + 16], 0.5f * 7.0f);  // row 1, element 16: high nibble 15 - 0
  // Requantized to q8_0: within half its step (max |x| / 127 / 2).
  const auto q8 = f.load(*q, "w", dtype::q8_0).to_floats(*q);
  for (std::size_t i = 0; i < q8.size(); ++i) EXPECT_NEAR(q8[i], floats[i], 16.0f / 254 + 1e-3f) << i;
  const auto text = error_text([&] { f.load(*q, "f32", dtype::q4_0); });
  EXPECT_NE(text.find("tensor 'f32'"), std::string::npos) << text;
  EXPECT_NE(text.find("multiple of the 32-element block"), std::string::npos) << text;
}

// Found by fuzz/gguf: an empty extent beside two huge ones passed the size check, then their
// product overflowed in numel(). Huge extents are refused whatever else the shape holds.
TEST(Gguf, AnEmptyExtentDoesNotHideHugeOnes) {
  gguf_builder b;
  b.tensor("w", {0, std::uint64_t{1} << 55, std::uint64_t{1} << 60}, 0, {});
  const auto text = error_text([&] { gguf_file::parse(b.build(), "huge.gguf"); });
  EXPECT_NE(text.find("tensor 'w': extents exceed what the file can hold"), std::string::npos) << text;
  gguf_builder empty;
  empty.tensor("e", {0, 4}, 0, {});
  const auto f = gguf_file::parse(empty.build(), "empty.gguf");
  EXPECT_EQ(f.get("e").numel(), 0);
}

TEST(Gguf, RejectsBrokenFilesNamingWhatIsWrong) {
  auto parse_error = [](const std::vector<std::byte>& bytes) {
    return error_text([&] { gguf_file::parse(bytes, "broken.gguf"); });
  };
  EXPECT_NE(parse_error({}).find("magic"), std::string::npos);
  {
    gguf_builder b;
    b.tensor("w", {32}, 99, std::vector<std::byte>(64));
    const auto text = parse_error(b.build());
    EXPECT_NE(text.find("tensor 'w' has unknown ggml type id 99"), std::string::npos) << text;
    EXPECT_NE(text.find("F32, F16, BF16, Q8_0, Q4_0, Q4_1"), std::string::npos) << text;
  }
  {
    gguf_builder b;
    b.tensor("w", {30}, 8, std::vector<std::byte>(34));
    EXPECT_NE(parse_error(b.build()).find("not a multiple of the Q8_0 block of 32"), std::string::npos);
  }
  {
    gguf_builder b;
    b.tensor("w", {64}, 0, std::vector<std::byte>(16));  // needs 256 bytes
    EXPECT_NE(parse_error(b.build()).find("tensor 'w': 256 bytes at offset 0 run past"), std::string::npos);
  }
  {
    gguf_builder b;
    b.key_string("a_rather_long_key", "v");
    auto bytes = b.build();
    bytes.resize(24 + 8 + 5);  // inside the key's name
    EXPECT_NE(parse_error(bytes).find("a key of 17 bytes exceeds the 5 bytes left"), std::string::npos)
        << parse_error(bytes);
  }
  {
    gguf_builder b;
    auto bytes = b.build();
    bytes[4] = std::byte{1};  // version 1
    EXPECT_NE(parse_error(bytes).find("version 1 is not supported; valid: 2, 3"), std::string::npos);
  }
  {
    // A huge count must be refused before anything is allocated.
    gguf_builder b;
    auto bytes = b.build();
    const std::uint64_t huge = 1ull << 60;
    std::memcpy(bytes.data() + 16, &huge, 8);
    EXPECT_NE(parse_error(bytes).find("key count"), std::string::npos);
  }
}

}  // namespace
}  // namespace prism::io
