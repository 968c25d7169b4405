// SPDX-License-Identifier: Apache-2.0
// decode_attention's GPU variants on whatever device runs the suite, for every dtype and every
// test case of the descriptor, so that CI's CPU device checks their structure (chunk splits,
// the last group's combine, the new position's key from local memory, cache rows read whole):
// variant 3 (flash decoding, warps reading whole rows) with one and with two warps a group. On
// devices without inline-PTX warp shuffles it runs its local-memory lane sums; on NVIDIA the
// shuffles. The one case it refuses (on CPU devices, more items than dims) names the reason.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "kernels/op_descriptor.hpp"
#include "ops_test_util.hpp"
#include "prism/runtime/graph.hpp"

namespace prism::test {
namespace {

/// A decode_attention call of shape `key` in f32, its data from `seed` (one seed, the same data).
op_call f32_call(queue& q, const shape_key& key, std::uint64_t seed) {
  sample_options o;
  o.type = dtype::f32;
  o.seed = seed;
  return op_registry::instance().get("decode_attention").sample(q, key, o);
}

TEST(kv_cache_variants, flash_decoding_matches_the_reference_in_every_dtype) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("decode_attention");
  // Every config a program of its own: PoCL spends 15-60 s of LLVM on each (a cold kernel cache on
  // CI's 2 cores), so a CPU device runs each config where its dtype-specific code differs, and GPUs
  // every config on every case.
  const bool every = !q.get_device().is_cpu();
  int ran = 0, refused = 0;
  for (dtype t : d.dtypes) {
    for (const auto& tc : d.test_cases(t)) {
      // Two warps over chunks of 32 keys (two passes of the loops; also with the first pass's
      // rows loaded ahead, ra=1) and of 16 (one pass: the rows loaded up front); one warp over
      // 16-key chunks. 16-bit caches also with two rows a warp (hr=1, where d = 128): 16-key
      // chunks on at most 8 groups (sp: two chunks a group at d = 128) are then one pass, 64-key
      // chunks two (with and without ra). f32 runs the four plain configs on every case. 16-bit
      // caches on a CPU device run them where their loads differ: at d = 128 (the rows' 8-byte
      // loads) one pass and the three hr configs, at d = 80 (element loads, lanes past the row)
      // the two-pass loops with and without ra, at d = 64 and d = 8 one pass.
      const bool wide = t == dtype::f32 || every, d128 = tc.shape_class == "qk_norm.gqa";
      const bool d80 = tc.shape_class == "gptj.partial_rot";
      std::vector<std::string> configs;
      if (wide)
        configs = {"variant=3,wg=64,chunk=32", "variant=3,wg=64,chunk=16", "variant=3,wg=64,chunk=32,ra=1",
                   "variant=3,wg=32,chunk=16"};
      else if (d80)
        configs = {"variant=3,wg=64,chunk=32", "variant=3,wg=64,chunk=32,ra=1"};
      else
        configs = {"variant=3,wg=64,chunk=16"};
      if (t != dtype::f32 && (every || d128))
        for (const char* hr : {"variant=3,wg=64,chunk=16,hr=1,sp=8", "variant=3,wg=64,chunk=64,hr=1",
                               "variant=3,wg=64,chunk=64,hr=1,ra=1"})
          configs.push_back(hr);
      for (const auto& text : configs) {
        sample_options o;
        o.type = t;
        o.seed = 11;
        op_call c = tc.make(q, o);
        const kernel_config cfg = kernel_config::parse(text);
        SCOPED_TRACE(tc.shape_class + " " + dtype_name(t) + " " + text);
        if (auto why = d.implementations.front().supports(q.get_device(), c, cfg)) {
          // Only PoCL's limit (more items than dims: the d = 8 case) refuses these shapes.
          EXPECT_TRUE(q.get_device().is_cpu()) << *why;
          EXPECT_NE(why->find("variant=3 on a CPU device needs wg <= d"), std::string::npos) << *why;
          ++refused;
          continue;
        }
        run_and_compare(d, c, cfg, false);
        ++ran;
      }
    }
  }
  // On GPUs: 4 cases x (4 configs in f32, 7 in f16 and bf16). On a CPU device: qk_norm.gqa (d =
  // 128), gptj.partial_rot (d = 80) and past_end (d = 64) four times in f32; in f16 and bf16 four,
  // three and one times; the d = 8 case refused four times in f32 and once in each 16-bit dtype.
  EXPECT_EQ(ran, every ? 72 : 26);
  EXPECT_EQ(refused, every ? 0 : 6);
}

// More chunks than a warp has lanes, and more than the combine's weight tile holds (two tiles,
// the last partial), more query heads per kv head than warps, and fewer (3 heads on 2 warps: one
// warp idles in the combine and in the row normalization), and more than a work-group serves (10:
// two blocks of 5, only the first writing the new key and value); chunks of one pass (rows loaded
// up front) among them; and groups that each merge a run of chunks (sp). The cases share four
// programs (the capacity and sp are arguments, not build options): PoCL spends 15-60 s on each.
TEST(kv_cache_variants, flash_decoding_combines_many_chunks) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("decode_attention");
  const std::pair<const char*, const char*> cases[] = {
      {"heads=4,kv_heads=1,d=32,max_seq=1200", "variant=3,wg=32,chunk=16"},  // 51 chunks, G = 4 on 1 warp
      // 167 chunks: two tiles of the combine's weights (160 and 7).
      {"heads=4,kv_heads=1,d=32,max_seq=4000", "variant=3,wg=32,chunk=16"},
      {"heads=6,kv_heads=2,d=64,max_seq=1100",
       "variant=3,wg=64,chunk=16"},  // 46 chunks, G = 3 on 2 warps, one pass
      {"heads=20,kv_heads=2,d=32,max_seq=300",
       "variant=3,wg=32,chunk=32"},  // 10 heads a kv head: 2 blocks of 5
      // Fewer groups than chunks (sp): 51 chunks on 8 groups of 7 (the last 2), two passes a chunk;
      // 46 chunks of one pass on 16 groups of 3 (the next chunk's rows loaded during the current
      // one's softmax), G = 3; two-pass chunks with the first pass ahead (ra) on 8 groups, G = 4 on
      // 2 warps; more groups than visible chunks (13 chunks, 16 groups: one chunk each).
      {"heads=4,kv_heads=1,d=32,max_seq=1200", "variant=3,wg=32,chunk=16,sp=8"},
      {"heads=6,kv_heads=2,d=64,max_seq=1100", "variant=3,wg=64,chunk=16,sp=16"},
      {"heads=4,kv_heads=1,d=64,max_seq=1200", "variant=3,wg=64,chunk=32,ra=1,sp=8"},
      {"heads=4,kv_heads=1,d=32,max_seq=300", "variant=3,wg=32,chunk=16,sp=16"}};
  for (const auto& [shape, text] : cases) {
    SCOPED_TRACE(std::string(shape) + " " + text);
    op_call c = f32_call(q, shape_key::parse(shape), 5);
    const kernel_config cfg = kernel_config::parse(text);
    ASSERT_FALSE(d.implementations.front().supports(q.get_device(), c, cfg).has_value());
    run_and_compare(d, c, cfg, false);
  }
}

