// SPDX-License-Identifier: Apache-2.0
// Shape sets: the YAML format ($vars, list expansion, errors), the shipped model sets, and the
// PRISM_RECORD_UNTUNED recorder producing a file pretune accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "prism/error.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;

TEST(ShapeSet, ExpandsListsAndVariables) {
  auto set = parse_shape_set(R"(
model: toy
source: made up
vars:
  tokens: [1, 16]
  hidden: 64
dtypes: [f32, f16]
shapes:
  - {op: matmul, m: $tokens, n: [$hidden, 128], k: $hidden, note: proj}
  - {op: rms_norm, dtype: f32, rows: $tokens, cols: $hidden}
  - {op: matmul, dtype: f32, m: 1, n: 64, k: 64}   # duplicate of an expanded entry
)");
  EXPECT_EQ(set.name, "toy");
  EXPECT_EQ(set.source, "made up");
  // 2 (m) x 2 (n) x 2 dtypes matmul + 2 norm; the duplicate is dropped.
  ASSERT_EQ(set.entries.size(), 10u);
  EXPECT_EQ(set.entries[0].op, "matmul");
  EXPECT_EQ(set.entries[0].dtype, "f32");
  EXPECT_EQ(set.entries[0].shape.str(), "m=1,n=64,k=64");
  EXPECT_EQ(set.entries[0].note, "proj");
  EXPECT_EQ(set.entries[1].dtype, "f16");
  EXPECT_EQ(set.entries.back().shape.str(), "rows=16,cols=64");
}

