// SPDX-License-Identifier: Apache-2.0
// The public op API (prism/ops.hpp) end to end: every function once on tiny inputs with
// hand-computed expectations, so a wrapper that maps an argument or attribute wrongly onto its
// descriptor fails here (descriptors fall back to attribute defaults silently).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "prism/ops.hpp"
#include "prism/runtime.hpp"
#include "tests/dispatch/test_support.hpp"

using namespace prism;

namespace {

queue& q() {
  static auto* qq = new queue();
  return *qq;
}

[[maybe_unused]] const auto* const drain_queue_env = prism::test::drain_before_exit(&q);

tensor t(std::vector<float> v, dims shape = {}, dtype type = dtype::f32) {
  if (shape.empty()) shape = dims{static_cast<std::int64_t>(v.size())};
  return tensor::from_floats(q(), v, shape, type);
}

void expect_values(const tensor& got, const std::vector<float>& want, double tol = 1e-5) {
  auto v = got.to_floats(q());
  ASSERT_EQ(v.size(), want.size()) << got.str();
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(v[i], want[i], tol * std::max(1.0, std::fabs(static_cast<double>(want[i]))))
        << "element " << i;
}

std::vector<float> map(const std::vector<float>& x, double (*f)(double)) {
  std::vector<float> out;
  for (float v : x) out.push_back(static_cast<float>(f(v)));
  return out;
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double silu(double x) {
  return x * sigmoid(x);
}
double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double relu(double x) {
  return x < 0 ? 0.0 : x;
}
double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
double neg(double x) {
  return -x;
}

}  // namespace

TEST(OpsApi, Unary) {
  const std::vector<float> x = {-1.0f, 0.5f, 2.0f}, p = {0.5f, 1.0f, 4.0f};
  auto tx = t(x), tp = t(p);
  expect_values(ops::neg(q(), tx), map(x, neg));
  expect_values(ops::abs(q(), tx), map(x, [](double v) { return std::fabs(v); }));
  expect_values(ops::exp(q(), tx), map(x, [](double v) { return std::exp(v); }));
  expect_values(ops::log(q(), tp), map(p, [](double v) { return std::log(v); }));
  expect_values(ops::sqrt(q(), tp), map(p, [](double v) { return std::sqrt(v); }));
  expect_values(ops::rsqrt(q(), tp), map(p, rsqrt));
  expect_values(ops::sin(q(), tx), map(x, [](double v) { return std::sin(v); }));
  expect_values(ops::cos(q(), tx), map(x, [](double v) { return std::cos(v); }));
  expect_values(ops::tanh(q(), tx), map(x, [](double v) { return std::tanh(v); }));
  expect_values(ops::sigmoid(q(), tx), map(x, sigmoid));
  expect_values(ops::relu(q(), tx), map(x, relu));
  expect_values(ops::silu(q(), tx), map(x, silu));
  expect_values(ops::gelu(q(), tx), map(x, gelu_erf));
  expect_values(ops::gelu(q(), tx, ops::gelu_approx::tanh), map(x, gelu_tanh));
  tensor out = tensor::empty(q(), {3}, dtype::f32);
  ops::gelu_out(q(), out, tx, ops::gelu_approx::tanh);
  expect_values(out, map(x, gelu_tanh));
  tensor inplace = t(x);
  ops::relu_out(q(), inplace, inplace);
  expect_values(inplace, map(x, relu));
}

TEST(OpsApi, Binary) {
  auto a = t({1, 2, 3}), b = t({10, 20, 30});
  expect_values(ops::add(q(), a, b, 2.0), {21, 42, 63});
  expect_values(ops::add(q(), a, 5.0, 2.0), {11, 12, 13});
  expect_values(ops::sub(q(), a, b), {-9, -18, -27});
  expect_values(ops::sub(q(), a, 1.0), {0, 1, 2});
  expect_values(ops::sub(q(), 10.0, a), {9, 8, 7});
  expect_values(ops::sub(q(), 10.0, a, 2.0), {8, 6, 4});
  expect_values(ops::mul(q(), a, b), {10, 40, 90});
  expect_values(ops::mul(q(), a, 3.0), {3, 6, 9});
  expect_values(ops::div(q(), b, a), {10, 10, 10});
  expect_values(ops::div(q(), a, 2.0), {0.5, 1, 1.5});
  expect_values(ops::div(q(), 6.0, a), {6, 3, 2});
  expect_values(ops::maximum(q(), a, 2.0), {2, 2, 3});
  expect_values(ops::maximum(q(), a, b), {10, 20, 30});
  expect_values(ops::minimum(q(), a, b), {1, 2, 3});
  expect_values(ops::minimum(q(), a, 2.0), {1, 2, 2});
  expect_values(ops::pow(q(), a, 2.0), {1, 4, 9}, 1e-4);
  expect_values(ops::pow(q(), 2.0, a), {2, 4, 8}, 1e-4);
  expect_values(ops::pow(q(), a, a), {1, 4, 27}, 1e-4);
  // Broadcasting [2, 3] + [3].
  auto m = t({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = ops::add(q(), m, a);
  EXPECT_EQ(r.shape(), (dims{2, 3}));
  expect_values(r, {2, 4, 6, 5, 7, 9});
  tensor out = tensor::empty(q(), {3}, dtype::f32);
  ops::add_out(q(), out, a, b);
  expect_values(out, {11, 22, 33});
  ops::sub_out(q(), out, 1.0, a);
  expect_values(out, {0, -1, -2});
  ops::mul_out(q(), out, a, 2.0);
  expect_values(out, {2, 4, 6});
}

TEST(OpsApi, Reductions) {
  auto m = t({1, 2, 3, 4, 5, 6}, {2, 3});
  auto all = ops::sum(q(), m);
  EXPECT_EQ(all.numel(), 1);
  expect_values(all, {21});
  auto rows = ops::sum(q(), m, {1});
  EXPECT_EQ(rows.shape(), (dims{2}));
  expect_values(rows, {6, 15});
  EXPECT_EQ(ops::sum(q(), m, {1}, true).shape(), (dims{2, 1}));
  expect_values(ops::mean(q(), m, {0}), {2.5, 3.5, 4.5});
  expect_values(ops::max(q(), m, {-1}), {3, 6});
  expect_values(ops::min(q(), m), {1});
  auto am = ops::argmax(q(), m, 1);
  EXPECT_EQ(am.type(), dtype::i64);
  EXPECT_EQ(am.shape(), (dims{2}));
  expect_values(am, {2, 2});
  expect_values(ops::argmax(q(), t({3, 9, 1, 9})), {1});
  EXPECT_EQ(ops::argmax(q(), m, 0, true).shape(), (dims{1, 3}));
}

// argmax over long rows, as a decode step's logits take it: the kernel reads whole vectors and
// looks inside one only when it holds a NaN or a new best, so the first maximum (ties inside one
// vector and across work-items), the first NaN, and rows of one value must all still come out;
// f16 rows of odd length start at odd elements (PoCL's vload_half16 faulted there).
TEST(OpsApi, ArgmaxOverLongRows) {
  const std::int64_t n = 1031;
  auto row = [&](auto fill) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      v[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i));
    fill(v);
    return v;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      row([](auto& v) { v[700] = v[701] = v[1030] = 5; }),            // ties in one vector and past it
      row([](auto& v) { v[3] = v[900] = 5; }),                        // ties far apart
      row([&](auto& v) { v[500] = nan, v[600] = 9, v[800] = nan; }),  // the first NaN beats 9
      row([&](auto& v) { std::fill(v.begin(), v.end(), -inf); }),     // one value: index 0
      row([](auto& v) { v[1029] = 7; })};                             // in the scalar tail
  const std::vector<float> want = {700, 3, 500, 0, 1029};
  std::vector<float> all;
  for (const auto& r : rows) all.insert(all.end(), r.begin(), r.end());
  const dims shape = {static_cast<std::int64_t>(rows.size()), n};
  for (dtype type : {dtype::f32, dtype::f16, dtype::bf16}) {
    SCOPED_TRACE(dtype_name(type));
    expect_values(ops::argmax(q(), t(all, shape, type), 1), want);
  }
}

TEST(OpsApi, SoftmaxAndNorms) {
  auto x = t({1, 2, 3, 1, 1, 1}, {2, 3});
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  std::vector<float> sm = {float(e1 / s), float(e2 / s), float(e3 / s), 1.f / 3, 1.f / 3, 1.f / 3};
  expect_values(ops::softmax(q(), x), sm);
  std::vector<float> lsm;
  for (float v : sm) lsm.push_back(std::log(v));
  expect_values(ops::log_softmax(q(), x, 1), lsm);
  // softmax over dim 0 of [[1,2,3],[1,1,1]].
  auto s0 = ops::softmax(q(), x, 0).to_floats(q());
  EXPECT_NEAR(s0[0], 0.5, 1e-5);
  EXPECT_NEAR(s0[1], e2 / (e2 + e1), 1e-5);

  auto w = t({1, 2, 3}), bias = t({0.5, 0, -0.5});
  // layer_norm of [1,2,3]: mean 2, var 2/3.
  const double inv = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);
  expect_values(ops::layer_norm(q(), x, w, bias),
                {float(-inv * 1 + 0.5), 0.0f, float(inv * 3 - 0.5), 0.5f, 0.0f, -0.5f}, 1e-4);
  const double rms = std::sqrt((1 + 4 + 9) / 3.0 + 1e-6);
  expect_values(ops::rms_norm(q(), x, w), {float(1 / rms), float(4 / rms), float(9 / rms), 1, 2, 3}, 1e-4);
  expect_values(ops::rms_norm(q(), x, {}, 0.5),
                {float(1 / std::sqrt(14 / 3.0 + 0.5)), float(2 / std::sqrt(14 / 3.0 + 0.5)),
                 float(3 / std::sqrt(14 / 3.0 + 0.5)), float(1 / std::sqrt(1.5)), float(1 / std::sqrt(1.5)),
                 float(1 / std::sqrt(1.5))},
                1e-4);
  // fused_add_rms_norm: residual <- x + residual; out = rms_norm(residual) * w.
  auto residual = t({0, 0, 0, 1, 1, 1}, {2, 3});
  auto out = ops::fused_add_rms_norm(q(), x, residual, w);
  expect_values(residual, {1, 2, 3, 2, 2, 2});
  expect_values(out, {float(1 / rms), float(4 / rms), float(9 / rms), 1, 2, 3}, 1e-4);
}

