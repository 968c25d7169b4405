// SPDX-License-Identifier: Apache-2.0
// prism-llm's device load of Hugging Face folders (load_device_weights: the mapped file straight
// to device tensors) against the host path (model_weights::load, then upload): bit-identical
// weights and logits, stored as run, converted, sharded out of order, with qkv bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "examples/llm/checkpoint.hpp"
#include "examples/llm/decoder.hpp"
#include "examples/llm/run.hpp"
#include "prism/error.hpp"
#include "prism/io/safetensors.hpp"
#include "prism/runtime.hpp"

namespace prism::llm {
namespace {

namespace fs = std::filesystem;

queue& load_queue() {
  static auto* q = new queue();
  return *q;
}

model_config small_config(bool bias) {
  auto c = preset("tiny");
  c.vocab_size = 320;  // save_hf_checkpoint's byte-level tokenizer needs >= 259 ids
  c.attention_bias = bias;
  c.validate();
  return c;
}

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("prism_test_load_" + name);
  fs::remove_all(dir);
  return dir;
}

// A Hugging Face folder of seeded random weights, model.safetensors stored as `stored`.
fs::path write_folder(const std::string& name, bool bias, dtype stored) {
  const auto dir = fresh_dir(name);
  const auto weights = model_weights::random(small_config(bias), 11);
  save_hf_checkpoint(weights, dir.string());
  if (stored != dtype::f32) weights.save((dir / "model.safetensors").string(), stored);
  return dir;
}

// The host values of a weight in `t`'s storage bits, as the decoder's host upload makes them.
std::vector<std::byte> host_bits(const host_tensor& h, dtype t) {
  std::vector<std::byte> out(h.values.size() * dtype_size(t));
  for (std::size_t i = 0; i < h.values.size(); ++i) {
    if (t == dtype::f32) {
      std::memcpy(out.data() + 4 * i, &h.values[i], 4);
    } else {
      const std::uint16_t b = t == dtype::f16 ? float_to_half(h.values[i]) : float_to_bf16(h.values[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

// Loads `dir` both ways as `run`: every weight and the logits of a prefill and two decode steps
// must be bit-identical.
void expect_same_as_host_path(const fs::path& dir, dtype run,
                              io::cpu_placement place = io::cpu_placement::mapped) {
  queue& q = load_queue();
  const auto host = open_checkpoint(dir.string(), run, 64);
  auto dev = open_checkpoint(dir.string(), run, 64, false, &q, place);
  ASSERT_TRUE(dev.device.has_value());
  EXPECT_FALSE(dev.weights.contains("model.norm.weight"));  // no host copy on the device path
  EXPECT_EQ(dev.config.summary(), host.config.summary());
  std::size_t compared = 0;
  for (const auto& [name, shape] : model_weights::expected(host.config)) {
    if (!host.weights.contains(name)) continue;
    ASSERT_TRUE(dev.device->tensors.count(name)) << name;
    const tensor& t = dev.device->tensors.at(name);
    EXPECT_EQ(t.type(), run) << name;
    EXPECT_EQ(t.to_host(q), host_bits(host.weights.get(name), run)) << name << " as " << dtype_name(run);
    ++compared;
  }
  EXPECT_EQ(compared, dev.device->tensors.size());
  EXPECT_GT(dev.device->file_bytes, 0u);

  decoder a(q, host.weights);
  decoder b(q, *dev.device);
  const std::vector<std::int32_t> prompt = {1, 7, 42, 300, 5};
  auto la = a.forward(prompt).to_floats(q);
  auto lb = b.forward(prompt).to_floats(q);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << "prefill logits differ";
  for (std::int32_t next : {9, 250}) {
    la = a.forward(std::span<const std::int32_t>(&next, 1)).to_floats(q);
    lb = b.forward(std::span<const std::int32_t>(&next, 1)).to_floats(q);
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << "decode logits differ";
  }
}

TEST(DeviceLoad, F32StoredAndRunIsBitIdenticalToHostPath) {
  const auto dir = write_folder("f32", false, dtype::f32);
  expect_same_as_host_path(dir, dtype::f32);
  expect_same_as_host_path(dir, dtype::f32, io::cpu_placement::copied);  // prism-llm --no-mmap
}

TEST(DeviceLoad, ConvertedDtypesAreBitIdenticalToHostPath) {
  const auto f32_dir = write_folder("conv_f32", false, dtype::f32);
  expect_same_as_host_path(f32_dir, dtype::bf16);
  expect_same_as_host_path(f32_dir, dtype::bf16, io::cpu_placement::copied);
  expect_same_as_host_path(f32_dir, dtype::f16);
  const auto bf16_dir = write_folder("conv_bf16", false, dtype::bf16);
  expect_same_as_host_path(bf16_dir, dtype::bf16);  // stored as run: views of the mapping
  expect_same_as_host_path(bf16_dir, dtype::f32);
  expect_same_as_host_path(bf16_dir, dtype::f16);
}

TEST(DeviceLoad, QkvBiasIsBitIdenticalToHostPath) {
  const auto dir = write_folder("bias", true, dtype::f32);
  expect_same_as_host_path(dir, dtype::f32);
  expect_same_as_host_path(dir, dtype::bf16);
}

// Two shards with the tensors in reverse order (q, k, v not back to back: the decoder fuses them
// by a copy), as an index names them.
TEST(DeviceLoad, ShardedOutOfOrderIsBitIdenticalToHostPath) {
  const auto dir = write_folder("sharded", false, dtype::f32);
  const auto weights = model_weights::load(small_config(false), (dir / "model.safetensors").string());
  fs::remove(dir / "model.safetensors");
  auto expected = model_weights::expected(weights.config());
  std::reverse(expected.begin(), expected.end());
  std::vector<io::safetensor_data> shard[2];
  nlohmann::json map = nlohmann::json::object();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, shape] = expected[i];
    const int s = i % 2;
    const auto& t = weights.get(name);
    shard[s].push_back({name, t.shape, t.values});
    map[name] = fmt::format("model-0000{}-of-00002.safetensors", s + 1);
  }
  for (int s = 0; s < 2; ++s)
    io::write_safetensors((dir / fmt::format("model-0000{}-of-00002.safetensors", s + 1)).string(), shard[s],
                          s == 0 ? dtype::f32 : dtype::bf16);
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  expect_same_as_host_path(dir, dtype::f32);
  expect_same_as_host_path(dir, dtype::f16);
}

TEST(DeviceLoad, ProblemsAreNamedBeforeAnythingLoads) {
  const auto dir = write_folder("bad", false, dtype::f32);
  auto c = small_config(false);
  c.hidden_size = 128;  // every projection's shape is now wrong
  try {
    load_device_weights(load_queue(), c, dir.string());
    FAIL() << "no error";
  } catch (const prism::error& e) {
    EXPECT_NE(std::string(e.what()).find("the config needs"), std::string::npos) << e.what();
  }
  io::safetensors_checkpoint file(dir.string());
  try {
    file.load_named(load_queue(), {"model.norm.weight", "no.such.tensor"});
    FAIL() << "no error";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
    EXPECT_NE(std::string(e.what()).find("no.such.tensor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prism::llm
