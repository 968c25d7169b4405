// SPDX-License-Identifier: Apache-2.0
// The Unicode character classes the tokenizer's pre-tokenizers use (\p{L}, \p{N}, \s), and
// UTF-8 decoding. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prism::llm::unicode {

struct code_range {
  char32_t first, last;
};
extern const code_range letter_ranges[];
extern const std::size_t letter_ranges_count;
extern const code_range number_ranges[];
extern const std::size_t number_ranges_count;

bool is_letter(char32_t c);
bool is_number(char32_t c);
/// Unicode White_Space, as \s in the Rust and Oniguruma regexes Hugging Face tokenizers use.
bool is_space(char32_t c);

/// One decoded code point and the bytes it spans. Invalid bytes decode as U+FFFD of length 1.
struct decoded {
  char32_t code_point;
  std::size_t length;
};
decoded decode_utf8(std::string_view text, std::size_t at);
/// The code points of `text` with their byte offsets (offsets has one more entry: the end).
void split_utf8(std::string_view text, std::vector<char32_t>& code_points, std::vector<std::size_t>& offsets);
void append_utf8(std::string& out, char32_t c);
/// `text` with each invalid UTF-8 sequence (a maximal prefix of a valid one, else one byte)
/// replaced by U+FFFD, as Rust's String::from_utf8_lossy (Hugging Face's decoders) does.
std::string to_valid_utf8(std::string_view text);
/// The length of the longest prefix of `text` that ends on a whole UTF-8 sequence.
std::size_t complete_utf8_prefix(std::string_view text);

}  // namespace prism::llm::unicode
