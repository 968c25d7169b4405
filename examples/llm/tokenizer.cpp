// SPDX-License-Identifier: Apache-2.0
// BPE encode/decode. Pre-tokenizers are the Hugging Face regexes written out as small scanners
// (GPT-2, Llama-3, Qwen2; SmolLM = single digits + GPT-2), so no regex engine with Unicode
// classes is needed; an unknown regex is an error that names it.
#include "examples/llm/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <climits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "examples/llm/unicode.hpp"
#include "prism/error.hpp"

namespace prism::llm {

namespace {

using json = nlohmann::json;
using unicode::is_letter;
using unicode::is_number;
using unicode::is_space;

constexpr const char* op_name = "llm::tokenizer";
constexpr std::string_view metaspace = "\xE2\x96\x81";  // U+2581 '▁'

// The Hugging Face pre-tokenizer regexes prism knows, as written in tokenizer.json.
constexpr std::string_view gpt2_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

[[noreturn]] void unsupported(const std::string& source, const std::string& what) {
  throw error(errc::unsupported, op_name, fmt::format("'{}': {}", source, what));
}

// GPT-2's reversible byte <-> printable code point map.
struct byte_map {
  std::array<char32_t, 256> to_cp{};
  std::unordered_map<char32_t, std::uint8_t> to_byte;
  std::array<std::string, 256> utf8;
  byte_map() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_byte[to_cp[b]] = static_cast<std::uint8_t>(b);
      unicode::append_utf8(utf8[b], to_cp[b]);
    }
  }
};
const byte_map& bytes() {
  static const byte_map* m = new byte_map;
  return *m;
}

// Scanners over code points for the pre-tokenizer regexes. Each returns the end of the match
// that starts at i (always > i: the last alternatives take any whitespace or other run).
struct scanner {
  const std::vector<char32_t>& cp;
  std::size_t n() const { return cp.size(); }
  bool letter(std::size_t i) const { return i < n() && is_letter(cp[i]); }
  bool number(std::size_t i) const { return i < n() && is_number(cp[i]); }
  bool space(std::size_t i) const { return i < n() && is_space(cp[i]); }
  bool other(std::size_t i) const {
    return i < n() && !is_space(cp[i]) && !is_letter(cp[i]) && !is_number(cp[i]);
  }
  bool newline(std::size_t i) const { return i < n() && (cp[i] == '\r' || cp[i] == '\n'); }

  std::size_t contraction(std::size_t i, bool ignore_case) const {
    if (cp[i] != '\'' || i + 1 >= n()) return i;
    auto lower = [&](std::size_t k) -> char32_t {
      if (k >= n()) return 0;
      return ignore_case && cp[k] >= 'A' && cp[k] <= 'Z' ? cp[k] + 32 : cp[k];
    };
    const char32_t a = lower(i + 1), b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    return i;
  }
  std::size_t run(std::size_t i, bool (scanner::*pred)(std::size_t) const) const {
    while ((this->*pred)(i)) ++i;
    return i;
  }
  // \s+(?!\S)|\s+ at a whitespace position.
  std::size_t whitespace(std::size_t i) const {
    const std::size_t end = run(i, &scanner::space);
    if (end == n() || end - i == 1) return end;
    return end - 1;  // leave the last space to prefix the next word
  }

  std::size_t gpt2(std::size_t i) const {
    if (auto e = contraction(i, false); e > i) return e;
    const std::size_t j = cp[i] == ' ' ? i + 1 : i;
    if (letter(j)) return run(j, &scanner::letter);
    if (number(j)) return run(j, &scanner::number);
    if (other(j)) return run(j, &scanner::other);
    return whitespace(i);
  }

