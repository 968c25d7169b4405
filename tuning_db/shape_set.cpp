// SPDX-License-Identifier: Apache-2.0
// Shape sets (tuning_db/shapes/*.yaml, format in docs/tuning.md): parsing with $variables and
// list expansion, the shipped per-model sets, and the PRISM_RECORD_UNTUNED recorder.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_set>

#include "prism/error.hpp"
#include "prism/tuning_db.hpp"
#include "runtime/paths.hpp"
#include "tuning_db/common.hpp"

namespace prism::tuning {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& where, const std::string& what) {
  throw prism::error(errc::config_error, "tuning::load_shape_set", origin + ": " + where + ": " + what);
}

// Limits that keep a hostile shape set bounded in time and memory.
constexpr std::size_t max_file_bytes = 4u << 20;   // 4 MiB of YAML
constexpr std::size_t max_yaml_nodes = 1'000'000;  // nodes visited, aliases expanded
constexpr std::size_t max_entries = 100'000;       // (op, dtype, shape) entries after expansion

// Counts the YAML nodes a parse visits (an alias is visited again each time it is used).
struct node_budget {
  std::size_t used = 0;
  void take(const std::string& origin, const std::string& where) {
    if (++used > max_yaml_nodes)
      bad(origin, where,
          "the file expands to more than " + std::to_string(max_yaml_nodes) +
              " YAML nodes (aliases are counted each time they are used)");
  }
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A component value: an integer, a list of integers, or "$name" naming a var holding either.
std::vector<std::int64_t> values_of(const YAML::Node& node, const std::map<std::string, YAML::Node>& vars,
                                    const std::string& origin, const std::string& where, node_budget& budget,
                                    int depth = 0) {
  budget.take(origin, where);
  auto as_int = [&](const YAML::Node& n) -> std::int64_t {
    try {
      return n.as<std::int64_t>();
    } catch (const YAML::Exception&) {
      bad(origin, where, "'" + n.as<std::string>("?") + "' is not an integer");
    }
  };
  if (node.IsScalar()) {
    auto text = node.Scalar();
    if (!text.empty() && text[0] == '$') {
      auto it = vars.find(text.substr(1));
      if (it == vars.end()) {
        std::string known;
        for (auto& [k, v] : vars) known += (known.empty() ? "" : ", ") + k;
        bad(origin, where,
            "unknown variable '" + text + "' (defined in 'vars': " + (known.empty() ? "none" : known) + ")");
      }
      if (depth > 4) bad(origin, where, "variable '" + text + "' refers to itself");
      return values_of(it->second, vars, origin, where, budget, depth + 1);
    }
    return {as_int(node)};
  }
  if (node.IsSequence()) {
    std::vector<std::int64_t> out;
    if (depth > 16) bad(origin, where, "lists nested more than 16 deep");
    for (const auto& item : node) {
      auto sub = values_of(item, vars, origin, where, budget, depth + 1);
      out.insert(out.end(), sub.begin(), sub.end());
    }
    if (out.empty()) bad(origin, where, "an empty list");
    return out;
  }
  bad(origin, where, "expected an integer, a list of integers or a $variable");
}

std::vector<std::string> strings_of(const YAML::Node& node, const std::string& origin,
                                    const std::string& where, node_budget& budget) {
  std::vector<std::string> out;
  budget.take(origin, where);
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      budget.take(origin, where);
      if (!item.IsScalar()) bad(origin, where, "expected a list of names");
      out.push_back(item.Scalar());
    }
  } else {
    bad(origin, where, "expected a name or a list of names");
  }
  if (out.empty()) bad(origin, where, "an empty list");
  return out;
}

}  // namespace

