// SPDX-License-Identifier: Apache-2.0
// wait_list: the cl_events a command must wait for, built on the stack. Adding an event from
// another OpenCL queue flushes that queue, so the wait cannot stall on unsubmitted work.
#pragma once

#include <vector>

#include "runtime/impl.hpp"

namespace prism::detail {

class wait_list {
 public:
  /// Adds `e` unless it is null, complete-by-construction, already present or ordered by
  /// `same_lane` (the in-order lane the command goes to).
  void add(const event::impl* e, std::uint64_t same_lane = 0) {
    if (!e || !e->ev) return;
    if (same_lane != 0 && e->lane_id == same_lane) return;
    add_raw(e->ev);
  }
  void add_raw(cl_event ev) {
    for (std::size_t i = 0; i < size_; ++i)
      if (data()[i] == ev) return;
    cl_int s = CL_COMPLETE;
    clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
    if (s == CL_COMPLETE) return;
    if (s > CL_RUNNING) {  // queued or submitted: make sure its queue hands it to the device
      cl_command_queue q = nullptr;
      if (clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, nullptr) == CL_SUCCESS && q) clFlush(q);
    }
    if (size_ < inline_count) {
      inline_[size_++] = ev;
    } else {
      if (more_.empty()) more_.assign(inline_, inline_ + inline_count);
      more_.push_back(ev);
      ++size_;
    }
  }
  cl_uint size() const { return static_cast<cl_uint>(size_); }
  const cl_event* data() const {
    if (size_ == 0) return nullptr;
    return size_ <= inline_count ? inline_ : more_.data();
  }

 private:
  static constexpr std::size_t inline_count = 8;
  cl_event inline_[inline_count] = {};
  std::size_t size_ = 0;
  std::vector<cl_event> more_;
};

}  // namespace prism::detail