  std::size_t llama3(std::size_t i, std::size_t max_digits) const {
    if (auto e = contraction(i, true); e > i) return e;
    if (!newline(i) && !letter(i) && !number(i) && letter(i + 1)) return run(i + 1, &scanner::letter);
    if (letter(i)) return run(i, &scanner::letter);
    if (number(i)) {
      std::size_t e = i;
      while (e - i < max_digits && number(e)) ++e;
      return e;
    }
    const std::size_t j = cp[i] == ' ' ? i + 1 : i;
    if (other(j)) return run(run(j, &scanner::other), &scanner::newline);
    // \s*[\r\n]+: up to the last newline of the whitespace run.
    const std::size_t end = run(i, &scanner::space);
    for (std::size_t k = end; k > i; --k)
      if (newline(k - 1)) return k;
    return whitespace(i);
  }
};

std::int32_t json_id(const json& v, const std::string& source, const std::string& what) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT32_MAX)
    throw error(errc::config_error, op_name, fmt::format("'{}': {} must be a token id >= 0", source, what));
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

}  // namespace

void tokenizer::finish() {
  std::sort(added_.begin(), added_.end(),
            [](const added_token& a, const added_token& b) { return a.content.size() > b.content.size(); });
  special_.assign(id_to_token_.size(), false);
  is_added_.assign(id_to_token_.size(), false);
  for (const auto& a : added_) {
    special_[a.id] = a.special;
    is_added_[a.id] = true;
  }
}

std::int32_t tokenizer::token_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& tokenizer::token_text(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size())
    throw error(errc::invalid_argument, op_name,
                fmt::format("token id {} is outside the vocabulary [0, {})", id, id_to_token_.size()));
  return id_to_token_[id];
}

bool tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < special_.size() && special_[id];
}

