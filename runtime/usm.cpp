// SPDX-License-Identifier: Apache-2.0
// USM-style allocations: device memory backed by a cl_mem, or coarse-grain SVM where offered.
#include "runtime/impl.hpp"
#include "runtime/log.hpp"

namespace prism::detail {

std::shared_ptr<usm_alloc> usm_allocate(const context& ctx, std::size_t bytes, usm_kind kind) {
  auto& c = ctx.get_impl();
  const char* op = kind == usm_kind::svm ? "malloc_svm" : "malloc_device";
  if (kind == usm_kind::svm && !c.dev.has_svm())
    throw error(
        errc::unsupported, op,
        c.dev.name() + " has no coarse-grain buffer SVM (CL_DEVICE_SVM_CAPABILITIES); use malloc_device");
  check_allocation(c.dev, bytes, op);
  auto a = std::make_shared<usm_alloc>();
  a->ctx = ctx;
  a->kind = kind;
  a->bytes = bytes;
  if (bytes == 0) return a;
  if (kind == usm_kind::svm) {
    a->svm = clSVMAlloc(c.ctx, CL_MEM_READ_WRITE, bytes, 0);
    if (!a->svm)
      throw error(errc::out_of_memory, "clSVMAlloc",
                  "could not allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) +
                      ") of SVM on " + c.dev.name());
  } else {
    cl_int st = CL_SUCCESS;
    a->mem = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, bytes, nullptr, &st);
    check_cl(st, "clCreateBuffer", std::to_string(bytes) + " bytes for malloc_device on " + c.dev.name());
  }
  return a;
}

std::size_t usm_bytes(const usm_alloc& a) noexcept {
  return a.bytes;
}
void* usm_svm_pointer(const usm_alloc& a) noexcept {
  return a.svm;
}

usm_alloc::~usm_alloc() {
  if (mem) clReleaseMemObject(mem);
  if (svm) clSVMFree(ctx.get_impl().ctx, svm);
}

}  // namespace prism::detail
