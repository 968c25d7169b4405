// Weight-only quantized GEMM (q8_0, q4_0, q4_1 weights; gemm_quant.cl): every kernel family
// (cpu, gemv, tiled, the nv auto choice) against the dequantized double-precision reference at
// M = 1, small M and large M, f16/bf16 activations, the dispatcher's choice, the host block
// codecs against GGUF's layouts, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <string_view>

#include <unistd.h>

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "ops_test_util.hpp"
#include "prism/ops.hpp"
#include "prism/runtime/graph.hpp"

namespace prism::test {
namespace {

const op_descriptor& linear_op() {
  return op_registry::instance().get("linear");
}

// A linear call: x [m, k] in `act`, weight [n, k] in `wt`, an optional bias in `act`.
op_call linear_call(queue& q, std::int64_t m, std::int64_t n, std::int64_t k, dtype act, dtype wt, bool bias,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  op_call c{"linear", {}, {}, {}};
  c.inputs = {kernels::random_tensor(q, {m, k}, act, rng, -1, 1),
              kernels::random_tensor(q, {n, k}, wt, rng, -1, 1),
              bias ? kernels::random_tensor(q, {n}, act, rng, -1, 1) : tensor()};
  allocate_outputs(q, linear_op(), c);
  return c;
}

kernel_config config(const char* text) {
  return linear_op().config.complete(kernel_config::parse(text));
}

// rms_norm_linear on [m, k] activations (norm weights in 0.5..1.5) and a [n, k] weight of `wt`.
op_call rms_norm_linear_call(queue& q, std::int64_t m, std::int64_t n, std::int64_t k, dtype wt,
                             std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  op_call c{"rms_norm_linear", {}, {}, {}};
  c.inputs = {kernels::random_tensor(q, {m, k}, dtype::f32, rng, -2, 2),
              kernels::random_tensor(q, {k}, dtype::f32, rng, 0.5, 1.5),
              kernels::random_tensor(q, {n, k}, wt, rng, -1, 1), tensor()};
  c.attrs["eps"] = 1e-5;
  allocate_outputs(q, op_registry::instance().get("rms_norm_linear"), c);
  return c;
}

// Why op `d` refuses call c at `cfg` on q's device ("" when an implementation serves it).
std::string refusal(queue& q, const op_descriptor& d, const op_call& c, const char* cfg) {
  std::vector<std::string> why;
  const kernel_config k = d.config.complete(kernel_config::parse(cfg));
  return select_implementation(d, q.get_device(), c, k, &why) != nullptr ? std::string()
                                                                          : ::testing::PrintToString(why);
}

// The programs built within `run`, as the options each was built with (PRISM_DUMP_PROGRAMS), one
// line a program. Only programs built there show: a test adds a define of its own
// (scoped_cl_options) so that its programs are not taken from the suite's memo.
std::string built_options(const std::function<void()>& run) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("prism_quant_programs_" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  env::override_for_testing("PRISM_DUMP_PROGRAMS", dir.string());
  run();
  env::override_for_testing("PRISM_DUMP_PROGRAMS", std::nullopt);
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".options") {
      std::ifstream in(e.path());
      all += std::string(std::istreambuf_iterator<char>(in), {}) + "\n";
    }
  std::filesystem::remove_all(dir);
  return all;
}

// One config per kernel family, and the shape classes each is for.
const char* const family_configs[] = {
    "variant=0,rm=4,qrn=4,qwg=2",        // cpu, several rows and columns per work-item
    "variant=0,rm=1,qrn=8,qwg=1",        // cpu, decode form
    "variant=0,rm=4,qrn=4,qwg=2,qa=1",   // cpu, int8 activations, several rows per work-item
    "variant=0,rm=1,qrn=1,qwg=32,qa=1",  // cpu, int8 activations, decode form (qa=2, the pocl route at M = 1: its own test)
    "variant=2,mb=4,nb=4,wg=64",         // gemv
    "variant=1,tm=32,tn=32,wm=4,wn=4",   // tiled
    "variant=4,mb=2,nb=4,warps=2",       // rows: 32-item teams per nb weight rows, partial groups
    "variant=4,mb=2,nb=4,warps=2,qa=1",  // rows on int8 activations (dp4a on NVIDIA)
    "variant=3,auto=1",                  // nv's auto: rows for M <= 8, tiled above
};

TEST(quant, every_kernel_family_matches_the_reference) {
  queue& q = shared_queue();
  std::uint64_t seed = 1;
  for (dtype wt : quantized_dtypes)
    for (const char* cfg : family_configs)
      for (std::int64_t m : {1, 5, 70}) {
        SCOPED_TRACE(std::string(dtype_name(wt)) + " m=" + std::to_string(m) + " " + cfg);
        op_call c = linear_call(q, m, 67, 96, dtype::f32, wt, m != 5, ++seed);
        run_and_compare(linear_op(), c, config(cfg), false);
      }
}

// The CPU kernel on int8 activations in tiles of several activation and weight rows a work-item
// (prefill): on AVX-512 hosts q4_0 and q4_1 walk four blocks a 512-bit register in every tile
// (gemm_quant.cl's Q_G4), elsewhere, for q8_0 and with -DPRISM_Q_G4=0 block by block. Against the
// reference at K = 576 (four groups of four blocks, then two single blocks) and K = 256 (whole
// groups), M = 3 and 32, N = 37 (partial tiles both ways), f32 and bf16 activations; tiles 4 x 4
// (the pocl default), 4 x 2, 2 x 4 and 1 x 8, and 4 x 4 block by block.
TEST(quant, cpu_tiles_match_the_reference) {
  queue& q = shared_queue();
  const std::vector<const char*> tiles = {
      "variant=0,rm=4,qrn=4,qwg=2,qa=1", "variant=0,rm=4,qrn=2,qwg=2,qa=1", "variant=0,rm=2,qrn=4,qwg=2,qa=1",
      "variant=0,rm=1,qrn=8,qwg=2,qa=1"};
  std::uint64_t seed = 5000;
  for (const bool block_walk : {false, true}) {
    scoped_cl_options scoped(block_walk ? std::optional<std::string>("-DPRISM_Q_G4=0") : std::nullopt);
    const std::vector<dtype> weights = block_walk ? std::vector<dtype>{dtype::q4_0, dtype::q4_1}
                                                  : std::vector<dtype>{dtype::q4_0, dtype::q4_1, dtype::q8_0};
    for (dtype wt : weights)
      for (dtype act : {dtype::f32, dtype::bf16})
        for (std::int64_t k : {576, 256})
          for (std::int64_t m : {3, 32})
            for (std::size_t t = 0; t < (block_walk ? 1 : tiles.size()); ++t) {
              SCOPED_TRACE(std::string(block_walk ? "-DPRISM_Q_G4=0 " : "") + dtype_name(wt) + " " +
                           dtype_name(act) + " k=" + std::to_string(k) + " m=" + std::to_string(m) + " " +
                           tiles[t]);
              op_call c = linear_call(q, m, 37, k, act, wt, m == 3, ++seed);
              run_and_compare(linear_op(), c, config(tiles[t]), false);
            }
  }
}

// Every config of generic's space and of this device's profile (every shipped profile with
// PRISM_OPS_ALL_VENDORS) on a quantized weight, as the op suite does for float operands: no
// config the tuner may pick for a quantized call can be wrong.
TEST(quant, every_vendor_config) {
  queue& q = shared_queue();
  std::vector<tune_space> spaces = {dispatch::vendor_tune_space(linear_op(), "generic"),
                                    suite_space(linear_op())};
  if (std::getenv("PRISM_OPS_ALL_VENDORS"))
    for (const char* v : {"pocl", "nvidia"}) spaces.push_back(dispatch::vendor_tune_space(linear_op(), v));
  int ran = 0;
  for (const auto& space : spaces)
    for (const auto& cfg : space.configs) {
      op_call c = linear_call(q, 3, 67, 64, dtype::f32, dtype::q4_1, true, 11);
      std::vector<std::string> refusals;
      if (!select_implementation(linear_op(), q.get_device(), c, cfg, &refusals))
        continue;  // e.g. local memory
      SCOPED_TRACE(space.vendor + " " + cfg.str());
      run_and_compare(linear_op(), c, cfg, false);
      ++ran;
    }
  EXPECT_GT(ran, 0);
}

// rms_norm_linear on a block-quantized weight: both kernels (variant 1: the CPU decode GEMV;
// 0: the GPU rows kernel, on int8 activations with 4-byte slots or a lane per block (qp=2; qp=3
// quantizing the normalized row in the kernel itself, no quantize launch: 2 teams of 4 rows, 4 blocks
// a lane a step)) with
// the norm in the int8 quantization (qa=1) and as float rows (qa=0),
// against the double-precision norm and dequantized weight; f32 and bf16 activations, a bias,
// several rows, and K of 576 (18 blocks: a norm group of 32 items, 14 idle).
TEST(quant, rms_norm_linear_on_quantized_weights) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("rms_norm_linear");
  std::uint64_t seed = 500;
  for (dtype wt : quantized_dtypes)
    for (dtype act : {dtype::f32, dtype::bf16})
      for (std::int64_t m : {1, 3}) {
        std::mt19937_64 rng(++seed);
        op_call c{"rms_norm_linear", {}, {}, {}};
        c.inputs = {kernels::random_tensor(q, {m, 576}, act, rng, -2, 2),
                    kernels::random_tensor(q, {576}, act, rng, 0.5, 1.5),
                    kernels::random_tensor(q, {45, 576}, wt, rng, -1, 1),
                    m == 1 ? kernels::random_tensor(q, {45}, act, rng, -1, 1) : tensor()};
        c.attrs["eps"] = 1e-5;
        allocate_outputs(q, d, c);
        for (const char* cfg : {"variant=1,qa=1", "variant=1,qa=0", "variant=0,qa=1", "variant=0,qa=1,qp=2",
                                "variant=0,qa=1,qp=3,nb=4,wg=64,qu=4", "variant=0,qa=0"}) {
          SCOPED_TRACE(std::string(dtype_name(wt)) + " " + dtype_name(act) + " m=" + std::to_string(m) + " " +
                       cfg);
          run_and_compare(d, c, d.config.complete(kernel_config::parse(cfg)), false);
        }
      }
}