tokenizer tokenizer::from_json(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw error(errc::config_error, op_name, fmt::format("'{}' is not valid JSON: {}", source, e.what()));
  }
  tokenizer t;
  const json& model = j.value("model", json::object());
  if (model.value("type", std::string()) != "BPE")
    unsupported(source, fmt::format("model type '{}' is not supported; valid: BPE",
                                    model.value("type", std::string("<none>"))));
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw error(errc::config_error, op_name, fmt::format("'{}': model.vocab must be an object", source));
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    const auto id = json_id(*it, source, fmt::format("vocab['{}']", it.key()));
    if (static_cast<std::size_t>(id) >= t.id_to_token_.size()) t.id_to_token_.resize(id + 1);
    t.id_to_token_[id] = it.key();
    t.vocab_[it.key()] = id;
  }
  std::int32_t rank = 0;
  for (const auto& m : model.value("merges", json::array())) {
    std::string left, right;
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const auto sp = s.find(' ', 1);
      if (sp == std::string::npos)
        throw error(errc::config_error, op_name,
                    fmt::format("'{}': merge '{}' is not 'left right'", source, s));
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw error(errc::config_error, op_name, fmt::format("'{}': merge {} is malformed", source, m.dump()));
    }
    t.merge_rank_.emplace(left + '\0' + right, rank++);
  }
  t.byte_fallback_ = model.value("byte_fallback", false);
  t.ignore_merges_ = model.value("ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string())
    t.unk_id_ = t.token_id(model["unk_token"].get<std::string>());
  for (const auto& a : j.value("added_tokens", json::array())) {
    added_token tok{a.value("content", std::string()),
                    json_id(a.value("id", json(-1)), source, "added token id"), a.value("special", false)};
    if (tok.content.empty()) continue;
    if (static_cast<std::size_t>(tok.id) >= t.id_to_token_.size()) t.id_to_token_.resize(tok.id + 1);
    t.id_to_token_[tok.id] = tok.content;
    t.vocab_[tok.content] = tok.id;
    t.added_.push_back(std::move(tok));
  }

  // Normalizer: none, NFC (identity on NFC text), or the Llama-2 Metaspace one (Prepend "▁",
  // Replace " " -> "▁").
  bool metaspace_normalizer = false;
  std::vector<json> norms;
  const json norm = j.value("normalizer", json());
  if (norm.is_object()) {
    if (norm.value("type", std::string()) == "Sequence")
      for (const auto& n : norm.value("normalizers", json::array())) norms.push_back(n);
    else
      norms.push_back(norm);
  }
  for (const auto& n : norms) {
    const auto type = n.value("type", std::string());
    if (type == "NFC") continue;
    if (type == "Prepend" && n.value("prepend", std::string()) == metaspace) {
      t.add_prefix_space_ = true;
      metaspace_normalizer = true;
    } else if (type == "Replace" && n.value("content", std::string()) == metaspace) {
      metaspace_normalizer = true;
    } else {
      unsupported(source,
                  fmt::format("normalizer {} is not supported; valid: none, NFC, Llama-2's Prepend/Replace "
                              "with \"\xE2\x96\x81\"",
                              n.dump()));
    }
  }

  // Pre-tokenizer.
  std::vector<json> pres;
  const json pre = j.value("pre_tokenizer", json());
  if (pre.is_object()) {
    if (pre.value("type", std::string()) == "Sequence")
      for (const auto& p : pre.value("pretokenizers", json::array())) pres.push_back(p);
    else
      pres.push_back(pre);
  }
  bool byte_level = false, metaspace_pre = false, regex_seen = false;
  for (const auto& p : pres) {
    const auto type = p.value("type", std::string());
    if (type == "ByteLevel") {
      byte_level = true;
      t.add_prefix_space_ = p.value("add_prefix_space", false);
      if (p.value("use_regex", true)) {
        t.split_ = split_kind::gpt2;
        regex_seen = true;
      }
    } else if (type == "Split") {
      const auto regex = p.value("pattern", json::object()).value("Regex", std::string());
      if (regex == gpt2_regex)
        t.split_ = split_kind::gpt2;
      else if (regex == llama3_regex)
        t.split_ = split_kind::llama3;
      else if (regex == qwen2_regex)
        t.split_ = split_kind::qwen2;
      else
        unsupported(source,
                    fmt::format("pre-tokenizer regex {} is not supported; valid: the GPT-2, Llama-3 and "
                                "Qwen2 regexes",
                                json(regex).dump()));
      regex_seen = true;
    } else if (type == "Digits" && p.value("individual_digits", false)) {
      t.split_digits_ = true;
    } else if (type == "Metaspace") {
      metaspace_pre = true;
      t.add_prefix_space_ =
          p.value("prepend_scheme", std::string("always")) != "never" && p.value("add_prefix_space", true);
      if (p.value("split", true))
        unsupported(source, "Metaspace with split: true is not supported; valid: split: false (Llama-2)");
    } else {
      unsupported(source,
                  fmt::format("pre-tokenizer {} is not supported; valid: ByteLevel, Split with a known "
                              "regex, Digits (individual), Metaspace",
                              p.dump()));
    }
  }
  if (byte_level && (metaspace_pre || metaspace_normalizer))
    unsupported(source, "a ByteLevel pre-tokenizer together with Metaspace is not supported");
  t.byte_level_ = byte_level;
  if (!byte_level) {
    if (!metaspace_pre && !metaspace_normalizer)
      unsupported(source,
                  "no ByteLevel or Metaspace pre-tokenization; valid: byte-level BPE (GPT-2, Llama-3, "
                  "Qwen2, SmolLM) or Metaspace BPE (Llama-2)");
    t.split_ = split_kind::none;
    t.pre_name_ = "metaspace";
  } else {
    if (!regex_seen) t.split_ = split_kind::none;
    t.pre_name_ = t.split_digits_                  ? "smollm"
                  : t.split_ == split_kind::llama3 ? "llama3"
                  : t.split_ == split_kind::qwen2  ? "qwen2"
                                                   : "gpt2";
  }

  // Post-processor: the single-sequence template's special tokens (e.g. Llama's "<s> $A").
  std::vector<json> posts;
  const json post = j.value("post_processor", json());
  if (post.is_object()) {
    if (post.value("type", std::string()) == "Sequence")
      for (const auto& p : post.value("processors", json::array())) posts.push_back(p);
    else
      posts.push_back(post);
  }
  for (const auto& p : posts) {
    if (p.value("type", std::string()) != "TemplateProcessing") continue;
    bool after = false;
    for (const auto& piece : p.value("single", json::array())) {
      if (piece.contains("Sequence")) {
        after = true;
      } else if (piece.contains("SpecialToken")) {
        const auto name = piece["SpecialToken"].value("id", std::string());
        const auto& special = p.value("special_tokens", json::object());
        if (!special.contains(name))
          throw error(
              errc::config_error, op_name,
              fmt::format("'{}': post-processor token '{}' has no special_tokens entry", source, name));
        for (const auto& id : special[name].value("ids", json::array()))
          (after ? t.suffix_ids_ : t.prefix_ids_).push_back(json_id(id, source, "post-processor id"));
      }
    }
  }
  t.finish();
  return t;
}

