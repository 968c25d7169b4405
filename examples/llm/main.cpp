// prism-llm: runs the Llama-style decoder on a prism device (prefill + greedy decode) and
// reports tokens/s, a per-step time breakdown and the dispatcher's statistics.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "cli/version/build_info.hpp"
#include "examples/llm/decoder.hpp"
#include "examples/llm/reference.hpp"
#include "examples/llm/run.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/runtime.hpp"

int main(int argc, char** argv) {
  using namespace prism::llm;
  run_options opt;
  CLI::App app{"prism-llm: a Llama/Qwen-style decoder on prism's public op API (prefill + greedy decode)",
               "prism-llm"};
  // A later occurrence of an option wins, so scripts can append to a user's arguments.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", [] {
    auto text = prism::cli::version_text("prism-llm");
    return text.substr(0, text.size() - 1);  // CLI11 ends the line itself
  });
  std::string preset_help = "model size; one of:";
  for (const auto& p : presets()) preset_help += "\n  " + p.name + ": " + p.description;
  app.add_option("--preset", opt.preset, preset_help)->capture_default_str();
  app.add_option("--dtype", opt.dtype, "weights and activations: f32, f16 or bf16")->capture_default_str();
  app.add_option("--device", opt.device,
                 std::string("device spec (default: PRISM_DEVICE, else a GPU, else a CPU); ") +
                     prism::device_spec_syntax());
  app.add_option("--routes", opt.routes, "routes YAML file (sets PRISM_ROUTES for this run)");
  app.add_option(
      "--backend", opt.backend,
      "route every op to this backend (opencl, clblast, host), e.g. host for the all-host baseline");
  app.add_option("--weights", opt.weights,
                 "safetensors checkpoint with Hugging Face Llama names (default: seeded random weights)");
  app.add_option("--save-weights", opt.save_weights, "write the weights used to this safetensors file (f32)");
  app.add_option("--seed", opt.seed, "seed of the random weights and the random prompt")
      ->capture_default_str();
  app.add_option("--prompt-len", opt.prompt_len, "random prompt length in tokens")->capture_default_str();
  app.add_option("--prompt", opt.prompt, "prompt token ids, comma separated (overrides --prompt-len)");
  app.add_option("--new-tokens", opt.new_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--warmup", opt.warmup_runs, "untimed warm-up generations (build kernels first)")
      ->capture_default_str();
  app.add_option("--repeat", opt.repeat, "timed generations; the fastest prefill and decode are reported")
      ->capture_default_str();
  app.add_option("--breakdown-steps", opt.breakdown_decode_steps,
                 "decode steps in the synchronised per-step breakdown pass (0: skip the pass)")
      ->capture_default_str();
  app.add_flag("--check", opt.check,
               "also run the host reference decoder and compare logits and tokens (small presets)");
  app.add_option("--dump-logits", opt.dump_path,
                 "write prompt, generated ids and the prefill's next-token logits as JSON");
  app.add_option("--json", opt.json_path, "write the measured figures as JSON");
  bool list = false;
  app.add_flag("--list-presets", list, "list the presets and exit");
  CLI11_PARSE(app, argc, argv);
  if (list) {
    for (const auto& p : presets())
      fmt::print("{:16} {}\n  {}\n", p.name, p.description, preset(p.name).summary());
    return 0;
  }
  try {
    const auto result = run_model(opt);
    print_report(result, stdout);
    if (opt.check && !result.check_passed) return 2;
    return 0;
  } catch (const prism::error& e) {
    std::fprintf(stderr, "prism-llm: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism-llm: error: %s\n", e.what());
    return 1;
  }
}
