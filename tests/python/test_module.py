"""prism's Python module: devices, tensors to and from NumPy and DLPack (zero copy on devices that
share host memory), every registry op under prism.ops, the dispatch log, errors, stubs and
`python -m prism`. Each bad input of issue 18 has a test that it raises a clear exception."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import log_lines


# ---- devices --------------------------------------------------------------------------------

def test_devices_and_selection(prism):
    devs = prism.devices()
    assert devs, "no OpenCL device"
    d = prism.select_device()
    assert d in devs
    assert d.type in ("cpu", "gpu", "accelerator", "other")
    assert len(d.fingerprint) == 16
    # PRISM_DEVICE syntax: an index and a type select the same devices the CLI would.
    assert prism.select_device(str(devs[0].index)) == devs[0]
    assert prism.select_device(devs[0].type).type == devs[0].type
    q = prism.set_device(str(d.index))
    assert q.device == d and prism.get_device() == d


def test_bad_device_spec_names_the_syntax(prism):
    with pytest.raises(prism.DeviceNotFoundError) as e:
        prism.select_device("no-such-device-xyz")
    assert "no-such-device-xyz" in str(e.value)
    assert e.value.code == "device_not_found"
    with pytest.raises(TypeError):
        prism.select_device(3)


# ---- tensors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.bool_])
def test_numpy_round_trip(prism, dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    t = prism.tensor(a)
    assert t.shape == (2, 3, 4)
    assert t.dtype == {np.float32: "f32", np.float16: "f16", np.int32: "i32", np.int64: "i64", np.bool_: "bool"}[dtype]
    np.testing.assert_array_equal(t.numpy(), a)


def test_zero_copy_on_host_sharing_devices(prism):
    a = np.arange(1000, dtype=np.float32)
    t = prism.tensor(a)
    if not prism.get_device().shares_host_memory:
        pytest.skip("the device keeps its own memory: tensors are copies")
    # The tensor is the array's memory: a kernel's result lands in it, and numpy() is a view.
    prism.ops.add(t, 1.0, out=t)
    back = t.numpy()
    assert np.shares_memory(back, a)
    np.testing.assert_array_equal(a, np.arange(1000, dtype=np.float32) + 1)
    # Results of ops live in host memory too: numpy() does not copy them.
    r = prism.ops.mul(t, 2.0)
    assert r.host_memory != 0
    r1, r2 = r.numpy(), r.numpy()
    assert np.shares_memory(r1, r2)
    # copy=True copies; copy=False insists on the array's memory.
    c = prism.tensor(a, copy=True)
    assert not np.shares_memory(c.numpy(), a)
    assert np.shares_memory(prism.tensor(a, copy=False).numpy(), a)


def test_strided_views_are_wrapped_without_copy(prism):
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    view = base[1:5:2, ::3]  # non-contiguous, offset into the array
    t = prism.tensor(view)
    assert t.shape == view.shape
    np.testing.assert_array_equal(t.numpy(), view)
    np.testing.assert_allclose(prism.ops.exp(t).numpy(), np.exp(view), rtol=1e-6)
    rev = base[::-1, ::-1]  # negative strides
    np.testing.assert_array_equal(prism.ops.neg(prism.tensor(rev)).numpy(), -rev)


def test_read_only_array_is_copied_or_refused(prism):
    a = np.ones(8, dtype=np.float32)
    a.setflags(write=False)
    t = prism.tensor(a)
    np.testing.assert_array_equal(t.numpy(), a)
    if prism.get_device().shares_host_memory:
        with pytest.raises(prism.InvalidArgumentError, match="read-only"):
            prism.tensor(a, copy=False)


def test_dlpack_both_ways(prism):
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    t = prism.from_dlpack(a)
    assert t.__dlpack_device__()[0] in (1, 4)
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, a)
    if prism.get_device().shares_host_memory:
        assert t.__dlpack_device__() == (1, 0)
        assert np.shares_memory(back, a)


def test_empty_and_zeros(prism):
    z = prism.zeros((3, 5), "f16")
    assert z.dtype == "f16" and z.shape == (3, 5)
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 5), np.float16))
    e = prism.empty([0, 4])
    assert e.numel() == 0 and e.numpy().shape == (0, 4)


# ---- ops ----------------------------------------------------------------------------------

def test_every_registry_op_is_a_function_with_its_attributes(prism):
    infos = prism._prism._op_infos()
    assert len(infos) >= 40
    assert prism.ops.names() == sorted(i["name"] for i in infos)
    for i in infos:
        fn = getattr(prism.ops, i["name"].replace(".", "_"))
        params = inspect.signature(fn).parameters
        for name, default, optional, _ in i["attrs"]:
            assert name in params, f"{i['name']} lacks attribute {name}"
            if not optional:
                assert params[name].default == default, f"{i['name']}.{name}"
        for name, _ in i["inputs"]:
            assert name in params
        assert "out" in params and "queue" in params
        assert i["summary"] in fn.__doc__


def test_ops_match_numpy(prism):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(prism.ops.add(x, x, alpha=2.0).numpy(), x + 2 * x, rtol=1e-6)
    np.testing.assert_allclose(prism.ops.sub(1.0, x).numpy(), 1.0 - x, rtol=1e-6)  # a scalar first operand
    np.testing.assert_allclose(prism.ops.linear(x, w, b).numpy(), x @ w.T + b, rtol=1e-4, atol=1e-4)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(prism.ops.softmax(x, -1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(prism.ops.sum(x, dims=[1], keepdim=True).numpy(), x.sum(1, keepdims=True), rtol=1e-5,
                               atol=1e-5)
    cat = prism.ops.cat([x, x[:1]], dim=0)
    np.testing.assert_array_equal(cat.numpy(), np.concatenate([x, x[:1]]))
    ids = np.array([[1, 0, 3]], dtype=np.int64)
    np.testing.assert_array_equal(prism.ops.embedding(w, ids).numpy(), w[ids])
    out = prism.empty((4, 8))
    r = prism.ops.linear(x, w, out=out)
    assert r.same_storage(out)
    np.testing.assert_allclose(out.numpy(), x @ w.T, rtol=1e-4, atol=1e-4)


def test_op_with_in_place_output_returns_every_output(prism):
    info = prism.ops.info("fused_add_rms_norm")
    x = np.ones((2, 8), np.float32)
    res = np.full((2, 8), 2.0, np.float32)
    r = prism.ops.fused_add_rms_norm(x, prism.tensor(res))
    outs = r if isinstance(r, tuple) else (r,)
    assert len(outs) == len(info.outputs)
    np.testing.assert_allclose(outs[0].numpy(), np.ones((2, 8)), rtol=1e-5)


# ---- bad input: each raises a clear exception naming what was wrong and what is valid ----------

def test_wrongly_typed_array(prism):
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.tensor(np.zeros(3, dtype=np.float64))
    assert "float64" in str(e.value) and "float32" in str(e.value)
    with pytest.raises(prism.InvalidArgumentError, match="complex64.*valid: float32"):
        prism.tensor(np.zeros(3, dtype=np.complex64))
    with pytest.raises(prism.InvalidArgumentError, match="uint8"):
        prism.ops.relu(np.zeros(3, dtype=np.uint8))
    with pytest.raises(prism.InvalidArgumentError, match="not one prism stores"):
        prism.zeros((2,), "float64")


def test_non_contiguous_array_where_contiguity_is_needed(prism):
    a = np.zeros((4, 4), np.float32)[:, ::2]
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism._prism._from_array(prism.default_queue(), a, "never")
    assert "C-contiguous" in str(e.value) and "ascontiguousarray" in str(e.value)
    # An output must be contiguous: the op's own check names the output.
    x = prism.tensor(np.ones((4, 2), np.float32))
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.ops.relu(x, out=prism.tensor(a))
    assert "ops::relu" in str(e.value) and "out" in str(e.value)


def test_tensor_on_another_device(prism):
    class CudaLike:
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

        def __dlpack__(self, **kw):
            raise AssertionError("must not be read")

    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.from_dlpack(CudaLike())
    assert "device type 2" in str(e.value) and "CPU" in str(e.value)


def test_unknown_op_and_attribute(prism):
    with pytest.raises(AttributeError) as e:
        prism.ops.softmaxx
    assert "softmax" in str(e.value)  # the closest names are listed
    with pytest.raises(prism.NotFoundError) as e:
        prism.ops.info("no_such_op")
    assert "add" in str(e.value)
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="dimm"):
        prism.ops.softmax(x, dimm=1)  # a misspelt keyword: Python's own error names it
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.ops.softmax(x, dim="last")
    assert "dim" in str(e.value) and "integer" in str(e.value)
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.ops.softmax(x, dim=5)
    assert "softmax" in str(e.value)
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.ops.gelu(x, approximate="fast")
    assert "approximate" in str(e.value) and "tanh" in str(e.value)
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.ops.mm(x, x)
    assert e.value.code == "invalid_argument" and e.value.operation == "ops::mm"
    assert str(e.value).startswith("ops::mm: ")


def test_errors_keep_the_cpp_message(prism):
    x = prism.tensor(np.ones((2, 2), np.float32))
    w = prism.tensor(np.ones((3, 2), np.float32))
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.ops.mm(x, w)
    assert isinstance(e.value, ValueError) and isinstance(e.value, prism.Error)
    assert "[2, 2]" in str(e.value) and "[3, 2]" in str(e.value)


def test_nothing_crashes_on_garbage(prism):
    x = np.ones((2, 3), np.float32)
    for bad in (object(), "text", [object()], {"a": 1}):
        with pytest.raises((TypeError, prism.Error)):
            prism.ops.relu(bad)
    with pytest.raises((TypeError, prism.Error)):
        prism.ops.cat(x)  # a tensor where a list is needed
    with pytest.raises(prism.InvalidArgumentError):
        prism.ops.sum(x, dims=[0, "a"])
    with pytest.raises(prism.Error):
        prism.ops.relu(x, out=[prism.empty((2, 3)), prism.empty((2, 3))])
    with pytest.raises(prism.InvalidArgumentError):
        prism.empty([1] * 9)


# ---- dispatch log and statistics --------------------------------------------------------------

def test_dispatch_log_control(prism, log_file):
    prism.dispatch.reset_statistics()
    x = prism.tensor(np.ones(64, np.float32))
    prism.ops.add(x, 1.0)
    prism.ops.tanh(x)
    rows = log_lines(log_file, "exec")
    assert [r["op"] for r in rows][-2:] == ["add", "tanh"]
    assert rows[-1]["backend"] in prism.dispatch.backends()
    stats = {s["op"]: s for s in prism.dispatch.statistics()}
    assert stats["add"]["calls"] >= 1
    # Off: nothing more is written.
    prism.dispatch.set_log("0")
    prism.ops.tanh(x)
    assert len(log_lines(log_file, "exec")) == len(rows)
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.dispatch.set_log("loud")
    assert "valid: 0, 1, profile, dispatch, all" in str(e.value)


def test_dispatch_log_context_manager(prism, tmp_path):
    path = tmp_path / "block.csv"
    before = prism.dispatch.log_settings()
    with prism.dispatch.log("1", file=str(path)):
        prism.ops.relu(np.ones(4, np.float32))
    assert prism.dispatch.log_settings() == before
    assert [r["op"] for r in log_lines(path, "exec")] == ["relu"]


# ---- stubs and docs -----------------------------------------------------------------------------

def test_shipped_stubs_match_the_registry(prism):
    from prism import _stubgen

    path = os.path.join(os.path.dirname(prism.__file__), "ops.pyi")
    with open(path) as f:
        assert f.read() == _stubgen.render(), "ops.pyi is stale: rebuild (python -m prism._stubgen)"
    compile(_stubgen.render(), "ops.pyi", "exec")
    here = os.path.dirname(prism.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    with open(os.path.join(here, "_prism.pyi")) as f:  # the native module's, by nanobind's stubgen
        native = f.read()
    assert "class Tensor" in native and "def numpy(self)" in native


# ---- python -m prism ----------------------------------------------------------------------------

def test_python_dash_m_runs_the_cli(prism):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "prism", "ops", "--json"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    import json

    names = sorted(o["name"] for o in json.loads(r.stdout))
    assert names == prism.ops.names()
    r = subprocess.run([sys.executable, "-m", "prism", "no-such-command"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 2 and "no-such-command" in (r.stderr + r.stdout)