tokenizer tokenizer::from_gguf(const io::gguf_file& file) {
  tokenizer t;
  const auto model = file.get_string("tokenizer.ggml.model");
  const auto& tokens = file.get_strings("tokenizer.ggml.tokens");
  std::vector<double> types;
  if (file.contains_key("tokenizer.ggml.token_type")) types = file.get_numbers("tokenizer.ggml.token_type");
  t.id_to_token_ = tokens;
  for (std::size_t i = 0; i < tokens.size(); ++i) t.vocab_.emplace(tokens[i], static_cast<std::int32_t>(i));
  // Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
  for (std::size_t i = 0; i < types.size() && i < tokens.size(); ++i) {
    if (types[i] == 3 || types[i] == 4)
      t.added_.push_back({tokens[i], static_cast<std::int32_t>(i), types[i] == 3});
    if (types[i] == 2) t.unk_id_ = static_cast<std::int32_t>(i);
  }
  if (model == "gpt2") {
    t.byte_level_ = true;
    const auto& merges = file.get_strings("tokenizer.ggml.merges");
    std::int32_t rank = 0;
    for (const auto& m : merges) {
      const auto sp = m.find(' ', 1);
      if (sp == std::string::npos)
        throw error(errc::config_error, op_name,
                    fmt::format("'{}': merge '{}' is not 'left right'", file.path(), m));
      t.merge_rank_.emplace(m.substr(0, sp) + '\0' + m.substr(sp + 1), rank++);
    }
    const auto pre =
        file.contains_key("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
    if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
      t.split_ = split_kind::gpt2;
    } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
      t.split_ = split_kind::llama3;
      t.ignore_merges_ = true;
    } else if (pre == "qwen2") {
      t.split_ = split_kind::qwen2;
    } else if (pre == "smollm") {
      t.split_ = split_kind::gpt2;
      t.split_digits_ = true;
    } else {
      unsupported(file.path(), fmt::format("tokenizer.ggml.pre '{}' is not supported; valid: default, gpt-2, "
                                           "llama-bpe, qwen2, smollm",
                                           pre));
    }
    t.pre_name_ = pre == "smollm"                  ? "smollm"
                  : t.split_ == split_kind::llama3 ? "llama3"
                  : t.split_ == split_kind::qwen2  ? "qwen2"
                                                   : "gpt2";
  } else if (model == "llama") {
    t.byte_level_ = false;
    t.split_ = split_kind::none;
    t.use_scores_ = true;
    t.byte_fallback_ = true;
    t.add_prefix_space_ = file.contains_key("tokenizer.ggml.add_space_prefix")
                              ? file.get_bool("tokenizer.ggml.add_space_prefix")
                              : true;
    for (double s : file.get_numbers("tokenizer.ggml.scores")) t.scores_.push_back(static_cast<float>(s));
    if (t.scores_.size() != tokens.size())
      throw error(errc::config_error, op_name,
                  fmt::format("'{}': {} scores for {} tokens", file.path(), t.scores_.size(), tokens.size()));
    t.pre_name_ = "metaspace";
  } else {
    unsupported(file.path(),
                fmt::format("tokenizer.ggml.model '{}' is not supported; valid: gpt2, llama", model));
  }
  const bool add_bos = file.contains_key("tokenizer.ggml.add_bos_token")
                           ? file.get_bool("tokenizer.ggml.add_bos_token")
                           : model == "llama";
  if (add_bos && file.contains_key("tokenizer.ggml.bos_token_id"))
    t.prefix_ids_.push_back(static_cast<std::int32_t>(file.get_int("tokenizer.ggml.bos_token_id")));
  t.finish();
  return t;
}

