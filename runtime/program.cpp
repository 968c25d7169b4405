// SPDX-License-Identifier: Apache-2.0
// Program builds through a process-wide cache of shared futures keyed by (context, device,
// source hash, options): concurrent requests for one key compile once; failures are cached too.
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <unordered_map>

#include "runtime/env.hpp"
#include "runtime/hash.hpp"
#include "runtime/impl.hpp"
#include "runtime/log.hpp"

namespace prism {
namespace {
struct program_cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<program::impl>>> entries;
  std::atomic<std::uint64_t> hits{0}, builds{0}, failures{0};
};
thread_local std::uint64_t build_ns_on_this_thread = 0;
program_cache& cache() {
  static auto* c = new program_cache;  // never destroyed: holds cl_programs
  return *c;
}

std::string build_log(cl_program p, cl_device_id d) {
  std::size_t n = 0;
  clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n) clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Splits every `-prism-ptx-target=T` token (see program::build) off the driver's options: a
// program's own options and PRISM_CL_OPTIONS may both name one, and a token left behind would
// reach the driver as an option it does not know. Two different targets are an error naming both.
std::string take_ptx_target(std::string& options, const std::string& source_hash) {
  static constexpr std::string_view token = "-prism-ptx-target=";
  std::string target;
  for (std::size_t at; (at = options.find(token)) != std::string::npos;) {
    std::size_t end = options.find(' ', at);
    if (end == std::string::npos) end = options.size();
    std::string t = options.substr(at + token.size(), end - at - token.size());
    options.erase(at, end - at);
    if (t.empty())
      throw error(errc::invalid_argument, "program::build",
                  "program " + source_hash + ": -prism-ptx-target= names no target; give one, e.g. sm_90a");
    if (!target.empty() && t != target)
      throw error(errc::invalid_argument, "program::build",
                  "program " + source_hash + ": -prism-ptx-target is given as both " + target + " and " + t +
                      " (PRISM_CL_OPTIONS joins every build's own options); give one target");
    target = std::move(t);
  }
  return target;
}

// The program's binary for its one device, as the driver returns it (NVIDIA: PTX text).
std::string program_binary(cl_program prog) {
  std::size_t size = 0;
  detail::check_cl(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr),
                   "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  std::string bin(size, '\0');
  unsigned char* bytes = reinterpret_cast<unsigned char*>(bin.data());
  detail::check_cl(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bytes, &bytes, nullptr),
                   "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  return bin;
}

// The PTX of an NVIDIA build with the marked lines made live and its .target set to `target`;
// throws naming what is missing.
std::string retarget_ptx(cl_program prog, const std::string& target, const std::string& source_hash) {
  std::string ptx = program_binary(prog);
  ptx.resize(std::strlen(ptx.c_str()));
  const std::size_t t = ptx.find("\n.target ");
  if (t == std::string::npos)
    throw error(errc::build_failure, "program::build",
                "program " + source_hash + ": -prism-ptx-target=" + target +
                    " needs a driver whose program binary is PTX text (NVIDIA's OpenCL); this one has no "
                    ".target line");
  std::size_t name = t + 9, name_end = ptx.find_first_of(", \n", name);
  ptx.replace(name, name_end - name, target);
  std::string out;
  out.reserve(ptx.size());
  static constexpr std::string_view marker = PRISM_PTX_TARGET_MARKER;
  for (std::size_t pos = 0; pos < ptx.size();) {
    const std::size_t m = ptx.find(marker, pos);
    if (m == std::string::npos) {
      out.append(ptx, pos, std::string::npos);
      break;
    }
    out.append(ptx, pos, m - pos);
    pos = m + marker.size();
  }
  return out;
}

// PRISM_DUMP_PROGRAMS=DIR: each built program's binary (on NVIDIA's OpenCL the PTX text that
// ptxas compiled) to DIR/<source hash>.bin, its options and source beside it (.options, .cl), so
// that a developer can read what the driver's front end made of a kernel. A folder that cannot be
// written is an error naming it: a dump asked for is never skipped silently.
void dump_program(cl_program prog, std::string_view source, const std::string& options,
                  const std::string& source_hash) {
  const auto dir = env::get("PRISM_DUMP_PROGRAMS");
  if (!dir || dir->empty()) return;
  const std::string bin = program_binary(prog);
  const std::string base = *dir + "/" + source_hash;
  for (const auto& [ext, text] :
       {std::pair<const char*, std::string_view>{".bin", bin}, {".options", options}, {".cl", source}}) {
    std::ofstream out(base + ext, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out)
      throw error(
          errc::io_error, "PRISM_DUMP_PROGRAMS",
          "cannot write '" + base + ext + "'; PRISM_DUMP_PROGRAMS must name an existing, writable folder");
  }
}

std::shared_ptr<program::impl> compile(const context& ctx, std::string_view source,
                                       const std::string& options, const std::string& source_hash) {
  auto& c = ctx.get_impl();
  auto logger = log::get("runtime");
  auto p = std::make_shared<program::impl>();
  p->ctx = ctx;
  p->options = options;
  p->source_hash = source_hash;
  std::string driver_options = options;
  const std::string ptx_target = take_ptx_target(driver_options, source_hash);
  const char* src = source.data();
  std::size_t len = source.size();
  cl_int st = CL_SUCCESS;
  p->prog = clCreateProgramWithSource(c.ctx, 1, &src, &len, &st);
  detail::check_cl(st, "clCreateProgramWithSource");
  cl_device_id dev = c.dev.get_impl().id;
  auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](const char* stage) {
    std::string log = build_log(p->prog, dev);
    logger->warn("build of program {} failed on {} ({}, {})", source_hash, c.dev.name(), stage,
                 cl_error_name(st));
    throw error(errc::build_failure, stage,
                "program " + source_hash + " failed to build for " + c.dev.name() + " with options '" +
                    options + "'; compiler log:\n" + (log.empty() ? std::string("(empty)") : log),
                st);
  };
  st = clBuildProgram(p->prog, 1, &dev, driver_options.c_str(), nullptr, nullptr);
  if (st != CL_SUCCESS) fail("clBuildProgram");
  if (!ptx_target.empty()) {
    // The first build carried the marked lines as PTX comments; the second builds its PTX with
    // them live for the requested target.
    const std::string ptx = retarget_ptx(p->prog, ptx_target, source_hash);
    clReleaseProgram(p->prog);
    p->prog = nullptr;
    const auto* bin = reinterpret_cast<const unsigned char*>(ptx.c_str());
    const std::size_t bin_len = ptx.size() + 1;
    cl_int bin_status = CL_SUCCESS;
    p->prog = clCreateProgramWithBinary(c.ctx, 1, &dev, &bin_len, &bin, &bin_status, &st);
    detail::check_cl(st, "clCreateProgramWithBinary");
    st = clBuildProgram(p->prog, 1, &dev, driver_options.c_str(), nullptr, nullptr);
    if (st != CL_SUCCESS) fail("clBuildProgram (PTX retargeted)");
  }
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  dump_program(p->prog, source, options, source_hash);
  logger->debug("built program {} for {} in {:.1f} ms (options '{}')", source_hash, c.dev.name(), ms,
                options);
  if (logger->should_log(spdlog::level::debug)) {
    // What the compiler said about a good build (NVIDIA's -cl-nv-verbose: ptxas registers, spills).
    const std::string log = build_log(p->prog, dev);
    if (!log.empty()) logger->debug("compiler log of program {}:\n{}", source_hash, log);
  }
  return p;
}
}  // namespace