shape_set parse_shape_set(std::string_view yaml_text, const std::string& origin) {
  if (yaml_text.size() > max_file_bytes)
    bad(origin, "top level",
        "the file is " + std::to_string(yaml_text.size()) + " bytes; shape sets may be at most " +
            std::to_string(max_file_bytes) + " bytes");
  node_budget budget;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw prism::error(errc::config_error, "tuning::load_shape_set",
                       origin + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) bad(origin, "top level", "expected a mapping with a 'shapes' list (see docs/tuning.md)");
  shape_set set;
  // A scalar's text, or an error naming where it is and what was expected.
  auto scalar = [&](const YAML::Node& n, const std::string& where, const char* what) -> std::string {
    if (!n.IsScalar())
      bad(origin, where + " (line " + std::to_string(n.Mark().line + 1) + ")",
          std::string("expected ") + what);
    return n.Scalar();
  };
  set.name =
      root["model"] ? scalar(root["model"], "model", "a model name") : fs::path(origin).stem().string();
  set.source = root["source"] ? scalar(root["source"], "source", "a text") : "";
  std::map<std::string, YAML::Node> vars;
  if (auto v = root["vars"]) {
    if (!v.IsMap()) bad(origin, "vars", "expected a mapping of name: integer or list");
    for (auto it = v.begin(); it != v.end(); ++it) {
      budget.take(origin, "vars");
      vars[scalar(it->first, "vars", "a variable name")] = it->second;
    }
  }
  std::vector<std::string> default_dtypes{"f32"};
  if (auto d = root["dtypes"]) default_dtypes = strings_of(d, origin, "dtypes", budget);
  auto shapes = root["shapes"];
  if (!shapes || !(shapes.IsSequence() || shapes.IsNull()))
    bad(origin, "top level", "missing 'shapes:' list (see docs/tuning.md)");

  std::unordered_set<std::string> seen;
  std::size_t index = 0;
  for (const auto& entry : shapes) {
    budget.take(origin, "shapes");
    std::string where = "shapes[" + std::to_string(index++) + "]";
    if (!entry.IsMap()) bad(origin, where, "expected a mapping like {op: matmul, m: 1, n: 4096, k: 4096}");
    if (!entry["op"] || !entry["op"].IsScalar()) bad(origin, where, "missing 'op'");
    std::string op = entry["op"].Scalar();
    where += " (" + op + ")";
    std::vector<std::string> dtypes = default_dtypes;
    if (entry["dtype"] && entry["dtypes"]) bad(origin, where, "give 'dtype' or 'dtypes', not both");
    if (entry["dtype"]) dtypes = strings_of(entry["dtype"], origin, where + ".dtype", budget);
    if (entry["dtypes"]) dtypes = strings_of(entry["dtypes"], origin, where + ".dtypes", budget);
    std::string note = entry["note"] ? scalar(entry["note"], where + ".note", "a text") : "";

    std::vector<std::pair<std::string, std::vector<std::int64_t>>> dims;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      std::string name = scalar(it->first, where, "a component name");
      if (name == "op" || name == "dtype" || name == "dtypes" || name == "note") continue;
      dims.emplace_back(name, values_of(it->second, vars, origin, where + "." + name, budget));
    }
    if (dims.empty()) bad(origin, where, "no shape components (e.g. m: 1, n: 4096, k: 4096)");
    // The product is bounded before it is expanded.
    std::size_t product = dtypes.size();
    std::string factors = std::to_string(dtypes.size()) + " dtypes";
    for (auto& [name, values] : dims) {
      factors += " x " + std::to_string(values.size()) + " " + name;
      product =
          values.size() > max_entries ? max_entries + 1 : std::min(product * values.size(), max_entries + 1);
    }
    if (set.entries.size() + product > max_entries)
      bad(origin, where,
          "expands to " +
              (product > max_entries ? "more than " + std::to_string(max_entries) : std::to_string(product)) +
              " shapes (" + factors + "), and a shape set may hold at most " + std::to_string(max_entries) +
              " entries in all");

    // Cartesian product over list-valued components, in the order written.
    std::vector<std::size_t> pos(dims.size(), 0);
    while (true) {
      std::vector<shape_key::component> comps;
      for (std::size_t i = 0; i < dims.size(); ++i) comps.emplace_back(dims[i].first, dims[i].second[pos[i]]);
      shape_key key;
      try {
        key = shape_key(std::move(comps));
      } catch (const prism::error& e) {
        bad(origin, where, e.message());
      }
      for (auto& dt : dtypes) {
        std::string id = op + '|' + dt + '|' + key.canonical();
        if (seen.insert(id).second) set.entries.push_back(shape_entry{op, dt, key, note});
      }
      std::size_t i = dims.size();
      while (i > 0) {
        --i;
        if (++pos[i] < dims[i].second.size()) break;
        pos[i] = 0;
        if (i == 0) goto done;
      }
      if (dims.empty()) break;
    }
  done:;
  }
  return set;
}