void tokenizer::pre_tokenize(std::string_view text, std::vector<std::string_view>& pieces) const {
  std::vector<char32_t> cp;
  std::vector<std::size_t> off;
  unicode::split_utf8(text, cp, off);
  std::vector<std::pair<std::size_t, std::size_t>> spans;  // code point ranges
  // Digits first (SmolLM): each digit alone, the rest in between.
  std::size_t start = 0;
  for (std::size_t i = 0; i < cp.size(); ++i)
    if (split_digits_ && is_number(cp[i])) {
      if (i > start) spans.push_back({start, i});
      spans.push_back({i, i + 1});
      start = i + 1;
    }
  if (start < cp.size()) spans.push_back({start, cp.size()});
  for (const auto& [first, last] : spans) {
    if (split_ == split_kind::none) {
      pieces.push_back(text.substr(off[first], off[last] - off[first]));
      continue;
    }
    const std::vector<char32_t> sub(cp.begin() + first, cp.begin() + last);
    scanner s{sub};
    for (std::size_t i = 0; i < sub.size();) {
      const std::size_t e = split_ == split_kind::gpt2     ? s.gpt2(i)
                            : split_ == split_kind::llama3 ? s.llama3(i, 3)
                                                           : s.llama3(i, 1);
      pieces.push_back(text.substr(off[first + i], off[first + e] - off[first + i]));
      i = e;
    }
  }
}

void tokenizer::bpe(std::vector<std::string>& symbols) const {
  std::string key;
  while (symbols.size() > 1) {
    std::size_t best = SIZE_MAX;
    double best_value = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      if (use_scores_) {  // SentencePiece: the merged token with the highest score
        auto it = vocab_.find(symbols[i] + symbols[i + 1]);
        if (it == vocab_.end()) continue;
        const double score = scores_[it->second];
        if (best == SIZE_MAX || score > best_value) best = i, best_value = score;
      } else {  // BPE: the lowest merge rank
        key.assign(symbols[i]).push_back('\0');
        key += symbols[i + 1];
        auto it = merge_rank_.find(key);
        if (it == merge_rank_.end()) continue;
        if (best == SIZE_MAX || it->second < best_value) best = i, best_value = it->second;
      }
    }
    if (best == SIZE_MAX) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

void tokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty()) return;
  std::string mapped;
  if (byte_level_) {
    for (unsigned char b : piece) mapped += bytes().utf8[b];
  } else {
    for (char c : piece) {
      if (c == ' ')
        mapped += metaspace;
      else
        mapped.push_back(c);
    }
  }
  if (ignore_merges_)
    if (auto it = vocab_.find(mapped); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  std::vector<std::string> symbols;
  for (std::size_t i = 0; i < mapped.size();) {
    const auto len = unicode::decode_utf8(mapped, i).length;
    symbols.push_back(mapped.substr(i, len));
    i += len;
  }
  bpe(symbols);
  for (const auto& s : symbols) {
    if (auto it = vocab_.find(s); it != vocab_.end()) {
      out.push_back(it->second);
    } else if (byte_fallback_) {
      for (unsigned char b : s) {
        const auto id = token_id(fmt::format("<0x{:02X}>", b));
        if (id < 0)
          throw error(
              errc::invalid_argument, op_name,
              fmt::format("byte 0x{:02X} of '{}' has no <0x{:02X}> token in the vocabulary", b, s, b));
        out.push_back(id);
      }
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    } else {
      throw error(
          errc::invalid_argument, op_name,
          fmt::format("'{}' is not in the vocabulary, which has no byte fallback and no unknown token", s));
    }
  }
}

