// SPDX-License-Identifier: Apache-2.0
#include "kernels/ptx_forms.hpp"

#include <cctype>
#include <exception>
#include <mutex>

#include <fmt/format.h>

#include "prism/runtime/context.hpp"
#include "prism/runtime/program.hpp"
#include "runtime/log.hpp"

namespace prism {

namespace {

// One tiny kernel per form (with its build options); a form is usable when its kernel builds.
const char* const ptx_probe_sources[][3] = {
    {"mma.m16n8k8.tf32",
     "__kernel void probe(__global float* o, __global const uint* i) { float c0 = 0, c1 = 0, c2 = 0, c3 = 0;"
     " asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
     "{%8,%9},"
     " {%0,%1,%2,%3};\" : \"+f\"(c0), \"+f\"(c1), \"+f\"(c2), \"+f\"(c3) : \"r\"(i[0]), \"r\"(i[1]), "
     "\"r\"(i[2]),"
     " \"r\"(i[3]), \"r\"(i[4]), \"r\"(i[5])); o[get_global_id(0)] = c0 + c1 + c2 + c3; }",
     ""},
    {"mma.m16n8k16.f16",
     "__kernel void probe(__global float* o, __global const uint* i) { float c0 = 0, c1 = 0, c2 = 0, c3 = 0;"
     " asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
     "{%8,%9},"
     " {%0,%1,%2,%3};\" : \"+f\"(c0), \"+f\"(c1), \"+f\"(c2), \"+f\"(c3) : \"r\"(i[0]), \"r\"(i[1]), "
     "\"r\"(i[2]),"
     " \"r\"(i[3]), \"r\"(i[4]), \"r\"(i[5])); o[get_global_id(0)] = c0 + c1 + c2 + c3; }",
     ""},
    {"mma.m16n8k16.bf16",
     "__kernel void probe(__global float* o, __global const uint* i) { float c0 = 0, c1 = 0, c2 = 0, c3 = 0;"
     " asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
     "{%8,%9},"
     " {%0,%1,%2,%3};\" : \"+f\"(c0), \"+f\"(c1), \"+f\"(c2), \"+f\"(c3) : \"r\"(i[0]), \"r\"(i[1]), "
     "\"r\"(i[2]),"
     " \"r\"(i[3]), \"r\"(i[4]), \"r\"(i[5])); o[get_global_id(0)] = c0 + c1 + c2 + c3; }",
     ""},
    {"ldmatrix",
     "__kernel void probe(__global uint* o) { __local uint s[128]; s[get_local_id(0)] = get_local_id(0);"
     " barrier(CLK_LOCAL_MEM_FENCE); uint r0, r1, r2, r3; asm "
     "volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16"
     " {%0,%1,%2,%3}, [%4];\" : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : "
     "\"r\"((uint)(size_t)&s[(get_local_id(0)"
     " % 32) * 4])); o[get_global_id(0)] = r0 + r1 + r2 + r3; }",
     ""},
    {"dp4a",
     "__kernel void probe(__global int* o, __global const uint* i) { int r; asm volatile(\"dp4a.s32.s32 %0, "
     "%1, %2, %3;\" : \"=r\"(r) : \"r\"(i[0]), \"r\"(i[1]), \"r\"(0)); o[get_global_id(0)] = r; }",
     ""},
    {"cp.async",
     "__kernel void probe(__global const uint* i, __global uint* o) { __local uint s[512];"
     " asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, 16;\" :: "
     "\"r\"((uint)(size_t)&s[get_local_id(0) * 4]),"
     " \"l\"((ulong)(i + get_local_id(0) * 4)) : \"memory\"); asm volatile(\"cp.async.commit_group;\" ::: "
     "\"memory\");"
     " asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\"); barrier(CLK_LOCAL_MEM_FENCE);"
     " o[get_global_id(0)] = s[get_local_id(0)]; }",
     ""},
    {"shfl",
     "__kernel void probe(__global float* o) { float x = o[get_global_id(0)], y; asm "
     "volatile(\"shfl.sync.bfly.b32 "
     "%0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(y) : \"f\"(x), \"r\"(1)); o[get_global_id(0)] = y; }",
     ""},
    // A release/acquire fence and a relaxed load at GPU scope, and a back-off for spinning groups
    // (sm_70+).
    {"fence",
     "__kernel void probe(__global int* o) { int v; asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\");"
     " asm volatile(\"ld.relaxed.gpu.global.s32 %0, [%1];\" : \"=r\"(v) : \"l\"(o) : \"memory\");"
     " asm volatile(\"nanosleep.u32 %0;\" :: \"r\"((uint)v)); o[get_global_id(0)] = v; }",
     ""},
    // Hopper's warpgroup mma (sm_90a): the driver compiles for sm_90, so the kernel goes through
    // program::build's -prism-ptx-target=sm_90a, with its wgmma lines written as marked comments.
    {"wgmma", R"(#define L(s) ")" PRISM_PTX_TARGET_MARKER R"(" s "\n"
__kernel void probe(__global float* o, __global const ulong* i) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile(L("wgmma.fence.sync.aligned;") ::: "memory");
  asm volatile("{\n" L(".reg .pred p;") L("setp.ne.b32 p, %6, 0;")
               L("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;") "}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(i[0]), "l"(i[1]), "r"(1));
  asm volatile(L("wgmma.commit_group.sync.aligned;") ::: "memory");
  asm volatile(L("wgmma.wait_group.sync.aligned 0;") ::: "memory");
  o[get_global_id(0)] = d0 + d1 + d2 + d3;
})",
     "-prism-ptx-target=sm_90a"},
};

}  // namespace

const ptx_forms& probe_ptx(const device& dev) {
  static std::mutex mu;
  // Keyed by the device's index in the process's one device list: enqueues on the hot path ask.
  static auto* cache = new std::map<std::size_t, ptx_forms>();  // never destroyed: no OpenCL at exit
  const std::size_t key = dev.global_index();
  std::lock_guard lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  ptx_forms f;
  auto lower_name = dev.platform_name();
  for (auto& ch : lower_name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower_name.find("nvidia") == std::string::npos) {
    f.not_nvidia = fmt::format("inline PTX needs NVIDIA's OpenCL platform; device '{}' is on '{}'",
                               dev.name(), dev.platform_name());
  } else {
    const context ctx = context::get_default(dev);
    for (const auto& [form, src, options] : ptx_probe_sources) {
      try {
        program::build(ctx, src, options);
      } catch (const std::exception& e) {
        std::string what = e.what();
        if (what.size() > 300) what = what.substr(0, 300) + "...";
        f.rejected[form] = what;
        log::get("kernels")->warn("{} (driver {}) rejects inline PTX {}; kernels that use it fall back: {}",
                                  dev.name(), dev.driver_version(), form, what);
      }
    }
  }
  return cache->emplace(key, std::move(f)).first->second;
}

}  // namespace prism
