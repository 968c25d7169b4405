// SPDX-License-Identifier: Apache-2.0
// The op suite, generated from the op registry: every op x dtype x shape class against its
// host reference, every config of the vendor search spaces on a few shapes, and generic
// bad-input checks. One process, one shared queue, programs reused through the runtime cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "ops_test_util.hpp"

namespace prism::test {

queue& shared_queue() {
  static queue* q = new queue(default_selector_v);  // never destroyed: no OpenCL from static dtors
  return *q;
}

tune_space suite_space(const op_descriptor& d) {
  // The dispatcher's space on this device (vendors/*/vendor.yaml match, PRISM_VENDOR, and a
  // PRISM_VENDOR_PATH profile's own tune_configs.yaml), so the suite checks what dispatch runs.
  return dispatch::tune_space_for(d, shared_queue().get_device());
}

void run_and_compare(const op_descriptor& d, op_call& c, const kernel_config& cfg, bool small_integers) {
  queue& q = shared_queue();
  auto expected = compute_reference(q, d, c);  // before the op: in-place ops overwrite inputs
  enqueue_opencl(q, d, c, cfg);
  q.wait_and_throw();
  std::vector<host_tensor> got;
  for (const auto& o : c.outputs) got.push_back(read_host(q, o));
  comparison cmp = compare_outputs(d, c, expected, got, small_integers);
  EXPECT_TRUE(cmp.ok) << describe_call(d, c) << " config " << cfg.str() << ": " << cmp.message;
}

namespace {

std::string sanitize(std::string s) {
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

class case_test : public ::testing::Test {
 public:
  case_test(const op_descriptor* d, test_case tc, dtype t, bool ints)
      : d_(d), tc_(std::move(tc)), t_(t), ints_(ints) {}
  void TestBody() override {
    queue& q = shared_queue();
    sample_options o;
    o.type = t_;
    o.seed = std::hash<std::string>{}(d_->name + tc_.shape_class) ^ static_cast<std::uint64_t>(t_);
    o.small_integers = ints_;
    op_call c = tc_.make(q, o);
    run_and_compare(*d_, c, suite_space(*d_).defaults, ints_);
  }

 private:
  const op_descriptor* d_;
  test_case tc_;
  dtype t_;
  bool ints_;
};

class config_test : public ::testing::Test {
 public:
  config_test(const op_descriptor* d, std::string shape, kernel_config cfg)
      : d_(d), shape_(std::move(shape)), cfg_(std::move(cfg)) {}
  void TestBody() override {
    queue& q = shared_queue();
    sample_options o;
    o.type = d_->dtypes.front();
    o.seed = 7;
    op_call c = d_->sample(q, shape_key::parse(shape_), o);
    // A config may decline a shape (a stated limit, e.g. work-group size against the head dim):
    // skipped with its reasons when every implementation declines, run otherwise.
    std::vector<std::string> refusals;
    if (!select_implementation(*d_, q.get_device(), c, cfg_, &refusals)) {
      std::string why;
      for (const auto& r : refusals) why += "; " + r;
      GTEST_SKIP() << cfg_.str() << " declines " << shape_ << why;
    }
    run_and_compare(*d_, c, cfg_, false);
  }

 private:
  const op_descriptor* d_;
  std::string shape_;
  kernel_config cfg_;
};

/// Bad input, generically for every op: a wrong output dtype must be refused before anything
/// is enqueued, naming the op and the output.
class wrong_output_test : public ::testing::Test {
 public:
  explicit wrong_output_test(const op_descriptor* d) : d_(d) {}
  void TestBody() override {
    queue& q = shared_queue();
    sample_options o;
    o.type = d_->dtypes.front();
    auto cases = d_->test_cases(o.type);
    auto it = std::find_if(cases.begin(), cases.end(),
                           [](const test_case& t) { return t.shape_class.find("odd") != std::string::npos; });
    if (it == cases.end()) it = cases.begin();
    op_call c = it->make(q, o);
    int target = -1;
    for (std::size_t i = 0; i < c.outputs.size(); ++i)
      if (c.outputs[i].defined() && d_->outputs[i].in_place_of.empty()) target = static_cast<int>(i);
    if (target < 0) GTEST_SKIP() << "every output of " << d_->name << " is an in-place input";
    tensor& out = c.outputs[target];
    dtype other = out.type() == dtype::i32 ? dtype::f16 : dtype::i32;
    tensor orig = out;
    out = tensor::empty(q, orig.shape(), other);
    if (d_->infer_outputs(c)[target].type == other) {
      // The op converts into whatever output dtype it gets (copy): a wrong shape instead.
      dims s = orig.shape();
      if (s.empty())
        s.push_back(2);
      else
        s[s.size() - 1] += 1;
      out = tensor::empty(q, s, orig.type());
    }
    expect_refused(q, *d_, c, {"ops::" + d_->name, "'" + d_->outputs[target].name + "'"});
  }

 private:
  const op_descriptor* d_;
};

}  // namespace

void register_suite() {
  // generic's space and the device's (the dispatcher's); PRISM_OPS_ALL_VENDORS adds every shipped one.
  const bool all_vendors = std::getenv("PRISM_OPS_ALL_VENDORS") != nullptr;
  const std::vector<std::string> shipped = all_vendors ? std::vector<std::string>{"generic", "pocl", "nvidia"}
                                                       : std::vector<std::string>{"generic"};
  for (const op_descriptor* d : op_registry::instance().all()) {
    const std::string suite = "ops_" + sanitize(d->family);
    if (d->test_cases) {
      for (dtype t : d->dtypes) {
        for (const auto& tc : d->test_cases(t)) {
          std::string name = sanitize(d->name) + "__" + dtype_name(t) + "__" + sanitize(tc.shape_class);
          ::testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                  [=]() -> ::testing::Test* { return new case_test(d, tc, t, false); });
          // Exact comparison on small-integer inputs for accumulating / exact ops (f32 only).
          if (d->exact_on_small_integers && t == dtype::f32 &&
              tc.shape_class.find("odd") != std::string::npos) {
            ::testing::RegisterTest(suite.c_str(), (name + "__small_ints").c_str(), nullptr, nullptr,
                                    __FILE__, __LINE__,
                                    [=]() -> ::testing::Test* { return new case_test(d, tc, t, true); });
          }
        }
      }
      ::testing::RegisterTest(("errors_" + sanitize(d->family)).c_str(),
                              (sanitize(d->name) + "__wrong_output_dtype").c_str(), nullptr, nullptr,
                              __FILE__, __LINE__,
                              [=]() -> ::testing::Test* { return new wrong_output_test(d); });
    }
    if (d->sample) {
      std::set<std::string> seen;
      std::vector<tune_space> spaces;
      for (const auto& v : shipped) spaces.push_back(dispatch::vendor_tune_space(*d, v));
      spaces.push_back(suite_space(*d));
      for (const auto& space : spaces) {
        for (const auto& cfg : space.configs) {
          if (!seen.insert(cfg.str()).second) continue;
          for (const auto& shape : d->config_test_shapes) {
            std::string name = sanitize(d->name) + "__" + sanitize(cfg.str()) + "__" + sanitize(shape);
            ::testing::RegisterTest(("configs_" + sanitize(d->family)).c_str(), name.c_str(), nullptr,
                                    nullptr, __FILE__, __LINE__,
                                    [=]() -> ::testing::Test* { return new config_test(d, shape, cfg); });
          }
        }
      }
    }
  }
}

}  // namespace prism::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    prism::test::register_suite();
  } catch (const prism::error& e) {  // no device, a bad PRISM_DEVICE / PRISM_VENDOR, bad data files
    std::fprintf(stderr, "prism_op_suite: %s\n", e.what());
    return 2;
  }
  return RUN_ALL_TESTS();
}