TEST(ShapeSet, ErrorsNameTheEntry) {
  auto expect_error = [](const char* yaml, const std::string& needle) {
    try {
      (void)parse_shape_set(yaml, "t.yaml");
      FAIL() << "accepted " << yaml;
    } catch (const prism::error& e) {
      EXPECT_EQ(e.code(), prism::errc::config_error);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("shapes: [{m: 1}]", "shapes[0]: missing 'op'");
  expect_error("shapes: [{op: matmul, m: x}]", "shapes[0] (matmul).m");
  expect_error("shapes: [{op: matmul, m: $nope}]", "unknown variable '$nope'");
  expect_error("shapes: [{op: matmul}]", "no shape components");
  expect_error("foo: 1", "missing 'shapes:'");
  expect_error("shapes: [{op: linear, dtype: q4_0, act: f64, m: 1, n: 64, k: 64}]",
               "shapes[0] (linear).act: 'f64' is not an activation dtype (valid: f32, f16, bf16)");
  expect_error("shapes: [{op: linear, dtype: f32, act: bf16, m: 1, n: 64, k: 64}]",
               "dtype 'f32' is not one (valid: q8_0, q4_0, q4_1)");
  expect_error("shapes: [{op: matmul, m: [1, 2}", "not valid YAML");
  EXPECT_THROW((void)load_shape_set("/nonexistent/shapes.yaml"), prism::error);
}

// act: a block-quantized entry's activations. f32 is the default (written or not); entries that
// differ only in act are distinct shapes (they are distinct database keys).
TEST(ShapeSet, ActivationsOfQuantizedEntries) {
  auto set = parse_shape_set(
      "shapes:\n"
      "  - {op: linear, dtype: q4_0, m: 1, n: 64, k: 64}\n"
      "  - {op: linear, dtype: q4_0, act: f32, m: 1, n: 64, k: 64, calls: 2}\n"
      "  - {op: linear, dtype: q4_0, act: bf16, m: 1, n: 64, k: 64}\n"
      "  - {op: linear, dtypes: [q8_0, q4_1], act: f16, m: 1, n: 64, k: 64}\n",
      "act.yaml");
  ASSERT_EQ(set.entries.size(), 4u);
  EXPECT_EQ(set.entries[0].act, "");
  EXPECT_EQ(set.entries[0].calls, 2u);  // the act: f32 line is the same entry
  EXPECT_EQ(set.entries[1].act, "bf16");
  EXPECT_EQ(set.entries[2].dtype, "q8_0");
  EXPECT_EQ(set.entries[2].act, "f16");
  EXPECT_EQ(set.entries[3].dtype, "q4_1");
  EXPECT_EQ(set.entries[3].act, "f16");
  EXPECT_EQ(set.entries[1].shape.str(), "m=1,n=64,k=64");  // act is not a shape component
}

TEST(ShapeSet, ShippedModelSetsLoad) {
  auto names = shipped_models();
  for (const char* want : {"llama-2-7b", "qwen3-0.6b", "qwen2.5-7b"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  auto llama = load_model_shape_set("Llama-2-7B");  // case-insensitive
  std::set<std::string> ops;
  std::set<std::string> matmul_nk;
  for (auto& e : llama.entries) {
    ops.insert(e.op);
    if (e.op == "linear")
      matmul_nk.insert("n=" + std::to_string(*e.shape.find("n")) +
                       ",k=" + std::to_string(*e.shape.find("k")));
  }
  for (const char* op : {"linear", "rms_norm", "softmax", "rotary_embedding", "scaled_dot_product_attention",
                         "silu_and_mul", "embedding"})
    EXPECT_TRUE(ops.count(op)) << op;
  // Every shipped set parses; the model sets cover many shapes.
  for (auto& name : names) EXPECT_FALSE(load_model_shape_set(name).entries.empty()) << name;
  for (const char* model : {"llama-2-7b", "qwen3-0.6b", "qwen2.5-7b"})
    EXPECT_GT(load_model_shape_set(model).entries.size(), 50u) << model;
  // Llama-2-7B: hidden 4096, intermediate 11008, vocab 32000.
  for (const char* nk : {"n=4096,k=4096", "n=11008,k=4096", "n=4096,k=11008", "n=32000,k=4096"})
    EXPECT_TRUE(matmul_nk.count(nk)) << nk;
  try {
    (void)load_model_shape_set("gpt-17");
    FAIL();
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), prism::errc::not_found);
    EXPECT_NE(std::string(e.what()).find("llama-2-7b"), std::string::npos) << e.what();
  }
}

TEST(ShapeSet, RecorderWritesAFilePretuneReads) {
  auto dir = make_temp_dir("record");
  auto file = dir + "/untuned.yaml";
  std::map<std::string, std::string> env{{"PRISM_RECORD_UNTUNED", file}};
  auto a = spawn_helper({"record", "matmul", "f32", "m=1,n=64,k=64", "m=2,n=64,k=64", "m=1,n=64,k=64"},
                        dir + "/a.out", env);
  auto b = spawn_helper({"record", "softmax", "f16", "rows=4,cols=128"}, dir + "/b.out", env);
  ASSERT_EQ(wait_child(a), 0) << read_file(dir + "/a.out");
  ASSERT_EQ(wait_child(b), 0) << read_file(dir + "/b.out");
  // A later run records only what is new.
  auto c = spawn_helper({"record", "matmul", "f32", "m=2,n=64,k=64", "m=4,n=64,k=64"}, dir + "/c.out", env);
  ASSERT_EQ(wait_child(c), 0) << read_file(dir + "/c.out");
  auto set = load_shape_set(file);
  std::set<std::string> got;
  for (auto& e : set.entries) got.insert(e.op + " " + e.dtype + " " + e.shape.str());
  EXPECT_EQ(got, (std::set<std::string>{"matmul f32 m=1,n=64,k=64", "matmul f32 m=2,n=64,k=64",
                                        "matmul f32 m=4,n=64,k=64", "softmax f16 rows=4,cols=128"}));
  auto text = read_file(file);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3 + 4) << text;  // header + one line each
}

// One entry per log2 bucket: a decode loop's attention over KV lengths 129..160 is recorded once;
// another power of two, or a different flag, is a new entry.
TEST(ShapeSet, RecorderKeepsOneShapePerLog2Bucket) {
  auto dir = make_temp_dir("record-bucket");
  auto file = dir + "/untuned.yaml";
  std::map<std::string, std::string> env{{"PRISM_RECORD_UNTUNED", file}};
  std::vector<std::string> args{"record", "scaled_dot_product_attention", "f32"};
  for (int lk = 129; lk <= 160; ++lk) args.push_back("causal=1,lq=1,lk=" + std::to_string(lk) + ",d=64");
  args.push_back("causal=1,lq=1,lk=300,d=64");
  args.push_back("causal=0,lq=1,lk=130,d=64");
  auto a = spawn_helper(args, dir + "/a.out", env);
  ASSERT_EQ(wait_child(a), 0) << read_file(dir + "/a.out");
  // A later run skips what the file already covers.
  auto b = spawn_helper({"record", "scaled_dot_product_attention", "f32", "causal=1,lq=1,lk=140,d=64",
                         "causal=1,lq=1,lk=140,d=96"},
                        dir + "/b.out", env);
  ASSERT_EQ(wait_child(b), 0) << read_file(dir + "/b.out");
  std::set<std::string> got;
  for (auto& e : load_shape_set(file).entries) got.insert(e.shape.str());
  EXPECT_EQ(got, (std::set<std::string>{"causal=1,lq=1,lk=129,d=64", "causal=1,lq=1,lk=300,d=64",
                                        "causal=0,lq=1,lk=130,d=64"}))
      << read_file(file);
}

// PRISM_RECORD_UNTUNED_EXACT=1 keeps every distinct shape: the KV lengths the bucketed
// recorder folds into one entry are each written once.
TEST(ShapeSet, RecorderKeepsExactShapesWhenAsked) {
  auto dir = make_temp_dir("record-exact");
  auto file = dir + "/untuned.yaml";
  std::map<std::string, std::string> env{{"PRISM_RECORD_UNTUNED", file}, {"PRISM_RECORD_UNTUNED_EXACT", "1"}};
  std::vector<std::string> args{"record", "scaled_dot_product_attention", "f32"};
  for (int lk = 129; lk <= 132; ++lk) args.push_back("causal=1,lq=1,lk=" + std::to_string(lk) + ",d=64");
  args.push_back("causal=1,lq=1,lk=130,d=64");  // a repeat is still written once
  auto a = spawn_helper(args, dir + "/a.out", env);
  ASSERT_EQ(wait_child(a), 0) << read_file(dir + "/a.out");
  // A later run skips exact shapes already in the file, not whole buckets.
  auto b = spawn_helper({"record", "scaled_dot_product_attention", "f32", "causal=1,lq=1,lk=131,d=64",
                         "causal=1,lq=1,lk=133,d=64"},
                        dir + "/b.out", env);
  ASSERT_EQ(wait_child(b), 0) << read_file(dir + "/b.out");
  std::vector<std::string> got;
  for (auto& e : load_shape_set(file).entries) got.push_back(e.shape.str());
  EXPECT_EQ(got, (std::vector<std::string>{"causal=1,lq=1,lk=129,d=64", "causal=1,lq=1,lk=130,d=64",
                                           "causal=1,lq=1,lk=131,d=64", "causal=1,lq=1,lk=132,d=64",
                                           "causal=1,lq=1,lk=133,d=64"}))
      << read_file(file);
}

// calls: (the recorder's dispatch counts) is optional, sums over an entry listed again, and a
// bad value is an error naming the entry and the valid range.
TEST(ShapeSet, CallsAreReadSummedAndChecked) {
  auto set = parse_shape_set(
      "shapes:\n"
      "  - {op: matmul, m: 1, n: 64, k: 64}\n"
      "  - {op: matmul, m: 2, n: 64, k: 64, calls: 7}\n"
      "  - {op: matmul, m: 1, n: 64, k: 64, calls: 3}\n"
      "  - {op: matmul, m: 2, n: 64, k: 64, calls: 5}\n",
      "calls");
  ASSERT_EQ(set.entries.size(), 2u);
  EXPECT_EQ(set.entries[0].shape.str(), "m=1,n=64,k=64");
  EXPECT_EQ(set.entries[0].calls, 3u);
  EXPECT_EQ(set.entries[1].calls, 12u);
  // A file without counts stays valid: every entry has calls 0 (not counted).
  auto old = parse_shape_set("shapes:\n  - {op: softmax, rows: 4, cols: [64, 128]}\n", "old");
  ASSERT_EQ(old.entries.size(), 2u);
  for (auto& e : old.entries) EXPECT_EQ(e.calls, 0u);
  EXPECT_EQ(old.entries[0].shape.find("calls"), std::nullopt);
  for (const char* bad : {"-3", "1.5", "abc", "[1, 2]", "99999999999999999999"}) {
    try {
      parse_shape_set(
          std::string("shapes:\n  - {op: softmax, rows: 4, cols: 64}\n  - {op: matmul, m: 1, n: 4, "
                      "k: 4, calls: ") +
              bad + "}\n",
          "bad.yaml");
      ADD_FAILURE() << "calls: " << bad << " was accepted";
    } catch (const prism::error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("bad.yaml: shapes[1] (matmul).calls"), std::string::npos) << what;
      EXPECT_NE(what.find("number of calls"), std::string::npos) << what;
    }
  }
}