shape_set load_shape_set(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw prism::error(errc::io_error, "tuning::load_shape_set",
                       "cannot read shape set file " + path + ": no such file");
  if (!S_ISREG(st.st_mode))
    throw prism::error(errc::io_error, "tuning::load_shape_set",
                       "shape set " + path + " is not a regular file (a YAML file is expected)");
  if (static_cast<std::uint64_t>(st.st_size) > max_file_bytes)
    throw prism::error(errc::config_error, "tuning::load_shape_set",
                       path + ": the file is " + std::to_string(st.st_size) +
                           " bytes; shape sets may be at most " + std::to_string(max_file_bytes) + " bytes");
  std::ifstream in(path);
  if (!in) throw prism::error(errc::io_error, "tuning::load_shape_set", "cannot read shape set file " + path);
  std::string text(max_file_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return parse_shape_set(text, path);
}

namespace {
// Source tree: <root>/tuning_db/shapes; installed: <prefix>/share/prism/shapes.
fs::path shapes_dir() {
  fs::path source_layout = fs::path(prism::data_dir()) / "tuning_db" / "shapes";
  std::error_code ec;
  if (fs::is_directory(source_layout, ec)) return source_layout;
  return fs::path(prism::data_dir()) / "shapes";
}
}  // namespace

std::vector<std::string> shipped_models() {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(shapes_dir(), ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

shape_set load_model_shape_set(std::string_view model) {
  auto names = shipped_models();
  for (auto& n : names)
    if (lower(n) == lower(model)) return load_shape_set((shapes_dir() / (n + ".yaml")).string());
  std::string list;
  for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw prism::error(errc::not_found, "tuning::load_model_shape_set",
                     "no shipped shape set named '" + std::string(model) + "' in " + shapes_dir().string() +
                         "; shipped: " + (list.empty() ? "none" : list) + " (or pass --shapes FILE)");
}

// ---- PRISM_RECORD_UNTUNED ----

namespace {
// PRISM_RECORD_UNTUNED_EXACT=1 keeps every distinct shape (for a pretune that tunes exactly what
// a model runs); unset or 0 keeps the default below.
bool exact_from_env() {
  const auto v = detail::env("PRISM_RECORD_UNTUNED_EXACT").value_or("0");
  if (v == "1") return true;
  if (v != "0" && !v.empty())
    detail::log().warn(
        "PRISM_RECORD_UNTUNED_EXACT='{}' is not valid (valid: 0, 1); recording one shape per log2 bucket", v);
  return false;
}

bool record_exact() {
  static const bool exact = exact_from_env();  // read once, at the first recording
  return exact;
}

// By default one recorded shape per log2 bucket (shape_key::bucket): a decode loop records its
// attention once per power of two of the KV length instead of once per step.
std::string record_signature(std::string_view op, std::string_view dtype, const shape_key& shape) {
  return std::string(op) + '|' + std::string(dtype) + '|' +
         (record_exact() ? shape.canonical() : shape.bucket());
}
}  // namespace

namespace {
// The recorder's file and the entries it holds; the path starts as PRISM_RECORD_UNTUNED.
struct recorder_state {
  std::mutex mu;
  std::atomic<bool> on{false};  // the unlocked fast check of record_untuned
  std::string path;
  bool loaded = false;
  std::set<std::string> seen;
};
recorder_state& recorder() {
  static auto* r = [] {
    auto* s = new recorder_state;  // never destroyed: recording may run at exit
    s->path = detail::env("PRISM_RECORD_UNTUNED").value_or("");
    s->on = !s->path.empty();
    return s;
  }();
  return *r;
}
}  // namespace

std::string untuned_record_path() {
  auto& r = recorder();
  std::lock_guard lock(r.mu);
  return r.path;
}

void set_untuned_record_path(std::string path) {
  auto& r = recorder();
  std::lock_guard lock(r.mu);
  r.path = std::move(path);
  r.loaded = false;
  r.seen.clear();
  r.on = !r.path.empty();
}

void record_untuned(std::string_view op, std::string_view dtype, const shape_key& shape) {
  auto& r = recorder();
  if (!r.on.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(r.mu);
  const std::string& path = r.path;
  if (path.empty()) return;
  auto* seen = &r.seen;
  if (!r.loaded) {
    r.loaded = true;
    // Entries already in the file (from an earlier run) are not written again.
    try {
      if (fs::exists(path))
        for (auto& e : load_shape_set(path).entries) seen->insert(record_signature(e.op, e.dtype, e.shape));
    } catch (const prism::error& e) {
      detail::log().warn("PRISM_RECORD_UNTUNED: cannot read existing {} ({}); appending anyway", path,
                         e.message());
    }
  }
  if (!seen->insert(record_signature(op, dtype, shape)).second) return;

  std::string line = "  - {op: " + std::string(op) + ", dtype: " + std::string(dtype);
  for (auto& [name, value] : shape.components()) line += ", " + name + ": " + std::to_string(value);
  line += "}\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    static bool warned = false;
    if (!warned) detail::log().warn("PRISM_RECORD_UNTUNED: cannot open {} for appending", path);
    warned = true;
    return;
  }
  // The lock keeps the header and each line whole when several processes record at once.
  ::flock(fd, LOCK_EX);
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && st.st_size == 0)
    text =
        "# Shapes dispatched without a tuning database entry (PRISM_RECORD_UNTUNED).\n"
        "# Tune them with: prism pretune --shapes " +
        path + "\nshapes:\n";
  text += line;
  ssize_t written = ::write(fd, text.data(), text.size());
  (void)written;
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

}  // namespace prism::tuning
