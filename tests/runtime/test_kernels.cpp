// SPDX-License-Identifier: Apache-2.0
// User kernels with and without a local size, local memory arguments, argument checks, build
// errors carrying the compiler log, and the program cache compiling once under concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "prism/runtime.hpp"
#include "runtime/env.hpp"
#include "tests/runtime/test_support.hpp"

using namespace prism;
using prism::test::default_queue;
using prism::test::test_program;

TEST(Kernels, LaunchWithAndWithoutLocalSize) {
  auto& q = default_queue();
  auto k = test_program(q.get_context()).get_kernel("group_info");
  buffer<int> b(q, 256);
  q.submit([&](handler& h) {
    accessor<int> a(b, h, discard_write);
    h.parallel_for(nd_range(range<1>(256), range<1>(16)), k, a);
  });
  auto with_local = b.read();
  for (int v : with_local) ASSERT_EQ(v, 16);
  q.submit([&](handler& h) {
    accessor<int> a(b, h, discard_write);
    h.parallel_for(range<1>(256), k, a);
  });
  auto driver_local = b.read();
  EXPECT_GE(driver_local[0], 1);
  EXPECT_EQ(256 % driver_local[0], 0) << "the driver's local size divides the global size";
}

TEST(Kernels, LocalMemoryArgument) {
  auto& q = default_queue();
  auto k = test_program(q.get_context()).get_kernel("local_reverse");
  std::vector<int> host(64);
  for (int i = 0; i < 64; ++i) host[i] = i;
  buffer<int> in(q, static_cast<const int*>(host.data()), 64), out(q, 64);
  q.submit([&](handler& h) {
    accessor<int> a(in, h, read_only);
    accessor<int> b(out, h, discard_write);
    h.parallel_for(nd_range(range<1>(64), range<1>(8)), k, a, b, local_memory{8 * sizeof(int)});
  });
  auto got = out.read();
  EXPECT_EQ(got[0], 7);
  EXPECT_EQ(got[7], 0);
  EXPECT_EQ(got[8], 15);
}

// buffer_if passes a buffer the launch does not read as NULL (the kernel sees a null pointer), and
// the buffer it reads as itself, eagerly and from a recorded graph's replay.
TEST(Kernels, BufferIfPassesUnreadBuffersAsNull) {
  auto& q = default_queue();
  auto k = test_program(q.get_context()).get_kernel("null_args");
  buffer<int> a(q, 1), b(q, 1), out(q, 3);
  a.write(std::vector<int>{11});
  b.write(std::vector<int>{22});
  auto launch = [&](bool use_a, bool use_b) {
    q.submit([&](handler& h) {
      accessor<int> A(a, h, read_only), B(b, h, read_only), O(out, h, discard_write);
      h.parallel_for(range<1>(1), k, buffer_if<int>{A, use_a}, buffer_if<int>{B, use_b}, O);
    });
  };
  launch(true, false);
  EXPECT_EQ(out.read(), (std::vector<int>{2, 11, -1}));
  launch(false, true);
  EXPECT_EQ(out.read(), (std::vector<int>{1, -1, 22}));
  launch(true, true);
  EXPECT_EQ(out.read(), (std::vector<int>{0, 11, 22}));
  graph g = graph::record(q, [&] { launch(false, true); });
  out.write(std::vector<int>{7, 7, 7});
  g.replay(q);
  EXPECT_EQ(out.read(), (std::vector<int>{1, -1, 22}));
}

TEST(Kernels, ArgumentAndShapeErrorsAreReported) {
  auto& q = default_queue();
  auto prog = test_program(q.get_context());
  auto k = prog.get_kernel("add_const");
  EXPECT_EQ(k.name(), "add_const");
  EXPECT_GT(k.max_work_group_size(), 0u);
  EXPECT_GT(k.preferred_work_group_multiple(), 0u);
  buffer<int> b(q, 8);
  try {
    q.submit([&](handler& h) {
      accessor<int> a(b, h, read_write);
      h.parallel_for(range<1>(8), k, a);
    });
    FAIL() << "launch with too few arguments";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("takes 3 arguments"), std::string::npos) << e.what();
  }
  try {
    prog.get_kernel("no_such_kernel");
    FAIL() << "unknown kernel name";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
    EXPECT_NE(std::string(e.what()).find("add_const"), std::string::npos)
        << "lists the kernels: " << e.what();
  }
  // Two commands in one group are a user error, not a crash.
  EXPECT_THROW(q.submit([&](handler& h) {
    h.host_task([] {});
    h.host_task([] {});
  }),
               error);
  // The queue still works after the errors.
  q.fill(b, 1);
  EXPECT_EQ(b.read(), std::vector<int>(8, 1));
}