program program::build(const context& ctx, std::string_view source, std::string_view options) {
  auto& c = ctx.get_impl();
  std::string opts(options);
  // PRISM_CL_OPTIONS goes after every program's own options (a developer's switch: for example
  // -cl-nv-verbose, whose report the debug log shows); it is part of the cache key.
  if (const auto extra = env::get("PRISM_CL_OPTIONS"); extra && !extra->empty())
    opts += (opts.empty() ? "" : " ") + *extra;
  std::uint64_t h = hash::fnv1a64(source);
  h = hash::fnv1a64("\n--options--\n", h);
  h = hash::fnv1a64(opts, h);
  std::string source_hash = hash::to_hex(h);
  std::string key = std::to_string(c.id) + "/" +
                    std::to_string(reinterpret_cast<std::uintptr_t>(c.dev.get_impl().id)) + "/" +
                    hash::to_hex(hash::fnv1a64(source)) + "/" + opts;
  auto& pc = cache();
  std::promise<std::shared_ptr<impl>> promise;
  std::shared_future<std::shared_ptr<impl>> future;
  bool builder = false;
  {
    std::lock_guard lock(pc.mutex);
    auto it = pc.entries.find(key);
    if (it != pc.entries.end()) {
      future = it->second;
      ++pc.hits;
    } else {
      future = promise.get_future().share();
      pc.entries.emplace(key, future);
      builder = true;
    }
  }
  const bool waits = builder || future.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  const auto t0 = waits ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  struct count_wait {
    bool on;
    std::chrono::steady_clock::time_point t0;
    ~count_wait() {
      if (on)
        build_ns_on_this_thread += static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                .count());
    }
  } counted{waits, t0};
  if (builder) {
    ++pc.builds;
    try {
      promise.set_value(compile(ctx, source, opts, source_hash));
    } catch (...) {
      ++pc.failures;
      promise.set_exception(std::current_exception());
    }
  }
  return program(future.get());  // rethrows a (cached) build failure
}