// linear_silu_and_mul on block-quantized weights: the CPU kernel's gate/up row pairs (built with
// Q_GATED, each work-item the gate row j and the up row F + j) on float activations (qa=0,
// gemm_q_cpu) and on int8 ones (gemm_q_cpu_i8, two pairs a work-item), quantized by a launch (qa=1) or by the
// kernel's first work-group (qa=2), with and without the norm, against the dequantized double reference: K =
// 576 (four groups of four blocks, then two single blocks), F = 37 (partial work-groups), M 1 and 3, f32
// activations and bf16 for one case. qa=2 gives qa=1's bytes. Refused: the GPU GEMV (variant 0), naming why,
// and nb other than 1 on float activations; the AVX512-VNNI walk (qx=1) where the host has it. The config's
// wg and nb reach the kernel's program.
TEST(quant, gated_gemv_on_quantized_weights) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("linear_silu_and_mul");
  auto gated_call = [&](std::int64_t m, dtype act, dtype wt, bool norm, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    op_call c{"linear_silu_and_mul", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {m, 576}, act, rng, -2, 2),
                kernels::random_tensor(q, {74, 576}, wt, rng, -1, 1),
                norm ? kernels::random_tensor(q, {576}, act, rng, 0.5, 1.5) : tensor()};
    if (norm) c.attrs["eps"] = 1e-5;
    allocate_outputs(q, d, c);
    return c;
  };
  struct form {
    dtype wt, act;
    bool norm;
  };
  std::uint64_t seed = 1700;
  for (const form f : {form{dtype::q4_0, dtype::f32, true}, form{dtype::q4_0, dtype::f32, false},
                       form{dtype::q8_0, dtype::f32, true}, form{dtype::q4_1, dtype::bf16, false}})
    for (std::int64_t m : {1, 3}) {
      SCOPED_TRACE(std::string(dtype_name(f.wt)) + " " + dtype_name(f.act) + (f.norm ? " norm" : "") +
                   " m=" + std::to_string(m));
      op_call c = gated_call(m, f.act, f.wt, f.norm, ++seed);
      run_and_compare(d, c, d.config.complete(kernel_config::parse("variant=1,nb=1,qa=0")), false);
      run_and_compare(d, c, d.config.complete(kernel_config::parse("variant=1,nb=2,qa=1")), false);
      const auto launched = c.outputs[0].to_host(q);
      run_and_compare(d, c, d.config.complete(kernel_config::parse("variant=1,nb=2,qa=2")), false);
      EXPECT_EQ(c.outputs[0].to_host(q), launched);
    }
  op_call c = gated_call(1, dtype::f32, dtype::q4_0, true, ++seed);
  const std::string gpu_why = refusal(q, d, c, "variant=0,qa=1");
  EXPECT_NE(gpu_why.find("runs on the CPU kernel (variant=1)"), std::string::npos) << gpu_why;
  // The config's shape reaches the CPU kernel: wg is its group (Q_LX, reqd_work_group_size) and
  // nb the gate/up pairs a work-item walks on int8 activations (Q_PAIRS: nb gate rows, then
  // their up rows), and the values do not depend on either. Before, every config ran one pair
  // a work-item, 32 a group. F = 37 leaves the last work-item one pair of two. On float
  // activations a work-item walks one pair's two rows together: nb other than 1 is refused.
  {
    scoped_cl_options fresh("-DPRISM_TEST_GATED_GROUP=1");
    std::vector<double> want;
    const std::string one = built_options([&] {
      run_and_compare(d, c, d.config.complete(kernel_config::parse("variant=1,nb=1,wg=32,qa=2")), false);
      want = read_host(q, c.outputs[0]).values;
    });
    const std::string two = built_options([&] {
      run_and_compare(d, c, d.config.complete(kernel_config::parse("variant=1,nb=2,wg=16,qa=2")), false);
    });
    EXPECT_EQ(read_host(q, c.outputs[0]).values, want);
    const std::regex lx32("-DQ_LX=32(\\s|$)"), lx16("-DQ_LX=16(\\s|$)"), p1("-DQ_PAIRS=1(\\s|$)"),
        p2("-DQ_PAIRS=2(\\s|$)");
    EXPECT_TRUE(std::regex_search(one, lx32) && std::regex_search(one, p1) && !std::regex_search(one, p2))
        << one;
    EXPECT_TRUE(std::regex_search(two, lx16) && std::regex_search(two, p2) && !std::regex_search(two, p1))
        << two;
  }
  const std::string nb_why = refusal(q, d, c, "variant=1,nb=2,wg=16,qa=0");
  EXPECT_NE(nb_why.find("together a work-item: nb=1, got nb=2"), std::string::npos) << nb_why;
  if (refusal(q, d, c, "variant=1,nb=1,qa=2,qx=1").empty())
    run_and_compare(d, c, d.config.complete(kernel_config::parse("variant=1,nb=1,qa=2,qx=1")), false);
}

// A post_attention call on block-quantized weights of type wt: hidden 64, attention width 96, MLP
// width I (192: whole block pairs, as qp=1 reads them); the output is the hidden input itself when in_place
// (as decode runs it at M = 1).
op_call quant_post_attention_call(queue& q, std::int64_t m, dtype act, dtype wt, std::uint64_t seed,
                                  bool in_place, std::int64_t I = 192, std::int64_t A = 96) {
  std::mt19937_64 rng(seed);
  const std::int64_t H = 64;
  op_call c{"post_attention", {}, {}, {}};
  c.inputs = {kernels::random_tensor(q, {m, H}, act, rng, -1, 1),
              kernels::random_tensor(q, {m, A}, act, rng, -1, 1),
              kernels::random_tensor(q, {H, A}, wt, rng, -0.1, 0.1),
              kernels::random_tensor(q, {H}, act, rng, 0.5, 1.5),
              kernels::random_tensor(q, {2 * I, H}, wt, rng, -0.125, 0.125),
              kernels::random_tensor(q, {H, I}, wt, rng, -0.08, 0.08)};
  c.attrs["eps"] = 1e-6;
  if (in_place)
    c.outputs = {c.inputs[0]};
  else
    allocate_outputs(q, op_registry::instance().get("post_attention"), c);
  return c;
}

