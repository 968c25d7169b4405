# SPDX-License-Identifier: Apache-2.0
"""Shared pieces of the Hugging Face checks: the multilingual text, small random checkpoints
written with transformers, tokenizers trained with `tokenizers`, prism-llm runs."""
import json
import os
import subprocess

# Text the tests write and train on: several scripts, digits, punctuation, runs of spaces and
# newlines, contractions, emoji (4-byte UTF-8).
TEXT = """The quick brown fox jumps over the lazy dog. It's 2026; we've got 12345 reasons!
Le cœur a ses raisons que la raison ne connaît point. Ça va? Très bien, merci.
Der schnelle braune Fuchs springt über den faulen Hund — Größe: 3,5 m².
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!
敏捷的棕色狐狸跳过了懒狗。你好，世界！今天是2026年11月23日。
素早い茶色の狐がのろまな犬を飛び越える。こんにちは世界
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요!
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم
Ο γρήγορος καφέ αλεπού πηδάει πάνω από το τεμπέλικο σκυλί.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।
Emoji: 🦊🐶 ✨ done... "quoted" (parens) [brackets] {braces} <tags> #hash @at 50% $9.99
  indented   with   spaces	and	tabs
code: def f(x):\n    return x**2 + 1  # comment
I'LL SEE YOU'RE RIGHT, THEY'D SAY WE'VE I'M
"""

PROMPT_IDS = [5, 17, 42, 99, 3, 250, 7, 64]
NEW_TOKENS = 8


def run(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(map(str, cmd))}\n{res.stdout}\n{res.stderr}")
    return res.stdout


def prism_generate(prism_llm, model, workdir, extra=()):
    """prism-llm on `model` with PROMPT_IDS: returns (prompt ids, next-token logits, greedy ids)."""
    dump = os.path.join(workdir, "prism.json")
    run([prism_llm, "--model", model, "--prompt-ids", ",".join(map(str, PROMPT_IDS)), "--new-tokens",
         str(NEW_TOKENS), "--warmup", "0", "--breakdown-steps", "0", "--ignore-eos", "--dump-logits", dump,
         *extra])
    with open(dump) as f:
        d = json.load(f)
    return d["prompt"], d["logits"], d["tokens"]


def hf_generate(model, ids=PROMPT_IDS, steps=NEW_TOKENS):
    """Greedy ids and the first next-token logits of a transformers model, on the CPU in f32."""
    import torch
    x = torch.tensor([ids])
    out, first = [], None
    with torch.no_grad():
        for _ in range(steps):
            logits = model(x).logits[0, -1].double()
            if first is None:
                first = logits
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            x = torch.cat([x, torch.tensor([[nxt]])], dim=1)
    return first.numpy(), out


def with_int8_activations(model):
    """A copy of `model` whose linear layers see their input rounded to int8 per 32-block
    (d = max|x| / 127, q = round(x / d), half to even), as llama.cpp's CPU kernels and prism's
    at qa=1 compute block-quantized weights."""
    import copy
    import torch
    m = copy.deepcopy(model)

    def round_blocks(module, args):
        x = args[0]
        b = x.reshape(-1, 32).double()
        d = b.abs().amax(dim=1, keepdim=True) / 127
        q = torch.round(b / torch.where(d > 0, d, torch.ones_like(d)))
        return ((q * d).reshape(x.shape).to(x.dtype),) + tuple(args[1:])

    for module in m.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_pre_hook(round_blocks)
    return m


def compare_logits(name, got, want, rel=2e-4, extra=0.0):
    """max |got - want| <= rel * max(1, max |want|) + extra."""
    import numpy as np
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    diff = float(np.max(np.abs(got - want)))
    bound = rel * max(1.0, float(np.max(np.abs(want)))) + extra
    print(f"{name}: next-token logits max |diff| {diff:.3g} (bound {bound:.3g}"
          f"{f', of it {extra:.3g} for int8 activations' if extra else ''}, max |logit| "
          f"{float(np.max(np.abs(want))):.3g})")
    if not diff <= bound:
        raise SystemExit(f"{name}: logits differ by {diff} > {bound}")


def train_tokenizer(kind, vocab_size=400):
    """A BPE tokenizer trained on TEXT, in the style of `kind`: gpt2, llama3, qwen2, smollm or
    llama2 (Metaspace with byte fallback)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    llama3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
    qwen2 = llama3.replace(r"\p{N}{1,3}", r"\p{N}")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    if kind == "llama2":
        tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None, fuse_unk=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = None
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                      show_progress=False)
        tok.train_from_iterator(TEXT.splitlines(), trainer)
        # Llama-2's vocabulary holds the 256 byte tokens <0x00>..<0xFF> as plain entries.
        j = json.loads(tok.to_str())
        vocab = j["model"]["vocab"]
        for b in range(256):
            name = f"<0x{b:02X}>"
            if name not in vocab:
                vocab[name] = len(vocab) + len(j["added_tokens"]) - sum(
                    1 for a in j["added_tokens"] if a["content"] in vocab)
        tok = Tokenizer.from_str(json.dumps(j))
        bos = tok.token_to_id("<s>")
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
        return tok
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif kind == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                              use_regex=True)])
    else:
        regex = llama3 if kind == "llama3" else qwen2
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), behavior="isolated"),
                                                     byte_level])
        if kind == "qwen2":
            tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT.splitlines(), trainer)
    if kind == "llama3":
        bos = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A",
                                                           special_tokens=[("<|endoftext|>", bos)])
    return tok
