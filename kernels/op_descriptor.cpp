// SPDX-License-Identifier: Apache-2.0
// The op descriptor framework: attribute text forms, shape keys / configs, the registry, generic
// argument checks, implementation selection, host backend and output comparison.
#include "kernels/op_descriptor.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>

#include "kernels/op_support.hpp"
#include "runtime/text.hpp"

namespace prism {

namespace detail {
void register_all_ops(op_registry& r);  // generated from kernels/ops/*.cpp
}

// ---------------------------------------------------------------------------------------------
// Attributes

namespace {

bool is_word(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string format_real(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

[[noreturn]] void attr_parse_error(std::string_view text, std::size_t pos, std::string_view why) {
  throw error(
      errc::invalid_argument, "parse_attrs",
      std::string(why) + " at position " + std::to_string(pos) + " of '" + std::string(text) +
          "'; expected name=value pairs separated by ';' (values: 3, 1.5, true, word, \"text\", [0,2])");
}

}  // namespace

std::string format_attr(const attr_value& v) {
  struct visitor {
    std::string operator()(std::int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return format_real(x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& s) const {
      if (is_word(s) && s != "true" && s != "false" && s != "nan" && s != "inf") return s;
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(const std::vector<std::int64_t>& l) const {
      std::string out = "[";
      for (std::size_t i = 0; i < l.size(); ++i) out += (i ? "," : "") + std::to_string(l[i]);
      return out + "]";
    }
  };
  return std::visit(visitor{}, v);
}

std::string format_attrs(const attr_map& attrs) {
  std::string out;
  for (const auto& [name, v] : attrs) {
    if (!out.empty()) out += ';';
    out += name + "=" + format_attr(v);
  }
  return out;
}

attr_map parse_attrs(std::string_view text) {
  attr_map out;
  std::size_t i = 0;
  auto skip_ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto parse_int = [&](std::string_view tok, std::size_t at) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || p != tok.data() + tok.size())
      attr_parse_error(text, at, "bad integer '" + std::string(tok) + "'");
    return v;
  };
  while (true) {
    skip_ws();
    if (i >= text.size()) break;
    std::size_t eq = text.find('=', i);
    if (eq == std::string_view::npos) attr_parse_error(text, i, "missing '='");
    std::string name(text.substr(i, eq - i));
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    if (!is_word(name)) attr_parse_error(text, i, "bad attribute name '" + name + "'");
    i = eq + 1;
    skip_ws();
    attr_value v;
    if (i < text.size() && text[i] == '"') {
      std::string s;
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        s += text[i++];
      }
      if (i >= text.size()) attr_parse_error(text, i, "unterminated string");
      ++i;
      v = s;
    } else if (i < text.size() && text[i] == '[') {
      std::size_t close = text.find(']', i);
      if (close == std::string_view::npos) attr_parse_error(text, i, "unterminated list");
      std::vector<std::int64_t> l;
      std::string_view body = text.substr(i + 1, close - i - 1);
      std::size_t j = 0;
      while (j < body.size()) {
        std::size_t comma = body.find(',', j);
        std::string_view tok = body.substr(j, comma == std::string_view::npos ? body.size() - j : comma - j);
        while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.front()))) tok.remove_prefix(1);
        while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.back()))) tok.remove_suffix(1);
        if (!tok.empty()) l.push_back(parse_int(tok, i + 1 + j));
        if (comma == std::string_view::npos) break;
        j = comma + 1;
      }
      v = l;
      i = close + 1;
    } else {
      std::size_t end = text.find(';', i);
      if (end == std::string_view::npos) end = text.size();
      std::string_view tok = text.substr(i, end - i);
      while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.back()))) tok.remove_suffix(1);
      if (tok.empty()) attr_parse_error(text, i, "empty value");
      std::string t(tok);
      if (t == "true" || t == "false") {
        v = (t == "true");
      } else if (t == "nan" || t == "inf" || t == "-inf") {
        v = t == "nan" ? std::nan("") : (t == "inf" ? INFINITY : -INFINITY);
      } else if (is_word(t)) {
        v = t;
      } else if (t.find_first_of(".eE") != std::string::npos) {
        double d = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
        if (ec != std::errc() || p != t.data() + t.size())
          attr_parse_error(text, i, "bad number '" + t + "'");
        v = d;
      } else {
        v = parse_int(t, i);
      }
      i = end;
    }
    out[name] = std::move(v);
    skip_ws();
    if (i < text.size()) {
      if (text[i] != ';') attr_parse_error(text, i, "expected ';'");
      ++i;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// op_call getters

namespace {
[[noreturn]] void attr_error(const op_call& c, std::string_view name, std::string_view want) {
  auto it = c.attrs.find(name);
  std::string got = it == c.attrs.end() ? "it is missing" : "got " + format_attr(it->second);
  throw error(errc::invalid_argument, "ops::" + c.op,
              "attribute '" + std::string(name) + "' must be " + std::string(want) + "; " + got);
}
}  // namespace

std::int64_t op_call::get_int(std::string_view name) const {
  auto it = attrs.find(name);
  if (it == attrs.end() || !std::holds_alternative<std::int64_t>(it->second))
    attr_error(*this, name, "an integer");
  return std::get<std::int64_t>(it->second);
}
double op_call::get_f64(std::string_view name) const {
  auto it = attrs.find(name);
  if (it != attrs.end()) {
    if (auto* d = std::get_if<double>(&it->second)) return *d;
    if (auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  }
  attr_error(*this, name, "a number");
}
bool op_call::get_bool(std::string_view name) const {
  auto it = attrs.find(name);
  if (it != attrs.end()) {
    if (auto* b = std::get_if<bool>(&it->second)) return *b;
    if (auto* i = std::get_if<std::int64_t>(&it->second); i && (*i == 0 || *i == 1)) return *i == 1;
  }
  attr_error(*this, name, "true or false");
}
std::string op_call::get_str(std::string_view name) const {
  auto it = attrs.find(name);
  if (it != attrs.end())
    if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  attr_error(*this, name, "a word");
}
std::vector<std::int64_t> op_call::get_ints(std::string_view name) const {
  auto it = attrs.find(name);
  if (it != attrs.end()) {
    if (auto* l = std::get_if<std::vector<std::int64_t>>(&it->second)) return *l;
    if (auto* i = std::get_if<std::int64_t>(&it->second)) return {*i};
  }
  attr_error(*this, name, "an integer list like [0,2]");
}

// ---------------------------------------------------------------------------------------------
// Attribute checks and defaults (the descriptor's attr_spec list is their one source)

const char* attr_type_name(const attr_value& v) noexcept {
  switch (v.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a number";
    case 2:
      return "true or false";
    case 3:
      return "a word";
    default:
      return "an integer list like [0,2]";
  }
}

namespace {

const attr_spec* find_spec(const op_descriptor& d, std::string_view name) noexcept {
  for (const auto& a : d.attrs)
    if (a.name == name) return &a;
  return nullptr;
}

[[noreturn]] void unknown_attr(const op_descriptor& d, std::string_view name) {
  std::string msg = "unknown attribute '" + std::string(name) + "'";
  if (d.attrs.empty()) {
    msg += "; " + d.name + " takes no attributes";
  } else {
    // A transposition or a slip of one or two letters ("alhpa", "keep_dim").
    std::vector<std::string> names;
    for (const auto& a : d.attrs) names.push_back(a.name);
    const std::string best = text::closest(name, names, std::max<std::size_t>(2, name.size() / 3));
    if (!best.empty()) msg += " (did you mean '" + best + "'?)";
    std::string valid;
    for (const auto& a : d.attrs) valid += (valid.empty() ? "" : ", ") + a.name;
    msg += "; valid attributes of " + d.name + ": " + valid;
  }
  throw error(errc::invalid_argument, "ops::" + d.name, msg);
}

/// `v` in the declared type of `spec` when it converts exactly; nullopt when it does not.
std::optional<attr_value> as_declared(const attr_spec& spec, const attr_value& v) {
  if (v.index() == spec.default_value.index()) return v;
  const auto* i = std::get_if<std::int64_t>(&v);
  if (!i) return std::nullopt;
  switch (spec.default_value.index()) {
    case 1:
      return attr_value(static_cast<double>(*i));
    case 2:
      if (*i == 0 || *i == 1) return attr_value(*i == 1);
      return std::nullopt;
    case 4:
      return attr_value(std::vector<std::int64_t>{*i});
    default:
      return std::nullopt;
  }
}

}  // namespace

bool attrs_complete(const op_descriptor& d, const op_call& call) noexcept {
  std::size_t required_present = 0, required = 0;
  for (const auto& a : d.attrs) required += a.optional ? 0 : 1;
  for (const auto& [name, v] : call.attrs) {
    const attr_spec* spec = find_spec(d, name);
    if (!spec || spec->default_value.index() != v.index()) return false;
    required_present += spec->optional ? 0 : 1;
  }
  return required_present == required;
}

void complete_attrs(const op_descriptor& d, op_call& call) {
  if (attrs_complete(d, call)) return;
  for (auto& [name, v] : call.attrs) {
    const attr_spec* spec = find_spec(d, name);
    if (!spec) unknown_attr(d, name);
    auto converted = as_declared(*spec, v);
    if (!converted)
      throw error(errc::invalid_argument, "ops::" + d.name,
                  "attribute '" + name + "' must be " + attr_type_name(spec->default_value) + "; got " +
                      format_attr(v));
    v = std::move(*converted);
  }
  for (const auto& a : d.attrs)
    if (!a.optional && !call.has(a.name)) call.attrs.emplace(a.name, a.default_value);
}

// ---------------------------------------------------------------------------------------------
// named_ints

std::optional<std::int64_t> named_ints::find(std::string_view name) const {
  for (const auto& [n, v] : items_)
    if (n == name) return v;
  return std::nullopt;
}
std::int64_t named_ints::at(std::string_view name) const {
  if (auto v = find(name)) return *v;
  throw error(errc::not_found, "named_ints", "no component '" + std::string(name) + "' in '" + str() + "'");
}
std::int64_t named_ints::get(std::string_view name, std::int64_t fallback) const {
  auto v = find(name);
  return v ? *v : fallback;
}
void named_ints::set(std::string_view name, std::int64_t value) {
  for (auto& [n, v] : items_)
    if (n == name) {
      v = value;
      return;
    }
  items_.emplace_back(std::string(name), value);
}
std::string named_ints::str() const {
  std::string out;
  for (const auto& [n, v] : items_) out += (out.empty() ? "" : ",") + n + "=" + std::to_string(v);
  return out;
}
std::vector<std::pair<std::string, std::int64_t>> named_ints::parse_items(std::string_view text,
                                                                          const char* what) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  std::size_t i = 0;
  auto fail = [&](const std::string& why) -> void {
    throw error(errc::invalid_argument, what,
                why + " in '" + std::string(text) +
                    "'; expected name=integer pairs separated by ',' like \"m=128,n=64\"");
  };
  while (i < text.size()) {
    std::size_t comma = text.find(',', i);
    std::string_view item = text.substr(i, comma == std::string_view::npos ? text.size() - i : comma - i);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) fail("missing '=' in '" + std::string(item) + "'");
    std::string name(item.substr(0, eq));
    std::string_view num = item.substr(eq + 1);
    if (!is_word(name)) fail("bad name '" + name + "'");
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec != std::errc() || p != num.data() + num.size() || num.empty())
      fail("bad integer '" + std::string(num) + "' for '" + name + "'");
    for (const auto& [n, _] : out)
      if (n == name) fail("duplicate name '" + name + "'");
    out.emplace_back(std::move(name), v);
    if (comma == std::string_view::npos) break;
    i = comma + 1;
  }
  return out;
}
kernel_config kernel_config::parse(std::string_view text) {
  kernel_config k;
  k.items_ = parse_items(text, "kernel_config::parse");
  return k;
}