TEST(OpsApi, RotaryEmbedding) {
  // One token at position 1, one head, head_dim 4, rotary_dim 4: cache rows [cos | sin].
  const float c0 = 0.6f, s0 = 0.8f, c1 = 0.0f, s1 = 1.0f;
  auto cache = t({1, 1, 0, 0, c0, c1, s0, s1}, {2, 4});
  auto cos_cache = cache.slice(1, 0, 2), sin_cache = cache.slice(1, 2, 4);
  auto x = t({1, 2, 3, 4}, {1, 1, 4});
  auto pos = tensor::from_floats(q(), std::vector<float>{1}, {1}, dtype::i64);
  // NeoX pairs (0, 2) with angle 0 and (1, 3) with angle 1.
  expect_values(ops::rotary_embedding(q(), x, pos, cos_cache, sin_cache),
                {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1});
  // GPT-J pairs (0, 1) with angle 0 and (2, 3) with angle 1; separate (copied) caches.
  auto cos_sep = t({1, 1, c0, c1}, {2, 2}), sin_sep = t({0, 0, s0, s1}, {2, 2});
  expect_values(ops::rotary_embedding(q(), x, pos, cos_sep, sin_sep, ops::rope_style::gptj),
                {1 * c0 - 2 * s0, 2 * c0 + 1 * s0, 3 * c1 - 4 * s1, 4 * c1 + 3 * s1});
  // In place through _out with out == x, [batch, seq, heads, dim] form.
  auto x4 = t({1, 2, 3, 4}, {1, 1, 1, 4});
  auto pos2 = tensor::from_floats(q(), std::vector<float>{1}, {1, 1}, dtype::i32);
  ops::rotary_embedding_out(q(), x4, x4, pos2, cos_cache, sin_cache);
  expect_values(x4, {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1});
  tensor key;
  auto xq = t({1, 2, 3, 4}, {1, 1, 4});
  ops::rotary_embedding_(q(), xq, key, pos, cache);
  expect_values(xq, {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1});
}

