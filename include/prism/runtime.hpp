// SPDX-License-Identifier: Apache-2.0
// The SYCL-style runtime: devices, selectors, contexts, queues, buffers, USM, programs, events.
#pragma once

#include "prism/error.hpp"
#include "prism/runtime/buffer.hpp"
#include "prism/runtime/context.hpp"
#include "prism/runtime/device.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/graph.hpp"
#include "prism/runtime/handler.hpp"
#include "prism/runtime/idle_poll.hpp"
#include "prism/runtime/program.hpp"
#include "prism/runtime/queue.hpp"
#include "prism/runtime/range.hpp"
#include "prism/runtime/selector.hpp"
#include "prism/runtime/usm.hpp"
#include "prism/version.hpp"
