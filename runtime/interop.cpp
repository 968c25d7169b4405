// SPDX-License-Identifier: Apache-2.0
// interop::native(...): raw OpenCL handles of prism objects, for CLBlast and user OpenCL code.
#include "prism/interop/opencl.hpp"

#include "runtime/impl.hpp"

namespace prism::interop {

cl::Device native(const device& d) {
  return cl::Device(d.get_impl().id, true);
}
cl::Context native(const context& c) {
  return cl::Context(c.get_impl().ctx, true);
}
cl::CommandQueue native(const queue& q) {
  return cl::CommandQueue(q.get_impl().lanes.front().cq, true);
}
cl_mem native(const detail::buffer_impl& b) {
  return b.mem;
}
cl_mem native(const detail::usm_alloc& a) {
  return a.mem;
}
cl::Kernel native(const kernel& k) {
  return cl::Kernel(k.get_impl().k, true);
}
cl::Program native(const program& p) {
  return cl::Program(p.get_impl().prog, true);
}
cl_event native(const event& e) {
  return e.get_impl() ? e.get_impl()->ev : nullptr;
}

}  // namespace prism::interop
