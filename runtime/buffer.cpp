// SPDX-License-Identifier: Apache-2.0
// Buffers: allocation, blocking host transfers, host maps and write-back at destruction. Device
// commands on buffers are ordered in queue.cpp from the dependency state kept here.
#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "runtime/env.hpp"
#include "runtime/impl.hpp"
#include "runtime/log.hpp"
#include "runtime/sync.hpp"

namespace prism {

const char* access_mode_name(access_mode m) noexcept {
  switch (m) {
    case access_mode::read:
      return "read";
    case access_mode::write:
      return "write";
    case access_mode::read_write:
      return "read_write";
    case access_mode::discard_write:
      return "discard_write";
    case access_mode::discard_read_write:
      return "discard_read_write";
  }
  return "unknown";
}

namespace detail {

void check_allocation(const device& dev, std::size_t bytes, const char* operation) {
  auto& d = dev.get_impl();
  if (d.max_alloc && bytes > d.max_alloc)
    throw error(errc::out_of_memory, operation,
                "cannot allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ") on " +
                    d.name + ": the device's largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) is " +
                    std::to_string(d.max_alloc) + " bytes (" + format_bytes(d.max_alloc) + ")");
  if (d.global_mem && bytes > d.global_mem)
    throw error(errc::out_of_memory, operation,
                "cannot allocate " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ") on " +
                    d.name + ": the device has " + std::to_string(d.global_mem) + " bytes (" +
                    format_bytes(d.global_mem) + ") of global memory");
}

namespace {
std::atomic<std::uint64_t> buffer_serials{1};
}  // namespace

std::uint64_t next_buffer_serial() noexcept {
  return buffer_serials.load(std::memory_order_relaxed);
}

namespace {

// PRISM_HUGE_PAGES: on (the default: buffers of 32 MiB and more), off, or the smallest buffer in
// bytes that gets them. Read per allocation (the value itself is cached by env). 32 MiB is where
// glibc stops reusing freed memory (its largest mmap threshold), so smaller, short-lived buffers
// keep the allocator's reuse and only the big ones (weights, long KV caches) change pages.
std::size_t huge_page_threshold() {
  constexpr std::size_t fallback = std::size_t{32} << 20;
  const auto v = env::get("PRISM_HUGE_PAGES");
  if (!v || v->empty() || *v == "1" || *v == "on" || *v == "true" || *v == "yes") return fallback;
  if (*v == "0" || *v == "off" || *v == "false" || *v == "no") return SIZE_MAX;
  const bool digits = v->find_first_not_of("0123456789") == std::string::npos && v->size() <= 18;
  if (!digits || std::stoll(*v) <= 0)
    throw error(errc::config_error, "PRISM_HUGE_PAGES",
                "'" + *v + "' is not valid (valid: on, off, or the smallest buffer in bytes that gets 2 MiB pages)");
  return static_cast<std::size_t>(std::stoll(*v));
}

std::shared_ptr<void> huge_page_memory(const device& dev, std::size_t bytes) {
  constexpr std::size_t huge = std::size_t{2} << 20;
  if (dev.type() != device_type::cpu || bytes < huge_page_threshold()) return nullptr;
  // Streaming reads over 2 MiB pages ran 20-25% faster than over 4 KiB ones on the 2-core PoCL
  // machine (fewer TLB misses and page walks; benchmarks/RESULTS.md, "Issue 14, session 10"),
  // and decode streams every weight once per token. Where the kernel gives no transparent huge
  // pages (THP "never"), the pages stay ordinary ones and nothing else changes.
  const std::size_t size = (bytes + huge - 1) / huge * huge;
  void* raw = ::mmap(nullptr, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;  // the device allocates instead
  auto* base = static_cast<char*>(raw);
  auto* aligned = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(base) + huge - 1) & ~(huge - 1));
  if (aligned > base) ::munmap(base, static_cast<std::size_t>(aligned - base));
  const std::size_t tail = static_cast<std::size_t>(base + size + huge - (aligned + size));
  if (tail > 0) ::munmap(aligned + size, tail);
  // Fault the range in as small pages, then have the kernel collapse it into huge ones
  // (MADV_COLLAPSE, Linux 6.1): on the dev VM that took 0.45-0.5 s for 514 MB in most loads (6 s
  // in some), where faulting huge pages directly (MADV_HUGEPAGE at first touch) took 2.4-9.1 s:
  // the VM's host takes free memory back, and huge first touches pay for it most. Where
  // collapsing is not available, MADV_HUGEPAGE lets khugepaged collapse the range later.
  constexpr int populate_write = 23, collapse = 25;  // MADV_POPULATE_WRITE (5.14), MADV_COLLAPSE (6.1)
  if (::madvise(aligned, size, populate_write) != 0)
    for (std::size_t at = 0; at < size; at += 4096) aligned[at] = 0;
  if (::madvise(aligned, size, collapse) != 0) ::madvise(aligned, size, MADV_HUGEPAGE);
  return std::shared_ptr<void>(aligned, [size](void* p) { ::munmap(p, size); });
}

}  // namespace

