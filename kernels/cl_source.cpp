// SPDX-License-Identifier: Apache-2.0
// Embedded OpenCL sources and the kernel build helper: resolves `#include "x.cl"` lines against
// the embedded files, prepends prelude.cl and goes through the runtime's program cache.
#include "kernels/cl_source.hpp"

#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "prism/runtime/program.hpp"
#include "runtime/env.hpp"

namespace prism {
namespace detail {
extern const std::pair<std::string_view, std::string_view> embedded_cl_files[];
extern const int embedded_cl_count;
}  // namespace detail

std::string_view embedded_kernel_source(std::string_view file) {
  for (int i = 0; i < detail::embedded_cl_count; ++i)
    if (detail::embedded_cl_files[i].first == file) return detail::embedded_cl_files[i].second;
  std::string names;
  for (const auto& n : embedded_kernel_files()) names += (names.empty() ? "" : ", ") + n;
  throw error(errc::not_found, "embedded_kernel_source",
              "no embedded kernel file '" + std::string(file) + "'; embedded: " + names);
}

std::vector<std::string> embedded_kernel_files() {
  std::vector<std::string> out;
  for (int i = 0; i < detail::embedded_cl_count; ++i) out.emplace_back(detail::embedded_cl_files[i].first);
  return out;
}

namespace {
// Replaces each line `#include "name.cl"` by the embedded file (each file once per program).
void expand_includes(std::string_view text, std::string& out, std::set<std::string>& seen) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    std::string_view t = line;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    if (t.starts_with("#include \"") && t.find('"', 10) != std::string_view::npos) {
      std::string name(t.substr(10, t.find('"', 10) - 10));
      if (seen.insert(name).second) expand_includes(embedded_kernel_source(name), out, seen);
    } else {
      out.append(line);
      out += '\n';
    }
    pos = eol + 1;
  }
}
}  // namespace

kernel build_kernel(const context& ctx, std::string_view file, source_override src,
                    const std::string& options, const std::string& kernel_name) {
  // Source texts are assembled once per (file, override) and kept for the process lifetime.
  static std::mutex mu;
  static auto* sources = new std::map<std::pair<std::string, std::string>, std::string>();
  static auto* kernels =
      new std::map<std::tuple<std::uint64_t, std::string, std::string, std::string, std::string>, kernel>();
  std::string override_text = src ? std::string(*src) : std::string();
  // PRISM_CL_OPTIONS joins every program build (runtime/program.cpp), so it keys this memo too: a
  // kernel built before the setting changed is not the kernel asked for after.
  const std::string keyed_options = options + '\n' + env::get_or("PRISM_CL_OPTIONS", "");
  std::unique_lock lock(mu);
  auto kkey = std::make_tuple(ctx.id(), std::string(file), override_text, keyed_options, kernel_name);
  if (auto it = kernels->find(kkey); it != kernels->end()) return it->second;
  auto skey = std::make_pair(std::string(file), override_text);
  auto sit = sources->find(skey);
  if (sit == sources->end()) {
    std::string text;
    std::set<std::string> seen{"prelude.cl"};
    expand_includes(embedded_kernel_source("prelude.cl"), text, seen);
    seen.insert(std::string(file));
    expand_includes(src ? *src : embedded_kernel_source(file), text, seen);
    sit = sources->emplace(skey, std::move(text)).first;
  }
  const std::string& text = sit->second;
  lock.unlock();
  // The runtime cache makes concurrent builds of one key compile once. PRISM_CPU tells sources
  // whether the device is a CPU (e.g. prelude.cl's prism_exp16 only pays off there). CPU builds
  // also take -w: on hosts PoCL targets without AVX-512, clang notes that each 16-wide vector
  // passed to or returned from PoCL's builtins "changes the ABI" (-Wpsabi, which PoCL accepts no
  // option to silence alone), and PoCL prints their count to the process's stderr ("52 warnings
  // generated."), into the CLI's progress bar and the user's output.
  const char* cpu = ctx.get_device().is_cpu() ? " -DPRISM_CPU=1 -w" : " -DPRISM_CPU=0";
  program p = program::build(ctx, text, options + cpu);
  kernel k = p.get_kernel(kernel_name);
  lock.lock();
  kernels->emplace(kkey, k);
  return k;
}

const char* x86_dot_defines(const device& d) {
  if (!d.is_cpu()) return "";
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  if (vnni) return " -DPRISM_X86_VNNI=1";
#endif
  return "";
}

std::string dtype_defines(std::string_view prefix, dtype t) {
  const char* kind = "f32";
  switch (t) {
    case dtype::f32:
      kind = "f32";
      break;
    case dtype::f16:
      kind = "f16";
      break;
    case dtype::bf16:
      kind = "bf16";
      break;
    case dtype::i32:
      kind = "i32";
      break;
    case dtype::i64:
      kind = "i64";
      break;
    case dtype::boolean:
      kind = "b8";
      break;
    case dtype::q8_0:
    case dtype::q4_0:
    case dtype::q4_1:
      kind = "q";  // block formats: only the quantized GEMM kernels read them, with their own defines
      break;
  }
  std::string p(prefix);
  return "-D" + p + "_K=" + kind + " -D" + p + "_IS_INT=" + (is_floating(t) ? "0" : "1") + " ";
}

}  // namespace prism
