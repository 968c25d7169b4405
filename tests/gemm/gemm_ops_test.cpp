// SPDX-License-Identifier: Apache-2.0
// GEMM- and attention-specific checks beyond the generated op suite: every kernel variant on
// every operand layout, bias broadcasts, strided batches, decode shapes, GQA, causal offsets,
// masks, argument errors, and that the GEMM tolerance is tight enough to catch one wrong term.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"
#include "prism/runtime.hpp"
#include "prism/tensor.hpp"

namespace {

using namespace prism;

queue& test_queue() {
  static auto* q = new queue();
  return *q;
}

tensor rand_tensor(const dims& shape, dtype t, unsigned seed, bool ints = false) {
  std::vector<float> v(static_cast<std::size_t>(shape.product()));
  unsigned x = seed * 2654435761u + 12345u;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = ints ? static_cast<float>(static_cast<int>((x >> 16) % 5) - 2)
             : static_cast<float>((x >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return tensor::from_floats(test_queue(), v, shape, t);
}

op_call make_call(const std::string& op, std::vector<tensor> inputs) {
  op_call c{op, std::move(inputs), {}, {}};
  return c;
}

// Runs `call` (outputs allocated here) with `config` and compares against the host reference.
comparison run_and_compare(op_call& call, const std::string& config, bool ints = false) {
  queue& q = test_queue();
  const op_descriptor& d = op_registry::instance().get(call.op);
  if (call.outputs.empty()) allocate_outputs(q, d, call);
  enqueue_opencl(q, d, call, kernel_config::parse(config)).wait();
  const auto expected = compute_reference(q, d, call);
  std::vector<host_tensor> got;
  for (auto& t : call.outputs) got.push_back(read_host(q, t));
  return compare_outputs(d, call, expected, got, ints);
}

std::vector<float> floats_of(const tensor& t) {
  return t.to_floats(test_queue());
}

// One config per kernel variant (small tiles keep PoCL compiles cheap).
const char* const variant_configs[] = {
    "variant=0",                                // cpu, vendor-neutral default
    "variant=0,vw=4,rm=2,rn=3,ku=2,lx=2,ly=4",  // cpu, small blocks
    "variant=0,vw=1,rm=3,rn=2,lx=2,ly=4",       // cpu, scalar lanes (the schema's vw=1)
    "variant=1,tm=16,tn=32,tk=8,wm=2,wn=4",     // gpu tiles
    "variant=2,mb=8,nb=2,wg=32",                // small-M
};

TEST(GemmVariants, EveryLayoutMatchesReference) {
  for (const char* cfg : variant_configs) {
    const bool gemv = std::string(cfg).find("variant=2") != std::string::npos;
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      const std::int64_t m = gemv ? 7 : 33, n = 37, k = 45;
      for (bool ints : {true, false}) {
        tensor a = ta ? rand_tensor({k, m}, dtype::f32, 1, ints).transpose(0, 1)
                      : rand_tensor({m, k}, dtype::f32, 1, ints);
        tensor b = tb ? rand_tensor({n, k}, dtype::f32, 2, ints).transpose(0, 1)
                      : rand_tensor({k, n}, dtype::f32, 2, ints);
        op_call call = make_call("mm", {a, b});
        const comparison r = run_and_compare(call, cfg, ints);
        EXPECT_TRUE(r.ok) << cfg << " ta=" << ta << " tb=" << tb << " ints=" << ints << ": " << r.message;
      }
    }
  }
}

TEST(GemmVariants, HalfAndBfloatStorage) {
  for (dtype t : {dtype::f16, dtype::bf16})
    for (const char* cfg : {"variant=0", "variant=1,tm=16,tn=32,tk=8,wm=2,wn=4"}) {
      op_call call = make_call(
          "linear", {rand_tensor({3, 5, 40}, t, 3), rand_tensor({24, 40}, t, 4), rand_tensor({24}, t, 5)});
      const comparison r = run_and_compare(call, cfg);
      EXPECT_TRUE(r.ok) << dtype_name(t) << " " << cfg << ": " << r.message;
    }
}

TEST(GemmVariants, DecodeRowsClampPerWorkItem) {
  // M = 1..3 with the cpu variant's default rm=6: rows per work-item shrink to M.
  for (std::int64_t m : {1, 2, 3}) {
    op_call call = make_call(
        "linear", {rand_tensor({m, 64}, dtype::f32, 6, true), rand_tensor({40, 64}, dtype::f32, 7, true),
                   rand_tensor({40}, dtype::f32, 8, true)});
    const comparison r = run_and_compare(call, "variant=0", true);
    EXPECT_TRUE(r.ok) << "m=" << m << ": " << r.message;
  }
}

TEST(GemmVariants, KSlicesAccumulateOnce) {
  // kc=128 over K=300: three launches; bias and beta apply once, alpha to every slice.
  for (bool tb : {false, true}) {
    tensor b = tb ? rand_tensor({40, 300}, dtype::f32, 16, true).transpose(0, 1)
                  : rand_tensor({300, 40}, dtype::f32, 16, true);
    op_call call = make_call(
        "addmm", {rand_tensor({40}, dtype::f32, 15, true), rand_tensor({20, 300}, dtype::f32, 17, true), b});
    call.set("alpha", 2.0).set("beta", 3.0);
    const comparison r = run_and_compare(call, "variant=0,kc=128", true);
    EXPECT_TRUE(r.ok) << "tb=" << tb << ": " << r.message;
  }
  // One row block (M <= rm: decode) is one launch whatever kc says: slicing K would only add
  // launches and passes over C. Counted by recording the calls into a graph.
  auto launches = [](std::int64_t m) {
    op_call c = make_call(
        "mm", {rand_tensor({m, 300}, dtype::f32, 20, true), rand_tensor({300, 24}, dtype::f32, 21, true)});
    const op_descriptor& d = op_registry::instance().get(c.op);
    allocate_outputs(test_queue(), d, c);
    graph g = graph::record(test_queue(), [&] {
      enqueue_opencl(test_queue(), d, c, kernel_config::parse("variant=0,rm=6,kc=128"));
    });
    return g.command_count();
  };
  EXPECT_EQ(launches(1), 1u);
  EXPECT_EQ(launches(6), 1u);
  EXPECT_EQ(launches(7), 3u);
  // f16 output ignores kc (no rounding per slice).
  op_call h =
      make_call("mm", {rand_tensor({9, 300}, dtype::f16, 18), rand_tensor({300, 16}, dtype::f16, 19)});
  const comparison r = run_and_compare(h, "variant=0,kc=128");
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GemmVariants, PackedPanelsMatchReference) {
  // pk=1: each group copies its B panel (k-slice x rn*vw columns) into local memory first. N = 37
  // leaves a partial column block (the unpacked path, in its own group), M = 33 leaves items past
  // M (they still reach the group's barrier), K = 300 over kc=128 packs three slices, the last
  // 44 rows; B transposed (tb) is the dot form, which ignores pk.
  const char* cfg = "variant=0,vw=4,rm=3,rn=2,kc=128,lx=1,ly=4,pk=1";
  for (bool tb : {false, true})
    for (std::int64_t k : {45, 300}) {
      tensor b = tb ? rand_tensor({37, k}, dtype::f32, 31, true).transpose(0, 1)
                    : rand_tensor({k, 37}, dtype::f32, 31, true);
      op_call call = make_call(
          "addmm", {rand_tensor({37}, dtype::f32, 30, true), rand_tensor({33, k}, dtype::f32, 32, true), b});
      call.set("alpha", 2.0).set("beta", 3.0);
      const comparison r = run_and_compare(call, cfg, true);
      EXPECT_TRUE(r.ok) << "tb=" << tb << " k=" << k << ": " << r.message;
    }
  // 16-bit storage is one launch over all of K (its panel holds every row), and a batch of three.
  op_call h = make_call(
      "bmm", {rand_tensor({3, 9, 300}, dtype::bf16, 33), rand_tensor({3, 300, 16}, dtype::bf16, 34)});
  const comparison r = run_and_compare(h, cfg);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Addmm, BiasBroadcastShapes) {
  const std::int64_t m = 9, n = 14, k = 11;
  const std::vector<dims> bias_shapes = {{n}, {1, n}, {m, 1}, {m, n}, {1}};
  for (const dims& bs : bias_shapes) {
    op_call call =
        make_call("addmm", {rand_tensor(bs, dtype::f32, 9, true), rand_tensor({m, k}, dtype::f32, 10, true),
                            rand_tensor({k, n}, dtype::f32, 11, true)});
    call.set("alpha", 0.5).set("beta", 2.0);
    const comparison r = run_and_compare(call, "variant=0", true);
    EXPECT_TRUE(r.ok) << "bias " << bs.str() << ": " << r.message;
  }
}

TEST(Bmm, StridedAndBroadcastBatches) {
  // Every other batch of a larger tensor (batch stride 2*m*k), B shared across batches.
  tensor a = rand_tensor({6, 5, 12}, dtype::f32, 12, true).slice(0, 0, 6, 2);
  tensor b = rand_tensor({1, 12, 10}, dtype::f32, 13, true).expand({3, 12, 10});
  for (const char* cfg : {"variant=0", "variant=1,tm=16,tn=32,tk=8,wm=2,wn=4", "variant=2,mb=8,nb=2,wg=32"}) {
    op_call call = make_call("bmm", {a, b});
    const comparison r = run_and_compare(call, cfg, true);
    EXPECT_TRUE(r.ok) << cfg << ": " << r.message;
  }
}

TEST(GemmTolerance, CatchesOneWrongTerm) {
  // Device result of a @ b against the reference of a' @ b where a' differs in one element by
  // 1/64: the difference (about |b|/64 in one column) must exceed the bound.
  queue& q = test_queue();
  const op_descriptor& d = op_registry::instance().get("mm");
  const std::int64_t m = 8, n = 16, k = 256;
  std::vector<float> av(static_cast<std::size_t>(m * k));
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = std::sin(static_cast<float>(i));
  tensor a = tensor::from_floats(q, av, {m, k}, dtype::f32);
  tensor b = rand_tensor({k, n}, dtype::f32, 14);
  op_call call = make_call("mm", {a, b});
  allocate_outputs(q, d, call);
  enqueue_opencl(q, d, call, kernel_config::parse("variant=0")).wait();
  std::vector<host_tensor> got{read_host(q, call.outputs[0])};
  EXPECT_TRUE(compare_outputs(d, call, compute_reference(q, d, call), got).ok);
  av[3 * k + 100] += 1.0f / 64.0f;
  op_call perturbed = make_call("mm", {tensor::from_floats(q, av, {m, k}, dtype::f32), b});
  perturbed.outputs = call.outputs;
  const comparison r = compare_outputs(d, perturbed, compute_reference(q, d, perturbed), got);
  EXPECT_FALSE(r.ok) << "a perturbation of one product term went unnoticed";
}

TEST(GemmErrors, NameOpArgumentAndShapes) {
  queue& q = test_queue();
  auto expect_error = [&](op_call call, std::vector<std::string> needles) {
    const op_descriptor& d = op_registry::instance().get(call.op);
    try {
      check_call(d, call);
      FAIL() << "no error for " << call.op;
    } catch (const error& e) {
      const std::string msg = e.what();
      for (auto& n : needles)
        EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' missing in: " << msg;
    }
  };
  tensor a = rand_tensor({4, 5}, dtype::f32, 1), b = rand_tensor({6, 3}, dtype::f32, 2);
  op_call c1 = make_call("mm", {a, b});
  c1.outputs = {tensor::empty(q, {4, 3}, dtype::f32)};
  expect_error(c1, {"mm", "input", "mat2", "[4, 5]", "[6, 3]"});
  op_call c2 = make_call("mm", {a, rand_tensor({5, 3}, dtype::f16, 3)});
  c2.outputs = {tensor::empty(q, {4, 3}, dtype::f32)};
  expect_error(c2, {"mm", "f16", "f32"});
  op_call c3 = make_call("linear", {a, rand_tensor({7, 5}, dtype::f32, 4), rand_tensor({6}, dtype::f32, 5)});
  c3.outputs = {tensor::empty(q, {4, 7}, dtype::f32)};
  expect_error(c3, {"linear", "bias", "[6]"});
  op_call c4 = make_call("scaled_dot_product_attention",
                         {rand_tensor({1, 3, 2, 8}, dtype::f32, 1), rand_tensor({1, 2, 4, 8}, dtype::f32, 2),
                          rand_tensor({1, 2, 4, 8}, dtype::f32, 3), tensor(), tensor()});
  c4.outputs = {tensor::empty(q, {1, 3, 2, 8}, dtype::f32)};
  expect_error(c4, {"scaled_dot_product_attention", "multiple", "3", "2"});
  op_call c5 =
      make_call("scaled_dot_product_attention",
                {rand_tensor({1, 2, 2, 8}, dtype::f32, 1), rand_tensor({1, 2, 4, 8}, dtype::f32, 2),
                 rand_tensor({1, 2, 4, 8}, dtype::f32, 3), rand_tensor({3, 4}, dtype::f32, 4), tensor()});
  c5.outputs = {tensor::empty(q, {1, 2, 2, 8}, dtype::f32)};
  expect_error(c5, {"attn_mask", "[3, 4]", "broadcast"});
}

// ---------------------------------------------------------------------------------------------
// Attention

op_call sdpa(tensor q, tensor k, tensor v, tensor mask = {}, bool causal = false) {
  op_call c = make_call("scaled_dot_product_attention", {q, k, v, mask, tensor()});
  c.set("is_causal", causal);
  return c;
}

TEST(Attention, LocalAndPrivatePathsMatchReference) {
  tensor q = rand_tensor({2, 4, 7, 16}, dtype::f32, 21), k = rand_tensor({2, 2, 11, 16}, dtype::f32, 22),
         v = rand_tensor({2, 2, 11, 16}, dtype::f32, 23);
  for (const char* cfg : {"bq=4,bk=4,local=0", "bq=4,bk=4,local=1", "variant=1,wg=16"})
    for (bool causal : {false, true}) {
      op_call c = sdpa(q, k, v, {}, causal);
      const comparison r = run_and_compare(c, cfg);
      EXPECT_TRUE(r.ok) << cfg << " causal=" << causal << ": " << r.message;
    }
}

TEST(Attention, DecodeRowsEqualPrefillRows) {
  // Causal with a KV cache: the last 3 query rows alone must give the last 3 rows of the full pass.
  const std::int64_t L = 9, D = 16;
  tensor q = rand_tensor({1, 2, L, D}, dtype::f32, 31), k = rand_tensor({1, 2, L, D}, dtype::f32, 32),
         v = rand_tensor({1, 2, L, D}, dtype::f32, 33);
  for (const char* cfg : {"bq=4,bk=4,local=0", "variant=1,wg=16"}) {
    op_call full = sdpa(q, k, v, {}, true);
    ASSERT_TRUE(run_and_compare(full, cfg).ok);
    op_call tail = sdpa(q.slice(2, L - 3, L), k, v, {}, true);  // a strided view of the last rows
    ASSERT_TRUE(run_and_compare(tail, cfg).ok);
    const auto f = floats_of(full.outputs[0].slice(2, L - 3, L)), t = floats_of(tail.outputs[0]);
    ASSERT_EQ(f.size(), t.size());
    for (std::size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], t[i], 1e-6f) << cfg << " element " << i;
  }
}

TEST(Attention, GqaEqualsRepeatedHeads) {
  // Hq=4 over Hkv=2 equals plain MHA with each kv head repeated twice.
  const std::int64_t L = 6, D = 8;
  tensor q = rand_tensor({1, 4, L, D}, dtype::f32, 41);
  tensor k = rand_tensor({1, 2, L, D}, dtype::f32, 42), v = rand_tensor({1, 2, L, D}, dtype::f32, 43);
  auto repeat = [&](const tensor& t) {
    auto h = floats_of(t);
    std::vector<float> r;
    for (int head = 0; head < 4; ++head) {
      const auto begin = h.begin() + (head / 2) * L * D;
      r.insert(r.end(), begin, begin + L * D);
    }
    return tensor::from_floats(test_queue(), r, {1, 4, L, D}, dtype::f32);
  };
  op_call gqa = sdpa(q, k, v, {}, true), mha = sdpa(q, repeat(k), repeat(v), {}, true);
  ASSERT_TRUE(run_and_compare(gqa, "bq=4,bk=4,local=0").ok);
  ASSERT_TRUE(run_and_compare(mha, "bq=4,bk=4,local=0").ok);
  const auto a = floats_of(gqa.outputs[0]), b = floats_of(mha.outputs[0]);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "element " << i;
}

TEST(Attention, MasksAndFullyMaskedRows) {
  const std::int64_t Lq = 4, Lk = 10, D = 8;
  tensor q = rand_tensor({1, 2, Lq, D}, dtype::f32, 51), k = rand_tensor({1, 2, Lk, D}, dtype::f32, 52),
         v = rand_tensor({1, 2, Lk, D}, dtype::f32, 53);
  // Boolean [Lq, Lk] mask whose row 2 attends nothing: that row's output is zero.
  std::vector<float> bits(static_cast<std::size_t>(Lq * Lk));
  for (std::int64_t i = 0; i < Lq; ++i)
    for (std::int64_t j = 0; j < Lk; ++j) bits[i * Lk + j] = (i != 2 && (i + j) % 3 != 0) ? 1.0f : 0.0f;
  tensor bmask = tensor::from_floats(test_queue(), bits, {Lq, Lk}, dtype::boolean);
  for (const char* cfg : {"bq=4,bk=4,local=1", "variant=1,wg=16"}) {
    op_call c = sdpa(q, k, v, bmask);
    const comparison r = run_and_compare(c, cfg);
    EXPECT_TRUE(r.ok) << cfg << ": " << r.message;
    const auto out = floats_of(c.outputs[0]);
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(out[(h * Lq + 2) * D + d], 0.0f) << cfg;
  }
  // Additive mask broadcast over batch and heads, with an explicit scale.
  op_call c2 = sdpa(q, k, v, rand_tensor({1, 1, Lq, Lk}, dtype::f32, 54));
  c2.set("scale", 0.25);
  const comparison r2 = run_and_compare(c2, "bq=4,bk=4,local=0");
  EXPECT_TRUE(r2.ok) << r2.message;
}

TEST(Attention, SplitDecodeOverManyKeyBlocks) {
  // One query row against 53 cached keys: four 16-key blocks (the last partial), causal offset,
  // GQA, f32 and bf16 storage, and an explicit scale.
  for (dtype t : {dtype::f32, dtype::bf16}) {
    op_call c = sdpa(rand_tensor({2, 4, 1, 24}, t, 71), rand_tensor({2, 2, 53, 24}, t, 72),
                     rand_tensor({2, 2, 53, 20}, t, 73), {}, true);
    c.set("scale", 0.7);
    const comparison r = run_and_compare(c, "variant=1,wg=16");
    EXPECT_TRUE(r.ok) << dtype_name(t) << ": " << r.message;
  }
}

TEST(Attention, HalfAndBfloatStorage) {
  for (dtype t : {dtype::f16, dtype::bf16}) {
    op_call c = sdpa(rand_tensor({1, 2, 5, 16}, t, 61), rand_tensor({1, 1, 9, 16}, t, 62),
                     rand_tensor({1, 1, 9, 16}, t, 63), {}, true);
    const comparison r = run_and_compare(c, "bq=4,bk=4,local=0");
    EXPECT_TRUE(r.ok) << dtype_name(t) << ": " << r.message;
  }
}

}  // namespace
