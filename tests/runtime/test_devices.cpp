// SPDX-License-Identifier: Apache-2.0
// Device discovery, fingerprints, selectors, PRISM_DEVICE specs, errors, logging and hashing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "prism/runtime.hpp"
#include "runtime/env.hpp"
#include "runtime/hash.hpp"
#include "runtime/log.hpp"
#include "runtime/paths.hpp"

using namespace prism;

TEST(Devices, EnumeratesWithSaneQueries) {
  auto devices = device::get_devices();
  ASSERT_FALSE(devices.empty()) << "the test machine has no OpenCL device";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto& d = devices[i];
    EXPECT_EQ(d.global_index(), i);
    EXPECT_FALSE(d.name().empty());
    EXPECT_FALSE(d.vendor().empty());
    EXPECT_FALSE(d.platform_name().empty());
    EXPECT_EQ(d.opencl_version().rfind("OpenCL ", 0), 0u) << d.opencl_version();
    EXPECT_EQ(d.opencl_c_version().rfind("OpenCL C ", 0), 0u) << d.opencl_c_version();
    EXPECT_GT(d.compute_units(), 0u);
    EXPECT_GT(d.global_mem_size(), 0u);
    EXPECT_GT(d.local_mem_size(), 0u);
    // A cache smaller than the memory behind it; CPU drivers (PoCL) report the host's LLC.
    EXPECT_LT(d.global_mem_cache_size(), d.global_mem_size());
    if (d.is_cpu()) EXPECT_GT(d.global_mem_cache_size(), 0u);
    EXPECT_GT(d.max_mem_alloc_size(), 0u);
    EXPECT_LE(d.max_mem_alloc_size(), d.global_mem_size());
    EXPECT_GT(d.max_work_group_size(), 0u);
    EXPECT_GT(d.preferred_vector_width(scalar_kind::float_), 0u);
    EXPECT_FALSE(d.extensions().empty());
    EXPECT_TRUE(d.has_extension(d.extensions().front()));
    EXPECT_FALSE(d.has_extension("cl_prism_not_an_extension"));
    EXPECT_EQ(d.has_fp64(), d.has_extension("cl_khr_fp64") || d.has_fp64());
    EXPECT_EQ(d.has_fp16(), d.has_extension("cl_khr_fp16"));
    EXPECT_TRUE(d == devices[i]);
  }
}

TEST(Devices, FingerprintIsStableAndReadable) {
  auto a = device::get_devices();
  auto b = device::get_devices();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto& fp = a[i].fingerprint();
    EXPECT_EQ(fp.text, b[i].fingerprint().text);
    EXPECT_TRUE(std::regex_match(fp.hash, std::regex("[0-9a-f]{16}"))) << fp.hash;
    EXPECT_EQ(fp.hash, hash::hex(fp.text));
    EXPECT_NE(fp.text.find(a[i].name()), std::string::npos);
    EXPECT_NE(fp.text.find(a[i].platform_name()), std::string::npos);
    EXPECT_NE(fp.text.find(a[i].driver_version()), std::string::npos);
    EXPECT_NE(fp.text.find(std::to_string(a[i].compute_units()) + " CU"), std::string::npos);
  }
}

TEST(Selectors, CpuGpuAndCustom) {
  auto devices = device::get_devices();
  bool has_cpu = false, has_gpu = false;
  for (auto& d : devices) {
    has_cpu |= d.is_cpu();
    has_gpu |= d.is_gpu();
  }
  if (has_cpu)
    EXPECT_TRUE(select_device(cpu_selector_v).is_cpu());
  else
    EXPECT_THROW(select_device(cpu_selector_v), error);
  if (has_gpu) {
    EXPECT_TRUE(select_device(gpu_selector_v).is_gpu());
  } else {
    try {
      select_device(gpu_selector_v);
      FAIL() << "gpu_selector_v found a GPU on a machine without one";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::device_not_found);
      EXPECT_NE(std::string(e.what()).find(devices.front().name()), std::string::npos) << e.what();
    }
  }
  // A user scoring callable: prefer the last device.
  auto last = select_device([&](const device& d) { return static_cast<int>(d.global_index()); });
  EXPECT_EQ(last, devices.back());
  EXPECT_NO_THROW(select_device());
}

TEST(Selectors, RejectingEverythingListsDevicesAndSyntax) {
  try {
    select_device([](const device&) { return -1; });
    FAIL() << "expected device_not_found";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::device_not_found);
    std::string what = e.what();
    for (auto& d : device::get_devices()) EXPECT_NE(what.find(d.name()), std::string::npos) << what;
    EXPECT_NE(what.find("PRISM_DEVICE is a comma-separated list"), std::string::npos) << what;
  }
}

TEST(DeviceSpec, TermsMatchTypeIndexVendorAndName) {
  auto devices = device::get_devices();
  auto& first = devices.front();
  EXPECT_EQ(devices_matching("0").front(), first);
  EXPECT_EQ(devices_matching(std::string(device_type_name(first.type()))).front().type(), first.type());
  EXPECT_EQ(devices_matching(std::string(device_type_name(first.type())) + ":0").size(), 1u);
  // A case-insensitive substring of the name.
  std::string upper = first.name().substr(0, 6);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(devices_matching(upper).front().name().substr(0, 6), first.name().substr(0, 6));
  if (first.platform_name() == "Portable Computing Language")
    EXPECT_EQ(devices_matching("pocl").front(), first);
  // Order follows the spec; unknown terms alongside known ones are ignored.
  auto both = devices_matching("nothing-here, 0");
  EXPECT_EQ(both.front(), first);
}