// ---------------------------------------------------------------------------------------------
// config_schema

kernel_config config_schema::defaults() const {
  kernel_config c;
  for (const auto& p : params) c.set(p.name, p.default_value);
  return c;
}

std::string config_schema::param_names() const {
  std::string names;
  for (const auto& p : params) names += (names.empty() ? "" : ", ") + p.name;
  return names.empty() ? "none" : names;
}

bool config_schema::has(std::string_view name) const {
  return std::any_of(params.begin(), params.end(), [&](const config_param& p) { return p.name == name; });
}

std::optional<std::string> config_schema::validate(const kernel_config& c) const {
  for (const auto& [n, v] : c.items()) {
    auto it = std::find_if(params.begin(), params.end(), [&](const config_param& p) { return p.name == n; });
    if (it == params.end()) return "unknown parameter '" + n + "' (valid: " + param_names() + ")";
    if (it->allowed.empty()) {
      if (v < 1) return "parameter '" + n + "' = " + std::to_string(v) + " must be >= 1";
    } else if (std::find(it->allowed.begin(), it->allowed.end(), v) == it->allowed.end()) {
      std::string vals;
      for (auto a : it->allowed) vals += (vals.empty() ? "" : ", ") + std::to_string(a);
      return "parameter '" + n + "' = " + std::to_string(v) + " is not one of {" + vals + "}";
    }
  }
  if (rule) {
    kernel_config full;
    for (const auto& p : params) full.set(p.name, c.get(p.name, p.default_value));
    return rule(full);
  }
  return std::nullopt;
}