TEST(Programs, BuildErrorCarriesTheCompilerLog) {
  auto& q = default_queue();
  // Unique per run, so the first attempt below is a real build even under --gtest_repeat.
  static int run = 0;
  std::string broken = "kernel void broken(global int* a) { a[0] = prism_undeclared_identifier; }\n// run " +
                       std::to_string(run++);
  auto before = program_cache_statistics();
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      program::build(q.get_context(), broken);
      FAIL() << "a broken program built";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::build_failure);
      EXPECT_EQ(e.cl_error_name(), "CL_BUILD_PROGRAM_FAILURE");
      std::string what = e.what();
      EXPECT_NE(what.find("compiler log"), std::string::npos) << what;
      EXPECT_NE(what.find("prism_undeclared_identifier"), std::string::npos) << "log missing: " << what;
    }
  }
  auto after = program_cache_statistics();
  EXPECT_EQ(after.failures - before.failures, 1u) << "a failed build is cached, not retried";
}

TEST(Programs, ConcurrentRequestsCompileOnce) {
  auto& q = default_queue();
  // A source no other test uses, so this test sees its first build.
  static int run = 0;
  std::string source =
      "kernel void once(global int* a) { a[get_global_id(0)] = 17; }\n// cache-test " + std::to_string(run++);
  auto before = program_cache_statistics();
  std::vector<std::thread> threads;
  std::vector<program> results(8);
  std::atomic<int> go{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      results[t] = program::build(q.get_context(), source, "-cl-fast-relaxed-math");
    });
  go = 1;
  for (auto& th : threads) th.join();
  auto after = program_cache_statistics();
  EXPECT_EQ(after.builds - before.builds, 1u);
  EXPECT_EQ(after.hits - before.hits, 7u);
  for (auto& p : results) EXPECT_EQ(&p.get_impl(), &results[0].get_impl());
  EXPECT_EQ(results[0].options(), "-cl-fast-relaxed-math");
  EXPECT_EQ(results[0].source_hash().size(), 16u);
  // Other options are another cache entry with another hash.
  auto other = program::build(q.get_context(), source);
  EXPECT_NE(other.source_hash(), results[0].source_hash());
  EXPECT_EQ(program_cache_statistics().builds - before.builds, 2u);
}

// -prism-ptx-target: on NVIDIA's OpenCL the marked line is live in the retargeted build (the
// kernel writes 7, not 1); elsewhere the build fails naming the option and what it needs.
TEST(Programs, PtxTargetMakesMarkedLinesLive) {
  auto& q = default_queue();
  const std::string source = std::string("kernel void marked(global int* a) {\n  int x = 1;\n") +
                             "  __asm__ volatile(\"{\\n" PRISM_PTX_TARGET_MARKER
                             "mov.u32 %0, 7;\\n}\" : \"+r\"(x));\n" +
                             "  a[0] = x;\n}\n";
  const bool nvidia = q.get_device().platform_name().find("NVIDIA") != std::string::npos;
  if (!nvidia) {
    try {
      program::build(q.get_context(), "kernel void plain(global int* a) { a[0] = 1; }\n",
                     "-prism-ptx-target=sm_90a");
      FAIL() << "built with -prism-ptx-target off NVIDIA's OpenCL";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::build_failure);
      const std::string what = e.what();
      EXPECT_NE(what.find("-prism-ptx-target=sm_90a needs a driver whose program binary is PTX text"),
                std::string::npos)
          << what;
    }
    return;
  }
  for (const char* options : {"", "-prism-ptx-target=sm_90a"}) {
    const program p = program::build(q.get_context(), source, options);
    const kernel k = p.get_kernel("marked");
    buffer<int> out(q, 1);
    q.submit([&](handler& h) {
      accessor<int> a(out, h, discard_write);
      h.parallel_for(range<1>(1), k, a);
    });
    EXPECT_EQ(out.read()[0], *options ? 7 : 1) << "options '" << options << "'";
  }
}

