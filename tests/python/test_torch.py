"""prism.torch: each aten op the bridge serves matches torch, runs in prism (the dispatch log shows
it), works on the tensors' own memory, and falls back to torch with the reason logged when prism
cannot take the call; enable/disable/use_prism and their bad input."""
import pytest

torch = pytest.importorskip("torch")

from conftest import log_lines  # noqa: E402


@pytest.fixture()
def bridge(prism):
    import prism.torch as pt

    pt.reset_stats()
    yield pt
    pt.disable()


def _rand(*shape, dtype=None):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    return torch.randn(*shape, generator=g, dtype=dtype or torch.float32)


CASES = {
    "add.Tensor": (lambda a, b: a + b * 0.5, lambda: (_rand(4, 8), _rand(8))),
    "add.Tensor scalar": (lambda a: a + 2.0, lambda: (_rand(4, 8),)),
    "sub.Tensor": (lambda a, b: torch.sub(a, b, alpha=3), lambda: (_rand(4, 8), _rand(4, 8))),
    "mul.Tensor": (lambda a, b: a * b, lambda: (_rand(3, 5), _rand(3, 1))),
    "div.Tensor": (lambda a: a / 3.0, lambda: (_rand(3, 5),)),
    "pow.Tensor_Scalar": (lambda a: a.pow(2), lambda: (_rand(3, 5),)),
    "neg": (torch.neg, lambda: (_rand(7),)),
    "exp": (torch.exp, lambda: (_rand(7),)),
    "rsqrt": (lambda a: torch.rsqrt(a.abs() + 0.1), lambda: (_rand(7),)),
    "tanh": (torch.tanh, lambda: (_rand(7),)),
    "sigmoid": (torch.sigmoid, lambda: (_rand(7),)),
    "relu": (torch.relu, lambda: (_rand(7),)),
    "silu": (torch.nn.functional.silu, lambda: (_rand(2, 9),)),
    "gelu": (torch.nn.functional.gelu, lambda: (_rand(2, 9),)),
    "gelu tanh": (lambda a: torch.nn.functional.gelu(a, approximate="tanh"), lambda: (_rand(2, 9),)),
    "softmax.int": (lambda a: torch.softmax(a, -1), lambda: (_rand(3, 17),)),
    "log_softmax.int": (lambda a: torch.log_softmax(a, 1), lambda: (_rand(3, 17),)),
    "layer_norm": (lambda a, w, b: torch.nn.functional.layer_norm(a, (16,), w, b, 1e-5),
                   lambda: (_rand(3, 16), _rand(16), _rand(16))),
    "rms_norm": (lambda a, w: torch.nn.functional.rms_norm(a, (16,), w, 1e-6), lambda: (_rand(3, 16), _rand(16))),
    "mm": (torch.mm, lambda: (_rand(5, 7), _rand(7, 3))),
    "mm transposed": (lambda a, b: torch.mm(a.t(), b), lambda: (_rand(7, 5), _rand(7, 3))),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), lambda: (_rand(3), _rand(5, 7), _rand(7, 3))),
    "bmm": (torch.bmm, lambda: (_rand(2, 5, 7), _rand(2, 7, 3))),
    "linear": (torch.nn.functional.linear, lambda: (_rand(2, 4, 16), _rand(8, 16), _rand(8))),
    "matmul": (torch.matmul, lambda: (_rand(2, 5, 7), _rand(7, 3))),
    "scaled_dot_product_attention": (
        lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda: (_rand(1, 4, 6, 8), _rand(1, 4, 6, 8), _rand(1, 4, 6, 8))),
    "sdpa gqa mask": (
        lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
        lambda: (_rand(2, 4, 3, 8), _rand(2, 2, 5, 8), _rand(2, 2, 5, 8), torch.rand(2, 1, 3, 5) > 0.3)),
    "embedding": (torch.nn.functional.embedding, lambda: (torch.tensor([[1, 0, 3]]), _rand(5, 6))),
    "cat": (lambda a, b: torch.cat([a, b], dim=1), lambda: (_rand(2, 3), _rand(2, 5))),
    "mean.dim": (lambda a: a.mean(-1, keepdim=True), lambda: (_rand(3, 10),)),
    "sum.dim_IntList": (lambda a: a.sum(0), lambda: (_rand(3, 10),)),
    "amax": (lambda a: a.amax(1), lambda: (_rand(3, 10),)),
}
# The aten overload each case must route (the case's name, unless given here).
ATEN = {"add.Tensor scalar": "add.Tensor", "gelu tanh": "gelu", "mm transposed": "mm",
        "sdpa gqa mask": "scaled_dot_product_attention"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_torch_and_runs_in_prism(prism, bridge, log_file, case):
    fn, make = CASES[case]
    args = make()
    with torch.no_grad():
        expected = fn(*args)
        with bridge.use_prism():
            got = fn(*args)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=2e-4, atol=2e-5)
    aten = ATEN.get(case, case)
    stats = bridge.stats()
    assert stats.get(aten, {}).get("prism"), f"{aten} was not served by prism: {stats}"
    op = bridge._HANDLERS[aten][0]
    execs = [r["op"] for r in log_lines(log_file, "exec")]
    assert op in execs, f"{op} not in the dispatch log: {execs}"