std::vector<std::int32_t> tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<std::int32_t> out;
  if (add_special) out = prefix_ids_;
  // Split at added tokens (longest first), then pre-tokenize and merge each segment.
  std::vector<std::string_view> pieces;
  std::size_t seg = 0, i = 0;
  bool first_segment = true;
  auto flush = [&](std::size_t end) {
    if (end > seg) {
      std::string_view segment = text.substr(seg, end - seg);
      std::string prefixed;
      if (add_prefix_space_ && (byte_level_ ? first_segment && segment[0] != ' ' : true)) {
        prefixed = " " + std::string(segment);
        segment = prefixed;
      }
      pieces.clear();
      pre_tokenize(segment, pieces);
      for (const auto& p : pieces) encode_piece(p, out);
    }
    first_segment = false;
  };
  while (i < text.size()) {
    const added_token* hit = nullptr;
    for (const auto& a : added_)
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    flush(i);
    out.push_back(hit->id);
    i += hit->content.size();
    seg = i;
  }
  flush(text.size());
  if (add_special) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
  return out;
}

std::string tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  std::string out;
  for (const auto id : ids) {
    // Ids past the tokenizer's vocabulary (models pad vocab_size) have no text, as in Hugging Face.
    if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) continue;
    const std::string& tok = id_to_token_[id];
    if (is_added_[id]) {
      if (!(skip_special && is_special(id))) out += tok;
      continue;
    }
    if (byte_level_) {
      for (std::size_t i = 0; i < tok.size();) {
        const auto d = unicode::decode_utf8(tok, i);
        auto it = bytes().to_byte.find(d.code_point);
        if (it != bytes().to_byte.end())
          out.push_back(static_cast<char>(it->second));
        else
          out.append(tok, i, d.length);
        i += d.length;
      }
      continue;
    }
    if (tok.size() == 6 && tok.starts_with("<0x") && tok.back() == '>') {
      out.push_back(static_cast<char>(std::stoi(tok.substr(3, 2), nullptr, 16)));
      continue;
    }
    for (std::size_t i = 0; i < tok.size();) {
      if (tok.compare(i, metaspace.size(), metaspace) == 0) {
        out.push_back(' ');
        i += metaspace.size();
      } else {
        out.push_back(tok[i++]);
      }
    }
  }
  // SentencePiece style: the space prepended to the text is not part of it (HF's Strip decoder).
  if (!byte_level_ && add_prefix_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

chat_format detect_chat_format(const std::string& tmpl, const tokenizer& tok) {
  if (tmpl.find("<|im_start|>") != std::string::npos) return chat_format::chatml;
  if (tmpl.find("<|start_header_id|>") != std::string::npos) return chat_format::llama3;
  if (tmpl.find("[INST]") != std::string::npos) return chat_format::llama2;
  if (tmpl.empty()) {
    if (tok.token_id("<|im_start|>") >= 0) return chat_format::chatml;
    if (tok.token_id("<|start_header_id|>") >= 0) return chat_format::llama3;
    if (tok.token_id("[INST]") >= 0 || tok.pre_tokenizer_name() == "metaspace") return chat_format::llama2;
  }
  throw error(errc::unsupported, "prism-llm --chat",
              tmpl.empty()
                  ? "the checkpoint has no chat template and no ChatML or Llama special tokens; valid "
                    "formats: ChatML (<|im_start|>), Llama-3 (<|start_header_id|>), Llama-2 ([INST])"
                  : "the checkpoint's chat template is none of the formats prism-llm knows: ChatML "
                    "(<|im_start|>), Llama-3 (<|start_header_id|>), Llama-2 ([INST])");
}

std::string apply_chat_format(chat_format format, const std::string& system, const std::string& user) {
  switch (format) {
    case chat_format::chatml: {
      std::string s;
      if (!system.empty()) s += "<|im_start|>system\n" + system + "<|im_end|>\n";
      return s + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    }
    case chat_format::llama3: {
      std::string s = "<|begin_of_text|>";
      if (!system.empty()) s += "<|start_header_id|>system<|end_header_id|>\n\n" + system + "<|eot_id|>";
      return s + "<|start_header_id|>user<|end_header_id|>\n\n" + user +
             "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
    }
    case chat_format::llama2:
      if (!system.empty()) return "<s>[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n" + user + " [/INST]";
      return "<s>[INST] " + user + " [/INST]";
  }
  return user;
}

}  // namespace prism::llm
