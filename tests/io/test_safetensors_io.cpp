// SPDX-License-Identifier: Apache-2.0
// safetensors through the public API: parsing borrowed bytes, loading into prism tensors (same
// type: no conversion; f32 -> bf16), and sharded checkpoints with their index.
#include <gtest/gtest.h>

#include <unistd.h>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "prism/error.hpp"
#include "prism/io/safetensors.hpp"
#include "prism/ops.hpp"
#include "prism/runtime.hpp"

namespace prism::io {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("prism_io_test_" + std::to_string(::getpid())) / name;
  std::filesystem::create_directories(dir);
  return dir;
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

queue& test_queue() {
  static auto* q = new queue();
  return *q;
}

TEST(SafetensorsIo, ParsesBorrowedBytesAndLoadsTensors) {
  const auto path = (temp_dir("bytes") / "a.safetensors").string();
  const std::vector<float> w = {1.0f, -2.0f, 3.5f, 0.25f, 5.0f, -6.0f};
  write_safetensors(path, {{"w", {2, 3}, w}}, dtype::f32);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto file = safetensors_file::parse(std::as_bytes(std::span(raw)), "in-memory");
  EXPECT_EQ(file.get("w").shape, (std::vector<std::int64_t>{2, 3}));
  const tensor t = file.load(test_queue(), "w");
  EXPECT_EQ(t.type(), dtype::f32);
  EXPECT_EQ(t.shape(), (dims{2, 3}));
  EXPECT_EQ(t.to_floats(test_queue()), w);
  const tensor b = file.load(test_queue(), "w", dtype::bf16);
  EXPECT_EQ(b.type(), dtype::bf16);
  EXPECT_EQ(b.to_floats(test_queue()), w);  // all exact in bf16
  // Truncated bytes: the error names the label.
  const auto text =
      error_text([&] { safetensors_file::parse(std::as_bytes(std::span(raw)).first(20), "cut"); });
  EXPECT_NE(text.find("'cut'"), std::string::npos) << text;
}

TEST(SafetensorsIo, ShardedCheckpointFindsEachTensorInItsShard) {
  const auto dir = temp_dir("sharded");
  const std::vector<float> a = {1, 2}, b = {3, 4, 5};
  write_safetensors((dir / "model-00001-of-00002.safetensors").string(), {{"a", {2}, a}}, dtype::f32);
  write_safetensors((dir / "model-00002-of-00002.safetensors").string(), {{"b", {3}, b}}, dtype::f16);
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
             "b": "model-00002-of-00002.safetensors"}})";
  const safetensors_checkpoint ck(dir.string());
  EXPECT_EQ(ck.shards().size(), 2u);
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ck.get("a").to_floats(), a);
  EXPECT_EQ(ck.get("b").dtype, "F16");
  EXPECT_EQ(ck.load(test_queue(), "b", dtype::f32).to_floats(test_queue()), b);
  const auto all = ck.load_all(test_queue(), dtype::f32);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at("a").to_floats(test_queue()), a);
  EXPECT_EQ(all.at("b").to_floats(test_queue()), b);
  EXPECT_NE(error_text([&] { ck.get("c"); }).find("tensor 'c' is missing"), std::string::npos);

  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})";
  const auto text = error_text([&] { safetensors_checkpoint bad(dir.string()); });
  EXPECT_NE(text.find("puts tensor 'a' in 'model-00002-of-00002.safetensors', which does not hold it"),
            std::string::npos)
      << text;
  const auto empty = temp_dir("empty");
  EXPECT_NE(error_text([&] { safetensors_checkpoint none(empty.string()); }).find("holds neither"),
            std::string::npos);
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// load_all: one storage for the tensors that load as stored (on CPU devices the file's private
// mapping itself), each equal to load(); conversions load apart; the tensors outlive the file
// object, and a kernel writing into one changes neither the file nor the other tensors.
TEST(SafetensorsIo, LoadAllSharesOneStorageAndLeavesTheFileAlone) {
  queue& q = test_queue();
  const auto path = (temp_dir("load_all") / "m.safetensors").string();
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9}, c = {10};
  write_safetensors(path, {{"a", {2, 3}, a}, {"b", {3}, b}, {"c", {1}, c}}, dtype::f32);
  const std::vector<char> before = file_bytes(path);
  std::map<std::string, tensor> all;
  {
    const safetensors_file file(path);
    all = file.load_all(q);
    ASSERT_EQ(all.size(), 3u);
    for (const auto& name : file.names()) {
      const tensor one = file.load(q, name);
      EXPECT_EQ(all.at(name).shape(), one.shape()) << name;
      EXPECT_EQ(all.at(name).type(), dtype::f32) << name;
      EXPECT_EQ(all.at(name).to_floats(q), one.to_floats(q)) << name;
    }
    EXPECT_TRUE(all.at("a").same_storage(all.at("b")));
    EXPECT_TRUE(all.at("a").same_storage(all.at("c")));
    const auto halves = file.load_all(q, dtype::f16);
    EXPECT_EQ(halves.at("a").type(), dtype::f16);
    EXPECT_EQ(halves.at("a").to_floats(q), a);
  }
  tensor target = all.at("b");
  ops::fill(q, target, 0.5);
  EXPECT_EQ(all.at("b").to_floats(q), std::vector<float>(3, 0.5f));
  EXPECT_EQ(all.at("a").to_floats(q), a);
  EXPECT_EQ(all.at("c").to_floats(q), c);
  EXPECT_EQ(ops::sum(q, all.at("a")).to_floats(q), std::vector<float>{21});
  q.wait();
  EXPECT_EQ(file_bytes(path), before) << "a kernel's write reached the file";
  EXPECT_EQ(safetensors_file(path).load_all(q).at("b").to_floats(q), b);
}

