// SPDX-License-Identifier: Apache-2.0
// `prism ops [NAME]`: every op from its descriptor: shape-key components (what the dispatch log,
// `prism run --shape` and shape sets name), attributes with defaults, dtypes, backends and
// tunable parameters; --json too.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "dispatch/dispatcher.hpp"
#include "prism/runtime.hpp"

namespace {

struct ops_args {
  std::string name;
  bool json = false;
};

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

nlohmann::json op_json(const prism::op_descriptor& d, const std::vector<std::string>& key) {
  nlohmann::json attrs = nlohmann::json::array();
  for (const auto& a : d.attrs)
    attrs.push_back({{"name", a.name}, {"default", prism::format_attr(a.default_value)}, {"help", a.help}});
  nlohmann::json dtypes = nlohmann::json::array();
  for (auto t : d.dtypes) dtypes.push_back(prism::dtype_name(t));
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  for (const auto& i : d.inputs) inputs.push_back({{"name", i.name}, {"optional", i.optional}});
  for (const auto& o : d.outputs) outputs.push_back({{"name", o.name}, {"in_place_of", o.in_place_of}});
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : d.config.params)
    params.push_back(
        {{"name", p.name}, {"default", p.default_value}, {"allowed", p.allowed}, {"help", p.help}});
  nlohmann::json impls = nlohmann::json::array();
  for (const auto& i : d.implementations) impls.push_back(i.name);
  return {{"name", d.name},
          {"family", d.family},
          {"summary", d.summary},
          {"shape_key", key},
          {"attrs", attrs},
          {"dtypes", dtypes},
          {"inputs", inputs},
          {"outputs", outputs},
          {"variadic_inputs", d.variadic_inputs},
          {"backends", prism::dispatch::op_backends(d)},
          {"implementations", impls},
          {"config", params}};
}

std::string attr_list(const prism::op_descriptor& d) {
  std::string out;
  for (const auto& a : d.attrs)
    out += (out.empty() ? "" : ";") + a.name + "=" + prism::format_attr(a.default_value);
  return out.empty() ? "-" : out;
}

// "label:     value", the value wrapped under itself to fit `width`.
void print_field(const char* label, const std::string& value, std::size_t width) {
  constexpr std::size_t indent = 12;
  const std::string text = prism::cli::wrap(value, width > indent + 20 ? width - indent : 20, 0);
  std::string out = std::string(label) + ":" + std::string(indent - std::strlen(label) - 1, ' ');
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += std::string(indent, ' ');
  }
  std::printf("%s", out.c_str());
}

void print_one(const prism::op_descriptor& d, const std::vector<std::string>& key) {
  const std::size_t width = prism::cli::terminal_width();
  std::printf("%s", prism::cli::wrap(d.name + " (" + d.family + "): " + d.summary, width, 2).c_str());
  std::printf("shape key:  %s\n", key.empty() ? "?" : join(key).c_str());
  std::string dt;
  for (auto t : d.dtypes) dt += (dt.empty() ? "" : ", ") + std::string(prism::dtype_name(t));
  std::printf("dtypes:     %s\n", dt.c_str());
  std::string ins, outs;
  for (const auto& i : d.inputs)
    ins += (ins.empty() ? "" : ", ") + i.name + (i.optional ? " (optional)" : "");
  for (const auto& o : d.outputs) outs += (outs.empty() ? "" : ", ") + o.name;
  print_field("inputs", ins + (d.variadic_inputs ? " (last repeats)" : ""), width);
  print_field("outputs", outs, width);
  std::printf("backends:   %s\n", join(prism::dispatch::op_backends(d), ", ").c_str());
  if (!d.attrs.empty()) {
    prism::cli::table t;
    t.column("attribute").column("default").column("meaning", prism::cli::table::align::left, true, 20);
    for (const auto& a : d.attrs) t.row({a.name, prism::format_attr(a.default_value), a.help});
    std::printf("\n%s", t.render(width).c_str());
  }
  if (!d.config.params.empty()) {
    prism::cli::table t;
    t.column("config")
        .column("default", prism::cli::table::align::right)
        .column("allowed", prism::cli::table::align::left, true, 12)
        .column("meaning", prism::cli::table::align::left, true, 20);
    for (const auto& p : d.config.params) {
      std::string allowed;
      for (auto v : p.allowed) allowed += (allowed.empty() ? "" : ",") + std::to_string(v);
      t.row({p.name, std::to_string(p.default_value), allowed.empty() ? ">=1" : allowed, p.help});
    }
    std::printf("\n%s", t.render(width).c_str());
  }
}

}  // namespace

PRISM_CLI_COMMAND(20) {
  auto* cmd = app.add_subcommand(
      "ops", "List the ops: shape-key components, attributes with their defaults, dtypes and backends");
  auto a = std::make_shared<ops_args>();
  cmd->add_option("name", a->name, "Show one op in full (attribute help, tunable parameters)");
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  cmd->callback([a, &exit_code] {
    const auto& reg = prism::op_registry::instance();
    std::vector<const prism::op_descriptor*> ops;
    if (a->name.empty())
      ops = reg.all();
    else
      ops = {&reg.get(a->name)};  // unknown: not_found listing the names (exit 2)
    if (a->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto* d : ops) out.push_back(op_json(*d, d->key_names));
      std::cout << (a->name.empty() ? out : out[0]).dump(2) << "\n";
    } else if (!a->name.empty()) {
      print_one(*ops[0], ops[0]->key_names);
    } else {
      prism::cli::table t;
      // Backends, dtypes and help are in `prism ops NAME` and --json: the list keeps to what a
      // `prism run --shape ... --attrs ...` line needs.
      t.column("op")
          .column("shape key", prism::cli::table::align::left, true, 10)
          .column("attributes", prism::cli::table::align::left, true, 10);
      for (const auto* d : ops) {
        auto key = d->key_names;
        t.row({d->name, key.empty() ? "?" : join(key), attr_list(*d)});
      }
      std::printf("%s", t.render(prism::cli::terminal_width()).c_str());
      std::printf("%s", prism::cli::wrap(
                            std::to_string(ops.size()) +
                                " ops; attributes show their defaults; `prism ops NAME` shows one in full",
                            prism::cli::terminal_width())
                            .c_str());
    }
    exit_code = prism::cli::exit_ok;
  });
}
