// SPDX-License-Identifier: Apache-2.0
// Selectors and PRISM_DEVICE specs: which device a default queue gets, and why none matched.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include "runtime/env.hpp"
#include "runtime/impl.hpp"
#include "runtime/log.hpp"

namespace prism {
namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}
bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool term_matches(const device& d, const std::string& word) {
  if (word == "cpu") return d.type() == device_type::cpu;
  if (word == "gpu") return d.type() == device_type::gpu;
  if (word == "accelerator" || word == "acc") return d.type() == device_type::accelerator;
  auto& im = d.get_impl();
  for (const std::string* field : {&im.name, &im.vendor, &im.platform_name, &im.platform_vendor})
    if (lower(*field).find(word) != std::string::npos) return true;
  // AMD's platform and vendor strings say "Advanced Micro Devices".
  if (word == "amd") return lower(im.vendor).find("advanced micro devices") != std::string::npos;
  return false;
}

std::string device_listing(const std::vector<device>& devices) {
  if (devices.empty()) return "  (no OpenCL devices: is an ICD such as pocl-opencl-icd installed?)\n";
  std::string s;
  for (auto& d : devices)
    s += "  " + std::to_string(d.global_index()) + ": [" + device_type_name(d.type()) + "] " + d.name() +
         " (" + d.platform_name() + ", " + d.vendor() + ")\n";
  return s;
}

/// PRISM_DEVICE's matches, parsed once; nullopt when unset. Holds the error when it matched nothing.
struct env_filter {
  std::optional<std::vector<device>> devices;
  std::exception_ptr failure;
};
const env_filter& prism_device_filter() {
  static const auto* f = [] {
    auto* r = new env_filter;
    auto spec = env::get("PRISM_DEVICE");
    if (!spec || trim(*spec).empty()) return r;
    try {
      r->devices = devices_matching(*spec);
      log::get("runtime")->info("PRISM_DEVICE='{}' selects {}", *spec, r->devices->front().name());
    } catch (...) {
      r->failure = std::current_exception();
    }
    return r;
  }();
  return *f;
}
}  // namespace

const char* device_spec_syntax() noexcept {
  return "PRISM_DEVICE is a comma-separated list of terms, best first. A term is: cpu | gpu | accelerator; "
         "a platform or vendor word (pocl, nvidia, intel, amd, ...); a case-insensitive substring of the "
         "device "
         "name; any of those followed by :N to take the N-th match (e.g. nvidia:0, gpu:1); or a bare number "
         "N, "
         "the device's global index as `prism devices` lists it.";
}

std::vector<device> devices_matching(const std::string& spec, std::string_view source) {
  const auto& all = device::get_devices();
  std::vector<device> out;
  auto add = [&](const device& d) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  const std::string& rest = spec;
  std::size_t start = 0;
  while (start <= rest.size()) {
    auto comma = rest.find(',', start);
    std::string term =
        lower(trim(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    start = comma == std::string::npos ? rest.size() + 1 : comma + 1;
    if (term.empty()) continue;
    // A device index or :N; a number too large for any device list is an error, not "stoull".
    auto index_of = [&](const std::string& digits) -> std::size_t {
      std::size_t v = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v > 1'000'000)
        throw error(errc::invalid_argument, std::string(source),
                    "term '" + term + "' of '" + spec + "': the index '" + digits +
                        "' must be a whole number in [0, 1000000]; " + std::to_string(all.size()) +
                        " devices are present.\n" + device_spec_syntax());
      return v;
    };
    if (all_digits(term)) {
      auto index = index_of(term);
      if (index < all.size()) add(all[index]);
      continue;
    }
    std::optional<std::size_t> nth;
    if (auto colon = term.rfind(':'); colon != std::string::npos) {
      std::string n = term.substr(colon + 1);
      if (!all_digits(n))
        throw error(errc::invalid_argument, std::string(source),
                    "term '" + term + "' of '" + spec + "' has a non-numeric index after ':'.\n" +
                        device_spec_syntax());
      nth = index_of(n);
      term = term.substr(0, colon);
    }
    std::size_t seen = 0;
    for (auto& d : all) {
      if (!term_matches(d, term)) continue;
      if (!nth || seen == *nth) add(d);
      ++seen;
    }
  }
  if (out.empty())
    throw error(errc::device_not_found, std::string(source),
                "no device matches '" + spec + "'. Available devices:\n" + device_listing(all) +
                    device_spec_syntax());
  return out;
}

int default_selector_v(const device& d) {
  const auto& f = prism_device_filter();
  if (f.failure) return -1;
  if (f.devices) {
    auto it = std::find(f.devices->begin(), f.devices->end(), d);
    if (it == f.devices->end()) return -1;
    return 10000 - static_cast<int>(it - f.devices->begin());
  }
  switch (d.type()) {
    case device_type::gpu:
      return 300;
    case device_type::accelerator:
      return 200;
    case device_type::cpu:
      return 100;
    default:
      return 50;
  }
}

int cpu_selector_v(const device& d) {
  return d.type() == device_type::cpu ? 100 : -1;
}
int gpu_selector_v(const device& d) {
  return d.type() == device_type::gpu ? 100 : -1;
}

device select_device(const device_selector& selector) {
  if (!selector) throw error(errc::invalid_argument, "select_device", "empty selector");
  // The default selector's own error says what PRISM_DEVICE asked for and what exists.
  if (auto* fn = selector.target<int (*)(const device&)>(); fn && *fn == &default_selector_v) {
    if (auto& f = prism_device_filter(); f.failure) std::rethrow_exception(f.failure);
  }
  const auto& all = device::get_devices();
  const device* best = nullptr;
  int best_score = -1;
  for (auto& d : all) {
    int s = selector(d);
    if (s >= 0 && s > best_score) {
      best = &d;
      best_score = s;
    }
  }
  if (!best)
    throw error(errc::device_not_found, "select_device",
                "the selector accepted none of the available devices:\n" + device_listing(all) +
                    "(PRISM_DEVICE=" + env::get_or("PRISM_DEVICE", "<unset>") + ")\n" + device_spec_syntax());
  return *best;
}

}  // namespace prism
