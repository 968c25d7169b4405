// SPDX-License-Identifier: Apache-2.0
// Hostile input to the tuning_db parsers (issue 15): shape sets are bounded in size, YAML nodes
// and product expansion; `db import` checks every field's type and range and names it; a
// device index too large for any list is a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "prism/error.hpp"
#include "prism/runtime.hpp"
#include "tests/tuning_db/test_util.hpp"

using namespace prism::tuning;
using namespace prism::tuning::test;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const prism::error& e) {
    return e.what();
  }
  return "no error";
}

std::string import_error(const std::string& result_fields, const std::string& top = R"("version":1)") {
  database db(make_temp_dir("import") + "/t.db");
  std::string doc = R"({"format":"prism-tuning",)" + top + R"(,"results":[{"device":"aaaaaaaaaaaaaaaa",)" +
                    R"("op":"matmul","dtype":"f32","shape":"m=1,n=2,k=3","backend":"opencl","p50_ns":10)" +
                    result_fields + "}]}";
  return error_of([&] { db.import_json(doc); });
}

}  // namespace

TEST(ParseLimits, ShapeSetAliasBombIsRefusedQuickly) {
  std::string text = "vars:\n  a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  for (int i = 1; i < 9; ++i) {
    text += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  text += "shapes:\n  - {op: matmul, m: $a8, n: 1, k: 1}\n";
  auto start = std::chrono::steady_clock::now();
  auto what = error_of([&] { parse_shape_set(text, "bomb.yaml"); });
  EXPECT_NE(what.find("bomb.yaml: shapes[0] (matmul).m: the file expands to more than 1000000 YAML nodes"),
            std::string::npos)
      << what;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(ParseLimits, ShapeSetProductIsBoundedBeforeExpansion) {
  std::string list = "[";
  for (int i = 1; i <= 100; ++i) list += (i > 1 ? ", " : "") + std::to_string(i);
  list += "]";
  auto what = error_of([&] {
    parse_shape_set("shapes:\n  - {op: matmul, m: " + list + ", n: " + list + ", k: " + list + "}\n",
                    "p.yaml");
  });
  EXPECT_NE(what.find("p.yaml: shapes[0] (matmul): expands to more than 100000 shapes (1 dtypes x 100 m x "
                      "100 n x 100 k)"),
            std::string::npos)
      << what;
  // A product within the limit expands.
  auto set =
      parse_shape_set("shapes:\n  - {op: matmul, m: " + list + ", n: " + list + ", k: 1}\n", "ok.yaml");
  EXPECT_EQ(set.entries.size(), 10000u);
}

TEST(ParseLimits, ShapeSetFilesMustBeRegularAndSmall) {
  auto dir = make_temp_dir("shapefiles");
  auto what = error_of([] { load_shape_set("/dev/zero"); });
  EXPECT_NE(what.find("/dev/zero is not a regular file"), std::string::npos) << what;
  what = error_of([&] { load_shape_set(dir); });
  EXPECT_NE(what.find("is not a regular file"), std::string::npos) << what;
  auto big = dir + "/big.yaml";
  { std::ofstream(big) << "# " << std::string(5u << 20, 'x') << "\n"; }
  what = error_of([&] { load_shape_set(big); });
  EXPECT_NE(what.find("shape sets may be at most 4194304 bytes"), std::string::npos) << what;
  what = error_of([] { parse_shape_set("shapes:\n  - {op: matmul, [1, 2]: 3}\n", "key.yaml"); });
  EXPECT_NE(what.find("key.yaml: shapes[0] (matmul) (line 2): expected a component name"), std::string::npos)
      << what;
}

TEST(ParseLimits, ImportChecksTypesAndRanges) {
  auto what = import_error(R"(,"tuned_at":1e300)");
  EXPECT_NE(what.find("results[0]: field 'tuned_at' must be an integer number of unix seconds in [0, "
                      "253402300799], got 1e+300"),
            std::string::npos)
      << what;
  what = import_error(R"(,"tuned_at":-5)");
  EXPECT_NE(what.find("'tuned_at'"), std::string::npos) << what;
  what = import_error("", R"("version":18446744073709551615)");
  EXPECT_NE(what.find("field 'version' must be an integer in [1, 1]"), std::string::npos) << what;
  EXPECT_NE(what.find("18446744073709551615"), std::string::npos) << what;
  what = import_error("", R"("version":-1)");
  EXPECT_NE(what.find("field 'version'"), std::string::npos) << what;
  what = import_error(R"(,"default_ns":-3)");
  EXPECT_NE(what.find("results[0]: field 'default_ns' must be in [0, 1e18] nanoseconds"), std::string::npos)
      << what;
  what = import_error(R"(,"config":7)");
  EXPECT_NE(what.find("results[0]: field 'config' must be a string, got number 7"), std::string::npos)
      << what;

  database db(make_temp_dir("importdev") + "/t.db");
  what = error_of([&] {
    db.import_json(
        R"({"format":"prism-tuning","version":1,"devices":[{"fingerprint":"aa","name":5}],"results":[]})");
  });
  EXPECT_NE(what.find("devices[0]: field 'name' must be a string, got number 5"), std::string::npos) << what;
  what = error_of([&] { db.import_json(R"({"format":7,"version":1,"results":[]})"); });
  EXPECT_NE(what.find("field 'format' must be \"prism-tuning\""), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(db.path())) << "a refused import created the database";
}

TEST(ParseLimits, DeviceIndexOutOfRangeIsNamed) {
  auto what = error_of([] { prism::devices_matching("99999999999999999999999", "--device"); });
  EXPECT_NE(what.find("must be a whole number in [0, 1000000]"), std::string::npos) << what;
  what = error_of([] { prism::devices_matching("pocl:99999999999999999999999", "--device"); });
  EXPECT_NE(what.find("'99999999999999999999999'"), std::string::npos) << what;
}
