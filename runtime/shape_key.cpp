// SPDX-License-Identifier: Apache-2.0
// prism::shape_key: parsing, printing, the nearest-shape distance and the log2 bucket it implies.
#include "prism/shape_key.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "prism/error.hpp"

namespace prism {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

void check_components(const std::vector<shape_key::component>& parts) {
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!valid_name(parts[i].first))
      throw error(errc::invalid_argument, "shape_key",
                  "component name '" + parts[i].first + "' is not valid: expected letters, digits or '_'");
    for (std::size_t j = 0; j < i; ++j)
      if (parts[j].first == parts[i].first)
        throw error(errc::invalid_argument, "shape_key", "component '" + parts[i].first + "' appears twice");
  }
}

}  // namespace

shape_key::shape_key(std::initializer_list<component> components) : components_(components) {
  check_components(components_);
}

shape_key::shape_key(std::vector<component> components) : components_(std::move(components)) {
  check_components(components_);
}

shape_key shape_key::parse(std::string_view text) {
  std::vector<component> parts;
  std::string_view rest = trim(text);
  if (rest.empty()) return shape_key{};
  while (true) {
    auto comma = rest.find(',');
    std::string_view token = trim(rest.substr(0, comma));
    auto eq = token.find('=');
    if (eq == std::string_view::npos)
      throw error(errc::invalid_argument, "shape_key::parse",
                  "token '" + std::string(token) + "' in '" + std::string(text) +
                      "' is not name=integer (expected e.g. \"m=128,n=4096,k=4096\")");
    std::string_view name = trim(token.substr(0, eq));
    std::string_view value = trim(token.substr(eq + 1));
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size() || value.empty())
      throw error(errc::invalid_argument, "shape_key::parse",
                  "value '" + std::string(value) + "' of '" + std::string(name) + "' in '" +
                      std::string(text) + "' is not an integer");
    parts.emplace_back(std::string(name), v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return shape_key(std::move(parts));
}

std::optional<std::int64_t> shape_key::find(std::string_view name) const {
  for (const auto& [n, v] : components_)
    if (n == name) return v;
  return std::nullopt;
}

std::int64_t shape_key::at(std::string_view name) const {
  if (auto v = find(name)) return *v;
  std::string present;
  for (const auto& [n, v] : components_) present += (present.empty() ? "" : ", ") + n;
  throw error(errc::not_found, "shape_key",
              "no component '" + std::string(name) + "' in '" + str() +
                  "'; present: " + (present.empty() ? "none" : present));
}

std::int64_t shape_key::get(std::string_view name, std::int64_t fallback) const {
  return find(name).value_or(fallback);
}

void shape_key::set(std::string_view name, std::int64_t value) {
  for (auto& [n, v] : components_)
    if (n == name) {
      v = value;
      return;
    }
  if (!valid_name(name))
    throw error(errc::invalid_argument, "shape_key",
                "component name '" + std::string(name) + "' is not valid: expected letters, digits or '_'");
  components_.emplace_back(std::string(name), value);
}

std::string shape_key::str() const {
  std::string out;
  for (const auto& [n, v] : components_) {
    if (!out.empty()) out += ',';
    out += n;
    out += '=';
    out += std::to_string(v);
  }
  return out;
}

std::string shape_key::canonical() const {
  auto sorted = components_;
  std::sort(sorted.begin(), sorted.end());
  return shape_key(std::move(sorted)).str();
}

bool shape_key::comparable(const shape_key& other) const {
  if (components_.size() != other.components_.size()) return false;
  return std::all_of(components_.begin(), components_.end(),
                     [&](const component& c) { return other.find(c.first).has_value(); });
}

std::string shape_key::bucket() const {
  auto sorted = components_;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (const auto& [n, v] : sorted) {
    if (!out.empty()) out += ',';
    out += n;
    out += v <= 1 ? '=' : '~';
    out += std::to_string(v <= 1 ? v : std::bit_width(static_cast<std::uint64_t>(v)) - 1);
  }
  return out;
}

double shape_distance(const shape_key& a, const shape_key& b) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (!a.comparable(b)) return inf;
  double d = 0;
  for (const auto& [name, va] : a.components()) {
    const std::int64_t vb = *b.find(name);
    if (va <= 0 || vb <= 0) {
      if (va != vb) return inf;
      continue;
    }
    d += std::fabs(std::log2(static_cast<double>(va)) - std::log2(static_cast<double>(vb)));
  }
  return d;
}

}  // namespace prism
