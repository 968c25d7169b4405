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
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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

  std::unordered_map<std::string, std::size_t> seen;  // op|dtype|key -> index in set.entries
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
    // act: a block-quantized entry's activations (optional; f32 when absent).
    std::string act;
    if (auto a = entry["act"]) {
      act = scalar(a, where + ".act", "an activation dtype");
      if (act != "f32" && act != "f16" && act != "bf16")
        bad(origin, where + ".act", "'" + act + "' is not an activation dtype (valid: f32, f16, bf16)");
      for (const auto& dt : dtypes)
        if (dt != "q8_0" && dt != "q4_0" && dt != "q4_1")
          bad(origin, where + ".act",
              "act names a block-quantized weight's activations; dtype '" + dt +
                  "' is not one (valid: q8_0, q4_0, q4_1)");
      if (act == "f32") act.clear();
    }
    // calls: the recorder's dispatch count (optional; files without it stay valid).
    std::uint64_t calls = 0;
    if (auto c = entry["calls"]) {
      const std::string text = scalar(c, where + ".calls", "a whole number of calls");
      std::size_t used = 0;
      bool ok = !text.empty() && std::isdigit(static_cast<unsigned char>(text[0]));
      try {
        if (ok) calls = std::stoull(text, &used);
      } catch (const std::exception&) {
        ok = false;
      }
      if (!ok || used != text.size() || calls > (std::uint64_t(1) << 62))
        bad(origin, where + ".calls",
            "'" + text +
                "' is not a number of calls (valid: a whole number from 0 to 2^62; 0 = not counted)");
    }

    std::vector<std::pair<std::string, std::vector<std::int64_t>>> dims;
    for (auto it = entry.begin(); it != entry.end(); ++it) {
      std::string name = scalar(it->first, where, "a component name");
      if (name == "op" || name == "dtype" || name == "dtypes" || name == "note" || name == "calls" ||
          name == "act")
        continue;
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
        std::string id = op + '|' + dt + '|' + act + '|' + key.canonical();
        // An entry listed again (the recorder appends new counts) adds its calls to the first.
        auto [it, fresh] = seen.emplace(id, set.entries.size());
        if (fresh)
          set.entries.push_back(shape_entry{op, dt, key, note, calls, act});
        else
          set.entries[it->second].calls =
              std::min(set.entries[it->second].calls + calls, std::uint64_t(1) << 62);
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

// One recorded shape: its entry text (without calls) and its dispatch counter. Counters are
// never freed (the dispatcher's cached decisions point at them), even when the path changes.
struct recorded_shape {
  std::string entry;  // "op: matmul, dtype: f32, m: 1, ..."
  std::atomic<std::uint64_t> calls{0};
  std::uint64_t flushed = 0;  // calls already appended to the file
};

// The recorder's file and the entries it holds; the path starts as PRISM_RECORD_UNTUNED.
struct recorder_state {
  std::mutex mu;
  std::atomic<bool> on{false};  // the unlocked fast check of record_untuned
  std::string path;
  std::optional<bool> exact;  // set_untuned_record_path's choice; else the environment's
  bool loaded = false;
  bool at_exit = false;
  std::map<std::string, recorded_shape*> shapes;  // signature -> shape, of the current path
  // Every shape ever recorded, owned here (the state is never destroyed) so that a counter
  // outlives a path change while cached decisions still point at it.
  std::vector<std::unique_ptr<recorded_shape>> owned;
  recorded_shape* make(std::string entry) {
    owned.push_back(std::make_unique<recorded_shape>());
    owned.back()->entry = std::move(entry);
    return owned.back().get();
  }
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

bool record_exact(const recorder_state& r) {
  static const bool exact = exact_from_env();  // read once, at the first recording
  return r.exact.value_or(exact);
}

// By default one recorded shape per log2 bucket (shape_key::bucket): a decode loop records its
// attention once per power of two of the KV length instead of once per step.
std::string record_signature(const recorder_state& r, std::string_view op, std::string_view dtype,
                             const shape_key& shape, std::string_view act) {
  return std::string(op) + '|' + std::string(dtype) + '|' + std::string(act) + '|' +
         (record_exact(r) ? shape.canonical() : shape.bucket());
}

std::string entry_text(std::string_view op, std::string_view dtype, const shape_key& shape,
                       std::string_view act) {
  std::string text = "op: " + std::string(op) + ", dtype: " + std::string(dtype);
  if (!act.empty()) text += ", act: " + std::string(act);
  for (auto& [name, value] : shape.components()) text += ", " + name + ": " + std::to_string(value);
  return text;
}

// Appends `lines` to `path` under an exclusive lock (several processes may record at once),
// with the file's header when it is empty. False when the file cannot be opened.
bool append_lines(const std::string& path, const std::string& lines) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::flock(fd, LOCK_EX);
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && st.st_size == 0)
    text =
        "# Shapes dispatched without a tuning database entry (PRISM_RECORD_UNTUNED); an entry's\n"
        "# `calls:` lines add up. Tune them with: prism pretune --shapes " +
        path + "\nshapes:\n";
  text += lines;
  ssize_t written = ::write(fd, text.data(), text.size());
  (void)written;
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return true;
}

