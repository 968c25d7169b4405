// SPDX-License-Identifier: Apache-2.0
// Guide, part 3: weight files (docs/guide.md quotes the marked parts; CTest runs it).
#include <prism/io/gguf.hpp>
#include <prism/io/safetensors.hpp>
#include <prism/runtime.hpp>

#include <filesystem>
#include <map>

#include "guide_check.hpp"

int main() {
  prism::queue q;
  const auto path = (std::filesystem::temp_directory_path() / "prism_guide_io.safetensors").string();
  std::vector<float> values = {0.5f, -1.0f, 2.0f, 4.0f};
  prism::io::write_safetensors(path, {{"layer.weight", {2, 2}, values}}, prism::dtype::bf16);

  // [safetensors]
  prism::io::safetensors_file file(path);  // memory-mapped; checked on open
  for (const std::string& name : file.names()) {
    const prism::io::safetensor_view& v = file.get(name);  // dtype, shape, bytes
    std::printf("%s %s [%lld, %lld]\n", name.c_str(), v.dtype.c_str(), (long long)v.shape[0],
                (long long)v.shape[1]);
  }
  prism::tensor w = file.load(q, "layer.weight");                       // bf16, as stored
  prism::tensor w32 = file.load(q, "layer.weight", prism::dtype::f32);  // converted
  // Every tensor at once, the fast way: one storage (on CPU devices the mapping itself, no copy).
  std::map<std::string, prism::tensor> all = file.load_all(q);
  // A model folder with model.safetensors.index.json and shards:
  //   prism::io::safetensors_checkpoint ck("path/to/model");  ck.load(q, "model.norm.weight");
  // [safetensors]
  if (w.type() != prism::dtype::bf16) return 1;
  expect_values("safetensors load", w32.to_floats(q), {0.5f, -1.0f, 2.0f, 4.0f});
  expect_values("safetensors load_all", all.at("layer.weight").to_floats(q), {0.5f, -1.0f, 2.0f, 4.0f});
  std::filesystem::remove(path);

  // [errors]
  try {
    prism::io::gguf_file gguf("/nonexistent/model.gguf");
    return 1;
  } catch (const prism::error& e) {
    std::printf("caught: %s\n", e.what());  // names the file and the OS error
  }
  // [errors]
  return 0;
}