TEST(OpsApi, GatedEmbeddingAndLayout) {
  auto g = t({-1, 2, 3, 4}, {1, 4});
  expect_values(ops::silu_and_mul(q(), g), {float(silu(-1) * 3), float(silu(2) * 4)});
  expect_values(ops::gelu_and_mul(q(), g, ops::gelu_approx::tanh),
                {float(gelu_tanh(-1) * 3), float(gelu_tanh(2) * 4)});
  expect_values(ops::gelu_and_mul(q(), g), {float(gelu_erf(-1) * 3), float(gelu_erf(2) * 4)});

  auto w = t({0, 1, 10, 11, 20, 21}, {3, 2});
  auto idx = tensor::from_floats(q(), std::vector<float>{2, 0}, {2}, dtype::i64);
  auto e = ops::embedding(q(), w, idx);
  EXPECT_EQ(e.shape(), (dims{2, 2}));
  expect_values(e, {20, 21, 0, 1});
  auto bad = tensor::from_floats(q(), std::vector<float>{3}, {1}, dtype::i32);
  EXPECT_THROW(ops::embedding(q(), w, bad).to_floats(q()), prism::error);

  auto a = t({1, 2, 3, 4}, {2, 2}), b = t({5, 6}, {1, 2});
  auto c = ops::cat(q(), {a, b}, 0);
  EXPECT_EQ(c.shape(), (dims{3, 2}));
  expect_values(c, {1, 2, 3, 4, 5, 6});
  expect_values(ops::contiguous(q(), a.transpose(0, 1)), {1, 3, 2, 4});
  tensor dst = tensor::empty(q(), {2, 2}, dtype::f32);
  ops::copy(q(), dst, b);  // broadcast [1, 2] -> [2, 2]
  expect_values(dst, {5, 6, 5, 6});
  auto i = ops::cast(q(), t({1.7f, -2.5f}), dtype::i32);
  EXPECT_EQ(i.type(), dtype::i32);
  expect_values(i, {1, -2});
  tensor h = tensor::empty(q(), {2}, dtype::f16);
  ops::cast_out(q(), h, t({0.5f, 3.0f}));
  expect_values(h, {0.5f, 3.0f});
  ops::fill(q(), dst, 2.5);
  expect_values(dst, {2.5, 2.5, 2.5, 2.5});
  auto z = ops::zeros(q(), {2, 3}, dtype::f16);
  EXPECT_EQ(z.type(), dtype::f16);
  expect_values(z, {0, 0, 0, 0, 0, 0});
  expect_values(ops::full(q(), {2}, -1.5), {-1.5, -1.5});
  auto r = ops::arange(q(), 2, 7, 2, dtype::i32);
  EXPECT_EQ(r.type(), dtype::i32);
  expect_values(r, {2, 4, 6});
  expect_values(ops::arange(q(), 4), {0, 1, 2, 3});
  tensor ar = tensor::empty(q(), {3}, dtype::f32);
  ops::arange_out(q(), ar, 1.0, 0.5);
  expect_values(ar, {1, 1.5, 2});
}

