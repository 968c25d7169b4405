// SPDX-License-Identifier: Apache-2.0
// config.json reading, RoPE scaling, sampling and the tokenizer on inputs written here; the
// checks against Hugging Face itself are in hf/hf_check.py.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>

#include <fmt/format.h>

#include "examples/llm/checkpoint.hpp"
#include "examples/llm/sampling.hpp"
#include "examples/llm/tokenizer.hpp"
#include "examples/llm/unicode.hpp"
#include "prism/error.hpp"

namespace prism::llm {
namespace {

template <class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const prism::error& e) {
    return e.what();
  }
  return "<no error>";
}

constexpr const char* qwen3_config = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
  "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 512,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true,
  "bos_token_id": 1, "eos_token_id": [2, 3]})";

TEST(HfConfig, ReadsEveryField) {
  const auto c = config_from_hf_json(qwen3_config, "config.json");
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_NO_THROW(c.validate());
  std::string mistral = qwen3_config;
  mistral.replace(mistral.find("Qwen3ForCausalLM"), 16, "MistralForCausalLM");
  mistral.insert(mistral.find("\"bos_token_id\""), R"("sliding_window": 128, )");
  EXPECT_EQ(config_from_hf_json(mistral, "c").sliding_window, 128);
  mistral.insert(mistral.find("\"bos_token_id\""), R"("use_sliding_window": false, )");
  EXPECT_EQ(config_from_hf_json(mistral, "c").sliding_window, 0);
}

TEST(HfConfig, UnknownArchitectureAndMissingFieldsAreNamed) {
  std::string text = qwen3_config;
  text.replace(text.find("Qwen3ForCausalLM"), 16, "GPTNeoXForCausalLM");
  text.replace(text.find("\"qwen3\""), 7, "\"gpt_neox\"");
  const auto arch = error_text([&] { config_from_hf_json(text, "x/config.json"); });
  EXPECT_NE(arch.find("architecture 'GPTNeoXForCausalLM'"), std::string::npos) << arch;
  EXPECT_NE(arch.find("LlamaForCausalLM"), std::string::npos) << arch;
  std::string missing = qwen3_config;
  missing.replace(missing.find("\"intermediate_size\": 128,"), 25, "");
  const auto field = error_text([&] { config_from_hf_json(missing, "x/config.json"); });
  EXPECT_NE(field.find("'x/config.json': the field \"intermediate_size\" is missing"), std::string::npos)
      << field;
  std::string rope = qwen3_config;
  rope.insert(rope.find("\"bos_token_id\""), R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0}, )");
  EXPECT_NE(error_text([&] { config_from_hf_json(rope, "c"); }).find("rope scaling 'yarn' is not supported"),
            std::string::npos);
}

TEST(HfConfig, RopeScalingMatchesHuggingFaceFormulas) {
  std::string text = qwen3_config;
  text.insert(text.find("\"bos_token_id\""),
              R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}, )");
  const auto c = config_from_hf_json(text, "c");
  ASSERT_EQ(c.rope_scaling, model_config::rope_scaling_kind::llama3);
  const auto f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 16u);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double base = std::pow(1e6, -2.0 * static_cast<double>(i) / 32.0);
    const double wavelen = 2 * std::numbers::pi / base;
    double want = base;
    if (wavelen > 64.0)
      want = base / 8.0;         // low frequencies: slowed by the factor
    else if (wavelen >= 16.0) {  // in between: blended
      const double s = (64.0 / wavelen - 1.0) / 3.0;
      want = (1 - s) * base / 8.0 + s * base;
    }
    EXPECT_DOUBLE_EQ(f[i], want) << i;
  }
  EXPECT_DOUBLE_EQ(f[0], 1.0);  // the fastest frequency is kept
  EXPECT_LT(f[15], std::pow(1e6, -30.0 / 32.0));
}

