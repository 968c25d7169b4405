# SPDX-License-Identifier: Apache-2.0
"""The guide's encoder (examples/guide/encoder.cpp) against transformers' BertModel: a random
BERT written with save_pretrained, a padded batch, mean pooling + L2 normalization done in torch.
Checks prism's fused and unfused forwards within 1e-4 of torch (f32, CPU) and that the fused one
made fewer dispatches. Nothing is downloaded. Usage: encoder_check.py GUIDE_ENCODER WORKDIR"""
import os
import subprocess
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import BertConfig, BertModel


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    heads = 4
    config = BertConfig(vocab_size=64, hidden_size=48, num_hidden_layers=2, num_attention_heads=heads,
                        intermediate_size=96, max_position_embeddings=32, hidden_act="gelu")
    model = BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():  # larger than BERT's init (std 0.02), so attention and GELU matter
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    model_dir = os.path.join(work, "bert")
    model.save_pretrained(model_dir, safe_serialization=True)
    lengths = [9, 5, 2]
    ids = torch.randint(1, 64, (3, 9), dtype=torch.int64)
    mask = torch.zeros(3, 9, dtype=torch.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    ids = ids * mask  # padding id 0
    inputs = os.path.join(work, "inputs.safetensors")
    save_file({"input_ids": ids, "attention_mask": mask}, inputs)
    out = os.path.join(work, "prism.safetensors")
    res = subprocess.run([exe, os.path.join(model_dir, "model.safetensors"), inputs, str(heads), out],
                         capture_output=True, text=True)
    print(res.stdout, res.stderr)
    if res.returncode != 0:
        sys.exit(f"guide_encoder failed with exit code {res.returncode}")

    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state.double()
    m = mask.unsqueeze(-1).double()
    expected = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2, dim=-1)
    with safe_open(out, "pt") as f:
        meta = f.metadata()
        failed = False
        for name in ("embeddings", "embeddings_unfused"):
            got = f.get_tensor(name).double()
            err = (got - expected).abs().max().item()
            print(f"{name}: max |prism - transformers| = {err:.3g}")
            failed |= not err <= 1e-4
    fused, unfused = int(meta["fused_dispatches"]), int(meta["unfused_dispatches"])
    print(f"dispatches per forward: {unfused} unfused -> {fused} with the encoder ops")
    if failed or fused >= unfused:
        sys.exit("FAILED")


if __name__ == "__main__":
    main()
