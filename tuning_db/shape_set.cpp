// Shape sets (tuning_db/shapes/*.yaml, format in docs/tuning.md): parsing with $variables and
// list expansion, the shipped per-model sets, and the PRISM_RECORD_UNTUNED recorder.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
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

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A component value: an integer, a list of integers, or "$name" naming a var holding either.
std::vector<std::int64_t> values_of(const YAML::Node& node, const std::map<std::string, YAML::Node>& vars,
                                    const std::string& origin, const std::string& where, int depth = 0) {
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
      return values_of(it->second, vars, origin, where, depth + 1);
    }
    return {as_int(node)};
  }
  if (node.IsSequence()) {
    std::vector<std::int64_t> out;
    for (const auto& item : node) {
      auto sub = values_of(item, vars, origin, where, depth + 1);
      out.insert(out.end(), sub.begin(), sub.end());
    }
    if (out.empty()) bad(origin, where, "an empty list");
    return out;
  }
  bad(origin, where, "expected an integer, a list of integers or a $variable");
}

std::vector<std::string> strings_of(const YAML::Node& node, const std::string& origin,
                                    const std::string& where) {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
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
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw prism::error(errc::config_error, "tuning::load_shape_set",
                       origin + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) bad(origin, "top level", "expected a mapping with a 'shapes' list (see docs/tuning.md)");
  shape_set set;
  set.name = root["model"] ? root["model"].as<std::string>("") : fs::path(origin).stem().string();
  set.source = root["source"] ? root["source"].as<std::string>("") : "";
  std::map<std::string, YAML::Node> vars;
  if (auto v = root["vars"]) {
    if (!v.IsMap()) bad(origin, "vars", "expected a mapping of name: integer or list");
    for (auto it = v.begin(); it != v.end(); ++it) vars[it->first.as<std::string>()] = it->second;
  }
  std::vector<std::string> default_dtypes{"f32"};
  if (auto d = root["dtypes"]) default_dtypes = strings_of(d, origin, "dtypes");
  auto shapes = root["shapes"];
  if (!shapes || !(shapes.IsSequence() || shapes.IsNull()))
    bad(origin, "top level", "missing 'shapes:' list (see docs/tuning.md)");

  std::unordered_set<std::string> seen;
  std::size_t index = 0;
  for (const auto& entry : shapes) {
    std::string where = "shapes[" + std::to_string(index++) + "]";
    if (!entry.IsMap()) bad(origin, where, "expected a mapping like {op: matmul, m: 1, n: 4096, k: 4096}");
    if (!entry["op"] || !entry["op"].IsScalar()) bad(origin, where, "missing 'op'");
    std::string op = entry["op"].Scalar();
    where += " (" + op + ")";
    std::vector<std::string> dtypes = default_dtypes;
    if (entry["dtype"] && entry["dtypes"]) bad(origin, where, "give 'dtype' or 'dtypes', not both");
    if (entry["dtype"]) dtypes = strings_of(entry["dtype"], origin, where + ".dtype");
    if (entry["dtypes"]) dtypes = strings_of(entry["dtypes"], origin, where + ".dtypes");
    std::string note = entry["note"] ? entry["note"].as<std::string>("") : "";

    std::vector<std::pair<std::string, std::vector<std::int64_t>>> dims;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      std::string name = it->first.as<std::string>();
      if (name == "op" || name == "dtype" || name == "dtypes" || name == "note") continue;
      dims.emplace_back(name, values_of(it->second, vars, origin, where + "." + name));
    }
    if (dims.empty()) bad(origin, where, "no shape components (e.g. m: 1, n: 4096, k: 4096)");

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
  std::ifstream in(path);
  if (!in) throw prism::error(errc::io_error, "tuning::load_shape_set", "cannot read shape set file " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_shape_set(buf.str(), path);
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

const std::string& untuned_record_path() {
  static const std::string path = detail::env("PRISM_RECORD_UNTUNED").value_or("");
  return path;
}

void record_untuned(std::string_view op, std::string_view dtype, const shape_key& shape) {
  const std::string& path = untuned_record_path();
  if (path.empty()) return;
  static auto* mu = new std::mutex;
  static auto* seen = new std::set<std::string>;
  static bool loaded = false;
  std::lock_guard lock(*mu);
  if (!loaded) {
    loaded = true;
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
