// SPDX-License-Identifier: Apache-2.0
// Parsing of the dispatcher's PRISM_* environment variables (see env_settings.hpp).
#include "dispatch/config/env_settings.hpp"

#include "runtime/text.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

#include "prism/error.hpp"

extern char** environ;

namespace prism::dispatch {
namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parse_bool(const std::string& var, const std::string& value) {
  auto v = lower(trim(value));
  if (v.empty() || v == "0" || v == "false" || v == "off" || v == "no") return false;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  throw error(errc::config_error, var,
              "value '" + value + "' is not a boolean; valid: 1, 0, true, false, on, off");
}

}  // namespace

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    auto item = trim(text.substr(start, end - start));
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

env_snapshot process_environment() {
  env_snapshot out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    if (entry.rfind("PRISM_", 0) != 0) continue;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

const std::vector<std::string>& known_variables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {
        // runtime, tuning db, kernels
        "PRISM_DEVICE", "PRISM_DATA_DIR", "PRISM_LOG_LEVEL", "PRISM_HUGE_PAGES", "PRISM_CL_OPTIONS",
        "PRISM_DUMP_PROGRAMS", "PRISM_TUNING_DB", "PRISM_RECORD_UNTUNED", "PRISM_RECORD_UNTUNED_EXACT",
        "PRISM_ALLOW_TF32", "PRISM_TUNING_DB_LOCAL", "PRISM_TUNING_DB_REFRESH", "PRISM_TUNING_DB_TIMEOUT",
        // dispatcher (this file)
        "PRISM_ROUTES", "PRISM_UNUSED", "PRISM_STRICT_ROUTES", "PRISM_LOG_DISPATCH",
        "PRISM_LOG_DISPATCH_FILE", "PRISM_LOG_DISPATCH_FILTER", "PRISM_VENDOR", "PRISM_VENDOR_PATH",
        // benchmark knobs (benchmarks/*/)
        "PRISM_BENCH_VENDOR", "PRISM_BENCH_CONFIG", "PRISM_BENCH_CASES", "PRISM_BENCH_GEMV_LOCAL",
        "PRISM_GEMM_VENDOR", "PRISM_GEMM_CONFIG", "PRISM_GEMM_SMALL_M_CONFIG", "PRISM_GEMM_NO_BLAS",
        "PRISM_GEMM_NO_CLBLAST", "PRISM_GEMM_BIG", "PRISM_ATTN_CONFIG", "PRISM_BENCH_GRAPH",
        "PRISM_BENCH_PIPELINE", "PRISM_BENCH_MIN_TIME", "PRISM_BENCH_LLC_BYTES", "PRISM_BENCH_QACT",
        "PRISM_BENCH_DEVICE_TIME",
        // test knobs (tests/*/): the op suite asks the dispatcher for its vendor profile
        "PRISM_OPS_ALL_VENDORS", "PRISM_TUNING_RECORD_CHILD", "PRISM_TEST_PG_DIR", "PRISM_CLI",
        // the project's scripts (scripts/, tests/, benchmarks/) export these to the programs they run
        "PRISM_PYTHON", "PRISM_LLAMACPP_PYTHON", "PRISM_VENV", "PRISM_WHEELS", "PRISM_PIP_CACHE",
        "PRISM_BUILD_DIR", "PRISM_ASAN_BUILD_DIR", "PRISM_JOBS", "PRISM_BUILD_TARGETS",
        "PRISM_BUILD_LLAMACPP", "PRISM_TEST_JOBS", "PRISM_TEST_TIMEOUT", "PRISM_TEST_TUNING_DB",
        "PRISM_SANITIZE", "PRISM_FUZZ_SECONDS", "PRISM_FUZZ_ARTIFACTS", "PRISM_DEMO_ARGS",
        "PRISM_DEMO_BASELINE", "PRISM_DEMO_BUDGET_S", "PRISM_DEMO_MODEL", "PRISM_DEMO_PRESET",
        "PRISM_DEMO_PROMPT", "PRISM_DEMO_SAMPLES", "PRISM_BENCH_VENV", "PRISM_BENCH_PG_URL",
        "PRISM_BENCH_QCONFIG", "PRISM_BENCH_QKEY", "PRISM_BENCH_TUNING_SHAPES"};
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

namespace {
std::string unknown_entry(const std::string& name) {
  const std::string best = text::closest(name, known_variables(), 3);  // a typo or two
  return name + " is not a variable prism reads; ignored" +
         (best.empty() ? "" : " (did you mean " + best + "?)");
}
}  // namespace

env_settings parse_env(const env_snapshot& env) {
  env_settings s;
  static const std::string op_prefix = "PRISM_OP_";
  for (const auto& [name, value] : env) {
    if (name.rfind(op_prefix, 0) == 0) {
      auto op = name.substr(op_prefix.size());
      if (op.empty()) throw error(errc::config_error, name, "names no op; write PRISM_OP_<op>=<backend>");
      op = std::regex_replace(op, std::regex("__"), ".");
      auto backend = lower(trim(value));
      if (backend.empty())
        throw error(errc::config_error, name, "is empty; set it to a backend name (opencl, clblast, host)");
      s.routes.push_back({op, backend, name});
    } else if (name == "PRISM_UNUSED") {
      s.unused = split_list(value, ',');
    } else if (name == "PRISM_ROUTES") {
      s.routes_file = trim(value);
    } else if (name == "PRISM_STRICT_ROUTES") {
      s.strict = parse_bool(name, value);
    } else if (name == "PRISM_LOG_DISPATCH") {
      for (const auto& item : split_list(lower(value), ',')) {
        if (item == "0" || item == "off" || item == "false") continue;
        if (item == "1" || item == "on" || item == "true") {
          s.log.enabled = true;
        } else if (item == "profile") {
          s.log.enabled = s.log.profile = true;
        } else if (item == "dispatch") {
          s.log.enabled = s.log.candidates = true;
        } else if (item == "all") {
          s.log.enabled = s.log.profile = s.log.candidates = true;
        } else {
          throw error(
              errc::config_error, name,
              "value '" + value + "' is not valid; valid: 0, 1, profile, dispatch, all (comma-combinable)");
        }
      }
    } else if (name == "PRISM_LOG_DISPATCH_FILE") {
      s.log.file = trim(value);
    } else if (name == "PRISM_LOG_DISPATCH_FILTER") {
      s.log.filter = value;
      // std::regex compiles and matches recursively: a long or deeply nested pattern can
      // overflow the stack (20,000 '(' did), so both are bounded before it is compiled.
      constexpr std::size_t max_filter_chars = 256;
      constexpr int max_filter_nesting = 16;
      if (value.size() > max_filter_chars)
        throw error(errc::config_error, name,
                    "the pattern is " + std::to_string(value.size()) + " characters long; at most " +
                        std::to_string(max_filter_chars) + " are allowed");
      int depth = 0, deepest = 0;
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (value[i] == '\\') {
          ++i;
        } else if (value[i] == '(') {
          deepest = std::max(deepest, ++depth);
        } else if (value[i] == ')') {
          --depth;
        }
      }
      if (deepest > max_filter_nesting)
        throw error(errc::config_error, name,
                    "the pattern nests groups " + std::to_string(deepest) + " deep; at most " +
                        std::to_string(max_filter_nesting) + " levels are allowed");
      try {
        std::regex check(value);
      } catch (const std::regex_error& e) {
        throw error(errc::config_error, name,
                    "'" + value + "' is not a valid regular expression: " + e.what());
      }
    } else if (name == "PRISM_VENDOR") {
      s.vendor = lower(trim(value));
    } else if (name == "PRISM_VENDOR_PATH") {
      s.vendor_path = split_list(value, ':');
    } else if (!std::binary_search(known_variables().begin(), known_variables().end(), name)) {
      s.unknown.push_back(unknown_entry(name));
    }
  }
  std::sort(s.routes.begin(), s.routes.end(),
            [](const env_route& a, const env_route& b) { return a.op < b.op; });
  return s;
}

}  // namespace prism::dispatch
