// SPDX-License-Identifier: Apache-2.0
// Conditions of shape-aware routes (`when: "m <= 16 && k >= 1024"`): comparisons of an op's
// shape-key components with integers or each other, joined by && and ||, with parentheses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prism/shape_key.hpp"

namespace prism::dispatch {

/// A parsed condition. Thread safety: immutable after parse, safe to evaluate from any thread.
class route_condition {
 public:
  /// Longest condition text accepted, and the most comparisons / nesting levels in one.
  static constexpr std::size_t max_length = 512;
  static constexpr int max_terms = 32;
  static constexpr int max_depth = 16;

  route_condition() = default;
  /// Parses `text`. Throws errc::config_error "<problem> at column N of '<text>'" for bad syntax,
  /// a text that is too long, too many comparisons or too deep nesting.
  static route_condition parse(const std::string& text);

  /// The component names the condition reads, each once, in order of appearance.
  const std::vector<std::string>& names() const noexcept { return names_; }
  const std::string& text() const noexcept { return text_; }
  /// True when the condition holds for `key`; a component missing from `key` reads as 0
  /// (start-up validation makes sure every name is one the op's key has).
  bool holds(const shape_key& key) const;

  struct node;  // the expression tree (route_condition.cpp)

 private:
  std::string text_;
  std::vector<std::string> names_;
  std::shared_ptr<const node> root_;
};

}  // namespace prism::dispatch