TEST(DeviceSpec, NoMatchListsEveryDeviceAndTheSyntax) {
  try {
    devices_matching("definitely-not-a-device");
    FAIL() << "expected device_not_found";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::device_not_found);
    std::string what = e.what();
    EXPECT_NE(what.find("definitely-not-a-device"), std::string::npos);
    for (auto& d : device::get_devices()) EXPECT_NE(what.find(d.name()), std::string::npos) << what;
    EXPECT_NE(what.find(device_spec_syntax()), std::string::npos);
  }
  try {
    devices_matching("cpu:first");
    FAIL() << "expected invalid_argument";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW(devices_matching("999"), error);
  try {
    devices_matching("999", "--device");
    FAIL() << "expected device_not_found";
  } catch (const error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--device: no device matches '999'", 0), 0u) << e.what();
  }
}

// Run by CTest with PRISM_DEVICE=cpu (see CMakeLists.txt).
TEST(EnvFilter, SelectsCpu) {
  const char* spec = std::getenv("PRISM_DEVICE");
  if (!spec || std::string(spec) != "cpu") GTEST_SKIP() << "runs with PRISM_DEVICE=cpu";
  queue q;
  EXPECT_TRUE(q.get_device().is_cpu());
  EXPECT_TRUE(select_device(default_selector_v).is_cpu());
}

// Run by CTest with PRISM_DEVICE=no-such-device-xyz.
TEST(EnvFilter, NoMatchListsDevices) {
  const char* spec = std::getenv("PRISM_DEVICE");
  if (!spec || std::string(spec) != "no-such-device-xyz")
    GTEST_SKIP() << "runs with PRISM_DEVICE=no-such-device-xyz";
  try {
    queue q;
    FAIL() << "a queue was created although PRISM_DEVICE matches nothing";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::device_not_found);
    std::string what = e.what();
    EXPECT_NE(what.find("no-such-device-xyz"), std::string::npos) << what;
    for (auto& d : device::get_devices()) EXPECT_NE(what.find(d.name()), std::string::npos) << what;
    EXPECT_NE(what.find("PRISM_DEVICE is a comma-separated list"), std::string::npos) << what;
  }
}

TEST(Errors, CarryCodeOperationAndClName) {
  error e(errc::opencl_error, "clEnqueueNDRangeKernel", "it broke", -5);  // CL_OUT_OF_RESOURCES
  EXPECT_EQ(e.code(), errc::opencl_error);
  EXPECT_EQ(e.operation(), "clEnqueueNDRangeKernel");
  EXPECT_EQ(e.cl_error_name(), "CL_OUT_OF_RESOURCES");
  EXPECT_STREQ(e.what(), "clEnqueueNDRangeKernel: it broke [CL_OUT_OF_RESOURCES]");
  EXPECT_EQ(cl_error_name(0), "");
  EXPECT_EQ(cl_error_name(-12345), "CL_UNKNOWN_ERROR(-12345)");
  EXPECT_STREQ(errc_name(errc::build_failure), "build_failure");
  error plain(errc::invalid_argument, "op", "msg");
  EXPECT_STREQ(plain.what(), "op: msg");
  const std::exception& base = plain;
  EXPECT_STREQ(base.what(), "op: msg");
}

TEST(Support, LoggerEnvHashAndDataDir) {
  auto a = prism::log::get("runtime");
  EXPECT_EQ(a, prism::log::get("runtime"));
  EXPECT_NE(a, prism::log::get("tests"));
  EXPECT_EQ(a->name(), "runtime");
  EXPECT_EQ(hash::hex(""), "cbf29ce484222325");
  EXPECT_EQ(hash::hex("a"), "af63dc4c8601ec8c");
  env::override_for_testing("PRISM_TEST_VALUE", "42");
  EXPECT_EQ(env::get_int("PRISM_TEST_VALUE", 0), 42);
  env::override_for_testing("PRISM_TEST_VALUE", "on");
  EXPECT_TRUE(env::get_bool("PRISM_TEST_VALUE", false));
  env::override_for_testing("PRISM_TEST_VALUE", "forty");
  EXPECT_THROW(env::get_int("PRISM_TEST_VALUE", 0), error);
  env::override_for_testing("PRISM_TEST_VALUE", std::nullopt);
  EXPECT_EQ(env::get_or("PRISM_TEST_VALUE", "fallback"), "fallback");
  // The build tree runs from the source tree's data, unless PRISM_DATA_DIR names other data (as
  // the GPU machine's bundle does).
  if (auto over = env::get("PRISM_DATA_DIR"); over && !over->empty())
    EXPECT_TRUE(std::filesystem::equivalent(data_dir(), *over));
  else if (std::filesystem::is_directory(std::filesystem::path(PRISM_TEST_SOURCE_DIR) / "vendors"))
    EXPECT_TRUE(std::filesystem::equivalent(data_dir(), PRISM_TEST_SOURCE_DIR));
}
