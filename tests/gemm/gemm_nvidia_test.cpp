// SPDX-License-Identifier: Apache-2.0
// The NVIDIA GEMM family (kernels/cl/gemm_nv.cl, gemm_mma.cl; variants 3-5): refused with a reason
// where it cannot run (CPU devices; inline PTX off NVIDIA's platform), and on NVIDIA GPUs every
// kernel and form against the double reference on each operand layout, split-K, batches, bias,
// 16-bit storage, and TF32 only on request. PRISM_DEVICE picks the device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/gemm_lowering.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/runtime.hpp"
#include "prism/tensor.hpp"

namespace {

using namespace prism;

queue& test_queue() {
  static auto* q = new queue();  // never destroyed: no OpenCL from static destructors
  return *q;
}

bool on_nvidia() {
  return test_queue().get_device().platform_name().find("NVIDIA") != std::string::npos;
}

tensor rand_tensor(const dims& shape, dtype t, unsigned seed) {
  std::vector<float> v(static_cast<std::size_t>(shape.product()));
  unsigned x = seed * 2654435761u + 12345u;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<float>((x >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return tensor::from_floats(test_queue(), v, shape, t);
}

comparison run_and_compare(op_call& call, const std::string& config) {
  queue& q = test_queue();
  const op_descriptor& d = op_registry::instance().get(call.op);
  if (call.outputs.empty()) allocate_outputs(q, d, call);
  enqueue_opencl(q, d, call, kernel_config::parse(config)).wait();
  const auto expected = compute_reference(q, d, call);
  std::vector<host_tensor> got;
  for (auto& t : call.outputs) got.push_back(read_host(q, t));
  return compare_outputs(d, call, expected, got, false);
}

// The refusals of every implementation for `config` (empty when one accepts).
std::vector<std::string> refusals(const op_call& call, const std::string& config) {
  const op_descriptor& d = op_registry::instance().get(call.op);
  std::vector<std::string> why;
  const auto full = d.config.complete(kernel_config::parse(config));
  if (select_implementation(d, test_queue().get_device(), call, full, &why)) return {};
  return why;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

op_call mm_call(std::int64_t m, std::int64_t n, std::int64_t k, dtype t, bool ta, bool tb, unsigned seed) {
  tensor a = ta ? rand_tensor({k, m}, t, seed).transpose(0, 1) : rand_tensor({m, k}, t, seed);
  tensor b = tb ? rand_tensor({n, k}, t, seed + 1).transpose(0, 1) : rand_tensor({k, n}, t, seed + 1);
  return op_call{"mm", {a, b}, {}, {}};
}

// The FP32 auto choice by its grid's waves, at the shapes measured on an H200 (132 units;
// RESULTS.md, "Issue 13, session 32"): each pick below was the fastest measured there. Pure
// arithmetic, so it runs on every device.
TEST(NvTiles, WavesPickTheMeasuredTiles) {
  struct pick {
    std::int64_t m, n, k;
    gemm_gpu_tile tile;
  };
  const gemm_gpu_tile wide{128, 256, 16, 1, 0, true}, tall_sk{256, 128, 8, 1, 1, false};
  const pick picks[] = {
      {4096, 4096, 4096, wide},
      {8192, 8192, 8192, wide},
      {2048, 2048, 2048, wide},  // full waves
      {1024, 11008, 4096, tall_sk},
      {512, 11008, 4096, tall_sk},
      {256, 11008, 4096, tall_sk},
      {512, 4096, 4096, tall_sk},
      {2048, 1024, 3072, tall_sk},                     // partial waves
      {256, 4096, 4096, {256, 128, 8, 4, 0, false}},   // 32 tiles: split K
      {1024, 1024, 1024, {64, 128, 16, 1, 0, false}},  // K too short to split
      {64, 4096, 4096, {64, 128, 16, 1, 2, false}},    // M = 64: stream-K, two groups a unit
      {128, 11008, 4096, {128, 256, 8, 1, 1, false}},  // M = 128: 43 tiles, stream-K
      {128, 4096, 11008, {128, 256, 16, 8, 0, true}},  // 16 tiles: split K
      {128, 4096, 4096, {128, 256, 16, 8, 0, true}},
  };
  for (const auto& p : picks) {
    const gemm_gpu_tile t = fp32_gpu_tile(p.m, p.n, p.k, 1, 132);
    EXPECT_EQ(t, p.tile) << p.m << "x" << p.n << "x" << p.k << ": got " << t.bm << "x" << t.bn << "x" << t.bk
                         << " split " << t.splits << " stream-K " << t.streamk << " swizzled " << t.swizzled;
  }
  // A batch counts its groups; one unit still gets a valid tile.
  EXPECT_EQ(fp32_gpu_tile(128, 4096, 4096, 16, 132), wide);
  EXPECT_EQ(fp32_gpu_tile(1, 1, 1, 1, 1).splits, 1);
}

// nv auto's small-M kernel: always up to 16 rows; past 16 only for weights whose repeated passes
// stay in L2 (the H200's measurements); 16-bit heads of 64k rows and more at four rows a warp.
TEST(NvTiles, SkinnyPicksTheMeasuredShapes) {
  using s = gemm_skinny_shape;
  EXPECT_EQ(nv_skinny_shape(1, 4096, 4096, true), (s{1, 1, 8}));
  EXPECT_EQ(nv_skinny_shape(1, 151936, 1024, true), (s{1, 1, 8}));
  EXPECT_EQ(nv_skinny_shape(1, 151936, 1024, false), (s{1, 4, 4}));
  EXPECT_EQ(nv_skinny_shape(1, 4096, 1024, false), (s{1, 1, 8}));
  EXPECT_EQ(nv_skinny_shape(5, 4096, 4096, true), (s{8, 8, 4}));
  EXPECT_EQ(nv_skinny_shape(3, 4096, 4096, false), (s{4, 8, 4}));
  EXPECT_EQ(nv_skinny_shape(32, 4096, 1024, true), (s{8, 8, 4}));
  EXPECT_EQ(nv_skinny_shape(32, 4096, 4096, true), (s{8, 8, 4}));
  EXPECT_EQ(nv_skinny_shape(32, 11008, 4096, true), std::nullopt);
  EXPECT_EQ(nv_skinny_shape(48, 4096, 1024, true), (s{8, 8, 4}));
  EXPECT_EQ(nv_skinny_shape(48, 4096, 4096, true), std::nullopt);
  EXPECT_EQ(nv_skinny_shape(64, 1024, 3072, true), (s{8, 8, 4}));
  EXPECT_EQ(nv_skinny_shape(64, 6144, 1024, true), std::nullopt);
  EXPECT_EQ(nv_skinny_shape(128, 1024, 1024, true), std::nullopt);
  EXPECT_EQ(nv_skinny_shape(32, 1024, 3072, false), (s{16, 2, 4}));
  EXPECT_EQ(nv_skinny_shape(32, 1024, 2048, false), std::nullopt);
  EXPECT_EQ(nv_skinny_shape(32, 4096, 3072, false), std::nullopt);
}

// The stream-K grid: whole waves stay unshared; otherwise the last partial wave and one full wave
// are shared by the resident groups; fewer tiles than groups: at most 8 groups a tile, and never
// more groups than k-iterations (a group without one would never arrive at its tile's counter).
TEST(NvTiles, StreamKGridSharesTheLastWaves) {
  EXPECT_EQ(streamk_grid(512, 512, 132), (gemm_streamk_grid{264, 132}));  // 4096^3, 128x256: 3.88 waves
  EXPECT_EQ(streamk_grid(528, 512, 132), (gemm_streamk_grid{528, 0}));    // whole waves
  EXPECT_EQ(streamk_grid(172, 512, 132), (gemm_streamk_grid{0, 132}));    // under two waves: all shared
  EXPECT_EQ(streamk_grid(32, 256, 264), (gemm_streamk_grid{0, 256}));     // M = 64: 8 groups a tile
  EXPECT_EQ(streamk_grid(1, 5, 132), (gemm_streamk_grid{0, 5}));          // one iteration a group
  EXPECT_EQ(streamk_grid(0, 5, 132), (gemm_streamk_grid{0, 0}));
  EXPECT_EQ(streamk_grid(7, 3, 0), (gemm_streamk_grid{7, 0}));  // no units reported: one group
}

// Config checks that hold on every device: lsw's tile constraints, stream-K against split-K.
TEST(NvGemm, ExplicitTileConfigsRefusedWithReason) {
  op_call call = mm_call(64, 64, 64, dtype::f32, false, false, 1);
  allocate_outputs(test_queue(), op_registry::instance().get("mm"), call);
  EXPECT_TRUE(any_contains(refusals(call, "variant=3,auto=0,tm=16,tn=64,tk=16,wm=4,wn=4,lsw=1"),
                           "lsw=1 needs tm and tn multiples of 32"));
  EXPECT_TRUE(any_contains(refusals(call, "variant=3,auto=0,tm=64,tn=64,tk=16,wm=8,wn=8,skg=1,sk=2"),
                           "exclude each other"));
}

TEST(NvGemm, RefusedWithReasonOffNvidia) {
  const device dev = test_queue().get_device();
  op_call call = mm_call(32, 32, 32, dtype::f32, false, false, 1);
  allocate_outputs(test_queue(), op_registry::instance().get("mm"), call);
  if (!on_nvidia()) {
    auto why = refusals(call, "variant=5,tm=64,tn=64,tk=16");
    EXPECT_TRUE(any_contains(why, "opencl.mma: inline PTX needs NVIDIA's OpenCL platform")) << why.size();
  } else {
    EXPECT_TRUE(refusals(call, "variant=5,tm=64,tn=64,tk=16,ldsm=1,cpa=1,st=3").empty())
        << "the H100's driver builds every probed inline-PTX form";
  }
  if (dev.is_cpu()) {
    for (const char* cfg : {"variant=3,auto=1", "variant=4", "variant=3,tm=64,tn=64,tk=16,wm=4,wn=4"}) {
      auto why = refusals(call, cfg);
      EXPECT_TRUE(any_contains(why, "is a CPU")) << cfg;
    }
  }
}

TEST(NvGemm, Fp32KernelsMatchReference) {
  if (test_queue().get_device().is_cpu()) GTEST_SKIP() << "the nv variants are refused on CPU devices";
  const char* configs[] = {
      "variant=3,auto=1",
      "variant=3,auto=0,tm=64,tn=64,tk=16,wm=4,wn=4",
      "variant=3,auto=0,tm=128,tn=64,tk=8,wm=8,wn=4,sk=3",
      "variant=3,auto=0,tm=64,tn=64,tk=16,wm=4,wn=4,skg=2",
      "variant=3,auto=0,tm=64,tn=128,tk=16,wm=8,wn=8,lsw=1,skg=1",
      "variant=4,mb=4,nb=2,warps=2",
  };
  // Aligned shapes take the new kernels; odd ones (k = 45) take the fallback inside.
  const std::int64_t shapes[][3] = {{100, 136, 200}, {7, 68, 260}, {33, 37, 45}};
  for (const char* cfg : configs)
    for (const auto& s : shapes)
      for (int layout = 0; layout < 4; ++layout) {
        op_call call = mm_call(s[0], s[1], s[2], dtype::f32, layout & 1, layout & 2, 3);
        const comparison r = run_and_compare(call, cfg);
        EXPECT_TRUE(r.ok) << cfg << " m=" << s[0] << " n=" << s[1] << " k=" << s[2] << " layout=" << layout
                          << ": " << r.message;
      }
  // linear (B k-contiguous) with bias at decode and small-M sizes, and a batch with bias via addmm.
  for (const char* cfg : configs)
    for (std::int64_t m : {1, 5, 16, 40, 64}) {
      op_call call{"linear",
                   {rand_tensor({m, 512}, dtype::f32, 4), rand_tensor({72, 512}, dtype::f32, 5),
                    rand_tensor({72}, dtype::f32, 6)},
                   {},
                   {}};
      const comparison r = run_and_compare(call, cfg);
      EXPECT_TRUE(r.ok) << cfg << " linear m=" << m << ": " << r.message;
    }
  for (const char* cfg : configs) {
    op_call call{
        "bmm", {rand_tensor({3, 40, 64}, dtype::f32, 7), rand_tensor({3, 64, 36}, dtype::f32, 8)}, {}, {}};
    const comparison r = run_and_compare(call, cfg);
    EXPECT_TRUE(r.ok) << cfg << " bmm: " << r.message;
    op_call add{"addmm",
                {rand_tensor({36}, dtype::f32, 9), rand_tensor({40, 256}, dtype::f32, 10),
                 rand_tensor({256, 36}, dtype::f32, 11)},
                {},
                {}};
    add.set("alpha", 2.0).set("beta", 0.5);
    const comparison ra = run_and_compare(add, cfg);
    EXPECT_TRUE(ra.ok) << cfg << " addmm: " << ra.message;
  }
}

// The small-M kernel on 16-bit storage (16-byte loads of 8 elements): decode and small-M linears,
// a k with a tail past the last 256 (520) and one not 8-aligned (the gemv fallback inside).
TEST(NvGemm, SixteenBitSkinnyMatchesReference) {
  if (test_queue().get_device().is_cpu()) GTEST_SKIP() << "the nv variants are refused on CPU devices";
  const char* configs[] = {"variant=3,auto=1", "variant=4,mb=1,nb=1,warps=8", "variant=4,mb=4,nb=2,warps=2"};
  for (dtype dt : {dtype::f16, dtype::bf16})
    for (const char* cfg : configs)
      for (std::int64_t m : {1, 5, 16})
        for (std::int64_t k : {512, 520, 45}) {
          op_call call{"linear",
                       {rand_tensor({m, k}, dt, 4), rand_tensor({72, k}, dt, 5), rand_tensor({72}, dt, 6)},
                       {},
                       {}};
          const comparison r = run_and_compare(call, cfg);
          EXPECT_TRUE(r.ok) << cfg << " " << dtype_name(dt) << " linear m=" << m << " k=" << k << ": "
                            << r.message;
        }
  // The shapes nv auto sends to it past 16 rows and at M = 1 with four rows a warp, and those
  // configs named: 24 rows of k = 3072 (16 a group), a 65536-row weight.
  for (dtype dt : {dtype::f16, dtype::bf16})
    for (const char* cfg :
         {"variant=3,auto=1", "variant=4,mb=16,nb=2,warps=4", "variant=4,mb=1,nb=4,warps=4"}) {
      op_call tall{"linear",
                   {rand_tensor({24, 3072}, dt, 7), rand_tensor({72, 3072}, dt, 8), rand_tensor({72}, dt, 9)},
                   {},
                   {}};
      const comparison r = run_and_compare(tall, cfg);
      EXPECT_TRUE(r.ok) << cfg << " " << dtype_name(dt) << " linear m=24 k=3072: " << r.message;
      op_call head{
          "linear", {rand_tensor({1, 64}, dt, 10), rand_tensor({65536, 64}, dt, 11), tensor()}, {}, {}};
      const comparison rh = run_and_compare(head, cfg);
      EXPECT_TRUE(rh.ok) << cfg << " " << dtype_name(dt) << " linear m=1 n=65536: " << rh.message;
    }
}

TEST(NvGemm, TensorCoreFormsMatchReference) {
  if (!on_nvidia()) GTEST_SKIP() << "inline PTX runs only on NVIDIA's OpenCL";
  const char* configs[] = {
      "variant=5,tm=64,tn=64,tk=32,wpm=2,wpn=2",
      "variant=5,tm=128,tn=64,tk=32,wpm=2,wpn=2,ldsm=1",
      "variant=5,tm=64,tn=128,tk=32,wpm=2,wpn=2,ldsm=1,cpa=1,st=3",
      "variant=5,tm=64,tn=64,tk=32,wpm=2,wpn=2,ldsm=1,cpa=1,st=2,sk=3",
      "variant=3,auto=1",
  };
  for (dtype t : {dtype::bf16, dtype::f16})
    for (const char* cfg : configs)
      for (int layout = 0; layout < 4; ++layout) {
        op_call call = mm_call(100, 136, 200, t, layout & 1, layout & 2, 12);
        const comparison r = run_and_compare(call, cfg);
        EXPECT_TRUE(r.ok) << dtype_name(t) << " " << cfg << " layout=" << layout << ": " << r.message;
        op_call lin{
            "linear",
            {rand_tensor({2, 40, 264}, t, 13), rand_tensor({72, 264}, t, 14), rand_tensor({72}, t, 15)},
            {},
            {}};
        const comparison rl = run_and_compare(lin, cfg);
        EXPECT_TRUE(rl.ok) << dtype_name(t) << " " << cfg << " linear: " << rl.message;
      }
}

TEST(NvGemm, Tf32OnlyOnRequest) {
  if (!on_nvidia()) GTEST_SKIP() << "TF32 tensor cores run only on NVIDIA's OpenCL";
  queue& q = test_queue();
  const op_descriptor& d = op_registry::instance().get("mm");
  const std::string cfg = "variant=5,tm=64,tn=64,tk=16,wpm=2,wpn=2,ldsm=1";
  // Without a request an f32 product stays within the f32 bound, whatever the config says.
  op_call plain = mm_call(96, 128, 1024, dtype::f32, false, true, 16);
  const comparison r = run_and_compare(plain, cfg);
  EXPECT_TRUE(r.ok) << "f32 without allow_tf32 must not use TF32: " << r.message;
  // Each way of asking: within the TF32 bound (the attribute's tolerance), and outside the f32
  // one (so TF32 really ran).
  for (int how = 0; how < 3; ++how) {
    op_call call = mm_call(96, 128, 1024, dtype::f32, false, true, 16);
    allocate_outputs(q, d, call);
    std::string c = cfg;
    if (how == 0) call.set("allow_tf32", true);
    if (how == 1) c += ",tf32=1";
    if (how == 2) setenv("PRISM_ALLOW_TF32", "1", 1);
    enqueue_opencl(q, d, call, kernel_config::parse(c)).wait();
    if (how == 2) unsetenv("PRISM_ALLOW_TF32");
    const std::vector<host_tensor> got = {read_host(q, call.outputs[0])};
    call.set("allow_tf32", true);
    const auto expected = compute_reference(q, d, call);
    const comparison tf32 = compare_outputs(d, call, expected, got, false);
    EXPECT_TRUE(tf32.ok) << "how=" << how << ": " << tf32.message;
    call.attrs.erase("allow_tf32");
    const comparison strict = compare_outputs(d, call, expected, got, false);
    EXPECT_FALSE(strict.ok) << "how=" << how << ": TF32 result unexpectedly within the f32 bound";
  }
}

// Hopper's wgmma (mma config wgmma=1, built as sm_90a PTX): every layout, partial tiles in M, N
// and K, each swizzle width (slices 32, 64 and 128 bytes deep), split-K, a wgmma left running
// under the next slice's copies (wgw=1), the linear epilogue with a bias; TF32 (k8 steps) on
// request; and the default route (variant 3, auto) on a large and a small-M shape. Devices whose driver
// rejects the form refuse it with the probe's reason.
TEST(NvGemm, WgmmaMatchesReference) {
  if (!on_nvidia()) GTEST_SKIP() << "inline PTX runs only on NVIDIA's OpenCL";
  const std::vector<std::string> half_configs = {
      "variant=5,tm=128,tn=128,tk=32,cpa=1,st=3,wgmma=1,wgw=1",
      "variant=5,tm=128,tn=256,tk=16,cpa=1,st=4,wgmma=1,wgw=1",
      "variant=5,tm=64,tn=64,tk=32,cpa=1,st=2,sk=3,wgmma=1",
      "variant=5,tm=64,tn=128,tk=64,cpa=1,st=2,wgmma=1",  // 128-byte swizzle
      "variant=5,tm=256,tn=64,tk=32,cpa=1,st=2,wgmma=1",  // four warpgroups
  };
  const std::vector<std::string> tf32_configs = {
      "variant=5,tm=128,tn=128,tk=16,cpa=1,st=3,wgmma=1,wgw=1",
      "variant=5,tm=64,tn=64,tk=8,cpa=1,st=2,sk=3,wgmma=1",
      "variant=5,tm=64,tn=64,tk=32,cpa=1,st=3,wgmma=1",
  };
  {
    op_call probe = mm_call(64, 64, 64, dtype::bf16, false, true, 3);
    const auto why = refusals(probe, half_configs[0]);
    if (any_contains(why, "wgmma")) GTEST_SKIP() << "the driver rejects wgmma: " << why.front();
  }
  for (dtype t : {dtype::bf16, dtype::f16})
    for (const auto& cfg : half_configs)
      for (int layout = 0; layout < 4; ++layout) {
        op_call call = mm_call(300, 136, 200, t, layout & 1, layout & 2, 21);
        if (layout == 2)
          EXPECT_TRUE(refusals(call, cfg).empty()) << cfg << ": the wgmma kernel must serve it";
        const comparison r = run_and_compare(call, cfg);
        EXPECT_TRUE(r.ok) << dtype_name(t) << " " << cfg << " layout=" << layout << ": " << r.message;
      }
  for (dtype t : {dtype::bf16, dtype::f32})
    for (const auto& cfg : t == dtype::f32 ? tf32_configs : half_configs) {
      op_call lin{
          "linear",
          {rand_tensor({2, 70, 264}, t, 23), rand_tensor({200, 264}, t, 24), rand_tensor({200}, t, 25)},
          {},
          {}};
      if (t == dtype::f32) lin.set("allow_tf32", true);  // TF32's bound, and leave to use it
      EXPECT_TRUE(refusals(lin, cfg).empty()) << cfg << ": the wgmma kernel must serve " << dtype_name(t);
      const comparison rl = run_and_compare(lin, cfg);
      EXPECT_TRUE(rl.ok) << dtype_name(t) << " " << cfg << " linear: " << rl.message;
    }
  for (std::int64_t m : {1100, 40}) {
    op_call call = mm_call(m, 2000, 200, dtype::bf16, false, true, 31);  // 144 and 16 128x128 tiles
    const comparison r = run_and_compare(call, "variant=3,auto=1");
    EXPECT_TRUE(r.ok) << "auto m=" << m << ": " << r.message;
  }
}

}  // namespace