// post_attention (o projection, norm, gated MLP, down projection in one op) on block-quantized
// weights read in place: each kernel form (variant 0 as one chained launch, the warp form 2, the
// CPU rows form 1; the op suite's cases run variant 0 as three launches) and int8 activations
// (qa=1: five launches everywhere, chained on GPUs) with f32, f16 and bf16 activations, at M = 1
// (in place, as decode runs it) and M = 3, against the dequantized double-precision reference.
TEST(quant, post_attention_on_quantized_weights) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("post_attention");
  std::vector<const char*> configs = {"variant=0,chain=1,mb=2,nb=4,wg=64",
                                      "variant=2,chain=1,mb=2,nb=2,wg=64", "variant=1,chain=0,nb=4,wg=8,vw=8",
                                      "variant=0,chain=0,mb=2,nb=2,wg=32,qa=1"};
  if (!q.get_device().is_cpu())  // the chained int8 form builds on GPUs only
    configs.insert(configs.end(),
                   {"variant=0,chain=1,mb=2,nb=2,wg=64,qa=1", "variant=2,chain=1,mb=2,nb=2,wg=64,qa=1",
                    "variant=0,chain=1,mb=2,nb=2,wg=64,qa=1,qp=1,qo=1",
                    "variant=2,chain=1,mb=2,nb=2,wg=64,qa=1,qp=1,qo=2"});
  const dtype acts[] = {dtype::f32, dtype::f16, dtype::bf16};
  std::uint64_t seed = 900;
  int combo = 0;
  // Each weight dtype meets each form once and the activation dtypes in turn (PoCL compiles cost
  // ~1 s a program): 12 calls on CPUs.
  for (dtype wt : quantized_dtypes)
    for (const char* cfg : configs) {
      const dtype act = acts[combo % 3];
      const std::int64_t m = 1 + 2 * (combo++ % 2);
      // qo=2 walks block pairs in every stage: an attention width of whole pairs.
      const std::int64_t A = std::string_view(cfg).find("qo=2") == std::string_view::npos ? 96 : 128;
      op_call c = quant_post_attention_call(q, m, act, wt, ++seed, m == 1, 192, A);
      SCOPED_TRACE(std::string(dtype_name(wt)) + " " + dtype_name(act) + " m=" + std::to_string(m) + " " +
                   cfg);
      run_and_compare(d, c, d.config.complete(kernel_config::parse(cfg)), false);
    }
}

// post_attention's int8 activations (qa=1, with 16-bit slot loads and with block pairs, qp=1,
// and with stage 1 on int8 too, qo=1) against its float ones on the same call: the suite's
// bound above is a worst case summed over three stages (orders above the error it sees), so this
// holds the int8 form to llama.cpp's test-backend-ops measure for quantized types instead, the
// normalized mean squared error sum (int8 - float)^2 / sum float^2 <= 5e-4. A wrong block scale,
// slot or nibble moves it to ~1.
// Sum of (got - ref)^2 and of ref^2 over two outputs of one call: their ratio is llama.cpp's
// normalized mean squared error.
struct squared_error {
  double err = 0, ref = 0;
};
squared_error squared_error_of(const std::vector<double>& got, const std::vector<double>& ref) {
  squared_error e;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    e.err += (got[i] - ref[i]) * (got[i] - ref[i]);
    e.ref += ref[i] * ref[i];
  }
  return e;
}

TEST(quant, post_attention_int8_activations_track_float) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("post_attention");
  const std::string form =
      q.get_device().is_cpu() ? "variant=0,chain=0,mb=2,nb=2,wg=32" : "variant=0,chain=1,mb=2,nb=2,wg=64";
  std::uint64_t seed = 970;
  for (dtype wt : quantized_dtypes) {
    SCOPED_TRACE(dtype_name(wt));
    // An attention width of whole block pairs (128), which qo=2 needs and qo=1 walks as pairs.
    op_call c = quant_post_attention_call(q, 3, dtype::f32, wt, ++seed, false, 192, 128);
    // qa=0, the two int8 walks, the pair walk with the quantize steps inside the stages (qf), and
    // with stage 1 on int8 activations too (qo: a step of its own, 1, or in each task's local
    // memory, 2), and qo=1 with the steps inside the stages (the nvidia route at hidden >= 4096,
    // which adds qb=1: checked after the loop).
    const char* const forms[] = {",qa=0",           ",qa=1,qp=1,qf=1,qo=1", ",qa=1,qp=0",     ",qa=1,qp=1",
                                 ",qa=1,qp=1,qf=1", ",qa=1,qp=1,qo=1",      ",qa=1,qp=1,qo=2"};
    constexpr int n_forms = 7;
    std::vector<double> out[n_forms];
    run_and_compare(
        d, c,
        d.config.complete(kernel_config::parse("variant=0,chain=0,mb=2,nb=2,wg=32,qa=1,qp=1,qf=1,qb=1")),
        false);
    const std::vector<double> qb_out = read_host(q, c.outputs[0]).values;
    if (wt == dtype::q4_0) {
      // qb=1's tasks in more warps (stage 1: 16 warps of 2 units, stage 2: 8 of 4): each unit's lanes
      // split K as at 4 warps, so the result is the same bit for bit. Another call with other values
      // runs first, so that the int8 rows it reads are its own, not those the run above left.
      op_call other = quant_post_attention_call(q, 3, dtype::f32, wt, seed + 500, false, 192, 128);
      const std::string qb = "variant=0,chain=0,mb=2,nb=2,wg=32,qa=1,qp=1,qf=1,qb=1";
      run_and_compare(d, other, d.config.complete(kernel_config::parse(qb)), false);
      run_and_compare(d, c, d.config.complete(kernel_config::parse(qb + ",qw1=16,qw2=8")), false);
      const std::vector<double> warps = read_host(q, c.outputs[0]).values;
      for (std::size_t i = 0; i < qb_out.size(); ++i)
        ASSERT_EQ(warps[i], qb_out[i]) << "qb=1 at qw1=16, qw2=8 against qw 4 at " << i;
    }
    for (int f = 0; f < n_forms; ++f) {
      run_and_compare(d, c, d.config.complete(kernel_config::parse(form + forms[f])), false);
      out[f] = read_host(q, c.outputs[0]).values;
    }
    for (int f = 1; f < n_forms; ++f) {
      const auto [err, ref] = squared_error_of(out[f], out[0]);
      ASSERT_GT(ref, 0.0);
      EXPECT_LE(err / ref, 5e-4) << forms[f]
                                 << ": int8 activations' normalized mean squared error against float ones";
      EXPECT_GT(err, 0.0) << forms[f] << " gave the float result: the int8 walk did not run";
    }
    // The int8 forms sum the same block products (and qf the norm's squares) in another order:
    // they differ only where that order flips one of the roundings of h or the activations, far
    // below their distance to float: qp=1 against qp=0, qf=1 against qp=1, and qf=1,qo=1
    // against qo=1.
    for (const auto [f, g] : {std::pair{3, 2}, std::pair{4, 3}, std::pair{1, 5}}) {
      const auto [cross, ref] = squared_error_of(out[f], out[g]);
      EXPECT_LE(cross / ref, 1e-6) << forms[f] << " against " << forms[g];
    }
    // qb=1 (run first above, so that no earlier form on this call left its int8 rows in the
    // workspace): stages 1 and 2 as whole-block tasks that quantize their own blocks (no counters),
    // the same block arithmetic as qf=1 on h and activations summed in another order.
    {
      const auto [err, ref] = squared_error_of(qb_out, out[0]);
      EXPECT_LE(err / ref, 5e-4) << "qb=1 against float activations";
      EXPECT_GT(err, 0.0) << "qb=1 gave the float result: the int8 walk did not run";
      const auto [cross, qf_ref] = squared_error_of(qb_out, out[4]);
      EXPECT_LE(cross / qf_ref, 1e-6) << "qb=1 against qf=1";
    }
    // qo quantizes the attention output as well: not the pair walk's result, yet as close to float.
    double moved = 0;
    for (std::size_t i = 0; i < out[0].size(); ++i) moved += std::fabs(out[5][i] - out[3][i]);
    EXPECT_GT(moved, 0.0) << "qo=1 gave the float stage 1's result: the int8 stage 1 did not run";
    // qo=2 quantizes the same rows with the same arithmetic, in local memory: qo=1's result.
    for (std::size_t i = 0; i < out[0].size(); ++i)
      ASSERT_EQ(out[6][i], out[5][i]) << "qo=2 against qo=1 at " << i;
  }
  // qb=2 (stage 2 alone in whole-block tasks, stage 1 counting its blocks) on a call of its own, first
  // (no earlier form's int8 rows of these inputs in the workspace), against float activations.
  {
    op_call c = quant_post_attention_call(q, 3, dtype::bf16, dtype::q4_0, ++seed, false, 192, 128);
    run_and_compare(
        d, c,
        d.config.complete(kernel_config::parse("variant=0,chain=0,mb=2,nb=2,wg=32,qa=1,qp=1,qf=1,qb=2")),
        false);
    const std::vector<double> got = read_host(q, c.outputs[0]).values;
    run_and_compare(d, c, d.config.complete(kernel_config::parse(form + ",qa=0")), false);
    const std::vector<double> flt = read_host(q, c.outputs[0]).values;
    const auto [err, ref] = squared_error_of(got, flt);
    EXPECT_LE(err / ref, 5e-4) << "qb=2 against float activations";
    EXPECT_GT(err, 0.0) << "qb=2 gave the float result: the int8 walk did not run";
  }
  // qo=2 where the attention width is not whole block pairs (96): qo=1's quantize step serves it, the
  // same result bit for bit (the nvidia route asks qo=2 of any shape at hidden >= 4096).
  {
    op_call c = quant_post_attention_call(q, 1, dtype::bf16, dtype::q4_0, ++seed, false, 192, 96);
    std::vector<double> got[2];
    for (int f = 0; f < 2; ++f) {
      run_and_compare(
          d, c, d.config.complete(kernel_config::parse(form + (f ? ",qa=1,qp=1,qo=2" : ",qa=1,qp=1,qo=1"))),
          false);
      got[f] = read_host(q, c.outputs[0]).values;
    }
    for (std::size_t i = 0; i < got[0].size(); ++i)
      ASSERT_EQ(got[1][i], got[0][i]) << "qo=2 against qo=1 at " << i;
  }
  // qp=1 where the MLP width is not whole block pairs (160): the slot walk serves it.
  op_call c = quant_post_attention_call(q, 1, dtype::bf16, dtype::q4_0, ++seed, false, 160);
  run_and_compare(d, c, d.config.complete(kernel_config::parse(form + ",qa=1,qp=1")), false);
}