TEST(OpsApi, MatmulFamilyAndAttention) {
  auto a = t({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = t({1, 0, 0, 1, 1, 1}, {3, 2});
  expect_values(ops::mm(q(), a, b), {4, 5, 10, 11});
  expect_values(ops::mm(q(), b.transpose(0, 1), a.transpose(0, 1)), {4, 10, 5, 11});
  expect_values(ops::matmul(q(), a, b), {4, 5, 10, 11});
  auto bias = t({100, 200});
  expect_values(ops::addmm(q(), bias, a, b, 0.5, 2.0), {58, 110, 70, 122});
  // linear: x [2, 3] @ W^T with W [2, 3].
  auto W = b.transpose(0, 1).contiguous(q());
  expect_values(ops::linear(q(), a, W, bias), {104, 205, 110, 211});
  expect_values(ops::linear(q(), a, W), {4, 5, 10, 11});
  auto x3 = t({1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, {2, 2, 3});
  expect_values(ops::linear(q(), x3, W), {4, 5, 10, 11, 4, 5, 10, 11});
  expect_values(ops::matmul(q(), x3, b), {4, 5, 10, 11, 4, 5, 10, 11});
  auto bb = t({1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 2, 2}, {2, 3, 2});
  expect_values(ops::bmm(q(), x3, bb), {4, 5, 10, 11, 8, 10, 20, 22});
  expect_values(ops::matmul(q(), x3, bb), {4, 5, 10, 11, 8, 10, 20, 22});
  tensor out = tensor::empty(q(), {2, 2}, dtype::f32);
  ops::mm_out(q(), out, a, b);
  expect_values(out, {4, 5, 10, 11});

  // Attention: one query, two keys; GQA with 2 query heads over 1 kv head.
  auto query = t({1, 0, 0, 1}, {1, 2, 1, 2});
  auto key = t({1, 0, 0, 1}, {1, 1, 2, 2});
  auto value = t({10, 20, 30, 40}, {1, 1, 2, 2});
  const double sc = 1.0 / std::sqrt(2.0);
  const double w0 = std::exp(sc) / (std::exp(sc) + 1.0);  // head 0 scores (sc, 0)
  std::vector<float> expect = {float(w0 * 10 + (1 - w0) * 30), float(w0 * 20 + (1 - w0) * 40),
                               float((1 - w0) * 10 + w0 * 30), float((1 - w0) * 20 + w0 * 40)};
  expect_values(ops::scaled_dot_product_attention(q(), query, key, value), expect, 1e-4);
  // Causal with len_q == len_kv == 2: row 0 sees key 0 only.
  auto q2 = t({1, 0, 0, 1}, {1, 1, 2, 2});
  auto causal = ops::scaled_dot_product_attention(q(), q2, key, value, {}, true).to_floats(q());
  EXPECT_NEAR(causal[0], 10, 1e-4);
  EXPECT_NEAR(causal[1], 20, 1e-4);
  // Explicit scale 0 -> uniform weights... use scale 2 instead and check against the formula.
  const double w2 = std::exp(2.0) / (std::exp(2.0) + 1.0);
  auto scaled = ops::scaled_dot_product_attention(q(), query, key, value, {}, false, 2.0).to_floats(q());
  EXPECT_NEAR(scaled[0], w2 * 10 + (1 - w2) * 30, 1e-3);
  // Bool mask hiding key 0 for every query.
  auto mask = tensor::from_floats(q(), std::vector<float>{0, 1}, {1, 1, 1, 2}, dtype::boolean);
  auto masked = ops::scaled_dot_product_attention(q(), query, key, value, mask).to_floats(q());
  EXPECT_NEAR(masked[0], 30, 1e-4);
  EXPECT_NEAR(masked[3], 40, 1e-4);
}
