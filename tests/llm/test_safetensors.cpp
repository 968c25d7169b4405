// SPDX-License-Identifier: Apache-2.0
// The safetensors reader/writer and model_weights loading: round trips in every float type,
// and the errors a user with a wrong or broken checkpoint must see.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "examples/llm/weights.hpp"
#include "prism/error.hpp"
#include "prism/io/safetensors.hpp"

namespace prism::llm {
namespace {

using io::safetensor_data;
using io::safetensors_dtype_name;
using io::safetensors_file;
using io::write_safetensors;

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("prism_llm_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
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

TEST(Safetensors, RoundTripsEveryFloatType) {
  const std::vector<float> a = {1.0f, -2.5f, 3.14159f, 1e-3f, 65504.0f, -0.0f};
  const std::vector<float> b = {0.1f, 0.2f};
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
    const auto path = temp_path(std::string("rt_") + dtype_name(t) + ".safetensors");
    write_safetensors(path, {{"a", {2, 3}, a}, {"b.weight", {2}, b}}, t, {{"k", "v"}});
    safetensors_file f(path);
    EXPECT_EQ(f.names().size(), 2u);
    EXPECT_EQ(f.metadata().at("k"), "v");
    const auto& va = f.get("a");
    EXPECT_EQ(va.dtype, safetensors_dtype_name(t));
    EXPECT_EQ(va.shape, (std::vector<std::int64_t>{2, 3}));
    const auto got = va.to_floats();
    ASSERT_EQ(got.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float want = t == dtype::f16    ? half_to_float(float_to_half(a[i]))
                         : t == dtype::bf16 ? bf16_to_float(float_to_bf16(a[i]))
                                            : a[i];
      EXPECT_EQ(got[i], want) << dtype_name(t) << " element " << i;
    }
    // The data section starts 8-byte aligned (header padded), as the format recommends.
    std::ifstream in(path, std::ios::binary);
    unsigned char len[8];
    in.read(reinterpret_cast<char*>(len), 8);
    EXPECT_EQ(len[0] % 8, 0);
  }
}

TEST(Safetensors, RejectsBrokenFilesWithReasons) {
  const auto missing = temp_path("does_not_exist.safetensors");
  EXPECT_NE(error_text([&] { safetensors_file f(missing); }).find("cannot open"), std::string::npos);

  const auto tiny = temp_path("tiny.safetensors");
  std::ofstream(tiny, std::ios::binary) << "abc";
  EXPECT_NE(error_text([&] { safetensors_file f(tiny); }).find("8-byte header length"), std::string::npos);

  const auto huge_header = temp_path("huge_header.safetensors");
  {
    std::ofstream o(huge_header, std::ios::binary);
    const unsigned char len[8] = {0xff, 0xff, 0xff, 0, 0, 0, 0, 0};
    o.write(reinterpret_cast<const char*>(len), 8);
    o << "{}";
  }
  EXPECT_NE(error_text([&] { safetensors_file f(huge_header); }).find("exceeds the file size"),
            std::string::npos);

  auto write_raw = [&](const std::string& name, const std::string& header, std::size_t data_bytes) {
    const auto path = temp_path(name);
    std::ofstream o(path, std::ios::binary);
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) o.put(static_cast<char>(n >> (8 * i)));
    o << header << std::string(data_bytes, '\0');
    return path;
  };
  const auto bad_json = write_raw("bad_json.safetensors", "{not json", 0);
  EXPECT_NE(error_text([&] { safetensors_file f(bad_json); }).find("not valid JSON"), std::string::npos);
  const auto bad_size =
      write_raw("bad_size.safetensors", R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 12);
  const auto text = error_text([&] { safetensors_file f(bad_size); });
  EXPECT_NE(text.find("'w'"), std::string::npos) << text;
  EXPECT_NE(text.find("needs 16 bytes"), std::string::npos) << text;
  const auto out_of_file =
      write_raw("oob.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_NE(error_text([&] { safetensors_file f(out_of_file); }).find("outside the data section"),
            std::string::npos);
  const auto bad_dtype =
      write_raw("dtype.safetensors", R"({"w":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}})", 4);
  EXPECT_NE(error_text([&] { safetensors_file f(bad_dtype); }).find("unknown dtype 'Q4'"), std::string::npos);
  const auto ints =
      write_raw("ints.safetensors", R"({"w":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", 4);
  safetensors_file ints_file(ints);
  EXPECT_NE(error_text([&] { ints_file.get("w").to_floats(); }).find("supported as floats: F32, F16, BF16"),
            std::string::npos);
  EXPECT_NE(error_text([&] { ints_file.get("nope"); }).find("'nope' is missing"), std::string::npos);
}

TEST(Weights, RandomIsDeterministicPerSeedAndRoundedToDtype) {
  const auto c = preset("tiny");
  const auto a = model_weights::random(c, 7), b = model_weights::random(c, 7),
             other = model_weights::random(c, 8);
  const auto* name = "model.layers.1.self_attn.k_proj.weight";
  EXPECT_EQ(a.get(name).values, b.get(name).values);
  EXPECT_NE(a.get(name).values, other.get(name).values);
  auto cb = c;
  cb.weight_dtype = dtype::bf16;
  const auto rounded = model_weights::random(cb, 7);
  for (float v : rounded.get(name).values) EXPECT_EQ(v, bf16_to_float(float_to_bf16(v)));
}

TEST(Weights, LoadsWhatSaveWroteInEachFloatType) {
  const auto c = preset("tiny");
  const auto w = model_weights::random(c, 3);
  for (dtype t : {dtype::f32, dtype::bf16}) {
    const auto path = temp_path(std::string("weights_") + dtype_name(t) + ".safetensors");
    w.save(path, t);
    auto cl = c;
    cl.weight_dtype = t;
    const auto loaded = model_weights::load(cl, path);
    for (const auto& [name, shape] : model_weights::expected(c)) {
      const auto& want = w.get(name).values;
      const auto& got = loaded.get(name).values;
      ASSERT_EQ(got.size(), want.size()) << name;
      for (std::size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], t == dtype::bf16 ? bf16_to_float(float_to_bf16(want[i])) : want[i])
            << name << " " << i;
    }
    EXPECT_EQ(safetensors_file(path).metadata().at("num_hidden_layers"), "2");
  }
}

