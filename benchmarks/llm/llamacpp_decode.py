# SPDX-License-Identifier: Apache-2.0
"""llama.cpp's decode speed on a GGUF file, through llama-cpp-python: prompt of the given ids,
then N greedy tokens; prints one JSON line with tokens/s (best of REPEAT).
Usage: python llamacpp_decode.py FILE.gguf THREADS PROMPT_IDS NEW_TOKENS REPEAT"""
import json
import sys
import time

import llama_cpp
import numpy as np


def main():
    path, threads, prompt, new_tokens, repeat = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), \
        int(sys.argv[5])
    ids = [int(x) for x in prompt.split(",")]
    llm = llama_cpp.Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=512, n_batch=512,
                          verbose=False)
    n_vocab = llm.n_vocab()

    def last_logits():  # the logits of the last token evaluated (the only row llama.cpp computes)
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))

    best_decode, best_prefill, tokens = None, None, None
    for _ in range(repeat + 1):  # the first round warms up
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        first = int(last_logits().argmax())
        t1 = time.perf_counter()
        out = [first]
        for _ in range(new_tokens - 1):
            llm.eval([out[-1]])
            out.append(int(last_logits().argmax()))
        t2 = time.perf_counter()
        prefill, decode = t1 - t0, t2 - t1
        best_prefill = prefill if best_prefill is None else min(best_prefill, prefill)
        best_decode = decode if best_decode is None else min(best_decode, decode)
        tokens = out
    print(json.dumps({"engine": "llama.cpp", "version": llama_cpp.__version__, "threads": threads,
                      "prefill_tokens_per_s": len(ids) / best_prefill,
                      "decode_tokens_per_s": (new_tokens - 1) / best_decode, "tokens": tokens}))


if __name__ == "__main__":
    main()