// The q4 weight walks of the rows GEMV and of post_attention's chained block turn nibbles into
// floats with the 2^23 bit trick on GPUs (Q_MAGIC, quant_common.cl) and with conversions on CPUs.
// Both forms run here on any device (PRISM_CL_OPTIONS -DQ_MAGIC=0 / 1): each matches the
// dequantized reference, and they agree bit for bit (the same exact weight values either way).
TEST(quant, nibble_floats_by_bits_match_the_conversion) {
  queue& q = shared_queue();
  const op_descriptor& pa = op_registry::instance().get("post_attention");
  std::uint64_t seed = 950;
  for (dtype wt : {dtype::q4_0, dtype::q4_1})
    for (dtype act : {dtype::f32, dtype::bf16}) {
      SCOPED_TRACE(std::string(dtype_name(wt)) + " activations " + dtype_name(act));
      op_call lin = linear_call(q, 3, 37, 256, act, wt, true, ++seed);
      op_call blk = quant_post_attention_call(q, 1, act, wt, ++seed, false);  // both forms read one input
      const kernel_config rows = config("variant=4,mb=2,nb=2,warps=2");
      const kernel_config chain =
          pa.config.complete(kernel_config::parse("variant=2,chain=1,mb=2,nb=2,wg=64"));
      std::vector<double> got[2][2];
      for (int magic : {0, 1}) {
        scoped_cl_options options("-DQ_MAGIC=" + std::to_string(magic));
        run_and_compare(linear_op(), lin, rows, false);
        got[magic][0] = read_host(q, lin.outputs[0]).values;
        run_and_compare(pa, blk, chain, false);
        got[magic][1] = read_host(q, blk.outputs[0]).values;
      }
      EXPECT_EQ(got[0][0], got[1][0]) << "rows GEMV";
      EXPECT_EQ(got[0][1], got[1][1]) << "post_attention block";
    }
}

// GPUs read q8_0 blocks in the lane-per-block walks (qp=2, and qp=3 quantizing its row) as 32-bit
// words and funnel shifts (QW32, gemm_quant.cl), where CPUs and the other walks take 16-bit
// slots. Both forms run here on any device (PRISM_CL_OPTIONS -DQW32=0 / 1) and agree bit for bit:
// 71 blocks a row (K = 2272) puts blocks and rows at both 4-byte alignments, and 19 rows end the
// weight on a block that starts on a boundary (where a ninth whole word would read past it).
TEST(quant, q8_0_blocks_in_32_bit_words_match_the_16_bit_slots) {
  queue& q = shared_queue();
  std::uint64_t seed = 970;
  const std::pair<const char*, std::int64_t> forms[] = {{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=2", 1},
                                                        {"variant=4,mb=2,nb=2,warps=2,qa=1,qp=2", 3},
                                                        {"variant=4,mb=1,nb=2,warps=2,qa=1,qp=3", 1}};
  for (const auto& [cfg, m] : forms) {
    SCOPED_TRACE(std::string(cfg) + " m=" + std::to_string(m));
    op_call c = linear_call(q, m, 19, 2272, dtype::bf16, dtype::q8_0, false, ++seed);
    std::vector<double> got[2];
    for (int w32 : {0, 1}) {
      scoped_cl_options options("-DQW32=" + std::to_string(w32));
      run_and_compare(linear_op(), c, config(cfg), false);
      got[w32] = read_host(q, c.outputs[0]).values;
    }
    EXPECT_EQ(got[0], got[1]);
  }
}

// The three weights of post_attention take one dtype: a quantized o projection with float MLP
// weights, or with MLP weights in another block format, is refused naming the tensor.
TEST(quant, post_attention_refuses_mixed_weight_dtypes) {
  queue& q = shared_queue();
  std::mt19937_64 rng(77);
  auto call = [&](dtype wo, dtype mlp, std::int64_t A) {  // A: the attention width
    op_call c{"post_attention", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {1, 64}, dtype::f32, rng, -1, 1),
                kernels::random_tensor(q, {1, A}, dtype::f32, rng, -1, 1),
                kernels::random_tensor(q, {64, A}, wo, rng, -1, 1),
                kernels::random_tensor(q, {64}, dtype::f32, rng, 0.5, 1.5),
                kernels::random_tensor(q, {192, 64}, mlp, rng, -1, 1),
                kernels::random_tensor(q, {64, 96}, mlp, rng, -1, 1)};
    c.attrs["eps"] = 1e-6;
    c.outputs = {tensor::empty(q, {1, 64}, dtype::f32)};
    return c;
  };
  op_call mixed = call(dtype::q4_0, dtype::f32, 64);
  expect_refused(q, op_registry::instance().get("post_attention"), mixed,
                 {"'gate_up_weight' is f32", "q4_0"});
  op_call two_blocks = call(dtype::q4_0, dtype::q8_0, 64);
  expect_refused(q, op_registry::instance().get("post_attention"), two_blocks,
                 {"'gate_up_weight' is q8_0 and 'o_weight' q4_0", "one of q8_0, q4_0, q4_1 for all three"});
}

