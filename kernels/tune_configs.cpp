// SPDX-License-Identifier: Apache-2.0
// Reading vendors/<vendor>/tune_configs.yaml: per-op (or per-family) default configs and search
// spaces given as explicit lists and constrained cartesian products (docs/tune_configs.md).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <map>
#include <mutex>
#include <set>

#include "kernels/op_descriptor.hpp"

namespace prism {

namespace {

// ---- constraint expressions: "vec * ept <= 16", "tile_m % vec == 0" -------------------------

class expr_parser {
 public:
  expr_parser(std::string_view text, const kernel_config& c) : s_(text), c_(c) {}

  bool eval() {
    std::int64_t a = sum();
    skip();
    std::string op;
    while (pos_ < s_.size() && std::string_view("<>=!").find(s_[pos_]) != std::string_view::npos)
      op += s_[pos_++];
    if (op.empty()) throw bad("expected a comparison (<, <=, >, >=, ==, !=)");
    std::int64_t b = sum();
    skip();
    if (pos_ != s_.size()) throw bad("unexpected text");
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == ">") return a > b;
    if (op == ">=") return a >= b;
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    throw bad("unknown comparison '" + op + "'");
  }

 private:
  std::runtime_error bad(const std::string& why) const {
    return std::runtime_error(why + " at position " + std::to_string(pos_) + " of '" + std::string(s_) + "'");
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::int64_t sum() {
    std::int64_t v = product();
    for (;;) {
      skip();
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
        char op = s_[pos_++];
        std::int64_t r = product();
        bool overflow = op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v);
        if (overflow) throw bad(std::string("the value overflows 64-bit integers at '") + op + "'");
      } else {
        return v;
      }
    }
  }
  std::int64_t product() {
    std::int64_t v = atom();
    for (;;) {
      skip();
      if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '/' || s_[pos_] == '%')) {
        char op = s_[pos_++];
        std::int64_t r = atom();
        if (op != '*' && r == 0) throw bad("division by zero");
        if (op == '*') {
          if (__builtin_mul_overflow(v, r, &v)) throw bad("the value overflows 64-bit integers at '*'");
        } else if (r == -1) {
          // INT64_MIN / -1 traps; x % -1 is 0 but computes the same division.
          if (op == '/' && v == INT64_MIN) throw bad("the value overflows 64-bit integers at '/'");
          v = op == '/' ? -v : 0;
        } else {
          v = op == '/' ? v / r : v % r;
        }
      } else {
        return v;
      }
    }
  }
  std::int64_t atom() {
    skip();
    if (pos_ >= s_.size()) throw bad("expected a number or parameter name");
    if (s_[pos_] == '(') {
      if (++depth_ > 32) throw bad("parentheses nested more than 32 deep");
      ++pos_;
      std::int64_t v = sum();
      --depth_;
      skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') throw bad("expected ')'");
      ++pos_;
      return v;
    }
    std::size_t start = pos_;
    if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      std::int64_t v = 0;
      auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, v);
      if (ec != std::errc() || end != s_.data() + pos_)
        throw bad("the number '" + std::string(s_.substr(start, pos_ - start)) +
                  "' is out of the 64-bit integer range");
      return v;
    }
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    if (start == pos_) throw bad("expected a number or parameter name");
    std::string name(s_.substr(start, pos_ - start));
    auto v = c_.find(name);
    if (!v) throw bad("unknown parameter '" + name + "' (config has: " + c_.str() + ")");
    return *v;
  }

  std::string_view s_;
  const kernel_config& c_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

[[noreturn]] void cfg_error(std::string_view file, const std::string& where, const std::string& why) {
  throw error(errc::config_error, "tune_configs", std::string(file) + ": " + where + ": " + why);
}

kernel_config read_map(const YAML::Node& n, std::string_view file, const std::string& where) {
  if (!n.IsMap()) cfg_error(file, where, "expected a map of parameter: integer");
  kernel_config c;
  for (const auto& kv : n) {
    try {
      c.set(kv.first.as<std::string>(), kv.second.as<std::int64_t>());
    } catch (const YAML::Exception&) {
      cfg_error(file, where, "parameter '" + kv.first.as<std::string>() + "' must be an integer");
    }
  }
  return c;
}

/// The most configs one `product` item may expand to (before its `where` filter).
constexpr std::uint64_t max_product_configs = 100000;

/// Expands one `space` item: an explicit config map, or {product: {p: [..]}, where: [..]}.
void expand_item(const YAML::Node& item, const kernel_config& base, std::string_view file,
                 const std::string& where, std::vector<kernel_config>& out) {
  if (!item.IsMap()) cfg_error(file, where, "a space item is a config map or a {product, where} map");
  if (!item["product"]) {
    out.push_back(read_map(item, file, where));
    return;
  }
  const YAML::Node prod = item["product"];
  if (!prod.IsMap()) cfg_error(file, where, "'product' must map parameter names to lists of integers");
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> axes;
  for (const auto& kv : prod) {
    std::vector<std::int64_t> vals;
    if (kv.second.IsSequence()) {
      for (const auto& v : kv.second) vals.push_back(v.as<std::int64_t>());
    } else {
      vals.push_back(kv.second.as<std::int64_t>());
    }
    if (vals.empty()) cfg_error(file, where, "product axis '" + kv.first.as<std::string>() + "' is empty");
    axes.emplace_back(kv.first.as<std::string>(), vals);
  }
  // The product is counted before it is walked: a few long axes would otherwise run for
  // minutes and end in std::bad_alloc.
  std::uint64_t combinations = 1;
  for (const auto& [name, values] : axes) {
    combinations *= values.size();
    if (combinations > max_product_configs)
      cfg_error(file, where,
                "the product has more than " + std::to_string(max_product_configs) +
                    " combinations; split it into smaller products or list configs explicitly");
  }
  std::vector<std::string> constraints;
  if (const YAML::Node w = item["where"]) {
    if (w.IsSequence()) {
      for (const auto& e : w) constraints.push_back(e.as<std::string>());
    } else {
      constraints.push_back(w.as<std::string>());
    }
  }
  std::vector<std::size_t> idx(axes.size(), 0);
  for (;;) {
    kernel_config c;
    for (std::size_t a = 0; a < axes.size(); ++a) c.set(axes[a].first, axes[a].second[idx[a]]);
    kernel_config full = base;
    for (const auto& [n, v] : c.items()) full.set(n, v);
    bool keep = true;
    for (const auto& e : constraints) {
      try {
        if (!expr_parser(e, full).eval()) keep = false;
      } catch (const std::runtime_error& ex) {
        cfg_error(file, where, std::string("constraint: ") + ex.what());
      }
    }
    if (keep) out.push_back(c);
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++idx[a] < axes[a].second.size()) break;
      idx[a] = 0;
      if (a == 0) return;
    }
    if (axes.empty()) return;
  }
}

