// SPDX-License-Identifier: Apache-2.0
// Load speed: prism::io::safetensors_file::load_all (every tensor, one storage) and load() tensor
// by tensor (the public paths; q.wait() included) against read(2) of the same file into a reused
// buffer (what `cat` does), interleaved, with the page cache warm and cold (posix_fadvise
// DONTNEED before each run: the file's clean pages are dropped without root). Each load runs in
// a new process (after its OpenCL start-up), as a program loads its weights once: a second load
// in one process reuses memory the allocator already holds. Prints wall and CPU seconds, the
// median ratios, and each load's first use (a sum over every tensor, timed apart).
// Usage: prism_bench_load [FILE.safetensors] [rounds=3]; without a file it writes a 0.54 GB f32
// checkpoint of SmolLM-135M's tensor shapes to $TMPDIR (removed after, unless BENCH_LOAD_KEEP).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

#include <prism/io/safetensors.hpp>
#include <prism/ops.hpp>
#include <prism/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct timing {
  double wall = 0, cpu = 0;
  long faults = 0;       // minor page faults (mapping the file, touching new memory)
  double first_use = 0;  // child loads: wall seconds of the first sum over every tensor
};

template <class F>
timing timed(F f) {
  const double c0 = cpu_seconds();
  const long f0 = minor_faults();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), cpu_seconds() - c0,
          minor_faults() - f0};
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

std::size_t plain_read(const std::string& path) {
  static std::vector<char> buf(16 << 20);
  const int fd = ::open(path.c_str(), O_RDONLY);
  std::size_t total = 0;
  for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += static_cast<std::size_t>(n);
  ::close(fd);
  return total;
}

// load_all (one buffer over the mapping on CPU devices) or, with `each`, load() tensor by tensor.
std::vector<prism::tensor> prism_load(prism::queue& q, const std::string& path, bool each) {
  prism::io::safetensors_file file(path);
  std::vector<prism::tensor> tensors;
  if (each)
    for (const std::string& name : file.names()) tensors.push_back(file.load(q, name));
  else
    for (auto& [name, t] : file.load_all(q)) tensors.push_back(t);
  q.wait();
  return tensors;
}

// The first use: a sum over every tensor (reads each byte once on the device), so a load that
// left work for later (a lazy copy, page faults) shows it here.
void first_use(prism::queue& q, const std::vector<prism::tensor>& tensors) {
  for (const auto& t : tensors) prism::ops::sum(q, t.reshape({t.numel()}));
  q.wait();
}

// 0.54 GB of f32 in the shapes of SmolLM-135M (hidden 576, FFN 1536, 30 layers, vocab 49152, tied
// embeddings), the checkpoint issue 14 measured.
void write_checkpoint(const std::string& path) {
  std::vector<prism::io::safetensor_data> list;
  std::vector<std::vector<float>> store;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    store.emplace_back(static_cast<std::size_t>(n), 0.25f);
    list.push_back({std::move(name), std::move(shape), {}});
  };
  add("model.embed_tokens.weight", {49152, 576});
  for (int l = 0; l < 30; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* m : {"q_proj", "o_proj"}) add(p + "self_attn." + m + ".weight", {576, 576});
    for (const char* m : {"k_proj", "v_proj"}) add(p + "self_attn." + m + ".weight", {192, 576});
    for (const char* m : {"gate_proj", "up_proj"}) add(p + "mlp." + m + ".weight", {1536, 576});
    add(p + "mlp.down_proj.weight", {576, 1536});
    add(p + "input_layernorm.weight", {576});
    add(p + "post_attention_layernorm.weight", {576});
  }
  add("model.norm.weight", {576});
  for (std::size_t i = 0; i < list.size(); ++i) list[i].values = store[i];
  prism::io::write_safetensors(path, list, prism::dtype::f32);
}

// The load, timed in a child process: `self --child all|each FILE` prints "wall cpu faults".
timing load_in_child(const std::string& self, const std::string& path, bool each) {
  const std::string cmd = "'" + self + "' --child " + (each ? "each" : "all") + " '" + path + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  timing t;
  if (!p || std::fscanf(p, "%lf %lf %ld %lf", &t.wall, &t.cpu, &t.faults, &t.first_use) != 4) {
    std::fprintf(stderr, "prism_bench_load: the child load failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  if (::pclose(p) != 0) std::exit(1);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--child") {
    prism::queue q;
    prism::tensor::empty(q, {1024}, prism::dtype::f32);  // OpenCL start-up outside the timing
    const bool each = std::string(argv[2]) == "each";
    std::vector<prism::tensor> tensors;
    const timing t = timed([&] { tensors = prism_load(q, argv[3], each); });
    const timing use = timed([&] { first_use(q, tensors); });
    std::printf("%.6f %.6f %ld %.6f\n", t.wall, t.cpu, t.faults, use.wall);
    return 0;
  }
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::string path = argc > 1 ? argv[1] : "";
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 3;
  bool made = false;
  if (path.empty()) {
    path = (std::filesystem::temp_directory_path() / "prism_bench_load.safetensors").string();
    if (!std::filesystem::exists(path)) write_checkpoint(path);
    made = true;
  }
  prism::queue q;
  const double gb = static_cast<double>(std::filesystem::file_size(path)) / 1e9;
  std::printf("file %s, %.3f GB, device %s\n", path.c_str(), gb, q.get_device().name().c_str());
  for (const bool cold : {false, true}) {
    std::vector<double> wall_all, cpu_all, wall_each, cpu_each;
    for (int r = 0; r < rounds; ++r) {
      timing read, all, each;
      for (int k = 0; k < 3; ++k) {  // rotate which goes first
        const int which = (k + r) % 3;
        if (cold)
          drop_cache(path);
        else
          plain_read(path);  // warm: the file is in the page cache for every side
        if (which == 0)
          read = timed([&] { plain_read(path); });
        else if (which == 1)
          all = load_in_child(self, path, false);
        else
          each = load_in_child(self, path, true);
      }
      wall_all.push_back(all.wall / read.wall);
      cpu_all.push_back(all.cpu / std::max(read.cpu, 1e-6));
      wall_each.push_back(each.wall / read.wall);
      cpu_each.push_back(each.cpu / std::max(read.cpu, 1e-6));
      std::printf(
          "%s round %d: read %.3f s (cpu %.3f) | load_all %.3f s (cpu %.3f, %ld faults) %.2fx wall %.2fx "
          "cpu, "
          "first use %.3f s | load each %.3f s (cpu %.3f, %ld faults) %.2fx wall %.2fx cpu, first use %.3f "
          "s\n",
          cold ? "cold" : "warm", r + 1, read.wall, read.cpu, all.wall, all.cpu, all.faults, wall_all.back(),
          cpu_all.back(), all.first_use, each.wall, each.cpu, each.faults, wall_each.back(), cpu_each.back(),
          each.first_use);
    }
    std::printf("%s median, load / read: load_all %.2fx wall, %.2fx cpu; load each %.2fx wall, %.2fx cpu\n",
                cold ? "cold" : "warm", median(wall_all), median(cpu_all), median(wall_each),
                median(cpu_each));
  }
  if (made && std::getenv("BENCH_LOAD_KEEP") == nullptr) std::filesystem::remove(path);
  return 0;
}