TEST(quant, f16_and_bf16_activations) {
  queue& q = shared_queue();
  for (dtype act : {dtype::f16, dtype::bf16})
    for (std::int64_t m : {1, 6, 40}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " m=" + std::to_string(m));
      op_call c = linear_call(q, m, 35, 128, act, dtype::q4_0, true, 100 + m);
      run_and_compare(linear_op(), c, config("variant=0,rm=4,qrn=2,qwg=4"), false);
      run_and_compare(linear_op(), c, config("variant=0,rm=4,qrn=2,qwg=4,qa=1"), false);
      op_call g = linear_call(q, m, 35, 128, act, dtype::q8_0, false, 200 + m);
      run_and_compare(linear_op(), g, config("variant=3,auto=1"), false);
    }
}

// qa=1 computes sum_k w_k * d q_k with llama.cpp's activation blocks (d = absmax / 127 in f32,
// q = rint(a / d)): against that host model the only error left is f32 rounding, far inside the
// op's tolerance (which allows absmax / 254 per activation); a wrong scale, sum or nibble is not.
TEST(quant, int8_activations_follow_the_per_block_rounding) {
  queue& q = shared_queue();
  std::uint64_t seed = 300;
  // The CPU kernel (at M = 1 on AVX-512 four blocks a register; at K = 2272 on an x86 host with
  // AVX512-VNNI through vpdpbusd), the GPU rows kernel, its block-pair form and its lane-per-block
  // form (dp4a on NVIDIA, four multiplies elsewhere) all follow the same host model. K = 192: six
  // blocks, one group of four and two more (on AVX-512 the pair after the groups); the
  // lane-per-block form also at K = 2272 (71 blocks: two full steps of 2 x 32 lanes and a partial one;
  // with qu=4 one partial step of 4 x 32), and that form again quantizing its row in local memory
  // (qp=3: the kernel's own rounding; qu=1: three steps, the last partial).
  struct form {
    const char* cfg;
    std::int64_t k;
  };
  for (const form f :
       {form{"variant=0,rm=4,qrn=4,qwg=1,qa=1", 192}, form{"variant=0,rm=1,qrn=1,qwg=32,qa=1", 192},
        form{"variant=0,rm=1,qrn=1,qwg=32,qa=1", 2272}, form{"variant=4,mb=2,nb=4,warps=2,qa=1", 192},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=1", 192},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=2", 192},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=2", 2272},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=3", 192},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=3", 2272},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=2,qu=4", 2272},
        form{"variant=4,mb=2,nb=2,warps=2,qa=1,qp=3,qu=1", 2272}})
    for (dtype wt : quantized_dtypes)
      for (std::int64_t m : {1, 5, 33}) {
        const char* cfg = f.cfg;
        SCOPED_TRACE(std::string(dtype_name(wt)) + " m=" + std::to_string(m) + " k=" + std::to_string(f.k) +
                     " " + cfg);
        const std::int64_t n = 19, k = f.k;
        op_call c = linear_call(q, m, n, k, dtype::f32, wt, false, ++seed);
        enqueue_opencl(q, linear_op(), c, config(cfg));
        const host_tensor got = read_host(q, c.outputs[0]);
        const host_tensor a = read_host(q, c.inputs[0]), w = read_host(q, c.inputs[1]);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double want = 0, mag = 0, tie = 0;
            for (std::int64_t kb = 0; kb < k; kb += 32) {
              float amax = 0;
              for (std::int64_t kk = kb; kk < kb + 32; ++kk)
                amax = std::max(amax, std::fabs(static_cast<float>(a.values[i * k + kk])));
              const float d = amax * (1.0f / 127.0f), id = d > 0 ? 1.0f / d : 0.0f;
              for (std::int64_t kk = kb; kk < kb + 32; ++kk) {
                const float x = static_cast<float>(a.values[i * k + kk]) * id;
                const double qa = std::nearbyint(x);
                want += w.values[j * k + kk] * static_cast<double>(d) * qa;
                mag += std::fabs(w.values[j * k + kk] * static_cast<double>(d) * qa);
                // OpenCL's float division may be 2.5 ulp off (NVIDIA's is), so a product within a
                // few ulp of a rounding tie may round either way on the device: one step of slack.
                if (std::fabs(std::fabs(x - std::floor(x)) - 0.5f) <
                    8.0f * std::ldexp(1.0f, -23) * std::fabs(x))
                  tie += std::fabs(w.values[j * k + kk] * static_cast<double>(d));
              }
            }
            EXPECT_NEAR(got.values[i * n + j], want, 1e-5 * mag + tie + 1e-30)
                << "row " << i << " column " << j;
          }
      }
}

