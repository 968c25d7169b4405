// SPDX-License-Identifier: Apache-2.0
// Embedded OpenCL C sources (kernels/cl/*.cl, compiled into the library by a CMake step) and the
// kernel build helper every implementation uses: prelude + op source + defines, through the
// runtime's program cache.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "prism/runtime/context.hpp"
#include "prism/runtime/program.hpp"

namespace prism {

/// The text of kernels/cl/<file> as embedded at build time. Throws errc::not_found listing the
/// embedded files.
std::string_view embedded_kernel_source(std::string_view file);
/// Names of every embedded file ("elementwise.cl", ...), sorted.
std::vector<std::string> embedded_kernel_files();

/// A kernel from `file` (or its override text) built with `options` for the context's device.
/// Every program is prefixed with kernels/cl/prelude.cl (dtype load/store macros, see there);
/// an override replaces only the op's file. Kernels are cached per (program, name).
kernel build_kernel(const context& ctx, std::string_view file, source_override src,
                    const std::string& options, const std::string& kernel_name);

/// Build options that bind a storage type to a macro family of the prelude: for prefix "A" and
/// f16 gives "-DA_F16 ..." so the source can use LOAD_A(p, i) / STORE_A(p, i, v) / A_T.
std::string dtype_defines(std::string_view prefix, dtype t);

/// For a CPU device on an x86 host whose CPU has AVX512-VNNI: " -DPRISM_X86_VNNI=1"
/// (gemm_quant.cl's q4 walk, decode's and prefill's tiles, then takes vpdpbusd); "" otherwise. PoCL
/// names its CPU target by the CPU model its LLVM recognizes (skylake-avx512 on a Sapphire
/// Rapids-class VM), so the host's own feature bits are what tells; a CPU device computes on the
/// host's CPU.
const char* x86_dot_defines(const device& d);

}  // namespace prism
