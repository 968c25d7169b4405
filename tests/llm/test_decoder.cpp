// SPDX-License-Identifier: Apache-2.0
// The prism decoder against the host reference decoder with identical weights: every layer's
// output, the next-token logits over prefill and decode, and greedy token ids (f32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "examples/llm/decoder.hpp"
#include "examples/llm/reference.hpp"
#include "examples/llm/run.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

namespace prism::llm {
namespace {

// Documented tolerance (examples/llm/run.hpp, logits_tolerance): for f32,
// max |prism - reference| <= 2e-4 * max(1, max |reference|), per layer output and for logits.
double max_abs(std::span<const double> v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

template <class A, class B>
void expect_close(const A& got, const B& want, double rel_tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::vector<double> w(want.begin(), want.end());
  const double bound = rel_tol * std::max(1.0, max_abs(w));
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - w[i]);
    if (!(d <= worst)) {  // also catches NaN
      worst = d;
      at = i;
    }
  }
  EXPECT_LE(worst, bound) << what << ": worst element " << at << " got " << got[at] << " expected " << w[at];
}

queue& test_queue() {
  static auto* q = new queue();
  return *q;
}

void check_against_reference(const model_config& c, std::uint64_t seed) {
  const auto weights = model_weights::random(c, seed);
  reference_decoder ref(weights);
  decoder dec(test_queue(), weights);
  // Float weights go up into one arena (one allocation: huge pages on CPU devices), each a view.
  EXPECT_EQ(dec.weight_storages(), 1u);
  dec.capture_layers(true);
  const auto tol = logits_tolerance(c.weight_dtype);
  const auto prompt = random_prompt(7, c.vocab_size, seed);

  // Prefill: every layer's residual stream for all 7 tokens, then the last token's logits.
  const auto want_logits = ref.forward(prompt);
  const auto got_logits = dec.forward(prompt).to_floats(test_queue());
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    expect_close(dec.layer_output(l), ref.layer_output(l), tol, "prefill layer " + std::to_string(l));
  const std::span<const double> last(want_logits.data() + want_logits.size() - c.vocab_size, c.vocab_size);
  expect_close(got_logits, last, tol, "prefill logits");

  // Decode: three single-token steps reading the KV cache written so far.
  std::int32_t next = static_cast<std::int32_t>(argmax(last));
  for (int step = 0; step < 3; ++step) {
    const auto want = ref.forward(std::span<const std::int32_t>(&next, 1));
    const auto got = dec.forward(std::span<const std::int32_t>(&next, 1)).to_floats(test_queue());
    const std::string what = "decode step " + std::to_string(step);
    expect_close(dec.layer_output(0), ref.layer_output(0), tol, what + " layer 0");
    expect_close(got, want, tol, what + " logits");
    EXPECT_EQ(argmax(std::span<const float>(got)), argmax(std::span<const double>(want))) << what;
    next = static_cast<std::int32_t>(argmax(std::span<const double>(want)));
  }
  EXPECT_EQ(dec.position(), 10);
}

TEST(Decoder, LayersAndLogitsMatchHostReference) {
  check_against_reference(preset("tiny"), 1);
}

// Qwen-family variants: q/k/v bias (Qwen2) and per-head q/k RMSNorm (Qwen3), tied embeddings.
TEST(Decoder, QwenVariantsMatchHostReference) {
  auto c = preset("tiny");
  c.attention_bias = true;
  c.qk_norm = true;
  c.tie_embeddings = true;
  c.num_layers = 1;
  check_against_reference(c, 2);
}

// Block-quantized projections and head share the arena with the float weights, each view on a
// whole block pair; the decoder still matches the reference on the same (dequantized) values.
TEST(Decoder, QuantizedWeightsShareTheArena) {
  const auto c = preset("tiny");
  for (dtype q : {dtype::q8_0, dtype::q4_0}) {
    auto weights = model_weights::random(c, 3);
    weights.quantize(q);
    decoder dec(test_queue(), weights);
    EXPECT_EQ(dec.weight_storages(), 1u) << dtype_name(q);
    reference_decoder ref(weights);
    const auto prompt = random_prompt(5, c.vocab_size, 3);
    const auto want = ref.forward(prompt);
    const auto got = dec.forward(prompt).to_floats(test_queue());
    const std::span<const double> last(want.data() + want.size() - c.vocab_size, c.vocab_size);
    // The device may round activations to int8 per block (the pocl profile does at M = 1): the
    // bound widens by twice the reference's own spread between the two schemes.
    reference_decoder ref8(weights, reference_decoder::activations::int8);
    const auto want8 = ref8.forward(prompt);
    const double spread = next_token_spread(want, want8, c.vocab_size);
    EXPECT_GT(spread, 0.0) << dtype_name(q);
    expect_close(got, last, 1e-3 + 2 * spread / std::max(1.0, max_abs(last)),
                 std::string("prefill logits, ") + dtype_name(q));
    const std::span<const double> last8(want8.data() + want8.size() - c.vocab_size, c.vocab_size);
    const auto top = argmax(std::span<const float>(got));
    EXPECT_TRUE(top == argmax(last) || top == argmax(last8)) << dtype_name(q);
  }
}

TEST(Decoder, GreedyTokensEqualReferenceTokens) {
  const auto c = preset("tiny");
  const auto weights = model_weights::random(c, 5);
  const auto prompt = random_prompt(12, c.vocab_size, 5);
  reference_decoder ref(weights);
  const auto want = ref.generate(prompt, 20);
  decoder dec(test_queue(), weights);
  const auto got = dec.generate(prompt, 20);
  EXPECT_EQ(got.tokens, want);
  // The decoder restarts cleanly: a second generation gives the same ids.
  dec.reset();
  EXPECT_EQ(dec.generate(prompt, 20).tokens, want);
}

// Every decode step's logits and ids, graph on or off, greedy or sampled.
struct decoded {
  std::vector<std::int32_t> tokens;
  std::vector<std::vector<float>> logits;
};
decoded decode(decoder& dec, std::span<const std::int32_t> prompt, bool graph, sampler* chooser) {
  decoded d;
  decoder::controls c;
  c.chooser = chooser;
  c.on_logits = [&](const std::vector<float>& l) { d.logits.push_back(l); };
  dec.set_graph(graph);
  dec.reset();
  d.tokens = dec.generate(prompt, 9, &c).tokens;
  return d;
}

// The graph replays the very kernels and arguments eager decoding launches: the outputs are the
// same bits, for every op of the decoder (the Qwen variant: qkv bias, q/k norm, tied head).
TEST(Decoder, GraphDecodeIsBitIdenticalToEager) {
  auto c = preset("tiny");
  c.attention_bias = true;
  c.qk_norm = true;
  c.tie_embeddings = true;
  const auto weights = model_weights::random(c, 3);
  const auto prompt = random_prompt(6, c.vocab_size, 3);
  decoder dec(test_queue(), weights);
  for (bool greedy : {true, false}) {
    sampling_options so;
    so.temperature = greedy ? 0.0 : 0.9;
    so.seed = 11;
    sampler s1(so), s2(so);
    const auto eager = decode(dec, prompt, false, greedy ? nullptr : &s1);
    const auto graphed = decode(dec, prompt, true, greedy ? nullptr : &s2);
    ASSERT_EQ(eager.logits.size(), 8u);
    EXPECT_EQ(graphed.tokens, eager.tokens) << (greedy ? "greedy" : "sampled");
    ASSERT_EQ(graphed.logits.size(), eager.logits.size());
    for (std::size_t i = 0; i < eager.logits.size(); ++i)
      EXPECT_EQ(0, std::memcmp(graphed.logits[i].data(), eager.logits[i].data(),
                               eager.logits[i].size() * sizeof(float)))
          << (greedy ? "greedy" : "sampled") << " step " << i << ": logits differ";
  }
  // One recording per mode (greedy records argmax into the graph, sampling does not); a later
  // generation replays the same graph.
  EXPECT_EQ(dec.graph_recordings(), 2u);
  decode(dec, prompt, true, nullptr);
  EXPECT_EQ(dec.graph_recordings(), 3u);  // back to greedy
  decode(dec, prompt, true, nullptr);
  EXPECT_EQ(dec.graph_recordings(), 3u);
  // 2 layers x 3 ops (rms_norm_linear: input norm + qkv; decode_attention: q/k norm, RoPE, the
  // cache write and attention; post_attention: o_proj + residual, post norm, gate/up, SiLU * mul,
  // down + residual, one launch where its route chains the GEMVs, three otherwise) + embedding,
  // final norm + head, argmax.
  const auto want = decode(dec, prompt, false, nullptr).tokens;
  dec.set_graph(true);
  const auto times = dec.time_decode_step();
  const auto post = static_cast<std::size_t>(std::count_if(times.begin(), times.end(), [](const auto& t) {
    return t.what.find("post_attention") != std::string::npos;
  }));
  EXPECT_TRUE(post == 2 || post == 6) << post << " post_attention launches for 2 layers";
  EXPECT_EQ(dec.decode_step_commands(), 7u + post);

  // A timed replay of the step (prism-llm's launch-cost figure): a device time per command,
  // named; its cache write at the next free position leaves a later generation unchanged.
  ASSERT_EQ(times.size(), 7u + post);
  EXPECT_NE(times.front().what.find("kernel '"), std::string::npos) << times.front().what;
  double sum = 0;
  for (const auto& t : times) {
    EXPECT_GE(t.seconds, 0.0) << t.what;
    sum += t.seconds;
  }
  EXPECT_GT(sum, 0.0);
  // Each command's profiling timestamps: queued, started, ended, in that order, the device time
  // their difference.
  for (const auto& t : times) {
    EXPECT_LE(t.queued_ns, t.start_ns) << t.what;
    EXPECT_LE(t.start_ns, t.end_ns) << t.what;
    EXPECT_NEAR(t.seconds, static_cast<double>(t.end_ns - t.start_ns) * 1e-9, 1e-9) << t.what;
  }
  // The step's device time (prism-llm's decode_step_device_ms): at least its longest command.
  const auto span = dec.device_step_span();
  double longest = 0;
  for (const auto& t : times) longest = std::max(longest, t.seconds);
  EXPECT_GT(span.seconds, 0.0);
  EXPECT_GE(span.seconds, 0.5 * longest);  // another replay: timing noise aside
  EXPECT_EQ(decode(dec, prompt, true, nullptr).tokens, want);
  dec.set_graph(false);
  EXPECT_THROW(dec.time_decode_step(), prism::error);
  EXPECT_THROW(dec.device_step_span(), prism::error);

  // Without the norm fusion the norms launch on their own (rms_norm, then fused_add_rms_norm):
  // 2 x 7 + embedding, final norm, head, argmax. Tokens and logits agree with the fused step's
  // within rounding (the fused GEMVs read the norm unrounded).
  // The block fusion off: addmm (o_proj + residual), linear_silu_and_mul, addmm (down + residual):
  // 2 x 5 + 3 commands, the same tokens and logits within rounding.
  dec.set_fusions({true, true, false, false});
  EXPECT_EQ(dec.decode_step_commands(), 18u);
  const auto unfused = decode(dec, prompt, false, nullptr);
  dec.set_fusions({true, true, true, false});
  EXPECT_EQ(dec.decode_step_commands(), 13u);
  const auto unblocked = decode(dec, prompt, false, nullptr);
  dec.set_fusions({});
  const auto fused = decode(dec, prompt, false, nullptr);
  for (const auto* other : {&unfused, &unblocked}) {
    EXPECT_EQ(other->tokens, fused.tokens);
    ASSERT_EQ(other->logits.size(), fused.logits.size());
    for (std::size_t i = 0; i < fused.logits.size(); ++i)
      for (std::size_t j = 0; j < fused.logits[i].size(); ++j)
        ASSERT_NEAR(fused.logits[i][j], other->logits[i][j], 1e-3 * (1.0 + std::fabs(other->logits[i][j])))
            << "step " << i << " logit " << j;
  }
}

// A routing change (here: tuning lookups replaced) makes the decoder record its graph again,
// and the new routes serve the replays; a backend that cannot be recorded is named.
TEST(Decoder, GraphIsRecordedAgainWhenRoutingChanges) {
  const auto c = preset("tiny");
  const auto weights = model_weights::random(c, 4);
  const auto prompt = random_prompt(5, c.vocab_size, 4);
  decoder dec(test_queue(), weights);
  const auto want = decode(dec, prompt, false, nullptr).tokens;
  EXPECT_EQ(decode(dec, prompt, true, nullptr).tokens, want);
  EXPECT_EQ(dec.graph_recordings(), 1u);

  struct restore {
    ~restore() { dispatch::use_tuning_database(); }
  } at_exit;
  dispatch::set_tuning_lookup([](const dispatch::tuning_query& qy) -> std::optional<dispatch::tuned_choice> {
    if (qy.op == "rms_norm_linear") return dispatch::tuned_choice{"opencl", "variant=1,nb=2,wg=16,vw=8"};
    return std::nullopt;
  });
  EXPECT_EQ(decode(dec, prompt, true, nullptr).tokens, want);
  EXPECT_EQ(dec.graph_recordings(), 2u);

  dispatch::set_tuning_lookup([](const dispatch::tuning_query& qy) -> std::optional<dispatch::tuned_choice> {
    if (qy.op == "rms_norm_linear") return dispatch::tuned_choice{"host", ""};
    return std::nullopt;
  });
  try {
    decode(dec, prompt, true, nullptr);
    ADD_FAILURE() << "a host-backend op was recorded into a graph";
  } catch (const prism::error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), errc::unsupported) << what;
    EXPECT_NE(what.find("rms_norm_linear on the host backend"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot be recorded in a graph"), std::string::npos) << what;
  }
  // Eager decoding still runs it on the host, and the queue is usable again.
  EXPECT_EQ(decode(dec, prompt, false, nullptr).tokens, want);
}

// post_attention's one-launch form (chain=1: work-groups hand the stages to each other through
// global counters) inside a recorded decode graph: one command a layer for the block, replays
// bit-identical to eager decoding with the same form, and the same tokens and logits (within
// rounding) as the three-launch form the CPU profile routes.
TEST(Decoder, ChainedPostAttentionReplaysLikeEager) {
  const auto c = preset("tiny");
  const auto weights = model_weights::random(c, 6);
  const auto prompt = random_prompt(5, c.vocab_size, 6);
  decoder dec(test_queue(), weights);
  const auto three = decode(dec, prompt, false, nullptr);

  struct restore {
    ~restore() { dispatch::use_tuning_database(); }
  } at_exit;
  dispatch::set_tuning_lookup([](const dispatch::tuning_query& qy) -> std::optional<dispatch::tuned_choice> {
    if (qy.op == "post_attention")
      return dispatch::tuned_choice{"opencl", "variant=0,chain=1,mb=1,nb=2,wg=32"};
    return std::nullopt;
  });
  const auto eager = decode(dec, prompt, false, nullptr);
  const auto graphed = decode(dec, prompt, true, nullptr);
  EXPECT_EQ(dec.decode_step_commands(), 9u);  // 2 layers x 3 + embedding, final norm + head, argmax
  EXPECT_EQ(graphed.tokens, eager.tokens);
  ASSERT_EQ(graphed.logits.size(), eager.logits.size());
  for (std::size_t i = 0; i < eager.logits.size(); ++i)
    EXPECT_EQ(0, std::memcmp(graphed.logits[i].data(), eager.logits[i].data(),
                             eager.logits[i].size() * sizeof(float)))
        << "step " << i << ": logits differ";
  EXPECT_EQ(eager.tokens, three.tokens);
  ASSERT_EQ(eager.logits.size(), three.logits.size());
  for (std::size_t i = 0; i < eager.logits.size(); ++i)
    for (std::size_t j = 0; j < eager.logits[i].size(); ++j)
      ASSERT_NEAR(eager.logits[i][j], three.logits[i][j], 1e-3 * (1.0 + std::fabs(three.logits[i][j])))
          << "step " << i << " logit " << j;
}

// Greedy graph decoding one step ahead of the host (the default) gives the ids, the position and
// the state that reading each id first gives: through a stop id in mid-generation (the step run
// past it is dropped), a generation that continues from there, and a cache that fills up.
TEST(Decoder, RunningAheadKeepsTokensPositionAndState) {
  const auto c = preset("tiny");
  const auto weights = model_weights::random(c, 6);
  const auto prompt = random_prompt(6, c.vocab_size, 6);
  const auto more = random_prompt(3, c.vocab_size, 7);
  decoder dec(test_queue(), weights);
  dec.set_graph(true);
  struct outcome {
    std::vector<std::int32_t> first, streamed, second;
    std::int64_t pos_after_first = 0, pos_after_second = 0, pos_at_overflow = 0;
    std::string overflow;
  };
  auto run = [&](bool ahead, std::vector<std::int32_t> stop_ids) {
    outcome o;
    dec.set_run_ahead(ahead);
    dec.reset();
    decoder::controls ctl;
    ctl.stop_ids = std::move(stop_ids);
    ctl.on_token = [&](std::int32_t id) { o.streamed.push_back(id); };
    o.first = dec.generate(prompt, 24, &ctl).tokens;
    o.pos_after_first = dec.position();
    o.second = dec.generate(more, 6).tokens;  // continues from the stop: the cache must be intact
    o.pos_after_second = dec.position();
    try {
      dec.generate(more, c.max_seq_len);
    } catch (const prism::error& e) {
      o.overflow = e.what();
    }
    o.pos_at_overflow = dec.position();
    return o;
  };
  const auto plain = run(false, {});
  ASSERT_EQ(plain.first.size(), 24u);
  const auto ahead = run(true, {});
  EXPECT_EQ(ahead.first, plain.first);
  EXPECT_EQ(ahead.streamed, plain.first);
  EXPECT_EQ(ahead.pos_after_first, plain.pos_after_first);
  EXPECT_EQ(ahead.second, plain.second);
  EXPECT_EQ(ahead.pos_after_second, plain.pos_after_second);
  EXPECT_NE(plain.overflow.find("exceeds max_seq_len"), std::string::npos) << plain.overflow;
  EXPECT_NE(ahead.overflow.find("exceeds max_seq_len"), std::string::npos) << ahead.overflow;
  EXPECT_EQ(ahead.pos_at_overflow, plain.pos_at_overflow);
  EXPECT_EQ(ahead.pos_at_overflow, c.max_seq_len);

  // Stop at the 6th new id: running ahead has the 7th step in flight then.
  const std::int32_t stop = plain.first[5];
  const auto cut = static_cast<std::size_t>(std::find(plain.first.begin(), plain.first.end(), stop) -
                                            plain.first.begin()) +
                   1;
  const auto plain_stop = run(false, {stop});
  const auto ahead_stop = run(true, {stop});
  ASSERT_EQ(plain_stop.first.size(), cut);
  EXPECT_EQ(ahead_stop.first, plain_stop.first);
  EXPECT_EQ(ahead_stop.streamed, plain_stop.first);
  EXPECT_EQ(ahead_stop.pos_after_first, plain_stop.pos_after_first);
  EXPECT_EQ(ahead_stop.second, plain_stop.second);
  EXPECT_EQ(ahead_stop.pos_after_second, plain_stop.pos_after_second);
}

TEST(Decoder, RejectsBadTokensAndCacheOverflow) {
  const auto c = preset("tiny");
  const auto weights = model_weights::random(c, 1);
  decoder dec(test_queue(), weights);
  const std::vector<std::int32_t> bad{1, static_cast<std::int32_t>(c.vocab_size)};
  EXPECT_THROW(dec.forward(bad), prism::error);
  const std::vector<std::int32_t> too_long(static_cast<std::size_t>(c.max_seq_len + 1), 1);
  try {
    dec.forward(too_long);
    ADD_FAILURE() << "no error for a prompt longer than max_seq_len";
  } catch (const prism::error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds max_seq_len"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prism::llm
