"""transformers models served by prism through prism.torch: a small random Llama (decoder, GQA,
RoPE, RMSNorm, SwiGLU) and a BERT-style encoder (LayerNorm, GELU, padded attention masks), built
here without downloads. Outputs match plain torch, and every op the bridge routed appears in the
dispatch log."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from conftest import log_lines  # noqa: E402


def _run_both(bridge, model, **inputs):
    with torch.no_grad():
        expected = model(**inputs)
        bridge.reset_stats()
        with bridge.use_prism():
            got = model(**inputs)
    return expected, got


def _check_log(bridge, log_file, must_route):
    stats = bridge.stats()
    routed = {name for name, s in stats.items() if s["prism"]}
    for aten in must_route:
        assert aten in routed, f"{aten} was not served by prism: {stats}"
    execs = {r["op"] for r in log_lines(log_file, "exec")}
    from prism.torch import _HANDLERS

    for aten in routed:
        assert _HANDLERS[aten][0] in execs, f"{aten} ran in prism but the log has no {_HANDLERS[aten][0]}: {execs}"
    return stats


@pytest.fixture()
def bridge(prism):
    import prism.torch as pt

    yield pt
    pt.disable()


def test_llama_forward(prism, bridge, log_file):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rms_norm_eps=1e-6, attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    expected, got = _run_both(bridge, model, input_ids=ids)
    torch.testing.assert_close(got.logits, expected.logits, rtol=1e-3, atol=1e-4)
    stats = _check_log(bridge, log_file, ["embedding", "linear", "silu", "mul.Tensor", "rsqrt", "mean.dim",
                                          "scaled_dot_product_attention", "cat", "neg"])
    # Greedy decoding picks the same tokens.
    with torch.no_grad():
        plain = model.generate(ids[:1, :6], max_new_tokens=4, do_sample=False)
        with bridge.use_prism():
            routed = model.generate(ids[:1, :6], max_new_tokens=4, do_sample=False)
    assert torch.equal(plain, routed)
    assert stats["linear"]["prism"] >= 2 * 7


def test_bert_encoder_with_padding(prism, bridge, log_file):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64, attn_implementation="sdpa")
    model = BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 6:] = 0  # the second sequence is padded
    expected, got = _run_both(bridge, model, input_ids=ids, attention_mask=mask)
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, rtol=1e-3, atol=1e-4)
    _check_log(bridge, log_file, ["embedding", "linear", "layer_norm", "gelu", "scaled_dot_product_attention",
                                  "tanh"])
