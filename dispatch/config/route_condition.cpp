// SPDX-License-Identifier: Apache-2.0
// A small recursive-descent parser for route conditions (see route_condition.hpp). Grammar:
//   or := and ('||' and)*   and := cmp ('&&' cmp)*   cmp := '(' or ')' | value op value
//   value := name | integer  op := < <= > >= == !=
#include "dispatch/config/route_condition.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

#include "prism/error.hpp"

namespace prism::dispatch {

struct route_condition::node {
  enum class kind { any, all, compare } what = kind::compare;
  std::vector<std::shared_ptr<const node>> children;  // any / all
  std::string op;                                     // compare: "<", "<=", ...
  std::string lhs_name, rhs_name;                     // "" = the integer below
  std::int64_t lhs_value = 0, rhs_value = 0;
};

namespace {

using node_ptr = std::shared_ptr<const route_condition::node>;

class parser {
 public:
  parser(const std::string& text, std::vector<std::string>& names) : text_(text), names_(names) {}

  node_ptr parse() {
    auto n = parse_or(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + text_.substr(pos_, 8) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw error(errc::config_error, "route condition",
                what + " at column " + std::to_string(pos_ + 1) + " of '" + text_ +
                    "'; expected comparisons like 'm <= 16' (< <= > >= == !=) joined by && and ||");
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(const char* token) {
    skip_space();
    const std::size_t n = std::char_traits<char>::length(token);
    if (text_.compare(pos_, n, token) != 0) return false;
    pos_ += n;
    return true;
  }

  node_ptr parse_or(int depth) {
    if (depth > route_condition::max_depth)
      fail("nesting deeper than " + std::to_string(route_condition::max_depth) + " levels");
    auto first = parse_and(depth);
    if (!peek("||")) return first;
    auto n = std::make_shared<route_condition::node>();
    n->what = route_condition::node::kind::any;
    n->children.push_back(first);
    while (take("||")) n->children.push_back(parse_and(depth));
    return n;
  }
  node_ptr parse_and(int depth) {
    auto first = parse_compare(depth);
    if (!peek("&&")) return first;
    auto n = std::make_shared<route_condition::node>();
    n->what = route_condition::node::kind::all;
    n->children.push_back(first);
    while (take("&&")) n->children.push_back(parse_compare(depth));
    return n;
  }
  bool peek(const char* token) {
    skip_space();
    return text_.compare(pos_, std::char_traits<char>::length(token), token) == 0;
  }
  node_ptr parse_compare(int depth) {
    if (take("(")) {
      auto n = parse_or(depth + 1);
      if (!take(")")) fail("missing ')'");
      return n;
    }
    if (++terms_ > route_condition::max_terms)
      fail("more than " + std::to_string(route_condition::max_terms) + " comparisons");
    auto n = std::make_shared<route_condition::node>();
    value(n->lhs_name, n->lhs_value);
    skip_space();
    for (const char* op : {"<=", ">=", "==", "!=", "<", ">"})
      if (take(op)) {
        n->op = op;
        break;
      }
    if (n->op.empty()) fail("expected a comparison operator");
    value(n->rhs_name, n->rhs_value);
    return n;
  }
  void value(std::string& name, std::int64_t& number) {
    skip_space();
    const std::size_t start = pos_;
    if (pos_ < text_.size() &&
        (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-')) {
      ++pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      const std::string digits = text_.substr(start, pos_ - start);
      if (digits == "-") fail("expected a number after '-'");
      if (digits.size() > 18) fail("number '" + digits + "' out of range");
      number = std::stoll(digits);
      return;
    }
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start) fail("expected a shape-key component name or an integer");
    name = text_.substr(start, pos_ - start);
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
  }

  const std::string& text_;
  std::vector<std::string>& names_;
  std::size_t pos_ = 0;
  int terms_ = 0;
};

bool eval(const route_condition::node& n, const shape_key& key) {
  using kind = route_condition::node::kind;
  if (n.what == kind::any)
    return std::any_of(n.children.begin(), n.children.end(), [&](const auto& c) { return eval(*c, key); });
  if (n.what == kind::all)
    return std::all_of(n.children.begin(), n.children.end(), [&](const auto& c) { return eval(*c, key); });
  const std::int64_t a = n.lhs_name.empty() ? n.lhs_value : key.get(n.lhs_name, 0);
  const std::int64_t b = n.rhs_name.empty() ? n.rhs_value : key.get(n.rhs_name, 0);
  if (n.op == "<") return a < b;
  if (n.op == "<=") return a <= b;
  if (n.op == ">") return a > b;
  if (n.op == ">=") return a >= b;
  if (n.op == "==") return a == b;
  return a != b;
}

}  // namespace

route_condition route_condition::parse(const std::string& text) {
  route_condition c;
  c.text_ = text;
  if (text.size() > max_length)
    throw error(errc::config_error, "route condition",
                "condition of " + std::to_string(text.size()) + " characters; at most " +
                    std::to_string(max_length) + " are accepted");
  c.root_ = parser(c.text_, c.names_).parse();
  return c;
}

bool route_condition::holds(const shape_key& key) const {
  return !root_ || eval(*root_, key);
}

}  // namespace prism::dispatch
