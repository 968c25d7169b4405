// SPDX-License-Identifier: Apache-2.0
// Unicode class tests (binary search in the generated ranges) and UTF-8 helpers.
#include "examples/llm/unicode.hpp"

#include <algorithm>

namespace prism::llm::unicode {

namespace {
bool in_ranges(const code_range* ranges, std::size_t count, char32_t c) {
  const auto* end = ranges + count;
  const auto* it =
      std::upper_bound(ranges, end, c, [](char32_t v, const code_range& r) { return v < r.first; });
  return it != ranges && c <= (it - 1)->last;
}
}  // namespace

bool is_letter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return in_ranges(letter_ranges, letter_ranges_count, c);
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(number_ranges, number_ranges_count, c);
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

decoded decode_utf8(std::string_view s, std::size_t at) {
  const auto b0 = static_cast<unsigned char>(s[at]);
  if (b0 < 0x80) return {b0, 1};
  std::size_t len = b0 >= 0xF0 && b0 < 0xF5 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (len == 0 || at + len > s.size()) return {0xFFFD, 1};
  char32_t c = b0 & (0x7F >> len);
  for (std::size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[at + i]);
    if ((b & 0xC0) != 0x80) return {0xFFFD, 1};
    c = (c << 6) | (b & 0x3F);
  }
  // Overlong forms and surrogates are invalid.
  if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF))
    return {0xFFFD, 1};
  return {c, len};
}

void split_utf8(std::string_view text, std::vector<char32_t>& code_points,
                std::vector<std::size_t>& offsets) {
  code_points.clear();
  offsets.clear();
  for (std::size_t i = 0; i < text.size();) {
    const auto d = decode_utf8(text, i);
    code_points.push_back(d.code_point);
    offsets.push_back(i);
    i += d.length;
  }
  offsets.push_back(text.size());
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode_utf8(s, i);
    if (d.code_point != 0xFFFD || s.compare(i, 3, "\xEF\xBF\xBD") == 0) {
      out.append(s, i, d.length);
      i += d.length;
      continue;
    }
    const auto b0 = static_cast<unsigned char>(s[i]);
    const std::size_t need = b0 >= 0xC2 && b0 <= 0xDF   ? 2
                             : b0 >= 0xE0 && b0 <= 0xEF ? 3
                             : b0 >= 0xF0 && b0 <= 0xF4 ? 4
                                                        : 0;
    std::size_t k = 1;
    if (need) {
      const unsigned lo = b0 == 0xE0 ? 0xA0 : b0 == 0xF0 ? 0x90 : 0x80;
      const unsigned hi = b0 == 0xED ? 0x9F : b0 == 0xF4 ? 0x8F : 0xBF;
      auto at = [&](std::size_t j) { return static_cast<unsigned char>(s[i + j]); };
      if (i + 1 < s.size() && at(1) >= lo && at(1) <= hi) {
        k = 2;
        while (k < need && i + k < s.size() && (at(k) & 0xC0) == 0x80) ++k;
      }
    }
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

std::size_t complete_utf8_prefix(std::string_view text) {
  // Look back at most 3 bytes for the start of a sequence that the text cuts short.
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(3, n); ++back) {
    const auto b = static_cast<unsigned char>(text[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking
    const std::size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

}  // namespace prism::llm::unicode