// qx=1, the CPU decode walk through AVX512-VNNI's vpdpbusd, a key of linear's and of
// rms_norm_linear's CPU kernel: on a CPU device whose x86 host has it its programs are built
// with the walk's define (those of qx=0 without it: checked in the programs PRISM_DUMP_PROGRAMS
// writes), and it computes the same integer block sums and the same float steps as the walk
// without it, so q4_0 and q4_1 agree bit for bit with qx=0 at K = 192 (one group of four blocks
// and two more) and K = 2272 (the long-row prefetch, 71 blocks), at M = 1 and at M = 3 (rm=1:
// one activation row a work-item). Where it cannot run (q8_0, several activation rows a work-item, float
// activations, another device or host) the dispatcher refuses it naming why.
TEST(quant, x86_dot_product_walk_matches_or_is_refused) {
  queue& q = shared_queue();
  bool host_vnni = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  host_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#endif
  const bool runs = host_vnni && q.get_device().is_cpu();
  const op_descriptor& nl = op_registry::instance().get("rms_norm_linear");
  // Call c of op d at `plain` and at `plain` + qx=1: refused naming AVX512-VNNI where the walk
  // cannot run; else the same values bit for bit, and (`fresh_programs`: the first call of a build)
  // the walk's define in qx=1's programs only.
  auto check_walk = [&](const op_descriptor& d, op_call& c, const std::string& plain, bool fresh_programs) {
    const std::string dot_cfg = plain + ",qx=1";
    const std::string why = refusal(q, d, c, dot_cfg.c_str());
    if (!runs) {
      EXPECT_NE(why.find("AVX512-VNNI"), std::string::npos) << why;
      return;
    }
    ASSERT_EQ(why, "");
    std::vector<double> want;
    const std::string plain_opts = built_options([&] {
      run_and_compare(d, c, d.config.complete(kernel_config::parse(plain)), false);
      want = read_host(q, c.outputs[0]).values;
    });
    const std::string dot_opts =
        built_options([&] { run_and_compare(d, c, d.config.complete(kernel_config::parse(dot_cfg)), false); });
    EXPECT_EQ(read_host(q, c.outputs[0]).values, want);
    if (!fresh_programs) return;  // M = 3 reuses M = 1's programs (RM = 1 either way)
    EXPECT_EQ(plain_opts.find("PRISM_X86_VNNI"), std::string::npos) << plain_opts;
    EXPECT_NE(dot_opts.find("-DPRISM_X86_VNNI=1"), std::string::npos) << dot_opts;
  };
  // A define of this test's own, so that its programs are built here rather than taken from the
  // suite's memo.
  scoped_cl_options fresh("-DPRISM_TEST_X86_WALK=1");
  std::uint64_t seed = 1200;
  for (dtype wt : {dtype::q4_0, dtype::q4_1})
    for (std::int64_t k : {192, 2272})
      for (std::int64_t m : {1, 3}) {
        SCOPED_TRACE(std::string(dtype_name(wt)) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
        op_call c = linear_call(q, m, 19, k, dtype::f32, wt, true, ++seed);
        check_walk(linear_op(), c, "variant=0,rm=1,qrn=1,qwg=32,qa=1", m == 1);
      }
  op_call q8 = linear_call(q, 1, 19, 192, dtype::f32, dtype::q8_0, false, ++seed);
  const std::string q8_why = refusal(q, linear_op(), q8, "variant=0,rm=1,qrn=1,qwg=32,qa=1,qx=1");
  EXPECT_NE(q8_why.find("takes q4_0 or q4_1 weights, got q8_0"), std::string::npos) << q8_why;
  // Prefill's tiles (several activation and weight rows a work-item, the walk called once a tile):
  // M = 5 over 4-row tiles leaves a partial one, and K = 2272 (71 blocks) a pair and a block after
  // the groups.
  for (dtype wt : {dtype::q4_0, dtype::q4_1}) {
    SCOPED_TRACE(std::string(dtype_name(wt)) + " 4 x 4 tiles");
    op_call tile = linear_call(q, 5, 19, 2272, dtype::f32, wt, false, ++seed);
    check_walk(linear_op(), tile, "variant=0,rm=4,qrn=4,qwg=1,qa=1", true);
  }
  op_call rows = linear_call(q, 5, 19, 192, dtype::f32, dtype::q4_0, false, ++seed);
  const std::string float_why = refusal(q, linear_op(), rows, "variant=0,rm=1,qrn=1,qwg=32,qx=1");
  EXPECT_NE(float_why.find("needs qa=1"), std::string::npos) << float_why;

  // rms_norm_linear's CPU kernel (variant 1; the pocl decode route of qkv, gate/up and the head)
  // takes the same key: a q4_1 weight at K = 2272, M = 1 and 3.
  for (std::int64_t m : {1, 3}) {
    SCOPED_TRACE("rms_norm_linear m=" + std::to_string(m));
    op_call c = rms_norm_linear_call(q, m, 21, 2272, dtype::q4_1, ++seed);
    check_walk(nl, c, "variant=1,qa=1", m == 1);
    const std::string gpu_why = refusal(q, nl, c, "variant=0,qa=1,qx=1");
    EXPECT_NE(gpu_why.find("needs variant=1"), std::string::npos) << gpu_why;
    const std::string float_nl = refusal(q, nl, c, "variant=1,qa=0,qx=1");
    EXPECT_NE(float_nl.find("needs qa=1"), std::string::npos) << float_nl;
  }
}

// qa=2: gemm_q_cpu_i8 with no quantize launch (its first work-group quantizes the activations
// into the queue's workspace while the others wait; the last zeroes the flags). Against qa=1, bit
// for bit: linear (q8_0, q4_0; M 1 and 3; K = 2272, whose 71 blocks end in a partial group of four;
// 37 weight rows in 5 work-groups of 8), twice on fresh activations, so that a workspace or flags
// left from the call before show; rms_norm_linear's CPU kernel with the norm. A recorded call
// replays the eager one's values from the graph's own workspace. Refused: M = 9, and every kernel
// but the CPU one, naming why.
TEST(quant, fused_activation_quantize_matches_its_launch) {
  queue& q = shared_queue();
  const op_descriptor& nl = op_registry::instance().get("rms_norm_linear");
  auto run = [&](const op_descriptor& d, op_call& c, const std::string& cfg) {
    enqueue_opencl(q, d, c, d.config.complete(kernel_config::parse(cfg)));
    return c.outputs[0].to_host(q);
  };
  const std::string base = "variant=0,rm=1,qrn=1,qwg=8";
  std::uint64_t seed = 1300;
  for (dtype wt : {dtype::q8_0, dtype::q4_0})
    for (std::int64_t m : {1, 3}) {
      SCOPED_TRACE(std::string(dtype_name(wt)) + " m=" + std::to_string(m));
      for (int call = 0; call < 2; ++call) {
        op_call c = linear_call(q, m, 37, 2272, dtype::f32, wt, true, ++seed);
        ASSERT_EQ(refusal(q, linear_op(), c, (base + ",qa=2").c_str()), "");
        const auto want = run(linear_op(), c, base + ",qa=1");
        EXPECT_EQ(run(linear_op(), c, base + ",qa=2"), want) << "call " << call;
      }
    }
  for (std::int64_t m : {1, 3}) {
    SCOPED_TRACE("rms_norm_linear m=" + std::to_string(m));
    for (int call = 0; call < 2; ++call) {
      op_call c = rms_norm_linear_call(q, m, 21, 2272, dtype::q4_0, ++seed);
      const auto want = run(nl, c, "variant=1,qa=1");
      EXPECT_EQ(run(nl, c, "variant=1,qa=2"), want) << "call " << call;
      if (call == 0 && m == 1) {
        const std::string gpu_why = refusal(q, nl, c, "variant=0,qa=2");
        EXPECT_NE(gpu_why.find("needs variant=1"), std::string::npos) << gpu_why;
      }
    }
  }
  // From a graph: the eager call's values, with the graph's own workspace and counters.
  op_call eager = linear_call(q, 1, 37, 2272, dtype::f32, dtype::q4_0, false, ++seed);
  op_call recorded = linear_call(q, 1, 37, 2272, dtype::f32, dtype::q4_0, false, seed);
  const kernel_config fused = config((base + ",qa=2").c_str());
  enqueue_opencl(q, linear_op(), eager, fused);
  graph g = graph::record(q, [&] { enqueue_opencl(q, linear_op(), recorded, fused); });
  for (int i = 0; i < 2; ++i) {
    g.replay(q);
    q.wait_and_throw();
    EXPECT_EQ(recorded.outputs[0].to_host(q), eager.outputs[0].to_host(q)) << "replay " << i;
  }
  op_call nine = linear_call(q, 9, 37, 2272, dtype::f32, dtype::q4_0, false, ++seed);
  const std::string rows_why = refusal(q, linear_op(), nine, (base + ",qa=2").c_str());
  EXPECT_NE(rows_why.find("M <= 8, got M = 9"), std::string::npos) << rows_why;
  const std::string gpu_why = refusal(q, linear_op(), eager, "variant=4,mb=2,nb=4,warps=2,qa=2");
  EXPECT_NE(gpu_why.find("qa=2 (no quantize launch) is the CPU kernel's"), std::string::npos) << gpu_why;
}

// rms_norm_linear's CPU kernel on block-quantized weights (variant 1) takes its shape from the
// config, as linear's qrn / qwg: nb weight rows a work-item and wg work-items a group. A row's
// block sums run in one order whatever rows share its work-item, so one row and two rows a
// work-item give the same values bit for bit: q4_0 on float, int8 and fused-int8 activations
// (qa 0, 1, 2), q8_0 on fused-int8 ones (the pocl route's form), 37 rows (a partial work-item and
// group) at K = 2272. Each shape's programs carry its RN, which a kernel ignoring the config fails.
TEST(quant, norm_linear_cpu_kernel_takes_the_config_shape) {
  queue& q = shared_queue();
  const op_descriptor& nl = op_registry::instance().get("rms_norm_linear");
  scoped_cl_options fresh("-DPRISM_TEST_NORM_ROWS=1");
  const std::regex rn1("-DRN=1(\\s|$)"), rn2("-DRN=2(\\s|$)");
  struct form {
    dtype wt;
    const char* qa;
  };
  std::uint64_t seed = 1450;
  for (const form f : {form{dtype::q4_0, "qa=0"}, form{dtype::q4_0, "qa=1"}, form{dtype::q4_0, "qa=2"},
                       form{dtype::q8_0, "qa=2"}}) {
    SCOPED_TRACE(std::string(dtype_name(f.wt)) + " " + f.qa);
    op_call c = rms_norm_linear_call(q, 1, 37, 2272, f.wt, ++seed);
    auto run = [&](const std::string& shape) {
      run_and_compare(nl, c, nl.config.complete(kernel_config::parse(shape + "," + f.qa)), false);
    };
    std::vector<double> want;
    const std::string one = built_options([&] {
      run("variant=1,nb=1,wg=32");
      want = read_host(q, c.outputs[0]).values;
    });
    const std::string two = built_options([&] { run("variant=1,nb=2,wg=16"); });
    EXPECT_EQ(read_host(q, c.outputs[0]).values, want);
    EXPECT_TRUE(std::regex_search(one, rn1) && !std::regex_search(one, rn2)) << one;
    EXPECT_TRUE(std::regex_search(two, rn2) && !std::regex_search(two, rn1)) << two;
  }
}

// gemm_q_mma (qmma=1; nv auto for 16-bit activations at 2 <= M <= 8, checked bit for bit): the
// GEMV on tensor cores, NVIDIA's OpenCL only. Every block format with f32 (three bf16 terms),
// f16 and bf16 activations against the dequantized double reference: M 1, 5 and 11 (a second, partial group
// of 8 activation rows), N 37 (partial 16-row groups), K 768 (three 8-block chunks: one warp runs all three,
// or two warps share them), a bias; a weight that is a column slice (row stride 1024, offset 256) and
// matmul's transposed weight. Elsewhere, and for a K that is not whole chunks, refused naming why.
TEST(quant, tensor_core_gemv) {
  queue& q = shared_queue();
  const bool nvidia = q.get_device().platform_name().find("NVIDIA") != std::string::npos;
  std::vector<std::string> refusals;
  {
    op_call c = linear_call(q, 1, 16, 768, dtype::bf16, dtype::q4_0, false, 9);
    const bool ran = select_implementation(linear_op(), q.get_device(), c, config("variant=4,warps=2,qmma=1"),
                                           &refusals) != nullptr;
    EXPECT_EQ(ran, nvidia) << ::testing::PrintToString(refusals);
    if (!nvidia) {
      bool named = false;
      for (const auto& r : refusals) named = named || r.find("inline PTX needs NVIDIA") != std::string::npos;
      EXPECT_TRUE(named) << ::testing::PrintToString(refusals);
      // nv's auto takes the rows kernel instead, and is right.
      run_and_compare(linear_op(), c, config("variant=3,auto=1"), false);
      return;
    }
  }
  refusals.clear();
  op_call odd = linear_call(q, 1, 16, 96, dtype::bf16, dtype::q4_0, false, 10);
  EXPECT_EQ(
      select_implementation(linear_op(), q.get_device(), odd, config("variant=4,warps=2,qmma=1"), &refusals),
      nullptr);
  bool named = false;
  for (const auto& r : refusals) named = named || r.find("8-block chunks") != std::string::npos;
  EXPECT_TRUE(named) << ::testing::PrintToString(refusals);
  run_and_compare(linear_op(), odd, config("variant=3,auto=1"), false);  // auto falls back to rows

  std::uint64_t seed = 400;
  for (dtype wt : quantized_dtypes)
    for (dtype act : float_dtypes)
      for (std::int64_t m : {1, 5, 11}) {
        SCOPED_TRACE(std::string(dtype_name(wt)) + " activations " + dtype_name(act) +
                     " m=" + std::to_string(m));
        op_call c = linear_call(q, m, 37, 768, act, wt, true, ++seed);
        // one warp over all three chunks (the next chunk's loads in flight under each); auto's
        // warps; two warps, one with two chunks and one with one
        run_and_compare(linear_op(), c, config("variant=4,warps=1,qmma=1"), false);
        if (m <= 8) run_and_compare(linear_op(), c, config("variant=3,auto=1"), false);
        if (m == 1 && act != dtype::f32)
          run_and_compare(linear_op(), c, config("variant=4,warps=2,qmma=1"), false);
        if (m > 1) {  // auto's choice, bit for bit: qmma (2 warps for 3 chunks) for 16-bit
          // activations at any M (two groups of activation rows at 11, as a prefill runs it); for f32
          // the rows kernel at M <= 8 and the tiled GEMM above
          auto values = [&](const char* cfg) {
            enqueue_opencl(q, linear_op(), c, config(cfg));
            return read_host(q, c.outputs[0]).values;
          };
          const char* f32_kernel =
              m <= 8 ? "variant=4,mb=8,nb=2,warps=8" : "variant=3,auto=0,tm=64,tn=64,wm=4,wn=4";
          EXPECT_EQ(values("variant=3,auto=1"),
                    values(act == dtype::f32 ? f32_kernel : "variant=4,warps=2,qmma=1"));
        }
      }
  std::mt19937_64 rng(77);
  for (dtype wt : quantized_dtypes) {
    SCOPED_TRACE(std::string("slice and transpose, ") + dtype_name(wt));
    op_call c{"linear", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {3, 768}, dtype::bf16, rng, -1, 1),
                kernels::random_tensor(q, {21, 1024}, wt, rng, -1, 1).slice(1, 256, 1024), tensor()};
    allocate_outputs(q, linear_op(), c);
    run_and_compare(linear_op(), c, config("variant=4,warps=2,qmma=1"), false);
    op_call mm{"matmul", {}, {}, {}};
    mm.inputs = {kernels::random_tensor(q, {2, 512}, dtype::f16, rng, -1, 1),
                 kernels::random_tensor(q, {19, 512}, wt, rng, -1, 1).transpose(0, 1)};
    const op_descriptor& mmd = op_registry::instance().get("matmul");
    allocate_outputs(q, mmd, mm);
    run_and_compare(mmd, mm, mmd.config.complete(kernel_config::parse("variant=4,warps=1,qmma=1")), false);
  }
}

