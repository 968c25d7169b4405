// SPDX-License-Identifier: Apache-2.0
// prism-llm: runs the Llama-style decoder on a prism device (prefill + greedy decode) and
// reports tokens/s, a per-step time breakdown and the dispatcher's statistics.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/version/build_info.hpp"
#include "examples/llm/decoder.hpp"
#include "examples/llm/reference.hpp"
#include "examples/llm/run.hpp"
#include "examples/llm/tokenizer.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/io/gguf.hpp"
#include "prism/runtime.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw prism::error(prism::errc::io_error, "prism-llm", fmt::format("cannot read '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// --tokenize: the tokenizer alone, for checks against Hugging Face's.
int tokenize_file(const std::string& tokenizer_path, const std::string& text_path) {
  using prism::llm::tokenizer;
  namespace fs = std::filesystem;
  std::string path = tokenizer_path;
  if (fs::is_directory(path)) path = (fs::path(path) / "tokenizer.json").string();
  const tokenizer tok = path.ends_with(".gguf") ? tokenizer::from_gguf(prism::io::gguf_file(path))
                                                : tokenizer::from_json(read_file(path), path);
  const std::string text = read_file(text_path);
  auto entry = [&](std::string_view t) {
    const auto ids = tok.encode(t, false);
    return nlohmann::json{{"ids", ids}, {"ids_special", tok.encode(t, true)}, {"decoded", tok.decode(ids)}};
  };
  nlohmann::json lines = nlohmann::json::array();
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(entry(std::string_view(text).substr(start, end - start)));
    start = end + 1;
  }
  const nlohmann::json out = {
      {"pre_tokenizer", tok.pre_tokenizer_name()}, {"lines", lines}, {"whole", entry(text)}};
  std::fputs(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), stdout);
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace

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
  app.add_option("--model", opt.model,
                 "a Hugging Face model folder (config.json, safetensors, tokenizer.json) or a .gguf file: "
                 "Llama, Qwen2, Qwen3, Mistral");
  app.add_flag("--dequantize", opt.dequantize,
               "expand a GGUF file's Q8_0/Q4_0/Q4_1 weights to --dtype (default: they stay quantized on the "
               "device)");
  app.add_flag("--no-mmap", opt.no_mmap,
               "CPU devices: copy a model folder's weights into prism's memory (2 MiB pages where the OS "
               "gives them) instead of using the file's mapping in place: a slower load, faster decode");
  app.add_option("--quantize", opt.quantize,
                 "q8_0 or q4_0: quantize the linear weights at load (output head q8_0; embeddings and norms "
                 "stay float, as llama.cpp's quantizer does)");
  app.add_option("--max-context", opt.max_context,
                 "KV cache positions: min(this, a --model's max_position_embeddings or a preset's "
                 "context)")
      ->capture_default_str();
  app.add_option("--weights", opt.weights,
                 "safetensors checkpoint with Hugging Face Llama names (default: seeded random weights)");
  app.add_option("--save-model", opt.save_model,
                 "write the weights used as a Hugging Face model folder (config.json, model.safetensors, a "
                 "byte-level tokenizer.json) that --model and transformers read");
  app.add_option("--save-weights", opt.save_weights, "write the weights used to this safetensors file (f32)");
  app.add_option("--seed", opt.seed, "seed of the random weights, the random prompt and the sampler")
      ->capture_default_str();
  app.add_option("--prompt-len", opt.prompt_len, "random prompt length in tokens")->capture_default_str();
  app.add_option(
      "--prompt", opt.prompt,
      "prompt text (needs a --model with a tokenizer): the generated text is streamed and stops at EOS");
  app.add_option("--prompt-ids", opt.prompt_ids,
                 "prompt token ids, comma separated (overrides --prompt-len)");
  app.add_flag("--chat", opt.chat, "wrap --prompt in the model's chat format (ChatML, Llama-2 or Llama-3)");
  app.add_option("--system", opt.system, "the system message of --chat");
  app.add_flag("--ignore-eos", opt.ignore_eos, "generate --new-tokens tokens even past an end token");
  app.add_flag("!--no-stream", opt.stream, "print the text once at the end instead of as it is generated");
  app.add_option("--temperature", opt.sampling.temperature, "sampling temperature; 0: greedy")
      ->capture_default_str();
  app.add_option("--top-k", opt.sampling.top_k, "sample among the k most likely tokens; 0: all")
      ->capture_default_str();
  app.add_option("--top-p", opt.sampling.top_p,
                 "sample among the most likely tokens that reach this probability")
      ->capture_default_str();
  app.add_option("--new-tokens", opt.new_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--poll", opt.poll,
                 "CPU devices: idle CPUs poll instead of halting while generating (a PM QoS request on "
                 "/dev/cpu_dma_latency, needs write access; llama.cpp's workers poll likewise): on or off")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--graph", opt.graph,
                 "decode through a recorded prism::graph: on, off, or auto (the faster of the two, measured "
                 "after the warm-up on this device)")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--run-ahead", opt.run_ahead,
                 "greedy graph decoding: enqueue each step before the previous step's token reaches the "
                 "host (on), read each token first (off), or auto (the faster, measured after the warm-up "
                 "on this device)")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--fuse", opt.fuse,
                 "fused ops of a decode step: a comma-separated subset of attention (decode_attention), mlp "
                 "(linear_silu_and_mul; block-quantized weights on CPUs only) and norm (residual adds in the "
                 "projections' epilogues, RMSNorms read in the next GEMV: rms_norm_linear) and block (with "
                 "norm: the o projection, post-attention norm, MLP and residual adds as one post_attention "
                 "call), or none; auto: all of them, block for f32, f16 and bf16 weights (not "
                 "block-quantized ones)")
      ->capture_default_str();
  app.add_option("--warmup", opt.warmup_runs, "untimed warm-up generations (build kernels first)")
      ->capture_default_str();
  std::string pretune_text;
  auto* pretune =
      app.add_option(
             "--pretune", pretune_text,
             "before the run, tune this model's own shapes into the tuning database (PRISM_TUNING_DB): "
             "record them with their call counts in a short generation, tune the largest default "
             "time x calls first, stop after SECONDS (default 120; 0: no limit), then run on the new "
             "rows")
          ->expected(0, 1)
          ->type_name("[SECONDS]");
  app.add_option("--pretune-candidates", opt.pretune_candidates,
                 "--pretune: generated candidates per backend and shape (PoCL builds each in about a second)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--repeat", opt.repeat, "timed generations; the fastest prefill and decode are reported")
      ->capture_default_str();
  app.add_option("--breakdown-steps", opt.breakdown_decode_steps,
                 "decode steps in the synchronised per-step breakdown pass (0: skip the pass)")
      ->capture_default_str();
  app.add_flag("--perplexity", opt.perplexity,
               "score the prompt (--prompt, --prompt-ids) token by token and print its perplexity instead of "
               "generating");
  app.add_flag("--check", opt.check,
               "also run the host reference decoder and compare logits and tokens (small presets)");
  app.add_option("--dump-logits", opt.dump_path,
                 "write prompt, generated ids and the prefill's next-token logits as JSON");
  app.add_option("--json", opt.json_path, "write the measured figures as JSON");
  std::string tokenizer_path, tokenize_path;
  app.add_option("--tokenizer", tokenizer_path,
                 "with --tokenize: a tokenizer.json, model folder or .gguf file");
  app.add_option(
      "--tokenize", tokenize_path,
      "encode each line of this text file and the whole file, print ids and decoded text as JSON, exit");
  bool list = false;
  app.add_flag("--list-presets", list, "list the presets and exit");
  CLI11_PARSE(app, argc, argv);
  opt.sampling.seed = opt.seed;
  if (pretune->count() > 0) {
    opt.pretune_s = 120;
    if (!pretune_text.empty()) {
      std::size_t used = 0;
      double v = -1;
      try {
        v = std::stod(pretune_text, &used);
      } catch (const std::exception&) {
      }
      if (used != pretune_text.size() || !std::isfinite(v) || v < 0 || v > 1e6) {
        std::fprintf(stderr,
                     "prism-llm: error: --pretune takes a number of seconds in [0, 1e6] (0: no limit), got "
                     "'%s'\n",
                     pretune_text.c_str());
        return 1;
      }
      opt.pretune_s = v;
    }
  }
  if (list) {
    for (const auto& p : presets())
      fmt::print("{:16} {}\n  {}\n", p.name, p.description, preset(p.name).summary());
    return 0;
  }
  try {
    if (!tokenize_path.empty())
      return tokenize_file(tokenizer_path.empty() ? opt.model : tokenizer_path, tokenize_path);
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