void warn_cannot_open(const std::string& path) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) detail::log().warn("PRISM_RECORD_UNTUNED: cannot open {} for appending", path);
}

// The counts not yet in the file, appended as one `calls:` line per shape. Caller holds r.mu.
void flush_locked(recorder_state& r) {
  if (r.path.empty()) return;
  std::string lines;
  std::vector<std::pair<recorded_shape*, std::uint64_t>> taken;
  for (auto& [sig, shape] : r.shapes) {
    const std::uint64_t now = shape->calls.load(std::memory_order_relaxed);
    if (now <= shape->flushed) continue;
    lines += "  - {" + shape->entry + ", calls: " + std::to_string(now - shape->flushed) + "}\n";
    taken.emplace_back(shape, now);
  }
  if (lines.empty()) return;
  if (!append_lines(r.path, lines)) {
    warn_cannot_open(r.path);
    return;
  }
  for (auto& [shape, now] : taken) shape->flushed = now;
}

void flush_at_exit() {
  auto& r = recorder();
  std::lock_guard lock(r.mu);
  flush_locked(r);
}
}  // namespace

std::string untuned_record_path() {
  auto& r = recorder();
  std::lock_guard lock(r.mu);
  return r.path;
}

void set_untuned_record_path(std::string path, std::optional<bool> exact) {
  auto& r = recorder();
  std::lock_guard lock(r.mu);
  flush_locked(r);
  r.path = std::move(path);
  r.exact = exact;
  r.loaded = false;
  r.shapes.clear();  // the counters stay alive for decisions that still point at them
  r.on = !r.path.empty();
}

void flush_untuned_record() {
  auto& r = recorder();
  std::lock_guard lock(r.mu);
  flush_locked(r);
}

std::atomic<std::uint64_t>* record_untuned(std::string_view op, std::string_view dtype,
                                           const shape_key& shape, std::string_view act) {
  auto& r = recorder();
  if (!r.on.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard lock(r.mu);
  if (r.path.empty()) return nullptr;
  if (!r.at_exit) {
    r.at_exit = true;
    std::atexit(flush_at_exit);
  }
  if (!r.loaded) {
    r.loaded = true;
    // Entries already in the file (from an earlier run) are not written again; their new calls
    // are appended against the entry as it is written there.
    try {
      if (fs::exists(r.path))
        for (auto& e : load_shape_set(r.path).entries) {
          auto sig = record_signature(r, e.op, e.dtype, e.shape, e.act);
          if (r.shapes.count(sig)) continue;
          r.shapes.emplace(std::move(sig), r.make(entry_text(e.op, e.dtype, e.shape, e.act)));
        }
    } catch (const prism::error& e) {
      detail::log().warn("PRISM_RECORD_UNTUNED: cannot read existing {} ({}); appending anyway", r.path,
                         e.message());
    }
  }
  auto sig = record_signature(r, op, dtype, shape, act);
  auto it = r.shapes.find(sig);
  if (it != r.shapes.end()) return &it->second->calls;
  auto* s = r.make(entry_text(op, dtype, shape, act));
  r.shapes.emplace(std::move(sig), s);
  if (!append_lines(r.path, "  - {" + s->entry + "}\n")) warn_cannot_open(r.path);
  return &s->calls;
}

}  // namespace prism::tuning