// qp=1 reads pairs of blocks in 32-bit words: a K that leaves pairs unaligned is refused with the
// rule, and the dispatcher's fallback serves the call.
TEST(quant, block_pairs_need_k_multiple_of_64) {
  queue& q = shared_queue();
  op_call c = linear_call(q, 1, 8, 96, dtype::f32, dtype::q4_0, false, 5);
  std::vector<std::string> refusals;
  EXPECT_EQ(select_implementation(linear_op(), q.get_device(), c, config("variant=4,nb=2,warps=2,qa=1,qp=1"),
                                  &refusals),
            nullptr);
  bool named = false;
  for (const auto& r : refusals) named = named || r.find("multiples of 64") != std::string::npos;
  EXPECT_TRUE(named) << ::testing::PrintToString(refusals);
  refusals.clear();
  EXPECT_EQ(
      select_implementation(linear_op(), q.get_device(), c, config("variant=4,nb=2,warps=2,qp=1"), &refusals),
      nullptr);
}

// rms_norm_linear's qp=3 group is wg / 32 teams of nb rows: a wg below one team is refused naming
// wg and the valid sizes, where the same config at wg=32 is served.
TEST(quant, local_quantizing_walk_takes_whole_teams) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("rms_norm_linear");
  std::mt19937_64 rng(77);
  op_call c{"rms_norm_linear", {}, {}, {}};
  c.inputs = {kernels::random_tensor(q, {1, 64}, dtype::f32, rng, -1, 1),
              kernels::random_tensor(q, {64}, dtype::f32, rng, 0.5, 1.5),
              kernels::random_tensor(q, {8, 64}, dtype::q4_0, rng, -1, 1), tensor()};
  c.attrs["eps"] = 1e-5;
  allocate_outputs(q, d, c);
  std::vector<std::string> refusals;
  const auto cfg = [&](const char* text) { return d.config.complete(kernel_config::parse(text)); };
  EXPECT_EQ(select_implementation(d, q.get_device(), c, cfg("variant=0,qa=1,qp=3,wg=16"), &refusals),
            nullptr);
  bool named = false;
  for (const auto& r : refusals) named = named || r.find("wg=16 is below 32") != std::string::npos;
  EXPECT_TRUE(named) << ::testing::PrintToString(refusals);
  EXPECT_NE(select_implementation(d, q.get_device(), c, cfg("variant=0,qa=1,qp=3,wg=32"), nullptr), nullptr);
}

TEST(quant, dispatcher_serves_quantized_weights_with_opencl_quant) {
  queue& q = shared_queue();
  for (dtype wt : quantized_dtypes) {
    op_call c = linear_call(q, 1, 64, 256, dtype::f32, wt, true, 7);
    const auto expected = compute_reference(q, linear_op(), c);
    const auto res = dispatch::dispatch_call(q, c);
    q.wait_and_throw();
    EXPECT_EQ(res.implementation, "opencl.quant") << dtype_name(wt) << ": " << res.reason;
    EXPECT_TRUE(compare_outputs(linear_op(), c, expected, {read_host(q, c.outputs[0])}).ok);
  }
  // The public API; the weight of matmul is the transpose of a quantized [n, k].
  std::mt19937_64 rng(3);
  tensor x = kernels::random_tensor(q, {3, 64}, dtype::f32, rng, -1, 1);
  tensor w = kernels::random_tensor(q, {10, 64}, dtype::q4_1, rng, -1, 1);
  const auto want = ops::linear(q, x, w).to_floats(q);
  const auto got = ops::matmul(q, x, w.transpose(0, 1)).to_floats(q);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
}

