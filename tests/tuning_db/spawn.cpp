// SPDX-License-Identifier: Apache-2.0
// Child-process helpers for the tuning_db tests (posix_spawn / fork+exec).
#include "tests/tuning_db/spawn.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace prism::tuning::test {

namespace {
std::vector<std::string> merged_env(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto name = kv.substr(0, kv.find('='));
    if (!extra.count(name)) out.push_back(kv);
  }
  for (auto& [k, v] : extra) out.push_back(k + "=" + v);
  return out;
}
std::vector<char*> pointers(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}
// Temp dirs are removed at the end of a passing run and kept after a failure for inspection.
std::vector<std::string>& created_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}
struct temp_cleanup : ::testing::Environment {
  void TearDown() override {
    if (::testing::UnitTest::GetInstance()->Failed()) return;
    std::error_code ec;
    for (auto& d : created_dirs()) std::filesystem::remove_all(d, ec);
  }
};
[[maybe_unused]] auto* const cleanup_registered = ::testing::AddGlobalTestEnvironment(new temp_cleanup);
}  // namespace

child spawn_helper(const std::vector<std::string>& args, const std::string& output_path,
                   const std::map<std::string, std::string>& extra_env, bool drop_to_nobody,
                   const std::string& program) {
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  auto envs = merged_env(extra_env);
  auto argp = pointers(argv);
  auto envp = pointers(envs);
  child c;
  c.output_path = output_path;
  if (drop_to_nobody) {
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int fd = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(97);
      ::execve(argp[0], argp.data(), envp.data());
      ::_exit(98);
    }
    c.pid = pid;
    return c;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  int rc = posix_spawn(&c.pid, argp[0], &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn of " + argv[0] + " failed: " + std::to_string(rc));
  return c;
}

int wait_child(const child& c) {
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("prism-tdb-" + tag + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  ::chmod(tmpl.c_str(), 0755);
  created_dirs().push_back(tmpl);
  return tmpl;
}

}  // namespace prism::tuning::test