std::uint64_t program_build_ns_on_this_thread() noexcept {
  return build_ns_on_this_thread;
}

program_cache_stats program_cache_statistics() {
  auto& pc = cache();
  return {pc.hits.load(), pc.builds.load(), pc.failures.load()};
}

program::impl::~impl() {
  kernels.clear();
  if (prog) clReleaseProgram(prog);
}

program::impl& program::get_impl() const {
  if (!impl_)
    throw error(errc::invalid_argument, "prism::program", "use of a default-constructed (empty) program");
  return *impl_;
}
const std::string& program::options() const {
  return get_impl().options;
}
const std::string& program::source_hash() const {
  return get_impl().source_hash;
}

kernel program::get_kernel(const std::string& name) const {
  auto& p = get_impl();
  std::lock_guard lock(p.kernels_mutex);
  auto it = p.kernels.find(name);
  if (it != p.kernels.end()) return kernel(it->second);
  cl_int st = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p.prog, name.c_str(), &st);
  if (st == CL_INVALID_KERNEL_NAME) {
    std::size_t n = 0;
    clGetProgramInfo(p.prog, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n);
    std::string names(n, '\0');
    if (n) clGetProgramInfo(p.prog, CL_PROGRAM_KERNEL_NAMES, n, names.data(), nullptr);
    while (!names.empty() && names.back() == '\0') names.pop_back();
    throw error(errc::not_found, "program::get_kernel",
                "program " + p.source_hash + " has no kernel '" + name + "'; it has: " + names, st);
  }
  detail::check_cl(st, "clCreateKernel", name);
  auto ki = std::make_shared<kernel::impl>();
  ki->prog = impl_;
  ki->k = k;
  ki->name = name;
  clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof ki->num_args, &ki->num_args, nullptr);
  p.kernels.emplace(name, ki);
  return kernel(ki);
}

kernel::impl::~impl() {
  if (k) clReleaseKernel(k);
}

kernel::impl& kernel::get_impl() const {
  if (!impl_)
    throw error(errc::invalid_argument, "prism::kernel", "use of a default-constructed (empty) kernel");
  return *impl_;
}
const std::string& kernel::name() const {
  return get_impl().name;
}

namespace {
template <class T>
T work_group_info(const kernel::impl& k, cl_kernel_work_group_info what) {
  T v{};
  detail::check_cl(
      clGetKernelWorkGroupInfo(k.k, k.prog->ctx.get_impl().dev.get_impl().id, what, sizeof v, &v, nullptr),
      "clGetKernelWorkGroupInfo", k.name);
  return v;
}
}  // namespace

std::size_t kernel::max_work_group_size() const {
  return work_group_info<std::size_t>(get_impl(), CL_KERNEL_WORK_GROUP_SIZE);
}
std::uint64_t kernel::local_mem_size() const {
  return work_group_info<cl_ulong>(get_impl(), CL_KERNEL_LOCAL_MEM_SIZE);
}
std::size_t kernel::preferred_work_group_multiple() const {
  return work_group_info<std::size_t>(get_impl(), CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE);
}

}  // namespace prism