// cpu_placement: mapped tensors on a CPU device are the file's mapping (foreign memory of the
// buffer); copied ones are one copy in prism's own memory, with the same values either way.
TEST(SafetensorsIo, CopiedPlacementLoadsIntoPrismsOwnMemory) {
  queue& q = test_queue();
  const auto path = (temp_dir("placement") / "m.safetensors").string();
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9};
  write_safetensors(path, {{"a", {2, 3}, a}, {"b", {3}, b}}, dtype::f32);
  const safetensors_file file(path);
  const auto mapped = file.load_all(q);
  const auto copied = file.load_all(q, {}, cpu_placement::copied);
  EXPECT_EQ(copied.at("a").to_floats(q), a);
  EXPECT_EQ(copied.at("b").to_floats(q), b);
  EXPECT_TRUE(copied.at("a").same_storage(copied.at("b")));
  EXPECT_FALSE(copied.at("a").same_storage(mapped.at("a")));
  EXPECT_EQ(copied.at("a").storage().host_memory(), nullptr);
  if (q.get_device().type() == device_type::cpu) {
    EXPECT_NE(mapped.at("a").storage().host_memory(), nullptr);  // the mapping itself
  }
  tensor target = copied.at("a");
  ops::fill(q, target, 2.0);
  EXPECT_EQ(mapped.at("a").to_floats(q), a);
  EXPECT_EQ(safetensors_checkpoint(path).load_all(q, {}, cpu_placement::copied).at("a").to_floats(q), a);
  // Converted tensors are converted into prism's own buffer too.
  const auto halves = file.load_all(q, dtype::bf16, cpu_placement::copied);
  EXPECT_EQ(halves.at("a").type(), dtype::bf16);
  EXPECT_EQ(halves.at("a").to_floats(q), a);
  EXPECT_EQ(halves.at("b").to_floats(q), b);
  EXPECT_EQ(halves.at("a").storage().host_memory(), nullptr);
}