// The recorder counts each dispatch of a recorded shape and appends the counts at exit; a
// later run adds its own counts to the entries already in the file.
TEST(ShapeSet, RecorderCountsCalls) {
  auto dir = make_temp_dir("record-count");
  auto file = dir + "/untuned.yaml";
  std::map<std::string, std::string> env{{"PRISM_RECORD_UNTUNED", file}, {"PRISM_RECORD_UNTUNED_EXACT", "1"}};
  auto a = spawn_helper(
      {"count", "matmul", "f32", "m=1,n=64,k=64", "m=2,n=64,k=64", "m=1,n=64,k=64", "m=1,n=64,k=64"},
      dir + "/a.out", env);
  ASSERT_EQ(wait_child(a), 0) << read_file(dir + "/a.out");
  auto b = spawn_helper({"count", "matmul", "f32", "m=1,n=64,k=64", "m=4,n=64,k=64"}, dir + "/b.out", env);
  ASSERT_EQ(wait_child(b), 0) << read_file(dir + "/b.out");
  std::map<std::string, std::uint64_t> got;
  for (auto& e : load_shape_set(file).entries) got[e.shape.str()] = e.calls;
  EXPECT_EQ(got, (std::map<std::string, std::uint64_t>{
                     {"m=1,n=64,k=64", 4}, {"m=2,n=64,k=64", 1}, {"m=4,n=64,k=64", 1}}))
      << read_file(file);
}