std::shared_ptr<buffer_impl> make_buffer(const context& ctx, std::size_t bytes, void* host, bool copy_in,
                                         bool write_back) {
  auto& c = ctx.get_impl();
  check_allocation(c.dev, bytes, "buffer");
  auto b = std::make_shared<buffer_impl>();
  b->ctx = ctx;
  b->bytes = bytes;
  b->serial = buffer_serials.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0) return b;
  if (auto pages = huge_page_memory(c.dev, bytes)) {
    // prism's own pages, handed to the CPU device: it reads and writes them in place.
    if (copy_in && host) std::memcpy(pages.get(), host, bytes);
    cl_int st = CL_SUCCESS;
    b->mem = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, pages.get(), &st);
    check_cl(st, "clCreateBuffer", std::to_string(bytes) + " bytes of huge-page memory on " + c.dev.name());
    b->host_owner = std::move(pages);
    if (write_back) b->write_back = host;
    return b;
  }
  cl_mem_flags flags = CL_MEM_READ_WRITE;
  if (copy_in && host) flags |= CL_MEM_COPY_HOST_PTR;
  // On CPU devices host-allocated memory makes maps zero copy.
  if (c.dev.type() == device_type::cpu) flags |= CL_MEM_ALLOC_HOST_PTR;
  cl_int st = CL_SUCCESS;
  b->mem = clCreateBuffer(c.ctx, flags, bytes, copy_in ? host : nullptr, &st);
  check_cl(st, "clCreateBuffer", std::to_string(bytes) + " bytes on " + c.dev.name());
  if (write_back) b->write_back = host;
  return b;
}

std::shared_ptr<buffer_impl> wrap_host_memory(const context& ctx, void* host, std::size_t bytes,
                                              std::shared_ptr<const void> owner) {
  auto& c = ctx.get_impl();
  if (!host && bytes > 0)
    throw error(
        errc::invalid_argument, "buffer::wrap_host",
        "a null host pointer for " + std::to_string(bytes) + " bytes (valid: memory of at least that size)");
  check_allocation(c.dev, bytes, "buffer::wrap_host");
  auto b = std::make_shared<buffer_impl>();
  b->ctx = ctx;
  b->bytes = bytes;
  b->host_memory = host;
  b->host_owner = std::move(owner);
  b->serial = buffer_serials.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0) return b;
  cl_int st = CL_SUCCESS;
  b->mem = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, &st);
  check_cl(st, "clCreateBuffer",
           "CL_MEM_USE_HOST_PTR over " + std::to_string(bytes) + " bytes of host memory on " + c.dev.name());
  return b;
}

void* buffer_host_memory(const buffer_impl& b) noexcept {
  return b.host_memory;
}

std::shared_ptr<buffer_impl> make_host_backed_buffer(const context& ctx, void* host, std::size_t bytes,
                                                     std::shared_ptr<const void> owner) {
  if (ctx.get_impl().dev.type() != device_type::cpu) return nullptr;
  return wrap_host_memory(ctx, host, bytes, std::move(owner));
}

std::size_t buffer_bytes(const buffer_impl& b) noexcept {
  return b.bytes;
}
const context& buffer_context(const buffer_impl& b) noexcept {
  return b.ctx;
}
void buffer_set_write_back(buffer_impl& b, void* host) noexcept {
  std::lock_guard lock(b.mutex);
  b.write_back = host;
}

namespace {
void check_range(const buffer_impl& b, std::size_t offset, std::size_t bytes, const char* op) {
  if (offset > b.bytes || bytes > b.bytes - offset)
    throw error(errc::invalid_argument, op,
                "range [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                    ") bytes is outside the buffer of " + std::to_string(b.bytes) + " bytes");
}
}  // namespace

