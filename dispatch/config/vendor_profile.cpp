// SPDX-License-Identifier: Apache-2.0
// The vendor loader: reading profile folders, matching them to devices, and the tune-space
// fallback (see vendor_profile.hpp).
#include "dispatch/config/vendor_profile.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dispatch/config/yaml_file.hpp"
#include "prism/error.hpp"
#include "runtime/paths.hpp"

namespace prism::dispatch {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> match_fields = {"platform_name", "device_vendor", "device_type",
                                               "device_name"};

std::vector<std::string> scalar_list(const std::string& file, const YAML::Node& n, const std::string& what) {
  std::vector<std::string> out;
  if (n.IsSequence()) {
    for (auto item : n) out.push_back(yaml_scalar(file, item, what));
  } else {
    out.push_back(yaml_scalar(file, n, what + " or a list of them"));
  }
  return out;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw error(errc::io_error, "vendor profile", "cannot read '" + file.string() + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

vendor_profile load_profile(const fs::path& dir) {
  const auto file = (dir / "vendor.yaml").string();
  auto root = load_yaml_file(file);
  if (!root.IsMap())
    throw error(errc::config_error, "vendor profile", yaml_where(file, root) + ": expected a map");
  vendor_profile p;
  p.directory = dir.string();
  for (auto it = root.begin(); it != root.end(); ++it) {
    auto key = yaml_scalar(file, it->first, "a key");
    static const std::vector<std::string> keys = {"name",  "description", "priority",
                                                  "match", "routes",      "unused"};
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw error(errc::config_error, "vendor profile",
                  yaml_where(file, it->first) + ": unknown key '" + key +
                      "'; valid keys: name, description, priority, match, routes, unused");
  }
  p.name = yaml_scalar(file, root["name"], "'name: <vendor name>'");
  if (p.name != dir.filename().string())
    throw error(errc::config_error, "vendor profile",
                yaml_where(file, root["name"]) + ": name '" + p.name + "' differs from its folder '" +
                    dir.filename().string() + "'");
  if (auto pr = root["priority"]) {
    try {
      p.priority = pr.as<int>();
    } catch (const YAML::Exception&) {
      throw error(errc::config_error, "vendor profile",
                  yaml_where(file, pr) + ": priority must be an integer");
    }
  }
  if (auto m = root["match"]) {
    if (!m.IsMap())
      throw error(errc::config_error, "vendor profile", yaml_where(file, m) + ": 'match' must be a map");
    for (auto it = m.begin(); it != m.end(); ++it) {
      auto field = yaml_scalar(file, it->first, "a match field name");
      if (std::find(match_fields.begin(), match_fields.end(), field) == match_fields.end())
        throw error(errc::config_error, "vendor profile",
                    yaml_where(file, it->first) + ": unknown match field '" + field +
                        "'; valid: platform_name, device_vendor, device_type, device_name");
      p.match[field] = scalar_list(file, it->second, "a glob pattern");
    }
  }
  if (auto r = root["routes"]) {
    if (!r.IsMap())
      throw error(errc::config_error, "vendor profile", yaml_where(file, r) + ": 'routes' must be a map");
    for (auto it = r.begin(); it != r.end(); ++it) {
      auto op = yaml_scalar(file, it->first, "an op name");
      p.routes[op] = yaml_route(file, it->first, it->second, op);
    }
  }
  if (auto u = root["unused"]) {
    if (!u.IsSequence())
      throw error(errc::config_error, "vendor profile",
                  yaml_where(file, u) + ": 'unused' must be a list of op names");
    for (auto n : u) p.unused[yaml_scalar(file, n, "an op name")] = yaml_where(file, n);
  }
  auto kdir = dir / "kernels";
  if (fs::is_directory(kdir)) {
    for (const auto& entry : fs::directory_iterator(kdir))
      if (entry.is_regular_file() && entry.path().extension() == ".cl")
        p.kernels[entry.path().filename().string()] = {entry.path().string(), read_text(entry.path())};
  }
  const auto tune = dir / "tune_configs.yaml";
  if (fs::exists(tune)) {
    p.tune_file = tune.string();
    p.tune_spaces = parse_tune_configs(read_text(tune), p.name, p.tune_file);
  }
  return p;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool glob_at(const char* p, const char* t) {
  // Iterative wildcard match with single backtrack point for '*'.
  const char* star = nullptr;
  const char* resume = nullptr;
  while (*t) {
    if (*p == '?' || (*p && *p != '*' && *p == *t)) {
      ++p;
      ++t;
    } else if (*p == '*') {
      star = p++;
      resume = t;
    } else if (star) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == 0;
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& text) {
  auto p = lower(pattern), t = lower(text);
  return glob_at(p.c_str(), t.c_str());
}

bool vendor_profile::matches(const device_description& d) const {
  for (const auto& [field, patterns] : match) {
    const std::string& value = field == "platform_name"   ? d.platform_name
                               : field == "device_vendor" ? d.vendor
                               : field == "device_type"   ? d.type
                                                          : d.name;
    bool any = std::any_of(patterns.begin(), patterns.end(),
                           [&](const std::string& g) { return glob_match(g, value); });
    if (!any) return false;
  }
  return true;
}

std::string vendor_profile::match_summary() const {
  if (match.empty()) return "any device";
  std::string out;
  for (const auto& [field, patterns] : match) {
    if (!out.empty()) out += "; ";
    out += field + "=";
    for (std::size_t i = 0; i < patterns.size(); ++i) out += (i ? "|" : "") + patterns[i];
  }
  return out;
}

const vendor_profile* vendor_set::find(const std::string& name) const {
  for (const auto& p : profiles_)
    if (p.name == name) return &p;
  return nullptr;
}

const tune_space& vendor_set::tune_space_of(const op_descriptor& d, const vendor_profile* p) const {
  for (const vendor_profile* v : {p, find("generic")}) {
    if (!v) continue;
    if (auto it = v->tune_spaces.find(d.name); it != v->tune_spaces.end()) return it->second;
  }
  return schema_tune_space_of(d);
}

namespace {
// Any conversion yaml-cpp refuses inside a profile is an error naming the file and the line, not
// yaml-cpp's bare "bad conversion".
vendor_profile load_located(const fs::path& dir) {
  try {
    return load_profile(dir);
  } catch (const YAML::Exception& e) {
    throw error(errc::config_error, "vendor profile",
                (dir / "vendor.yaml").string() + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}
}  // namespace

vendor_profile load_vendor_profile(const std::string& dir) {
  return load_located(fs::path(dir));
}

std::vector<vendor_profile> load_vendor_profiles(const std::vector<std::string>& dirs) {
  std::vector<vendor_profile> out;
  auto add = [&](vendor_profile p) {
    auto same =
        std::find_if(out.begin(), out.end(), [&](const vendor_profile& o) { return o.name == p.name; });
    if (same != out.end()) out.erase(same);
    out.push_back(std::move(p));
  };
  for (const auto& d : dirs) {
    fs::path dir(d);
    if (!fs::is_directory(dir))
      throw error(errc::not_found, "vendor profiles",
                  "'" + d + "' is not a folder (from PRISM_VENDOR_PATH or the data dir)");
    if (fs::exists(dir / "vendor.yaml")) {
      add(load_located(dir));
      continue;
    }
    std::vector<fs::path> subdirs;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_directory() && fs::exists(entry.path() / "vendor.yaml")) subdirs.push_back(entry.path());
    std::sort(subdirs.begin(), subdirs.end());
    for (const auto& s : subdirs) add(load_located(s));
  }
  return out;
}

vendor_set load_vendors(const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> dirs;
  const auto shipped = data_dir() / "vendors";
  if (fs::is_directory(shipped)) dirs.push_back(shipped.string());
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  return vendor_set(load_vendor_profiles(dirs));
}

const vendor_profile* select_vendor(const std::vector<vendor_profile>& profiles, const device_description& d,
                                    const std::string& forced) {
  if (!forced.empty()) {
    for (const auto& p : profiles)
      if (p.name == forced) return &p;
    std::string names;
    for (const auto& p : profiles) names += (names.empty() ? "" : ", ") + p.name;
    throw error(errc::not_found, "PRISM_VENDOR",
                "no vendor profile named '" + forced + "'; loaded profiles: " + names);
  }
  const vendor_profile* best = nullptr;
  for (const auto& p : profiles)
    if (p.matches(d) && (!best || p.priority >= best->priority)) best = &p;
  return best;
}

}  // namespace prism::dispatch
