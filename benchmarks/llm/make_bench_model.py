# SPDX-License-Identifier: Apache-2.0
"""Writes the side-by-side benchmark's checkpoint: a random Llama model of SmolLM-135M's shape
(hidden 576, 30 layers, 9 heads / 3 kv x 64, ffn 1536, vocab 49152, tied embeddings; 134.5M
parameters) as a Hugging Face folder in f32 (model.safetensors: ~0.54 GB) and as an F32 GGUF
with the `gguf` package (llama.cpp's names and q/k row order).
Usage: python make_bench_model.py OUT_DIR   (the python of scripts/python-env.sh)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "llm", "hf"))


def main():
    import torch
    import transformers as tf
    import common
    import hf_check
    out = sys.argv[1]
    folder, gguf_path = os.path.join(out, "llama-135m"), os.path.join(out, "llama-135m-f32.gguf")
    if os.path.exists(os.path.join(folder, "model.safetensors")) and os.path.exists(gguf_path):
        print(f"make_bench_model: {folder} and {gguf_path} exist")
        return
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2)
    model = tf.LlamaForCausalLM(cfg).float().eval()
    print(f"make_bench_model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")
    model.save_pretrained(folder)
    tok = common.train_tokenizer("llama3")
    tok.save(os.path.join(folder, "tokenizer.json"))
    hf_check.write_gguf(model, "llama", "F32", gguf_path, tok)
    print(f"make_bench_model: wrote {folder} and {gguf_path}")


if __name__ == "__main__":
    main()