tune_space build_space(const YAML::Node& entry, const op_descriptor& d, std::string_view vendor,
                       std::string_view file, const std::string& where) {
  tune_space s;
  s.vendor = std::string(vendor);
  s.op = d.name;
  auto complete = [&](const kernel_config& c, const std::string& what) {
    if (auto why = d.config.validate(c))
      cfg_error(file, where, what + " '" + c.str() + "' for op " + d.name + ": " + *why);
    return d.config.complete(c);
  };
  s.defaults = entry["default"] ? complete(read_map(entry["default"], file, where + ".default"), "default")
                                : d.config.defaults();
  std::vector<kernel_config> raw;
  if (const YAML::Node sp = entry["space"]) {
    if (!sp.IsSequence()) cfg_error(file, where, "'space' must be a list");
    for (std::size_t i = 0; i < sp.size(); ++i)
      expand_item(sp[i], s.defaults, file, where + ".space[" + std::to_string(i) + "]", raw);
  }
  std::set<std::string> seen;
  auto add = [&](const kernel_config& c) {
    if (seen.insert(c.str()).second) s.configs.push_back(c);
  };
  add(s.defaults);  // the default is always part of the space
  for (const auto& c : raw) {
    kernel_config full = s.defaults;  // params an item leaves out come from the entry's default
    for (const auto& [n, v] : c.items()) full.set(n, v);
    add(complete(full, "config"));
  }
  return s;
}

}  // namespace

namespace {
std::map<std::string, tune_space> parse_tune_configs_unchecked(std::string_view yaml_text,
                                                               std::string_view vendor,
                                                               std::string_view file_name);
}  // namespace

std::map<std::string, tune_space> parse_tune_configs(std::string_view yaml_text, std::string_view vendor,
                                                     std::string_view file_name) {
  try {
    return parse_tune_configs_unchecked(yaml_text, vendor, file_name);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's own errors ("bad conversion", "operator[] call on a scalar"), with their place.
    cfg_error(file_name, e.mark.is_null() ? std::string("yaml") : "line " + std::to_string(e.mark.line + 1),
              e.msg);
  }
}

namespace {
std::map<std::string, tune_space> parse_tune_configs_unchecked(std::string_view yaml_text,
                                                               std::string_view vendor,
                                                               std::string_view file_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    cfg_error(file_name, "yaml", e.what());
  }
  const auto& reg = op_registry::instance();
  std::map<std::string, tune_space> direct, by_family;
  const YAML::Node entries = root["ops"];
  if (!entries || !entries.IsSequence()) cfg_error(file_name, "ops", "expected a top-level 'ops' list");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const YAML::Node e = entries[i];
    std::string where = "ops[" + std::to_string(i) + "]";
    std::vector<std::string> names;
    bool family = false;
    if (e["op"]) names.push_back(e["op"].as<std::string>());
    if (e["ops"])
      for (const auto& n : e["ops"]) names.push_back(n.as<std::string>());
    if (e["family"]) {
      family = true;
      std::string fam = e["family"].as<std::string>();
      for (const auto* d : reg.all())
        if (d->family == fam) names.push_back(d->name);
      if (names.empty()) cfg_error(file_name, where, "no registered op has family '" + fam + "'");
    }
    if (names.empty()) cfg_error(file_name, where, "an entry names 'op', 'ops' or 'family'");
    for (const auto& n : names) {
      const op_descriptor* d = reg.find(n);
      if (!d) cfg_error(file_name, where, "unknown op '" + n + "'");
      tune_space s = build_space(e, *d, vendor, file_name, where + " (" + n + ")");
      (family ? by_family : direct)[n] = std::move(s);
    }
  }
  for (auto& [n, s] : by_family) direct.emplace(n, std::move(s));  // op entries win over family ones
  return direct;
}
}  // namespace

tune_space schema_tune_space(const op_descriptor& d) {
  tune_space s;
  s.vendor = "schema";
  s.op = d.name;
  s.defaults = d.config.defaults();
  s.configs = {s.defaults};
  return s;
}

const tune_space& schema_tune_space_of(const op_descriptor& d) {
  static std::mutex mu;
  static auto* spaces = new std::map<const op_descriptor*, tune_space>();  // never destroyed
  std::lock_guard lock(mu);
  auto it = spaces->find(&d);
  if (it == spaces->end()) it = spaces->emplace(&d, schema_tune_space(d)).first;
  return it->second;
}

}  // namespace prism