kernel_config config_schema::complete(const kernel_config& c) const {
  if (auto why = validate(c)) throw error(errc::config_error, "kernel_config", "'" + c.str() + "': " + *why);
  kernel_config full;
  for (const auto& p : params) full.set(p.name, c.get(p.name, p.default_value));
  return full;
}

// ---------------------------------------------------------------------------------------------
// descriptor + registry

int op_descriptor::input_index(std::string_view n) const {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == n) return static_cast<int>(i);
  return -1;
}
int op_descriptor::output_index(std::string_view n) const {
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == n) return static_cast<int>(i);
  return -1;
}

const op_registry& op_registry::instance() {
  static const op_registry* reg = [] {
    auto* r =
        new op_registry();  // never destroyed: descriptors hold no OpenCL objects, but may be used at exit
    detail::register_all_ops(*r);
    return r;
  }();
  return *reg;
}

void op_registry::add(op_descriptor d) {
  if (ops_.count(d.name)) throw error(errc::internal, "op_registry", "op '" + d.name + "' registered twice");
  std::string name = d.name;
  ops_.emplace(name, std::move(d));
  sorted_.clear();
  for (const auto& [n, op] : ops_) sorted_.push_back(&op);
}

const op_descriptor* op_registry::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

const op_descriptor& op_registry::get(std::string_view name) const {
  if (auto* d = find(name)) return *d;
  // Closest names first (shared prefix length, then edit-free alphabetical order).
  std::vector<std::string> names;
  for (const auto& [n, _] : ops_) names.push_back(n);
  auto common = [&](const std::string& n) {
    std::size_t k = 0;
    while (k < n.size() && k < name.size() && n[k] == name[k]) ++k;
    return k;
  };
  std::stable_sort(names.begin(), names.end(), [&](auto& a, auto& b) { return common(a) > common(b); });
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw error(errc::not_found, "op_registry", "no op named '" + std::string(name) + "'; registered: " + list);
}