void buffer_read(buffer_impl& b, std::size_t offset, std::size_t bytes, void* dst) {
  check_range(b, offset, bytes, "buffer::read");
  check_not_recording("buffer::read", "a blocking read");
  if (bytes == 0) return;
  std::lock_guard lock(b.mutex);
  wait_list wl;
  for (auto& w : b.writers)
    if (w.begin < offset + bytes && offset < w.end) wl.add(w.ev.get());
  cl_int st = clEnqueueReadBuffer(b.ctx.get_impl().get_io_queue(), b.mem, CL_TRUE, offset, bytes, dst,
                                  wl.size(), wl.data(), nullptr);
  check_cl(st, "clEnqueueReadBuffer", std::to_string(bytes) + " bytes at offset " + std::to_string(offset));
}

void buffer_write(buffer_impl& b, std::size_t offset, std::size_t bytes, const void* src) {
  check_range(b, offset, bytes, "buffer::write");
  check_not_recording("buffer::write", "a blocking write");
  if (bytes == 0) return;
  std::lock_guard lock(b.mutex);
  wait_list wl;
  for (auto& w : b.writers) wl.add(w.ev.get());
  for (auto& r : b.readers) wl.add(r.ev.get());
  cl_int st = clEnqueueWriteBuffer(b.ctx.get_impl().get_io_queue(), b.mem, CL_TRUE, offset, bytes, src,
                                   wl.size(), wl.data(), nullptr);
  check_cl(st, "clEnqueueWriteBuffer", std::to_string(bytes) + " bytes at offset " + std::to_string(offset));
  // Blocking: every earlier user is done, and this write too.
  clear_users(b);
}

void* buffer_map(buffer_impl& b, access_mode mode) {
  check_not_recording("host_accessor", "a host accessor (a blocking map)");
  if (b.bytes == 0) return nullptr;
  std::lock_guard lock(b.mutex);
  wait_list wl;
  for (auto& w : b.writers) wl.add(w.ev.get());
  cl_map_flags flags = CL_MAP_READ;
  if (mode != access_mode::read) {
    for (auto& r : b.readers) wl.add(r.ev.get());
    flags = (mode == access_mode::discard_write || mode == access_mode::discard_read_write)
                ? CL_MAP_WRITE_INVALIDATE_REGION
                : CL_MAP_READ | CL_MAP_WRITE;
  }
  cl_int st = CL_SUCCESS;
  void* p = clEnqueueMapBuffer(b.ctx.get_impl().get_io_queue(), b.mem, CL_TRUE, flags, 0, b.bytes, wl.size(),
                               wl.data(), nullptr, &st);
  check_cl(st, "clEnqueueMapBuffer", std::to_string(b.bytes) + " bytes for " + access_mode_name(mode));
  b.mappings.push_back({p, mode});
  return p;
}

void buffer_unmap(buffer_impl& b, void* ptr) {
  std::lock_guard lock(b.mutex);
  access_mode mode = access_mode::read;
  bool found = false;
  for (auto it = b.mappings.begin(); it != b.mappings.end(); ++it)
    if (it->ptr == ptr) {
      mode = it->mode;
      b.mappings.erase(it);
      found = true;
      break;
    }
  if (!found) {
    log::get("runtime")->error("buffer_unmap: pointer {} is not mapped", ptr);
    return;
  }
  cl_event ev = nullptr;
  cl_int st = clEnqueueUnmapMemObject(b.ctx.get_impl().get_io_queue(), b.mem, ptr, 0, nullptr, &ev);
  if (st != CL_SUCCESS) {  // called from host_accessor's destructor: must not throw
    log::get("runtime")->error("clEnqueueUnmapMemObject failed: {}", cl_error_name(st));
    return;
  }
  auto e = std::make_shared<event::impl>();
  e->ev = ev;
  clFlush(b.ctx.get_impl().get_io_queue());
  if (mode == access_mode::read)
    add_reader(b, std::move(e), 0, whole_end(b));
  else
    set_writer(b, std::move(e), 0, whole_end(b));
}

