# SPDX-License-Identifier: Apache-2.0
"""llama.cpp's side of the quantization accuracy check, run by the python that has
llama-cpp-python (benchmarks/llm/llamacpp-env.sh):
  quantize SRC.gguf DST.gguf TYPE   llama-quantize's algorithm and rules (Q8_0, Q4_0, Q4_1)
  score FILE.gguf IDS               mean negative log-likelihood of each id after the ones before
                                    it, token by token as prism-llm --perplexity does; prints JSON"""
import json
import sys

import llama_cpp
import numpy as np


def quantize(src, dst, kind):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = {"Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
                    "Q4_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1}[kind]
    params.nthread = 2
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params) != 0:
        raise SystemExit(f"llama_model_quantize {src} -> {dst} ({kind}) failed")


def score(path, ids):
    llm = llama_cpp.Llama(model_path=path, n_threads=2, n_threads_batch=2, n_ctx=len(ids) + 8, n_batch=1,
                          verbose=False)
    n_vocab = llm.n_vocab()
    nll = 0.0
    for i in range(len(ids) - 1):
        llm.eval([ids[i]])
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
        x = logits.astype(np.float64)
        top = x.max()
        nll -= x[ids[i + 1]] - top - np.log(np.exp(x - top).sum())
    print(json.dumps({"engine": "llama.cpp", "version": llama_cpp.__version__, "scored_tokens": len(ids) - 1,
                      "mean_nll": nll / (len(ids) - 1)}))


if __name__ == "__main__":
    if sys.argv[1] == "quantize":
        quantize(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        score(sys.argv[2], [int(x) for x in sys.argv[3].split(",")])