// ---------------------------------------------------------------------------------------------
// describe / check / allocate

namespace {
std::string tensor_brief(const tensor& t) {
  if (!t.defined()) return "none";
  std::string s = std::string(dtype_name(t.type())) + t.shape().str();
  if (!t.is_contiguous()) s += " strides " + t.strides().str();
  if (t.offset()) s += " +" + std::to_string(t.offset());
  return s;
}
const std::string& arg_name(const std::vector<arg_spec>& specs, std::size_t i, bool variadic) {
  static const std::string unnamed = "arg";
  if (specs.empty()) return unnamed;
  return i < specs.size() ? specs[i].name : (variadic ? specs.back().name : unnamed);
}
}  // namespace

std::string describe_call(const op_descriptor& d, const op_call& call) {
  std::string s = d.name + "(";
  bool first = true;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    std::string n = arg_name(d.inputs, i, d.variadic_inputs);
    if (d.variadic_inputs && i + 1 >= d.inputs.size()) n += std::to_string(i + 1 - d.inputs.size());
    s += (first ? "" : ", ") + n + "=" + tensor_brief(call.inputs[i]);
    first = false;
  }
  for (std::size_t i = 0; i < call.outputs.size(); ++i) {
    s += (first ? "" : ", ") + arg_name(d.outputs, i, false) + "=" + tensor_brief(call.outputs[i]);
    first = false;
  }
  if (!call.attrs.empty()) s += "; " + format_attrs(call.attrs);
  return s + ")";
}