def test_zero_copy_in_and_out(prism, bridge):
    if not prism.get_device().shares_host_memory:
        pytest.skip("the device keeps its own memory")
    a = _rand(256)
    pa = prism.tensor(a)
    assert pa.host_memory != 0
    # The prism tensor is a's memory: a kernel writing it changes a.
    prism.ops.relu(pa, out=pa)
    prism.synchronize()
    assert (a >= 0).all()
    # Results come back as torch tensors over prism's memory (DLPack, no copy).
    with torch.no_grad(), bridge.use_prism(ops=["tanh"]):
        r = torch.tanh(a)
    back = prism.from_dlpack(r)
    assert back.host_memory != 0 and back.host_memory <= r.data_ptr() < back.host_memory + 128


def test_fallbacks_are_logged_with_their_reason(prism, bridge, log_file):
    with torch.no_grad(), bridge.use_prism():
        d = _rand(4, 4).double()
        torch.testing.assert_close(torch.tanh(d), torch.tanh(d.clone()))  # float64: not prism's
        x = _rand(4, 4)
        torch.testing.assert_close(x + d.float(), x + d.float())
        mixed = x + x.half()  # torch promotes mixed dtypes; prism does not
        assert mixed.dtype == torch.float32
        sp = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2))
        torch.mm(sp, x[:2])  # a sparse layout
        torch.nn.functional.scaled_dot_product_attention(x.view(1, 1, 4, 4), x.view(1, 1, 4, 4), x.view(1, 1, 4, 4),
                                                         dropout_p=0.5)
    # Autograd: grad mode on and an input requiring grad.
    w = _rand(4, 4).requires_grad_()
    with bridge.use_prism(ops=["tanh"]):
        y = torch.tanh(w).sum()
    y.backward()
    assert w.grad is not None
    rows = log_lines(log_file, "fallback")
    reasons = " | ".join(r["op"] + ": " + r["reason"] for r in rows)
    assert all(r["backend"] == "torch" and r["tier"] == "fallback" for r in rows)
    assert "aten::tanh: self has dtype torch.float64" in reasons, reasons
    assert "mixed dtypes" in reasons, reasons
    assert "dropout_p=0.5" in reasons, reasons
    assert "autograd" in reasons, reasons
    stats = bridge.stats()
    assert stats["tanh"]["torch"] >= 2 and "reason" in stats["tanh"]


def test_enable_disable_and_selection(prism, bridge):
    names = bridge.enable(ops=["add", "softmax"], unused=["add.Tensor"])
    assert "softmax.int" in names and "_softmax" in names and "add.Tensor" not in names
    assert bridge.is_enabled() and bridge.enabled_ops() == names
    x = _rand(3, 4)
    with torch.no_grad():
        torch.softmax(x, -1)
        x + x
    assert bridge.stats()["softmax.int"]["prism"] == 1
    assert "add.Tensor" not in bridge.stats()
    bridge.disable()
    assert not bridge.is_enabled()
    with torch.no_grad():
        torch.softmax(x, -1)
    assert bridge.stats()["softmax.int"]["prism"] == 1
    # The context manager restores an earlier enable().
    bridge.enable(ops=["tanh"])
    with bridge.use_prism(ops=["relu"]):
        assert bridge.enabled_ops() == ["relu"]
    assert bridge.enabled_ops() == ["tanh"]


def test_bad_bridge_input(prism, bridge):
    with pytest.raises(prism.InvalidArgumentError) as e:
        bridge.enable(ops=["softmaxx"])
    assert "did you mean softmax" in str(e.value) and "valid:" in str(e.value)
    with pytest.raises(prism.InvalidArgumentError):
        bridge.enable(unused=["conv2d"])
    with pytest.raises(TypeError):
        bridge.enable(ops="add")
    assert not bridge.is_enabled()


def test_record_writes_missed_shapes(prism, bridge, tmp_path):
    path = tmp_path / "shapes.yaml"
    with torch.no_grad(), bridge.use_prism(ops=["linear"], record=str(path)):
        torch.nn.functional.linear(_rand(3, 40), _rand(24, 40))
    assert prism.tuning.recording() == ""
    text = path.read_text()
    assert "op: linear" in text and "n: 24" in text and "k: 40" in text, text
    assert "prism pretune --shapes" in text


def test_torch_tensors_to_prism_and_back(prism):
    w = _rand(3, 4).requires_grad_()
    t = prism.tensor(w)  # detached: prism has no autograd
    assert t.shape == (3, 4) and t.dtype == "f32"
    torch.testing.assert_close(torch.from_dlpack(t), w.detach())
    bf = _rand(8).bfloat16()  # no NumPy dtype: DLPack both ways
    pb = prism.from_dlpack(bf)
    assert pb.dtype == "bf16"
    assert torch.equal(torch.from_dlpack(prism.ops.neg(pb)), -bf)
    with pytest.raises(prism.UnsupportedError, match="bfloat16"):
        pb.numpy()
    with pytest.raises(prism.InvalidArgumentError, match="complex64"):
        prism.from_dlpack(torch.zeros(2, dtype=torch.complex64))