void add_reader(buffer_impl& b, std::shared_ptr<event::impl> reader, std::size_t begin, std::size_t end) {
  // A later reader on the same in-order lane finishes after the earlier ones, so a writer needs
  // to wait for it alone where it covers their bytes; finished readers go too. Keeps the list
  // about as short as the lanes (times the disjoint ranges) in use.
  auto& rs = b.readers;
  const bool prune = rs.size() > 8;
  std::erase_if(rs, [&](const access_segment& r) {
    return (reader->lane_id != 0 && r.ev->lane_id == reader->lane_id && begin <= r.begin && r.end <= end) ||
           (prune && status_of(r.ev->ev) == event_status::complete);
  });
  rs.push_back({begin, end, std::move(reader)});
}

namespace {
/// Cuts [begin, end) out of each segment: covered ones go, overlapping ones keep their outside
/// part (a segment around the range splits in two).
void cut(std::vector<access_segment>& v, std::size_t begin, std::size_t end) {
  const std::size_t n = v.size();
  bool removed = false;
  for (std::size_t i = 0; i < n; ++i) {
    auto& s = v[i];
    if (s.end <= begin || end <= s.begin) continue;
    if (s.begin < begin && end < s.end) {
      access_segment right{end, s.end, s.ev};
      s.end = begin;
      v.push_back(std::move(right));  // may reallocate: `s` is not used after this
    } else if (s.begin < begin) {
      s.end = begin;
    } else if (end < s.end) {
      s.begin = end;
    } else {
      s.end = s.begin;  // covered: removed below
      removed = true;
    }
  }
  if (removed) std::erase_if(v, [](const access_segment& s) { return s.begin == s.end; });
}
}  // namespace

void set_writer(buffer_impl& b, std::shared_ptr<event::impl> writer, std::size_t begin, std::size_t end) {
  if (begin == 0 && end >= whole_end(b)) {  // the common whole-buffer case: no search
    b.readers.clear();
    b.writers.clear();
  } else {
    cut(b.readers, begin, end);
    cut(b.writers, begin, end);
    // Many disjoint writers (a KV cache written row by row): drop the finished ones.
    if (b.writers.size() > 16)
      std::erase_if(b.writers,
                    [](const access_segment& s) { return status_of(s.ev->ev) == event_status::complete; });
  }
  b.writers.push_back({begin, end, std::move(writer)});
}

void clear_users(buffer_impl& b) {
  b.writers.clear();
  b.readers.clear();
}

void handler_require(handler& h, const std::shared_ptr<buffer_impl>& b, access_mode mode, std::size_t offset,
                     std::size_t bytes) {
  if (!b)
    throw error(errc::invalid_argument, "accessor", "accessor of an empty (default-constructed) buffer");
  if (offset > b->bytes || bytes > b->bytes - offset)
    throw error(errc::invalid_argument, "accessor",
                "range [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                    ") bytes is outside the buffer of " + std::to_string(b->bytes) + " bytes");
  // The whole of an empty buffer is [0, 1), so uses of it still order; an empty range elsewhere
  // conflicts with nothing.
  std::size_t end = offset + bytes;
  if (b->bytes == 0) end = 1;
  h.require(b, mode, offset, end);
}

buffer_impl::~buffer_impl() {
  if (!mem) return;
  if (host_owner) {
    // The device may still read or write the foreign memory: wait for every user before the
    // owner (a member, destroyed after this body) can free it.
    wait_list wl;
    for (auto& w : writers) wl.add(w.ev.get());
    for (auto& r : readers) wl.add(r.ev.get());
    if (wl.size() > 0) {
      cl_int st = clWaitForEvents(wl.size(), wl.data());
      if (st != CL_SUCCESS)
        log::get("runtime")->error("waiting for the users of a wrapped host buffer failed: {}",
                                   cl_error_name(st));
    }
  }
  if (write_back) {
    try {
      wait_list wl;
      for (auto& w : writers) wl.add(w.ev.get());
      cl_int st = clEnqueueReadBuffer(ctx.get_impl().get_io_queue(), mem, CL_TRUE, 0, bytes, write_back,
                                      wl.size(), wl.data(), nullptr);
      if (st != CL_SUCCESS)
        log::get("runtime")->error("buffer write-back of {} bytes failed: {}", bytes, cl_error_name(st));
    } catch (const std::exception& e) {
      log::get("runtime")->error("buffer write-back failed: {}", e.what());
    }
  }
  clReleaseMemObject(mem);
}

}  // namespace detail
}  // namespace prism