TEST(Sampling, SameSeedSameTokensAndGreedyIsArgmax) {
  std::vector<float> logits(50);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(i * 1.7) * 3);
  sampling_options o;
  o.temperature = 0.9;
  o.top_k = 20;
  o.top_p = 0.9;
  o.seed = 42;
  sampler a(o), b(o);
  std::vector<std::int32_t> da, db;
  for (int i = 0; i < 64; ++i) da.push_back(a.sample(logits)), db.push_back(b.sample(logits));
  EXPECT_EQ(da, db);
  EXPECT_GT(std::set<std::int32_t>(da.begin(), da.end()).size(), 1u) << "sampling never varies";
  o.seed = 43;
  sampler c(o);
  std::vector<std::int32_t> dc;
  for (int i = 0; i < 64; ++i) dc.push_back(c.sample(logits));
  EXPECT_NE(da, dc);
  o.top_k = 1;  // top-1 is greedy whatever the seed
  sampler one(o);
  const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(one.sample(logits), best);
  sampler greedy(sampling_options{});
  EXPECT_EQ(greedy.sample(logits), best);
  sampling_options bad;
  bad.top_p = 0;
  EXPECT_NE(error_text([&] { bad.validate(); }).find("0 < top-p <= 1"), std::string::npos);
}

// A byte-level BPE vocabulary small enough to write by hand: "Ġ" is the byte-level space.
constexpr const char* tiny_tokenizer = R"({
  "added_tokens": [{"id": 9, "content": "<|end|>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": null,
  "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "Ġ": 2, "hi": 3, "Ġhi": 4, "!": 5, "1": 6, "2": 7, "12": 8},
            "merges": ["h i", "Ġ hi", "1 2"]}})";

TEST(Tokenizer, EncodesDecodesAndMatchesSpecialTokens) {
  const auto tok = tokenizer::from_json(tiny_tokenizer, "tiny.json");
  EXPECT_EQ(tok.encode("hi hi!12"), (std::vector<std::int32_t>{3, 4, 5, 8}));
  EXPECT_EQ(tok.encode("hi<|end|>hi"), (std::vector<std::int32_t>{3, 9, 3}));
  const std::vector<std::int32_t> ids = {3, 4, 9, 5};
  EXPECT_EQ(tok.decode(ids), "hi hi<|end|>!");
  EXPECT_EQ(tok.decode(ids, true), "hi hi!");
  EXPECT_TRUE(tok.is_special(9));
  EXPECT_EQ(tok.pre_tokenizer_name(), "gpt2");
  const auto unknown = error_text([] { tokenizer::from_json(tiny_tokenizer, "t").encode("x"); });
  EXPECT_NE(unknown.find("'x' is not in the vocabulary"), std::string::npos) << unknown;
  std::string regex = tiny_tokenizer;
  regex.replace(
      regex.find(R"({"type": "ByteLevel")"), 0,
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"}}]}, "x": )");
  const auto text = error_text([&] { tokenizer::from_json(regex, "t.json"); });
  EXPECT_NE(text.find("regex \"\\\\w+\" is not supported"), std::string::npos) << text;
}