// The nvidia route's 16-bit form (two rows a warp, groups merging runs of chunks) with one query
// head a kv head, as Llama-2-7B's: 26 chunks of 16 keys on 7 of 8 groups, 4 chunks a group (the
// last 2, the new position in its second), in bf16 and f16.
TEST(kv_cache_variants, flash_decoding_merges_chunks_of_16_bit_rows) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("decode_attention");
  const kernel_config cfg = kernel_config::parse("variant=3,wg=64,chunk=16,hr=1,sp=8");
  for (dtype t : {dtype::bf16, dtype::f16}) {
    SCOPED_TRACE(dtype_name(t));
    sample_options o;
    o.type = t;
    o.seed = 3;
    op_call c = d.sample(q, shape_key::parse("heads=2,kv_heads=2,d=128,max_seq=600"), o);
    ASSERT_FALSE(d.implementations.front().supports(q.get_device(), c, cfg).has_value());
    run_and_compare(d, c, cfg, false);
  }
}

// Recorded into a graph, the split kernel gets a workspace the graph owns: replays match the eager
// call bit for bit, also after other queues' calls have pushed the eager workspaces out of their
// per-queue cache.
TEST(kv_cache_variants, flash_decoding_replays_from_a_graph) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("decode_attention");
  const shape_key key = shape_key::parse("heads=4,kv_heads=2,d=32,max_seq=300");
  const kernel_config cfg = kernel_config::parse("variant=3,wg=32,chunk=32");
  op_call eager = f32_call(q, key, 21), recorded = f32_call(q, key, 21);
  enqueue_opencl(q, d, eager, cfg);
  graph g = graph::record(q, [&] { enqueue_opencl(q, d, recorded, cfg); });
  for (int i = 0; i < 9; ++i) {  // more queues than the workspace cache keeps
    queue other(q.get_context());
    op_call c = f32_call(other, key, 21);
    enqueue_opencl(other, d, c, cfg);
    other.wait_and_throw();
  }
  g.replay(q);
  q.wait_and_throw();
  for (std::size_t i = 0; i < eager.outputs.size(); ++i)
    EXPECT_EQ(eager.outputs[i].to_host(q), recorded.outputs[i].to_host(q)) << "output " << i;
}

// One recorded graph serves every decode step: with groups merging runs of chunks (sp) the split
// of the visible keys is the kernel's, from the position it reads. Replays at positions whose
// chunks fill one group, take one chunk a group, three and five chunks a group match an eager
// call at the same position (each writing its own cache's row there) bit for bit.
TEST(kv_cache_variants, flash_decoding_replays_merged_chunks_at_every_length) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("decode_attention");
  const shape_key key = shape_key::parse("heads=4,kv_heads=2,d=32,max_seq=600");
  const kernel_config cfg = kernel_config::parse("variant=3,wg=32,chunk=16,sp=8");
  op_call eager = f32_call(q, key, 8), recorded = f32_call(q, key, 8);
  graph g = graph::record(q, [&] { enqueue_opencl(q, d, recorded, cfg); });
  for (std::int64_t p : {5, 100, 300, 599}) {  // 1, 7, 19 and 38 chunks on 8 groups
    SCOPED_TRACE("position " + std::to_string(p));
    tensor at = tensor::from_host(q, &p, {1}, dtype::i64);
    q.copy(at.storage(), eager.inputs[1].storage());
    q.copy(at.storage(), recorded.inputs[1].storage());
    enqueue_opencl(q, d, eager, cfg);
    g.replay(q);
    q.wait_and_throw();
    for (std::size_t i = 0; i < eager.outputs.size(); ++i)
      ASSERT_EQ(eager.outputs[i].to_host(q), recorded.outputs[i].to_host(q)) << "output " << i;
  }
}

}  // namespace
}  // namespace prism::test