// The codecs against hand-written GGUF blocks.
TEST(quant, host_blocks_follow_gguf_layouts) {
  unsigned char q40[18] = {};
  const std::uint16_t d = float_to_half(0.5f);
  std::memcpy(q40, &d, 2);
  for (int j = 0; j < 16; ++j) q40[2 + j] = static_cast<unsigned char>(j | ((15 - j) << 4));
  double v[32];
  dequantize_block(dtype::q4_0, q40, v);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(v[j], 0.5 * (j - 8));       // low nibbles: elements 0..15
    EXPECT_EQ(v[16 + j], 0.5 * (7 - j));  // high nibbles: elements 16..31
  }
  // Quantize -> dequantize stays within half a step (q4_0: one step, as ggml clips the side
  // opposite its largest-magnitude value at q = 15).
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = std::sin(0.37f * j) * 3.0f;
  for (dtype t : quantized_dtypes) {
    unsigned char block[34];
    quantize_block(t, x, block);
    dequantize_block(t, block, v);
    const double step = t == dtype::q8_0   ? 0.51 * 3.0 / 127
                        : t == dtype::q4_0 ? 1.01 * 3.0 / 8
                                           : 0.51 * 6.0 / 15;
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::abs(v[j] - x[j]), step + 1e-3) << dtype_name(t) << " " << j;
  }
  EXPECT_EQ(dtype_storage_bytes(dtype::q4_1, 64), 40u);
  EXPECT_EQ(dtype_size(dtype::q8_0), 34u);
}

TEST(bad_input, quantized_weights) {
  queue& q = shared_queue();
  // A row that is not whole blocks.
  try {
    tensor::empty(q, {4, 40}, dtype::q4_0);
    ADD_FAILURE() << "a q4_0 [4, 40] tensor was accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
  // Quantized activations.
  std::mt19937_64 rng(5);
  {
    op_call c{"linear", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {2, 64}, dtype::q8_0, rng, -1, 1),
                kernels::random_tensor(q, {3, 64}, dtype::q8_0, rng, -1, 1), tensor()};
    c.outputs = {tensor::empty(q, {2, 3}, dtype::f32)};
    expect_refused(q, linear_op(), c, {"ops::linear", "activations"});
  }
  // A bias in another dtype than the activations.
  {
    op_call c = linear_call(q, 2, 8, 64, dtype::f16, dtype::q4_0, false, 9);
    c.inputs[2] = kernels::random_tensor(q, {8}, dtype::bf16, rng, -1, 1);
    expect_refused(q, linear_op(), c, {"ops::linear", "bias"});
  }
  // matmul's other with its blocks along n.
  {
    op_call c{"matmul", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {2, 64}, dtype::f32, rng, -1, 1),
                kernels::random_tensor(q, {64, 32}, dtype::q4_0, rng, -1, 1)};
    c.outputs = {tensor::empty(q, {2, 32}, dtype::f32)};
    expect_refused(q, op_registry::instance().get("matmul"), c, {"ops::matmul", "blocks of 32 along k"});
  }
  // Unknown names list the quantized dtypes.
  try {
    parse_dtype("q5_0");
    ADD_FAILURE() << "q5_0 parsed";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0, q4_0, q4_1"), std::string::npos) << e.what();
  }
  // A weight sliced inside its blocks (k 16..48).
  {
    op_call c = linear_call(q, 2, 8, 64, dtype::f32, dtype::q8_0, false, 10);
    c.inputs[0] = kernels::random_tensor(q, {2, 32}, dtype::f32, rng, -1, 1);
    c.inputs[1] = c.inputs[1].slice(1, 16, 48);
    c.outputs = {tensor::empty(q, {2, 8}, dtype::f32)};
    expect_refused(q, linear_op(), c, {"ops::linear", "starting on a block"});
  }
  // Element-wise ops never produce blocks.
  {
    op_call c{"cast", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {64}, dtype::f32, rng, -1, 1)};
    c.set("dtype", std::string("q4_0"));
    c.outputs = {tensor::empty(q, {64}, dtype::f32)};
    expect_refused(q, op_registry::instance().get("cast"), c, {"ops::cast", "block-quantized"});
  }
  // A sample key whose k is not whole blocks.
  sample_options o;
  o.type = dtype::q4_0;
  EXPECT_THROW(linear_op().sample(q, shape_key::parse("m=1,n=4,k=45"), o), error);
  // rms_norm_linear's and linear_silu_and_mul's samples (what pretune measures) take a
  // block-quantized dtype as their weight's, with f32 activations, so that a shape set's q4_1 entry
  // tunes a q4_1 call under that call's own database key; the gated op's weight is [2 n, k].
  const op_descriptor& nl = op_registry::instance().get("rms_norm_linear");
  o.type = dtype::q4_1;
  const op_call s = nl.sample(q, shape_key::parse("m=1,n=8,k=64"), o);
  EXPECT_EQ(dispatch::call_dtypes(s), "f32|f32|q4_1|-");
  EXPECT_THROW(nl.sample(q, shape_key::parse("m=1,n=8,k=45"), o), error);
  const op_descriptor& gated = op_registry::instance().get("linear_silu_and_mul");
  const op_call gs = gated.sample(q, shape_key::parse("m=1,n=8,k=64"), o);
  EXPECT_EQ(dispatch::call_dtypes(gs), "f32|q4_1|f32");
  EXPECT_EQ(gs.inputs[1].shape().str(), "[16, 64]");
  EXPECT_EQ(gs.outputs[0].shape().str(), "[1, 8]");
  EXPECT_THROW(gated.sample(q, shape_key::parse("m=1,n=8,k=45"), o), error);
  // addmm's sample (decode's o / down projection with the residual add, which a model records
  // with its weight's dtype): a quantized mat2 is a [n, k] weight's transpose, the input the
  // residual [m, n]; its key is the recorded one, so pretune stores the row dispatch looks up.
  // Before, the sample made every operand q4_0 and pretune failed on each such shape.
  const op_descriptor& addmm = op_registry::instance().get("addmm");
  o.type = dtype::q4_0;
  const shape_key ak = shape_key::parse("m=1,n=8,k=64,ta=0,tb=1");
  const op_call as = addmm.sample(q, ak, o);
  EXPECT_EQ(dispatch::call_dtypes(as), "f32|f32|q4_0");
  EXPECT_EQ(as.inputs[0].shape().str(), "[1, 8]");
  EXPECT_EQ(addmm.key(as).str(), ak.str());
  // A shape set's `act` (sample_options::act): every quantized sample takes its activations in it,
  // as a bf16 model's decode calls them; an activation dtype that is not a float is refused.
  o.act = dtype::bf16;
  for (const char* op :
       {"linear", "addmm", "matmul", "rms_norm_linear", "linear_silu_and_mul", "post_attention"}) {
    const char* key = std::string(op) == "addmm"            ? "m=1,n=8,k=64,ta=0,tb=1"
                      : std::string(op) == "post_attention" ? "m=1,h=64,a=64,i=64"
                                                            : "m=1,n=8,k=64";
    const op_call bf = op_registry::instance().get(op).sample(q, shape_key::parse(key), o);
    EXPECT_EQ(bf.inputs[0].type(), dtype::bf16) << op;
    EXPECT_EQ(bf.outputs[0].type(), dtype::bf16) << op;
  }
  o.act = dtype::i32;
  EXPECT_THROW(linear_op().sample(q, shape_key::parse("m=1,n=8,k=64"), o), error);
  o.act = dtype::f32;
  try {
    addmm.sample(q, shape_key::parse("m=1,n=8,k=64,ta=0,tb=0"), o);
    ADD_FAILURE() << "a q4_0 mat2 that is not a weight's transpose was sampled";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("needs ta=0 and tb=1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prism::test