// load_named converting: each tensor has the bits of tensor::from_floats (RNE), as load(), the converted
// tensors share one storage, a subset loads only its names, and a missing name is refused before any load.
TEST(SafetensorsIo, LoadNamedConvertsFromTheMappingIntoOneStorage) {
  queue& q = test_queue();
  const auto path = (temp_dir("load_named") / "m.safetensors").string();
  std::vector<float> a(3000), b(77), c = {1.0f / 3.0f};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 1.0f + static_cast<float>(i) * 1.0e-3f / 7.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i) / 13.0f;
  write_safetensors(path, {{"a", {30, 100}, a}, {"b", {77}, b}, {"c", {1}, c}}, dtype::f32);
  const safetensors_file file(path);
  for (dtype t : {dtype::bf16, dtype::f16}) {
    const auto some = file.load_named(q, {"a", "c"}, t);
    ASSERT_EQ(some.size(), 2u);
    EXPECT_FALSE(some.count("b"));
    EXPECT_TRUE(some.at("a").same_storage(some.at("c")));
    EXPECT_EQ(some.at("a").to_host(q), tensor::from_floats(q, a, {30, 100}, t).to_host(q)) << dtype_name(t);
    EXPECT_EQ(some.at("c").to_host(q), tensor::from_floats(q, c, {1}, t).to_host(q)) << dtype_name(t);
    EXPECT_EQ(file.load(q, "b", t).to_host(q), tensor::from_floats(q, b, {77}, t).to_host(q))
        << dtype_name(t);
  }
  EXPECT_NE(error_text([&] {
              file.load_named(q, {"a", "zzz"}, dtype::bf16);
            }).find("'zzz' is missing"),
            std::string::npos);
  const auto back = safetensors_file(path).load_named(q, {"b"}, dtype::f32);
  EXPECT_EQ(back.at("b").to_floats(q), b);
}

// Tensors large enough that load_named splits the conversion between threads (2 MiB ranges of
// the output, boundaries inside a tensor), odd lengths, NaNs, infs and subnormals: every element
// as the scalar functions give it, both narrowing and widening.
TEST(SafetensorsIo, LoadNamedConvertsLargeTensorsAcrossThreadsBitForBit) {
  queue& q = test_queue();
  std::mt19937 rng(7);
  std::vector<float> x(1'500'001), y(1'000'003), z(5);
  for (auto* v : {&x, &y, &z})
    for (auto& f : *v) f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));  // every class
  z = {std::numeric_limits<float>::infinity(), -0.0f, 65520.0f, 1.0e-45f, std::bit_cast<float>(0x7fa00001u)};
  const std::vector<safetensor_data> data = {{"x", {1'500'001}, x}, {"y", {1'000'003}, y}, {"z", {5}, z}};
  const auto dir = temp_dir("load_large");
  write_safetensors((dir / "f32.safetensors").string(), data, dtype::f32);
  write_safetensors((dir / "bf16.safetensors").string(), data, dtype::bf16);
  for (dtype t : {dtype::bf16, dtype::f16}) {  // f32 file, narrowed
    const auto loaded =
        safetensors_file((dir / "f32.safetensors").string()).load_named(q, {"x", "y", "z"}, t);
    for (const auto& d : data) {
      std::vector<std::byte> want(d.values.size() * 2);
      for (std::size_t i = 0; i < d.values.size(); ++i) {
        const std::uint16_t h = t == dtype::f16 ? float_to_half(d.values[i]) : float_to_bf16(d.values[i]);
        std::memcpy(want.data() + 2 * i, &h, 2);
      }
      EXPECT_TRUE(loaded.at(d.name).to_host(q) == want) << d.name << " as " << dtype_name(t);
    }
  }
  const safetensors_file bf16_file((dir / "bf16.safetensors").string());  // widened
  const auto loaded = bf16_file.load_named(q, {"x", "y", "z"}, dtype::f32);
  for (const auto& d : data) {
    const auto stored = bf16_file.get(d.name).data;
    std::vector<std::byte> want(d.values.size() * 4);
    for (std::size_t i = 0; i < d.values.size(); ++i) {
      std::uint16_t b;
      std::memcpy(&b, stored.data() + 2 * i, 2);
      const float f = bf16_to_float(b);
      std::memcpy(want.data() + 4 * i, &f, 4);
    }
    EXPECT_TRUE(loaded.at(d.name).to_host(q) == want) << d.name << " bf16 -> f32";
  }
}

}  // namespace
}  // namespace prism::io