// -prism-ptx-target named twice (a program's own options and PRISM_CL_OPTIONS): the same target
// acts once, with no token left for the driver; two different targets, or none after the '=', are
// an error naming them before any build.
TEST(Programs, PtxTargetGivenTwiceActsOnceOrNamesTheConflict) {
  auto& q = default_queue();
  const std::string source = "kernel void plain(global int* a) { a[0] = 1; }\n";
  const bool nvidia = q.get_device().platform_name().find("NVIDIA") != std::string::npos;
  const std::string twice = "-prism-ptx-target=sm_90a -DX=1 -prism-ptx-target=sm_90a";
  if (nvidia) {
    EXPECT_NO_THROW(program::build(q.get_context(), source, twice).get_kernel("plain"));
  } else {
    try {
      program::build(q.get_context(), source, twice);
      FAIL() << "built with -prism-ptx-target off NVIDIA's OpenCL";
    } catch (const error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("needs a driver whose program binary is PTX text"), std::string::npos) << what;
    }
  }
  for (const auto& [options, names] :
       {std::pair<const char*, const char*>{"-prism-ptx-target=sm_90a -prism-ptx-target=sm_90",
                                            "given as both sm_90a and sm_90"},
        {"-DX=1 -prism-ptx-target=", "names no target"}}) {
    try {
      program::build(q.get_context(), source, options);
      FAIL() << "built with '" << options << "'";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  }
}

TEST(Programs, ClOptionsFromTheEnvironmentJoinEveryBuild) {
  auto& q = default_queue();
  const std::string source =
      "kernel void seen(global int* a) {\n#ifdef PRISM_TEST_EXTRA\n a[0] = PRISM_TEST_EXTRA;\n#else\n a[0] = "
      "-1;\n#endif\n}\n";
  env::override_for_testing("PRISM_CL_OPTIONS", "-DPRISM_TEST_EXTRA=29");
  program with = program::build(q.get_context(), source, "-cl-fast-relaxed-math");
  env::override_for_testing("PRISM_CL_OPTIONS", std::nullopt);
  program without = program::build(q.get_context(), source, "-cl-fast-relaxed-math");
  EXPECT_EQ(with.options(), "-cl-fast-relaxed-math -DPRISM_TEST_EXTRA=29");
  EXPECT_EQ(without.options(), "-cl-fast-relaxed-math");
  EXPECT_NE(with.source_hash(), without.source_hash()) << "the extra options are part of the cache key";
  for (auto* p : {&with, &without}) {
    buffer<int> out(q, 1);
    const kernel k = p->get_kernel("seen");
    q.submit([&](handler& h) {
      accessor<int> a(out, h, discard_write);
      h.parallel_for(range<1>(1), k, a);
    });
    EXPECT_EQ(out.read()[0], p == &with ? 29 : -1);
  }
}

TEST(Programs, DumpWritesEachBuildsBinaryOptionsAndSource) {
  auto& q = default_queue();
  const auto dir = std::filesystem::temp_directory_path() / ("prism_dump_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string source = "kernel void dumped(global int* a) { a[0] = 41; }\n";
  env::override_for_testing("PRISM_DUMP_PROGRAMS", dir.string());
  program p = program::build(q.get_context(), source, "-DPRISM_DUMP_TEST=1");
  env::override_for_testing("PRISM_DUMP_PROGRAMS", (dir / "missing").string());
  EXPECT_THROW(program::build(q.get_context(), source, "-DPRISM_DUMP_TEST=2"), error)
      << "a folder that cannot be written is an error, not a silent skip";
  env::override_for_testing("PRISM_DUMP_PROGRAMS", std::nullopt);
  auto read = [](const std::filesystem::path& f) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const auto base = dir / p.source_hash();
  EXPECT_GT(std::filesystem::file_size(base.string() + ".bin"), 0u);
  EXPECT_EQ(read(base.string() + ".options"), "-DPRISM_DUMP_TEST=1");
  EXPECT_EQ(read(base.string() + ".cl"), source);
  std::filesystem::remove_all(dir);
}