TEST(Tokenizer, ChatFormatsFollowTheTemplate) {
  const auto tok = tokenizer::from_json(tiny_tokenizer, "tiny.json");
  EXPECT_EQ(detect_chat_format("{% for m in messages %}<|im_start|>{{ m.role }}", tok), chat_format::chatml);
  EXPECT_EQ(detect_chat_format("<|start_header_id|>", tok), chat_format::llama3);
  EXPECT_EQ(detect_chat_format("[INST] {{ m }} [/INST]", tok), chat_format::llama2);
  EXPECT_NE(error_text([&] { detect_chat_format("{{ messages }}", tok); }).find("ChatML"), std::string::npos);
  EXPECT_EQ(apply_chat_format(chat_format::chatml, "", "Hi"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// A GGUF holding only a SentencePiece-style vocabulary (tokenizer.ggml.model "llama"): merges go
// by the merged token's score, unknown bytes fall back to <0xXX>, a space prefix is added.
std::vector<std::byte> spm_gguf() {
  std::vector<std::byte> out;
  auto put = [&](auto v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  };
  auto put_string = [&](const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    for (char c : s) out.push_back(static_cast<std::byte>(c));
  };
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) tokens.push_back(fmt::format("<0x{:02X}>", b));
  const std::string sp = "\xE2\x96\x81";  // '▁'
  for (const auto& t : {sp, std::string("h"), std::string("i"), sp + "h", sp + "hi", std::string("hi")})
    tokens.push_back(t);
  std::vector<float> scores(tokens.size(), 0.0f);
  scores[tokens.size() - 3] = -1;     // ▁h
  scores[tokens.size() - 2] = -2;     // ▁hi
  scores[tokens.size() - 1] = -0.5f;  // hi: merged before ▁h
  std::vector<std::int32_t> types(tokens.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (int b = 0; b < 256; ++b) types[3 + b] = 6;
  for (char c : std::string("GGUF")) out.push_back(static_cast<std::byte>(c));
  put(std::uint32_t{3});
  put(std::uint64_t{0});  // tensors
  put(std::uint64_t{5});  // keys
  put_string("tokenizer.ggml.model");
  put(std::uint32_t{8});
  put_string("llama");
  put_string("tokenizer.ggml.tokens");
  put(std::uint32_t{9});
  put(std::uint32_t{8});
  put(static_cast<std::uint64_t>(tokens.size()));
  for (const auto& t : tokens) put_string(t);
  put_string("tokenizer.ggml.scores");
  put(std::uint32_t{9});
  put(std::uint32_t{6});
  put(static_cast<std::uint64_t>(scores.size()));
  for (float v : scores) put(v);
  put_string("tokenizer.ggml.token_type");
  put(std::uint32_t{9});
  put(std::uint32_t{5});
  put(static_cast<std::uint64_t>(types.size()));
  for (auto v : types) put(v);
  put_string("tokenizer.ggml.bos_token_id");
  put(std::uint32_t{4});
  put(std::uint32_t{1});
  return out;
}

TEST(Tokenizer, GgufSentencePieceVocabularyMergesByScoreWithByteFallback) {
  const auto bytes = spm_gguf();
  const auto file = io::gguf_file::parse(bytes, "spm.gguf");
  const auto tok = tokenizer::from_gguf(file);
  const std::int32_t sp = 259, hi = 264, sp_hi = 263;
  // "hi hi" -> "▁hi▁hi": both "hi" (score -0.5) merge first, then "▁" + "hi" (-2), leftmost first.
  EXPECT_EQ(tok.encode("hi hi"), (std::vector<std::int32_t>{sp_hi, sp_hi}));
  EXPECT_EQ(tok.encode("hi", true), (std::vector<std::int32_t>{1, sp_hi}));  // add_bos by default
  // '!' is not in the vocabulary: its byte token.
  EXPECT_EQ(tok.encode("!"), (std::vector<std::int32_t>{sp, 3 + '!'}));
  const std::vector<std::int32_t> ids = {1, sp_hi, sp, hi, 3 + '!', 2};
  EXPECT_EQ(tok.decode(ids, true), "hi hi!");
  EXPECT_EQ(tok.pre_tokenizer_name(), "metaspace");
}

TEST(Unicode, InvalidBytesBecomeOneReplacementPerMaximalPrefix) {
  EXPECT_EQ(unicode::to_valid_utf8("a\xE4\xBD"
                                   "b"),
            "a\xEF\xBF\xBD"
            "b");  // one U+FFFD for a cut 3-byte sequence
  EXPECT_EQ(unicode::to_valid_utf8("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(unicode::to_valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(unicode::to_valid_utf8("ok \xEF\xBF\xBD \xF0\x9F\xA6\x8A"), "ok \xEF\xBF\xBD \xF0\x9F\xA6\x8A");
  EXPECT_EQ(unicode::complete_utf8_prefix("ab\xF0\x9F\xA6"), 2u);  // holds back a cut emoji
  EXPECT_EQ(unicode::complete_utf8_prefix("ab\xF0\x9F\xA6\x8A"), 6u);
}

}  // namespace
}  // namespace prism::llm