TEST(Weights, LoadNamesEveryMissingTensorAndShapeMismatch) {
  const auto c = preset("tiny");
  const auto path = temp_path("partial.safetensors");
  const auto w = model_weights::random(c, 1);
  const auto& embed = w.get("model.embed_tokens.weight").values;
  const std::vector<float> wrong(10, 0.0f);
  // Embedding present; a q_proj of the wrong shape; everything else missing.
  write_safetensors(path,
                    {{"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, embed},
                     {"model.layers.0.self_attn.q_proj.weight", {2, 5}, wrong}},
                    dtype::f32);
  const auto text = error_text([&] { model_weights::load(c, path); });
  EXPECT_NE(text.find("'model.layers.0.self_attn.q_proj.weight' has shape 2x5, the config needs 64x64"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("missing 'model.layers.0.input_layernorm.weight'"), std::string::npos) << text;
  EXPECT_NE(text.find("problem(s)"), std::string::npos) << text;
  EXPECT_EQ(text.find("lm_head"), std::string::npos) << "a missing lm_head means tied embeddings: " << text;
}

TEST(Weights, MissingLmHeadMeansTiedEmbeddings) {
  auto c = preset("tiny");
  const auto w = model_weights::random(c, 1);
  std::vector<safetensor_data> list;
  for (const auto& [name, shape] : model_weights::expected(c))
    if (name != "lm_head.weight") list.push_back({name, shape, w.get(name).values});
  const auto path = temp_path("tied.safetensors");
  write_safetensors(path, list, dtype::f32);
  const auto loaded = model_weights::load(c, path);
  EXPECT_TRUE(loaded.config().tie_embeddings);
  EXPECT_EQ(loaded.lm_head_name(), "model.embed_tokens.weight");
}

TEST(Config, PresetsValidateAndUnknownNamesListTheValidOnes) {
  for (const auto& p : presets()) EXPECT_NO_THROW(preset(p.name).validate()) << p.name;
  const auto text = error_text([] { preset("llama-70b"); });
  EXPECT_NE(text.find("unknown preset 'llama-70b'"), std::string::npos);
  EXPECT_NE(text.find("tiny"), std::string::npos);
  auto c = preset("tiny");
  c.num_kv_heads = 3;
  EXPECT_NE(error_text([&] { c.validate(); }).find("multiple of num_kv_heads"), std::string::npos);
}

}  // namespace
}  // namespace prism::llm