namespace {
void check_inputs(const op_descriptor& d, const op_call& call) {
  const std::string op = "ops::" + d.name;
  std::size_t n = call.inputs.size();
  bool arity_ok = d.variadic_inputs ? n >= d.inputs.size() : n == d.inputs.size();
  if (!arity_ok) {
    std::string names;
    for (const auto& a : d.inputs) names += (names.empty() ? "" : ", ") + a.name + (a.optional ? "?" : "");
    throw error(errc::invalid_argument, op,
                "got " + std::to_string(n) + " inputs; expected " + (d.variadic_inputs ? "at least " : "") +
                    std::to_string(d.inputs.size()) + " (" + names + (d.variadic_inputs ? "..." : "") + ")");
  }
  const context* ctx = nullptr;
  std::string ctx_arg;
  auto same_ctx = [&](const tensor& t, const std::string& name) {
    if (!t.defined()) return;
    if (!ctx) {
      ctx = &t.get_context();
      ctx_arg = name;
    } else if (!(t.get_context() == *ctx)) {
      throw error(errc::invalid_argument, op,
                  "'" + name + "' lives in context " + std::to_string(t.get_context().id()) + " but '" +
                      ctx_arg + "' in context " + std::to_string(ctx->id()) +
                      "; all tensors of a call must share one context");
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    const auto& spec = d.inputs[std::min(i, d.inputs.size() - 1)];
    if (!call.inputs[i].defined() && !spec.optional)
      throw error(errc::invalid_argument, op, "input '" + spec.name + "' is required but undefined");
    same_ctx(call.inputs[i], spec.name);
  }
  for (std::size_t i = 0; i < call.outputs.size() && i < d.outputs.size(); ++i)
    same_ctx(call.outputs[i], d.outputs[i].name);
  // dtype of the op's main tensor: first defined input, else the first output.
  const tensor* main = nullptr;
  std::string main_name;
  for (std::size_t i = 0; i < n && !main; ++i)
    if (call.inputs[i].defined()) {
      main = &call.inputs[i];
      main_name = d.inputs[std::min(i, d.inputs.size() - 1)].name;
    }
  if (!main && !call.outputs.empty() && call.outputs[0].defined()) {
    main = &call.outputs[0];
    main_name = d.outputs.empty() ? "out" : d.outputs[0].name;
  }
  if (main && !d.dtypes.empty() &&
      std::find(d.dtypes.begin(), d.dtypes.end(), main->type()) == d.dtypes.end()) {
    std::string valid;
    for (auto t : d.dtypes) valid += (valid.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw error(errc::invalid_argument, op,
                "'" + main_name + "' has dtype " + dtype_name(main->type()) + "; valid: " + valid);
  }
  if (d.check) d.check(call);
}
}  // namespace

namespace {
/// An output that updates an optional input in place is absent when that input is.
bool optional_in_place(const op_descriptor& d, const op_call& call, std::size_t out) {
  if (d.outputs[out].in_place_of.empty()) return false;
  int in = d.input_index(d.outputs[out].in_place_of);
  return in >= 0 && d.inputs[in].optional &&
         (in >= static_cast<int>(call.inputs.size()) || !call.inputs[in].defined());
}
}  // namespace

void check_call(const op_descriptor& d, const op_call& call) {
  if (!attrs_complete(d, call)) {
    op_call full = call;
    complete_attrs(d, full);
    return check_call(d, full);
  }
  const std::string op = "ops::" + d.name;
  if (call.outputs.size() != d.outputs.size())
    throw error(errc::invalid_argument, op,
                "got " + std::to_string(call.outputs.size()) + " outputs; expected " +
                    std::to_string(d.outputs.size()));
  for (std::size_t i = 0; i < call.outputs.size(); ++i)
    if (!call.outputs[i].defined() && !optional_in_place(d, call, i))
      throw error(errc::invalid_argument, op, "output '" + d.outputs[i].name + "' is undefined");
  check_inputs(d, call);
  if (d.infer_outputs) {
    auto specs = d.infer_outputs(call);
    for (std::size_t i = 0; i < specs.size() && i < call.outputs.size(); ++i) {
      const tensor& o = call.outputs[i];
      if (!o.defined()) continue;
      if (!(o.shape() == specs[i].shape) || o.type() != specs[i].type)
        throw error(errc::invalid_argument, op,
                    "output '" + d.outputs[i].name + "' is " + dtype_name(o.type()) + o.shape().str() +
                        "; expected " + dtype_name(specs[i].type) + specs[i].shape.str());
    }
  }
  for (std::size_t i = 0; i < call.outputs.size(); ++i) {
    if (d.outputs[i].in_place_of.empty()) continue;
    int in = d.input_index(d.outputs[i].in_place_of);
    const tensor& o = call.outputs[i];
    if (in >= 0 && in < static_cast<int>(call.inputs.size())) {
      const tensor& t = call.inputs[in];
      if (!t.defined()) continue;
      if (!o.same_storage(t) || o.offset() != t.offset() || !(o.strides() == t.strides()))
        throw error(errc::invalid_argument, op,
                    "output '" + d.outputs[i].name + "' updates input '" + d.outputs[i].in_place_of +
                        "' in place and must be that same view; got " + tensor_brief(o) + " vs " +
                        tensor_brief(t));
    }
  }
  for (std::size_t i = 0; i < call.outputs.size(); ++i) {
    bool strided_ok = i < d.strided_outputs_ok.size() && d.strided_outputs_ok[i];
    if (call.outputs[i].defined() && !strided_ok && !call.outputs[i].is_contiguous())
      throw error(errc::invalid_argument, op,
                  "output '" + d.outputs[i].name + "' must be contiguous; got strides " +
                      call.outputs[i].strides().str() + " for shape " + call.outputs[i].shape().str() +
                      " (pass a contiguous tensor, or copy into the view afterwards)");
  }
}

std::vector<tensor_spec> infer_output_specs(const op_descriptor& d, op_call& call) {
  complete_attrs(d, call);
  check_inputs(d, call);
  if (!d.infer_outputs)
    throw error(errc::internal, "ops::" + d.name, "the op has no output shape rule; pass outputs explicitly");
  return d.infer_outputs(call);
}

void allocate_outputs(queue& q, const op_descriptor& d, op_call& call) {
  complete_attrs(d, call);
  check_inputs(d, call);
  if (!d.infer_outputs)
    throw error(errc::internal, "ops::" + d.name, "the op has no output shape rule; pass outputs explicitly");
  auto specs = d.infer_outputs(call);
  call.outputs.clear();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    int in = i < d.outputs.size() && !d.outputs[i].in_place_of.empty()
                 ? d.input_index(d.outputs[i].in_place_of)
                 : -1;
    if (in >= 0 && in < static_cast<int>(call.inputs.size()))
      call.outputs.push_back(call.inputs[in]);  // undefined when the optional input is absent
    else
      call.outputs.push_back(tensor::empty(q, specs[i].shape, specs[i].type));
  }
}

// ---------------------------------------------------------------------------------------------
// implementations

const op_implementation* select_implementation(const op_descriptor& d, const device& dev, const op_call& call,
                                               const kernel_config& config,
                                               std::vector<std::string>* refusals) {
  for (const auto& impl : d.implementations) {
    auto why = impl.supports ? impl.supports(dev, call, config) : std::nullopt;
    if (!why) return &impl;
    if (refusals) refusals->push_back(impl.name + ": " + *why);
  }
  return nullptr;
}

event enqueue_opencl(queue& q, const op_descriptor& d, const op_call& call, const kernel_config& config,
                     source_override src) {
  if (!attrs_complete(d, call)) {
    op_call full = call;
    complete_attrs(d, full);
    return enqueue_opencl(q, d, full, config, src);
  }
  check_call(d, call);
  kernel_config full = d.config.complete(config);
  std::vector<std::string> refusals;
  const op_implementation* impl = select_implementation(d, q.get_device(), call, full, &refusals);
  if (!impl) {
    std::string why;
    for (const auto& r : refusals) why += "; " + r;
    throw error(errc::unsupported, "ops::" + d.name,
                "no OpenCL implementation accepts " + describe_call(d, call) + " with config '" + full.str() +
                    "'" + why);
  }
  return impl->enqueue(q, call, full, src);
}

// ---------------------------------------------------------------------------------------------
// host side

host_tensor read_host(queue& q, const tensor& t) {
  host_tensor h;
  if (!t.defined()) return h;
  h.defined = true;
  h.shape = t.shape();
  h.type = t.type();
  if (t.numel() == 0) return h;
  const int last = t.dim() - 1;
  if (is_quantized(t.type()) && last >= 1 && t.size(last) > 1 && t.strides()[last] != 1) {
    // Blocks run along another dim (a transposed weight): read the view with that dim last,
    // then put the values back in this view's row-major order.
    int kd = 0;
    while (kd < last && t.strides()[kd] != 1) ++kd;
    dims order;
    for (int i = 0; i <= last; ++i)
      if (i != kd) order.push_back(i);
    order.push_back(kd);
    const host_tensor p = read_host(q, t.permute(order));
    h.values.resize(p.values.size());
    std::vector<std::int64_t> idx(t.dim(), 0);
    for (std::size_t i = 0; i < h.values.size(); ++i) {
      std::int64_t at = 0;
      for (int j = 0; j <= last; ++j) at = at * p.shape[j] + idx[order[j]];
      h.values[i] = p.values[static_cast<std::size_t>(at)];
      for (int d = last; d >= 0; --d) {
        if (++idx[d] < t.size(d)) break;
        idx[d] = 0;
      }
    }
    return h;
  }
  auto bytes = t.to_host(q);
  h.values.resize(static_cast<std::size_t>(t.numel()));
  kernels::decode_values(t.type(), bytes.data(), h.values.size(), h.values.data());
  return h;
}

std::vector<host_tensor> compute_reference(queue& q, const op_descriptor& d, const op_call& call) {
  if (!attrs_complete(d, call)) {
    op_call full = call;
    complete_attrs(d, full);
    return compute_reference(q, d, full);
  }
  host_call hc;
  hc.call = &call;
  for (const auto& t : call.inputs) hc.inputs.push_back(read_host(q, t));
  auto specs = d.infer_outputs ? d.infer_outputs(call) : std::vector<tensor_spec>{};
  for (std::size_t i = 0; i < call.outputs.size(); ++i) {
    host_tensor o;
    o.defined = call.outputs[i].defined();
    o.shape = i < specs.size() ? specs[i].shape : call.outputs[i].shape();
    o.type = i < specs.size() ? specs[i].type : call.outputs[i].type();
    o.values.assign(static_cast<std::size_t>(std::max<std::int64_t>(o.shape.product(), 0)), 0.0);
    hc.outputs.push_back(std::move(o));
  }
  d.reference(hc);
  return std::move(hc.outputs);
}

event run_host(queue& q, const op_descriptor& d, const op_call& call) {
  check_call(d, call);
  auto expected = compute_reference(q, d, call);
  for (std::size_t i = 0; i < call.outputs.size(); ++i) {
    const tensor& o = call.outputs[i];
    if (!o.defined() || o.numel() == 0) continue;
    std::vector<std::byte> bytes(o.nbytes());
    kernels::encode_values(o.type(), expected[i].values.data(), expected[i].values.size(), bytes.data());
    kernels::write_logical(q, o, bytes);
  }
  return event{};
}

double ulp_of(dtype dt, double x) noexcept {
  x = std::fabs(x);
  int mant_bits = 23, min_exp = -126;
  if (dt == dtype::f16) {
    mant_bits = 10;
    min_exp = -14;
  } else if (dt == dtype::bf16) {
    mant_bits = 7;
  }
  int e = x > 0 && std::isfinite(x) ? std::ilogb(x) : min_exp;
  if (e < min_exp) e = min_exp;
  return std::ldexp(1.0, e - mant_bits);
}

comparison compare_outputs(const op_descriptor& d, const op_call& call,
                           const std::vector<host_tensor>& expected, const std::vector<host_tensor>& got,
                           bool small_integers) {
  comparison r;
  double worst_ratio = -1;
  for (std::size_t o = 0; o < expected.size() && o < got.size(); ++o) {
    const auto& e = expected[o];
    const auto& g = got[o];
    if (!e.defined || !g.defined) continue;
    if (!(e.shape == g.shape) || e.values.size() != g.values.size()) {
      r.ok = false;
      r.output = static_cast<int>(o);
      r.message =
          "output " + std::to_string(o) + " has shape " + g.shape.str() + "; expected " + e.shape.str();
      return r;
    }
    bool exact = !is_floating(e.type) || (small_integers && d.exact_on_small_integers);
    tolerance tol = exact || !d.tol ? tolerance{} : d.tol(call, static_cast<int>(o));
    for (std::size_t i = 0; i < e.values.size(); ++i) {
      // The expected value as the output dtype stores it: exact ops then compare with bound 0.
      double ev = is_floating(e.type) ? kernels::round_to(e.type, e.values[i]) : e.values[i],
             gv = g.values[i];
      ++r.checked;
      double err, bound;
      if (std::isnan(ev)) {
        err = std::isnan(gv) ? 0 : INFINITY;
        bound = 0;
      } else if (std::isinf(ev) || std::isinf(gv) || std::isnan(gv)) {
        err = (ev == gv) ? 0 : INFINITY;
        bound = 0;
      } else {
        err = std::fabs(gv - ev);
        bound = tol.ulps * ulp_of(e.type, ev) + tol.atol + tol.rtol * std::fabs(ev);
        if (tol.magnitude_eps > 0 && i < e.magnitude.size()) bound += tol.magnitude_eps * e.magnitude[i];
      }
      bool bad = err > bound;
      if (bad) ++r.mismatches;
      double ratio = err == 0 ? 0 : (bound > 0 ? err / bound : INFINITY);
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        r.output = static_cast<int>(o);
        r.index = static_cast<std::int64_t>(i);
        r.expected = ev;
        r.got = gv;
        r.error = err;
        r.bound = bound;
      }
    }
  }
  r.ok = r.mismatches == 0;
  if (r.output >= 0) {
    const auto& shape = expected[r.output].shape;
    r.coord = dims();
    std::int64_t rem = r.index;
    std::vector<std::int64_t> c(shape.size());
    for (int k = shape.size() - 1; k >= 0; --k) {
      c[k] = shape[k] ? rem % shape[k] : 0;
      rem = shape[k] ? rem / shape[k] : 0;
    }
    for (auto v : c) r.coord.push_back(v);
    std::ostringstream m;
    m.precision(9);
    std::string oname = r.output < static_cast<int>(d.outputs.size()) ? d.outputs[r.output].name : "out";
    m << "worst at " << oname << r.coord.str() << " (index " << r.index << "): expected " << r.expected
      << " got " << r.got << " |err| " << r.error << (r.ok ? " <= " : " > ") << "bound " << r.bound << "; "
      << r.mismatches << " of " << r.checked << " elements over bound";
    r.message = m.str();
  } else {
    r.message = "no elements compared";
  }
  return r;
}

}  // namespace prism
