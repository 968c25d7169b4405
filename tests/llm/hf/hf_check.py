# SPDX-License-Identifier: Apache-2.0
"""Checks prism-llm against Hugging Face on checkpoints this script writes (nothing downloaded):
  logits ARCH      random transformers checkpoint (llama, qwen2, qwen3, mistral, llama-sharded,
                   llama-rope-llama3, llama-rope-linear): next-token logits within 2e-4 of max
                   |logit| and identical greedy ids; with a trained tokenizer, --prompt "text"
                   encodes to Hugging Face's ids
  tokenizer KIND   tokenizer trained with `tokenizers` (gpt2, llama3, qwen2, smollm, llama2): ids
                   equal to Hugging Face's on every line of a multilingual text and on the whole
                   text, and decode(encode(text)) == text
  gguf TYPE        the llama and qwen2 checkpoints written as GGUF with the `gguf` package in TYPE
                   (F32, F16, Q8_0, Q4_0) with the tokenizer embedded: logits against transformers
                   run on the same weights dequantized (so the bound stays 2e-4), identical greedy
                   ids; against the original weights, no further than the quantization moves
                   transformers' own logits; the embedded tokenizer's ids
  perplexity llama a small Llama trained here on a text the check writes, saved as an F32 GGUF and
                   quantized to Q8_0, Q4_0 and Q4_1 by llama.cpp's own quantizer (llama-cpp-python,
                   benchmarks/llm/llamacpp-env.sh; else by the `gguf` package, and the llama.cpp
                   comparison is skipped: exit 77): perplexity of held-out text, token by token, by
                   prism-llm --perplexity and by llama.cpp on the same files. Q8_0 within 1% of F32;
                   Q4_0 and Q4_1 no further from F32 than llama.cpp's own gap (+ 1/4 of it); the
                   quantized weights kept on the device equal --dequantize (NLL within 1e-3: int8
                   activations); --quantize q8_0|q4_0
                   of the F32 file matches llama.cpp's file of that type
Usage: python hf_check.py PRISM_LLM WORKDIR {logits|tokenizer|gguf|perplexity} NAME...
(one process for several names: importing torch and transformers is most of a check's time)"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402


def make_model(arch, seed=0):
    import torch
    import transformers as tf
    torch.manual_seed(seed)
    base = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                rms_norm_eps=1e-5, initializer_range=0.25, bos_token_id=1, eos_token_id=2)
    if arch.startswith("llama"):
        if arch == "llama-rope-llama3":
            base["rope_scaling"] = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                        original_max_position_embeddings=32)
        elif arch == "llama-rope-linear":
            base["rope_scaling"] = dict(rope_type="linear", factor=2.0)
        cfg = tf.LlamaConfig(**base, rope_theta=10000.0, tie_word_embeddings=False)
        model = tf.LlamaForCausalLM(cfg)
    elif arch == "mistral":
        cfg = tf.MistralConfig(**base, rope_theta=10000.0, sliding_window=None, tie_word_embeddings=False)
        model = tf.MistralForCausalLM(cfg)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(**base, rope_theta=1000000.0, tie_word_embeddings=True)
        model = tf.Qwen2ForCausalLM(cfg)
    elif arch == "qwen3":
        cfg = tf.Qwen3Config(**base, head_dim=32, rope_theta=1000000.0, tie_word_embeddings=True)
        model = tf.Qwen3ForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown arch {arch}")
    # Norm weights away from 1 so that a dropped or misplaced norm shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.7, 1.3)
            elif name.endswith("bias"):
                p.uniform_(-0.2, 0.2)
    return model.float().eval()


def check_logits(prism_llm, work, arch):
    model = make_model(arch)
    folder = os.path.join(work, arch)
    shutil.rmtree(folder, ignore_errors=True)
    # The sharded variant: small shards and model.safetensors.index.json.
    model.save_pretrained(folder, max_shard_size="100KB" if arch.endswith("sharded") else "2GB")
    files = sorted(os.listdir(folder))
    print(f"{arch}: wrote {', '.join(files)}")
    if arch.endswith("sharded") and "model.safetensors.index.json" not in files:
        raise SystemExit("the sharded checkpoint has no index")
    want_logits, want_ids = common.hf_generate(model)
    _, got_logits, got_ids = common.prism_generate(prism_llm, folder, work)
    common.compare_logits(arch, got_logits, want_logits)
    print(f"{arch}: greedy ids prism {got_ids} transformers {want_ids}")
    if got_ids != want_ids:
        raise SystemExit(f"{arch}: greedy ids differ")
    if arch == "llama":  # --no-mmap: the weights copied into prism's memory, the same numbers
        _, copy_logits, copy_ids = common.prism_generate(prism_llm, folder, work, ["--no-mmap"])
        if copy_logits != got_logits or copy_ids != got_ids:
            raise SystemExit(f"{arch}: --no-mmap changed the logits or the ids ({copy_ids} against {got_ids})")
        print(f"{arch}: --no-mmap gives the same logits and ids")
    if arch in ("llama", "qwen2"):  # text in, text out, with the checkpoint's own tokenizer
        tok = common.train_tokenizer("llama3" if arch == "llama" else "qwen2")
        tok.save(os.path.join(folder, "tokenizer.json"))
        prompt = "Le cœur a ses raisons, 敏捷的棕色狐狸!"
        dump = os.path.join(work, "text.json")
        out = common.run([prism_llm, "--model", folder, "--prompt", prompt, "--new-tokens", "6", "--warmup", "0",
                          "--breakdown-steps", "0", "--ignore-eos", "--dump-logits", dump])
        with open(dump) as f:
            d = json.load(f)
        want_prompt = tok.encode(prompt).ids
        if d["prompt"] != want_prompt:
            raise SystemExit(f"{arch}: prompt ids {d['prompt']} != Hugging Face's {want_prompt}")
        _, want_ids = common.hf_generate(model, want_prompt, 6)
        if d["tokens"] != want_ids:
            raise SystemExit(f"{arch}: text-prompt greedy ids {d['tokens']} != {want_ids}")
        if d["text"] != tok.decode(want_ids, skip_special_tokens=True):
            raise SystemExit(f"{arch}: text {d['text']!r} != {tok.decode(want_ids, skip_special_tokens=True)!r}")
        if d["text"] not in out:
            raise SystemExit(f"{arch}: the streamed output lacks the text {d['text']!r}:\n{out}")
        print(f"{arch}: --prompt text: ids equal to Hugging Face's, text {d['text']!r}")


def check_tokenizer(prism_llm, work, kind):
    tok = common.train_tokenizer(kind)
    path = os.path.join(work, f"tokenizer-{kind}.json")
    tok.save(path)
    text_path = os.path.join(work, "text.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(common.TEXT)
    got = json.loads(common.run([prism_llm, "--tokenizer", path, "--tokenize", text_path]))
    lines = [line for line in common.TEXT.split("\n") if line]
    if len(got["lines"]) != len(lines):
        raise SystemExit(f"{kind}: {len(got['lines'])} lines from prism, {len(lines)} written")
    bad = 0
    for line, g in zip(lines + [common.TEXT], got["lines"] + [got["whole"]]):
        want = tok.encode(line, add_special_tokens=False).ids
        want_special = tok.encode(line).ids
        if g["ids"] != want or g["ids_special"] != want_special:
            bad += 1
            print(f"{kind}: MISMATCH on {line[:40]!r}:\n  prism {g['ids']}\n  hf    {want}")
        if g["decoded"] != line:
            bad += 1
            print(f"{kind}: decode(encode(x)) != x: {g['decoded'][:60]!r} vs {line[:60]!r}")
    if bad:
        raise SystemExit(f"{kind}: {bad} mismatches")
    print(f"{kind}: {len(lines)} lines and the whole text ({len(got['whole']['ids'])} tokens, "
          f"pre-tokenizer {got['pre_tokenizer']}): ids equal to Hugging Face's, round trip exact")


def write_gguf(model, arch, qtype, path, tok):
    """The checkpoint as llama.cpp's converter writes it: llama names, q/k rows permuted for the
    llama architecture, 1-D tensors in F32, the tokenizer as tokenizer.ggml.*. Returns the
    state dict as the file holds it, dequantized and in Hugging Face's layout."""
    import gguf
    import numpy as np
    import torch
    cfg = model.config
    gtype = {"F32": gguf.GGMLQuantizationType.F32, "F16": gguf.GGMLQuantizationType.F16,
             "Q8_0": gguf.GGMLQuantizationType.Q8_0, "Q4_0": gguf.GGMLQuantizationType.Q4_0,
             "Q4_1": gguf.GGMLQuantizationType.Q4_1}[qtype]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"prism-test-{arch}")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(float(model.config.rope_parameters["rope_theta"]) if hasattr(model.config, "rope_parameters")
                         and model.config.rope_parameters else float(cfg.rope_theta))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_file_type(int(gtype) if qtype != "F32" else 0)
    # Tokenizer: the gpt2 model of llama.cpp, with the pre-tokenizer named.
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    for a in j["added_tokens"]:
        vocab[a["content"]] = a["id"]
    tokens = [None] * cfg.vocab_size
    types = [gguf.TokenType.UNUSED] * cfg.vocab_size
    for t, i in vocab.items():
        tokens[i] = t
        types[i] = gguf.TokenType.NORMAL
    for a in j["added_tokens"]:
        types[a["id"]] = gguf.TokenType.CONTROL
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]"
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe" if arch == "llama" else "qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def permute(x, heads):
        return x.reshape(heads, 2, x.shape[0] // heads // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    def unpermute(x, heads):
        return x.reshape(heads, x.shape[0] // heads // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    as_stored = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        x = t.detach().float().numpy()
        if name == "model.embed_tokens.weight":
            gname = "token_embd.weight"
        elif name == "model.norm.weight":
            gname = "output_norm.weight"
        elif name == "lm_head.weight":
            gname = "output.weight"
        else:
            parts = name.split(".")
            gname = f"blk.{parts[2]}." + names[".".join(parts[3:])]
        permuted = arch == "llama" and (".attn_q." in gname or ".attn_k." in gname)
        heads = cfg.num_attention_heads if ".attn_q." in gname else cfg.num_key_value_heads
        if permuted:
            x = permute(x, heads)
        kind = gtype if x.ndim == 2 else gguf.GGMLQuantizationType.F32
        # The output head (output.weight, or token_embd when tied) stays at higher precision
        # under 4-bit types, as llama-quantize keeps it (Q6_K there; Q8_0 here, prism's rule).
        head = gname == "output.weight" or (gname == "token_embd.weight" and cfg.tie_word_embeddings)
        if head and kind in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q4_1):
            kind = gguf.GGMLQuantizationType.Q8_0
        data = gguf.quants.quantize(x, kind) if kind != gguf.GGMLQuantizationType.F32 else x
        w.add_tensor(gname, data, raw_dtype=kind)
        back = gguf.quants.dequantize(data, kind) if kind != gguf.GGMLQuantizationType.F32 else x
        back = np.asarray(back, dtype=np.float32).reshape(x.shape)
        as_stored[name] = torch.from_numpy(unpermute(back, heads) if permuted else back)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if cfg.tie_word_embeddings:
        as_stored["lm_head.weight"] = as_stored["model.embed_tokens.weight"]
    return as_stored


# Every quantized-weight GEMV on float activations (qa=0), the decode step's fused forms included
# (addmm: o/down projections with the residual; rms_norm_linear: the norm as float rows, variant 1
# the CPU kernel; linear_silu_and_mul: the gate/up pairs, which prism-llm runs on CPUs).
FLOAT_ACTIVATION_ROUTES = ('routes:\n  linear: {backend: opencl, config: "qa=0"}\n'
                           '  addmm: {backend: opencl, config: "qa=0"}\n'
                           '  rms_norm_linear: {backend: opencl, config: "variant=1,qa=0"}\n'
                           '  linear_silu_and_mul: {backend: opencl, config: "variant=1,nb=1,qa=0"}\n')


def check_gguf(prism_llm, work, qtype):
    import copy
    for arch in ("llama", "qwen2"):
        model = make_model(arch)
        tok = common.train_tokenizer("llama3" if arch == "llama" else "qwen2")
        path = os.path.join(work, f"{arch}-{qtype}.gguf")
        stored = write_gguf(model, arch, qtype, path, tok)
        same = copy.deepcopy(model)
        same.load_state_dict(stored, strict=False)
        want_logits, want_ids = common.hf_generate(same)
        # Linears on float activations (qa=0: the same arithmetic as transformers), so the f32
        # bound holds; decode's fused forms too (addmm with the residual, rms_norm_linear).
        exact = _write(work, "float-activations.yaml", FLOAT_ACTIVATION_ROUTES)
        _, got_logits, got_ids = common.prism_generate(prism_llm, path, work, ("--routes", exact))
        common.compare_logits(f"{arch} {qtype} vs transformers on the dequantized weights", got_logits, want_logits)
        if got_ids != want_ids:
            raise SystemExit(f"{arch} {qtype}: greedy ids {got_ids} != {want_ids}")
        spread = 0.0
        if qtype.startswith("Q"):
            # The profile's routes: blocks may meet activations rounded to int8 per 32-block (qa=1:
            # the pocl profile at M = 1, as llama.cpp on CPUs). The bound widens by twice the spread
            # that rounding every linear's input makes in transformers. The first id must be one of
            # the two runs'; later ones are not checked, as prism then mixes float prefill with int8
            # decode steps, which neither run does, and these random models have near-tied logits.
            import numpy as np
            logits8, ids8 = common.hf_generate(common.with_int8_activations(same))
            spread = float(np.max(np.abs(np.asarray(logits8) - want_logits)))
            _, routed_logits, routed_ids = common.prism_generate(prism_llm, path, work)
            common.compare_logits(f"{arch} {qtype} (profile routes) vs transformers", routed_logits, want_logits,
                                  extra=2 * spread)
            if routed_ids[0] not in (want_ids[0], ids8[0]):
                raise SystemExit(f"{arch} {qtype}: first greedy id {routed_ids[0]} != {want_ids[0]} "
                                 f"(int8 activations: {ids8[0]})")
        # Against the original f32 weights: prism's error is the quantization's, as transformers
        # measures it on the same dequantized weights.
        orig_logits, _ = common.hf_generate(model, steps=1)
        import numpy as np
        err = float(np.max(np.abs(np.asarray(got_logits) - orig_logits)))
        quant_err = float(np.max(np.abs(np.asarray(want_logits) - orig_logits)))
        scale = float(np.max(np.abs(orig_logits)))
        print(f"{arch} {qtype}: ids {got_ids} identical; vs the original weights max |diff| {err:.3g} "
              f"(transformers on the dequantized weights: {quant_err:.3g}) of max |logit| {scale:.3g}")
        if err > quant_err + 2e-4 * max(1.0, scale):
            raise SystemExit(f"{arch} {qtype}: {err} from the original logits exceeds the quantization's {quant_err}")
        text = "It's 2026; 你好，世界！"
        got = json.loads(common.run([prism_llm, "--tokenizer", path, "--tokenize",
                                     _write(work, "gguf-text.txt", text)]))
        if got["whole"]["ids"] != tok.encode(text, add_special_tokens=False).ids:
            raise SystemExit(f"{arch} {qtype}: GGUF tokenizer ids {got['whole']['ids']} != "
                             f"{tok.encode(text, add_special_tokens=False).ids}")


# A text from a small grammar (seeded): learnable enough that a tiny model trained for a few
# seconds reaches a low perplexity, so that quantization visibly moves it.
GRAMMAR = (["the cat", "a dog", "my friend", "the old man", "every child", "the teacher", "her brother"],
           ["sees", "likes", "finds", "takes", "wants", "makes", "paints"],
           ["the ball", "a red apple", "the small house", "some water", "the blue sky", "a good book", "his coat"],
           ["today", "again", "at night", "in the park", "with joy", "before lunch", ""])


def grammar_text(seed, sentences):
    import random
    rng = random.Random(seed)
    return " ".join(" ".join(w for w in (rng.choice(part) for part in GRAMMAR) if w) + " ." for _ in range(sentences))


def llamacpp_python():
    """The python with llama-cpp-python: PRISM_LLAMACPP_PYTHON, else the benchmark venv's."""
    import subprocess
    cand = os.environ.get("PRISM_LLAMACPP_PYTHON") or os.path.join(
        os.environ.get("PRISM_BENCH_VENV", os.path.expanduser("~/.cache/prism/bench-venv")), "bin", "python")
    if os.path.exists(cand) and subprocess.run([cand, "-c", "import llama_cpp"], capture_output=True).returncode == 0:
        return cand
    return None


def check_perplexity(prism_llm, work, arch):
    import time
    import torch
    import transformers as tf
    t_start = time.time()
    words = sorted({w for part in GRAMMAR for phrase in part for w in phrase.split()} | {"."})
    ids_of = {w: 3 + i for i, w in enumerate(words)}
    train_text, eval_text = grammar_text(1, 600), grammar_text(2, 40)
    _write(work, "train.txt", train_text)
    _write(work, "eval.txt", eval_text)
    train = torch.tensor([ids_of[w] for w in train_text.split()])
    eval_ids = [ids_of[w] for w in eval_text.split()][:200]
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2)
    model = tf.LlamaForCausalLM(cfg).float()
    saved = os.path.join(work, "trained.pt")  # a rerun in the same folder reuses the training
    if os.path.exists(saved):
        model.load_state_dict(torch.load(saved))
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=4e-3)
        model.train()
        for step in range(80):
            starts = torch.randint(0, len(train) - 49, (8,))
            x = torch.stack([train[s:s + 48] for s in starts.tolist()])
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"perplexity: trained {sum(p.numel() for p in model.parameters())} parameters to loss "
              f"{loss.item():.3f} in {time.time() - t_start:.1f} s")
        torch.save(model.state_dict(), saved)
    model.eval()
    tok = common.train_tokenizer("llama3")
    f32 = os.path.join(work, f"{arch}-F32.gguf")
    write_gguf(model, arch, "F32", f32, tok)
    ids_arg = ",".join(map(str, eval_ids))
    llama_py = llamacpp_python()

    def prism_nll(path, *extra):
        out = os.path.join(work, "ppl.json")
        common.run([prism_llm, "--model", path, "--prompt-ids", ids_arg, "--perplexity", "--new-tokens", "1",
                    "--warmup", "0", "--max-context", "512", "--json", out, *extra])
        with open(out) as f:
            return json.load(f)["mean_nll"]

    def llama_nll(path):
        return json.loads(common.run([llama_py, os.path.join(os.path.dirname(__file__), "llamacpp_tool.py"),
                                      "score", path, ids_arg]))["mean_nll"]

    import math
    files = {"F32": f32}
    for kind in ("Q8_0", "Q4_0", "Q4_1"):
        files[kind] = os.path.join(work, f"{arch}-{kind}.gguf")
        if llama_py:
            common.run([llama_py, os.path.join(os.path.dirname(__file__), "llamacpp_tool.py"), "quantize", f32,
                        files[kind], kind])
        else:
            write_gguf(model, arch, kind, files[kind], tok)
    prism = {k: prism_nll(p) for k, p in files.items()}
    llama = {k: llama_nll(p) for k, p in files.items()} if llama_py else {}
    ppl = {k: math.exp(v) for k, v in prism.items()}
    for k in files:
        line = f"perplexity {k}: prism {ppl[k]:.4f} (gap {ppl[k] / ppl['F32'] - 1:+.4%})"
        if llama:
            line += f", llama.cpp {math.exp(llama[k]):.4f} (gap {math.exp(llama[k] - llama['F32']) - 1:+.4%})"
        print(line)
    failures = []
    if llama and abs(prism["F32"] - llama["F32"]) > 0.01:
        failures.append(f"F32: prism mean NLL {prism['F32']:.5f} vs llama.cpp {llama['F32']:.5f}")
    if not ppl["Q8_0"] <= 1.01 * ppl["F32"]:
        failures.append(f"Q8_0 perplexity {ppl['Q8_0']:.4f} is more than 1% above F32's {ppl['F32']:.4f}")
    for k in ("Q4_0", "Q4_1"):
        gap = ppl[k] / ppl["F32"] - 1
        if llama:
            ref = math.exp(llama[k] - llama["F32"]) - 1
            if gap > ref + 0.25 * abs(ref) + 0.002:
                failures.append(f"{k}: prism's perplexity gap {gap:+.4%} exceeds llama.cpp's {ref:+.4%}")
        elif gap > 0.10:
            failures.append(f"{k}: perplexity gap {gap:+.4%} > 10% without a llama.cpp reference")
    # The blocks kept on the device against the same weights expanded (--dequantize), both on
    # float activations (qa=0), where the two runs do the same arithmetic in another order: a
    # wrong scale, offset or block order moves this NLL by far more than 1e-4. The profile's
    # routes round activations to int8 per 32-block (qa=1, llama.cpp's rule on CPUs, at every M
    # on pocl); that moved it by 2.4e-3 (2026-11-24), so its bound is 5e-3, half a percent of
    # perplexity.
    deq = prism_nll(files["Q4_0"], "--dequantize")
    floats = _write(work, "float-activations.yaml", FLOAT_ACTIVATION_ROUTES)
    kept = prism_nll(files["Q4_0"], "--routes", floats)
    print(f"perplexity Q4_0 --dequantize: {math.exp(deq):.4f}, kept on float activations: {math.exp(kept):.4f}")
    if abs(deq - kept) > 1e-4:
        failures.append(f"Q4_0 kept quantized on float activations (NLL {kept:.6f}) != --dequantize ({deq:.6f})")
    if abs(deq - prism["Q4_0"]) > 5e-3:
        failures.append(f"Q4_0 kept quantized on the profile's routes (NLL {prism['Q4_0']:.6f}) is more than 5e-3 "
                        f"from --dequantize ({deq:.6f})")
    # prism's quantizer and llama-quantize's rules: the same perplexity as llama.cpp's files.
    for kind in ("q8_0", "q4_0"):
        own = prism_nll(f32, "--quantize", kind)
        print(f"perplexity F32 --quantize {kind}: {math.exp(own):.4f}")
        if abs(own - prism[kind.upper()]) > 0.005:
            failures.append(f"--quantize {kind}: NLL {own:.5f} vs {prism[kind.upper()]:.5f} on the {kind.upper()} file")
    if failures:
        raise SystemExit("perplexity: " + "; ".join(failures))
    print(f"perplexity: checks passed in {time.time() - t_start:.1f} s")
    if not llama:
        print("perplexity: no llama-cpp-python (benchmarks/llm/llamacpp-env.sh): the comparison with llama.cpp "
              "was skipped")
        sys.exit(77)


def _write(work, name, text):
    path = os.path.join(work, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def main():
    prism_llm, work, what, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    import torch
    torch.set_num_threads(2)
    for name in names:
        os.makedirs(os.path.join(work, name), exist_ok=True)
        {"logits": check_logits, "tokenizer": check_tokenizer, "gguf": check_gguf,
         "perplexity": check_perplexity}[what](
            prism_llm, os.path.join(work, name), name)
    print("PASS")


if __name__ == "__main__":
    main()
