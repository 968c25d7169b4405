"""prism.torch: PyTorch's aten ops on CPU tensors served by prism, FlagGems style.

    import prism.torch
    prism.torch.enable(unused=["cat"], record="untuned.yaml")   # process-wide
    with prism.torch.use_prism(ops=["linear", "softmax"]):       # or for a block
        model(inputs)

Implementations are registered through torch.library on the AutogradCPU dispatch key, above
aten's CPU kernels: tensors are handed to prism without a copy (DLPack over their memory, on
devices that share host memory), and prism's results come back as torch tensors over prism's
memory. A call prism cannot serve (a dtype, layout or argument it does not take, autograd, a
shape its kernels refuse) runs the kernel the bridge replaced (torch.library.get_kernel) instead,
with the reason written to the dispatch log as a "fallback" line (prism.dispatch.set_log) and
counted in stats().

prism has no backward: a call that needs autograd (grad mode on and an input requiring grad)
falls back to aten with its autograd intact. Under torch.inference_mode() aten skips the
autograd layer where the bridge sits, so prism is not reached: use torch.no_grad().
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import torch

from . import _prism
from . import ops as _ops
from ._core import Error, Queue, Tensor, default_queue

__all__ = ["enable", "disable", "enabled_ops", "is_enabled", "supported_ops", "stats", "reset_stats", "use_prism"]

_torch_dtypes = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
                 torch.int64: "i64", torch.bool: "bool"}
_float_dtypes = (torch.float32, torch.float16, torch.bfloat16)


class _Fallback(Exception):
    """Raised by a handler when prism does not take the call; the message is the reason."""


# ---- conversion -----------------------------------------------------------------------------

def _to_prism(t: torch.Tensor, q: Queue, what: str) -> Tensor:
    if t.device.type != "cpu":
        raise _Fallback(f"{what} is on {t.device}, not the CPU")
    if t.layout != torch.strided:
        raise _Fallback(f"{what} has layout {t.layout}; prism takes strided tensors")
    if t.dtype not in _torch_dtypes:
        raise _Fallback(f"{what} has dtype {t.dtype}; prism takes {', '.join(str(d) for d in _torch_dtypes)}")
    if t.is_conj() or t.is_neg():
        raise _Fallback(f"{what} carries a lazy conj/neg bit")
    try:
        return _prism._from_array(q, t.detach(), "auto")
    except Error as e:
        raise _Fallback(f"{what}: {e}") from None


def _to_torch(t: Tensor) -> torch.Tensor:
    # A view of prism's host memory where the device shares it; a host copy from other devices
    # (their memory is not CPU-visible, and torch tensors here are CPU tensors).
    return torch.from_dlpack(t.__dlpack__(copy=True))


def _float(t: Any, what: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise _Fallback(f"{what} is a {type(t).__name__}, not a tensor")
    if t.dtype not in _float_dtypes:
        raise _Fallback(f"{what} has dtype {t.dtype}; prism serves this op for float32, float16, bfloat16")
    return t


def _same_dtype(*ts: torch.Tensor) -> None:
    dtypes = {t.dtype for t in ts if t is not None}
    if len(dtypes) > 1:
        raise _Fallback("mixed dtypes " + ", ".join(sorted(str(d) for d in dtypes)) + " (torch promotes; prism does not)")


def _run(op: str, q: Queue, inputs: Sequence[Optional[torch.Tensor]], attrs: Dict[str, Any]) -> Any:
    pins = [None if t is None else _to_prism(t, q, f"input {i}") for i, t in enumerate(inputs)]
    try:
        outs = _prism._call(q, _ops.info(op).id, pins, attrs, None)
    except Error as e:
        raise _Fallback(str(e)) from None
    return _to_torch(outs[0]) if len(outs) == 1 else tuple(_to_torch(o) for o in outs)


def _is_scalar_operand(b: Any) -> bool:
    return not isinstance(b, torch.Tensor) or (b.dim() == 0 and b.device.type == "cpu")


def _scalar(b: Any) -> float:
    return float(b.item()) if isinstance(b, torch.Tensor) else float(b)


# ---- handlers: one per aten overload, in aten's argument order --------------------------------

def _unary(op: str) -> Callable:
    def handler(q: Queue, x: torch.Tensor) -> torch.Tensor:
        return _run(op, q, [_float(x, "self")], {})
    return handler


def _binary(op: str, has_alpha: bool) -> Callable:
    def handler(q: Queue, a: torch.Tensor, b: Any, alpha: Any = 1) -> torch.Tensor:
        _float(a, "self")
        attrs: Dict[str, Any] = {}
        if has_alpha and alpha != 1:
            attrs["alpha"] = float(alpha)
        if _is_scalar_operand(b):
            if isinstance(b, torch.Tensor) and b.dtype.is_complex:
                raise _Fallback("a complex scalar operand")
            attrs["scalar"] = _scalar(b)
            return _run(op, q, [a, None], attrs)
        _same_dtype(a, b)
        return _run(op, q, [a, b], attrs)
    return handler


def _gelu(q: Queue, x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return _run("gelu", q, [_float(x, "self")], {"approximate": approximate})


def _softmax_int(op: str) -> Callable:
    def handler(q: Queue, x: torch.Tensor, dim: int, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        if dtype is not None and dtype != x.dtype:
            raise _Fallback(f"dtype={dtype} converts the input; prism keeps the input's dtype")
        return _run(op, q, [_float(x, "self")], {"dim": int(dim)})
    return handler


def _softmax_kernel(op: str) -> Callable:
    def handler(q: Queue, x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
        if half_to_float:
            raise _Fallback("half_to_float=True returns float32 from a half input")
        return _run(op, q, [_float(x, "self")], {"dim": int(dim)})
    return handler


def _layer_norm(q: Queue, x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor] = None,
                bias: Optional[torch.Tensor] = None, eps: float = 1e-5, cudnn_enable: bool = True) -> torch.Tensor:
    if len(normalized_shape) != 1:
        raise _Fallback(f"normalized_shape {list(normalized_shape)}: prism normalizes over the last dim only")
    _float(x, "input")
    _same_dtype(x, weight, bias)
    return _run("layer_norm", q, [x, weight, bias], {"eps": float(eps)})


def _rms_norm(q: Queue, x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor] = None,
              eps: Optional[float] = None) -> torch.Tensor:
    if len(normalized_shape) != 1:
        raise _Fallback(f"normalized_shape {list(normalized_shape)}: prism normalizes over the last dim only")
    _float(x, "input")
    _same_dtype(x, weight)
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    return _run("rms_norm", q, [x, weight], {"eps": float(eps)})


def _gemm(op: str, n: int) -> Callable:
    def handler(q: Queue, *args: torch.Tensor) -> torch.Tensor:
        ts = [_float(t, f"input {i}") for i, t in enumerate(args[:n])]
        _same_dtype(*ts)
        return _run(op, q, ts, {})
    return handler


def _addmm(q: Queue, bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, beta: Any = 1, alpha: Any = 1) -> torch.Tensor:
    _same_dtype(_float(bias, "self"), _float(a, "mat1"), _float(b, "mat2"))
    return _run("addmm", q, [bias, a, b], {"beta": float(beta), "alpha": float(alpha)})


def _linear(q: Queue, x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
    _same_dtype(_float(x, "input"), _float(w, "weight"), b)
    return _run("linear", q, [x, w, b], {})


def _sdpa(q: Queue, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
          enable_gqa: bool = False) -> torch.Tensor:
    if dropout_p:
        raise _Fallback(f"dropout_p={dropout_p}: prism's attention has no dropout")
    _same_dtype(_float(query, "query"), _float(key, "key"), _float(value, "value"))
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise _Fallback(f"query/key/value of ranks {query.dim()}/{key.dim()}/{value.dim()}; prism takes 4-D "
                        "[batch, heads, len, dim]")
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise _Fallback("query and key heads differ without enable_gqa")
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        _same_dtype(query, attn_mask)
    attrs: Dict[str, Any] = {"is_causal": bool(is_causal)}
    if scale is not None:
        attrs["scale"] = float(scale)
    return _run("scaled_dot_product_attention", q, [query, key, value, attn_mask], attrs)


def _embedding(q: Queue, weight: torch.Tensor, indices: torch.Tensor, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> torch.Tensor:
    _float(weight, "weight")
    if indices.dtype not in (torch.int32, torch.int64):
        raise _Fallback(f"indices of dtype {indices.dtype}; prism takes int32 or int64")
    return _run("embedding", q, [weight, indices], {})


def _cat(q: Queue, tensors: Sequence[torch.Tensor], dim: int = 0) -> torch.Tensor:
    ts = [t for t in tensors if not (t.dim() == 1 and t.numel() == 0)]  # torch skips legacy empty 1-D tensors
    if not ts:
        raise _Fallback("only empty tensors")
    _same_dtype(*ts)
    for i, t in enumerate(ts):
        if t.dtype not in _torch_dtypes:
            raise _Fallback(f"tensor {i} has dtype {t.dtype}")
    return _run("cat", q, ts, {"dim": int(dim)})


def _reduce(op: str) -> Callable:
    def handler(q: Queue, x: torch.Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> torch.Tensor:
        if dtype is not None and dtype != x.dtype:
            raise _Fallback(f"dtype={dtype} converts the input; prism keeps the input's dtype")
        dims = [] if dim is None else ([int(dim)] if isinstance(dim, int) else [int(d) for d in dim])
        return _run(op, q, [_float(x, "self")], {"dims": dims, "keepdim": bool(keepdim)})
    return handler


def _pow_scalar(q: Queue, x: torch.Tensor, exponent: Any) -> torch.Tensor:
    return _run("pow", q, [_float(x, "self"), None], {"scalar": _scalar(exponent)})


# aten overload -> (prism op, handler). The bridge's one table: enable(ops=...) filters it.
_HANDLERS: Dict[str, tuple] = {}
for _name in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "silu"):
    _HANDLERS[_name] = (_name, _unary(_name))
for _name, _prism_op, _alpha in (("add.Tensor", "add", True), ("sub.Tensor", "sub", True), ("mul.Tensor", "mul", False),
                                 ("div.Tensor", "div", False), ("maximum", "maximum", False),
                                 ("minimum", "minimum", False), ("pow.Tensor_Tensor", "pow", False)):
    _HANDLERS[_name] = (_prism_op, _binary(_prism_op, _alpha))
_HANDLERS.update({
    "pow.Tensor_Scalar": ("pow", _pow_scalar),
    "gelu": ("gelu", _gelu),
    "softmax.int": ("softmax", _softmax_int("softmax")),
    "_softmax": ("softmax", _softmax_kernel("softmax")),
    "log_softmax.int": ("log_softmax", _softmax_int("log_softmax")),
    "_log_softmax": ("log_softmax", _softmax_kernel("log_softmax")),
    "layer_norm": ("layer_norm", _layer_norm),
    "rms_norm": ("rms_norm", _rms_norm),
    "mm": ("mm", _gemm("mm", 2)),
    "bmm": ("bmm", _gemm("bmm", 2)),
    "matmul": ("matmul", _gemm("matmul", 2)),
    "addmm": ("addmm", _addmm),
    "linear": ("linear", _linear),
    "scaled_dot_product_attention": ("scaled_dot_product_attention", _sdpa),
    "embedding": ("embedding", _embedding),
    "cat": ("cat", _cat),
    "mean.dim": ("mean", _reduce("mean")),
    "sum.dim_IntList": ("sum", _reduce("sum")),
    "amax": ("max", _reduce("max")),
    "amin": ("min", _reduce("min")),
})


def supported_ops() -> List[str]:
    """The aten overloads the bridge can serve ("add.Tensor", "linear", ...)."""
    return sorted(_HANDLERS)


# ---- registration -----------------------------------------------------------------------------

_lock = threading.Lock()
_active: Dict[str, Any] = {"lib": None, "ops": [], "record_before": None, "queue": None}
_stats: Dict[str, Dict[str, int]] = {}
_reasons: Dict[str, str] = {}


def _count(name: str, served: str) -> None:
    s = _stats.setdefault(name, {"prism": 0, "torch": 0})
    s[served] += 1


def _describe(args: Sequence[Any]) -> tuple:
    dtypes, shapes = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            dtypes.append(str(a.dtype).replace("torch.", ""))
            shapes.append("x".join(str(s) for s in a.shape) or "scalar")
    return "|".join(dtypes), ";".join(shapes)


# Overloads whose Tensor operand may arrive as a Python number (torch unwraps wrapped numbers
# before a Python kernel sees them): the fallback calls the Scalar overload's kernel then.
_SCALAR_TWIN = {"add.Tensor": "add.Scalar", "sub.Tensor": "sub.Scalar", "mul.Tensor": "mul.Scalar",
                "div.Tensor": "div.Scalar", "pow.Tensor_Tensor": "pow.Tensor_Scalar"}


def _make_impl(name: str, original: Any, handler: Callable, scalar_original: Any = None) -> Callable:
    """The AutogradCPU kernel of one aten overload: prism when it takes the call, else the kernel
    it replaced (`original`, from torch.library.get_kernel), which keeps autograd intact."""
    aten_name = "aten::" + name

    def impl(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            reason = "autograd: an input requires grad and prism has no backward"
        else:
            q = _active["queue"] or default_queue()
            try:
                out = handler(q, *args, **kwargs)
                _count(name, "prism")
                return out
            except _Fallback as e:
                reason = str(e)
        _count(name, "torch")
        _reasons[name] = reason
        dtypes, shapes = _describe(args)
        _prism._log_fallback(aten_name, dtypes, shapes, "torch", reason)
        if scalar_original is not None and len(args) > 1 and not isinstance(args[1], torch.Tensor):
            return scalar_original.call_boxed(keyset, *args, **kwargs)
        return original.call_boxed(keyset, *args, **kwargs)

    impl.__name__ = "prism_" + name.replace(".", "_")
    return impl


def _select(ops: Optional[Iterable[str]], unused: Iterable[str]) -> List[str]:
    def matches(pattern: str) -> List[str]:
        hits = [n for n in _HANDLERS if n == pattern or n.split(".")[0] == pattern or _HANDLERS[n][0] == pattern]
        if not hits:
            from difflib import get_close_matches

            close = get_close_matches(pattern, sorted({n.split(".")[0] for n in _HANDLERS}), n=3)
            raise _prism.InvalidArgumentError(
                f"prism.torch: '{pattern}' is not an op the bridge serves"
                + (f" (did you mean {', '.join(close)}?)" if close else "")
                + f"; valid: {', '.join(supported_ops())} (aten names, their packets such as 'add', or prism op names)")
        return hits

    if isinstance(ops, str) or isinstance(unused, str):
        raise TypeError("prism.torch: ops and unused take lists of names, not a string")
    chosen = sorted(_HANDLERS) if ops is None else sorted({h for p in ops for h in matches(p)})
    dropped = {h for p in unused for h in matches(p)}
    return [n for n in chosen if n not in dropped]


def enable(ops: Optional[Iterable[str]] = None, unused: Iterable[str] = (), record: Optional[str] = None,
           queue: Optional[Queue] = None) -> List[str]:
    """Routes aten ops on CPU tensors to prism, process-wide, until disable().

    ops: the ops to serve (aten overloads "add.Tensor", packets "add", or prism names "softmax";
    default: every supported op); unused: ops to leave to torch; record: a shape-set file that
    the shapes missing from the tuning database are appended to (`prism pretune --shapes FILE`
    tunes them); queue: where prism runs (default: prism.default_queue()). Returns the aten
    overloads registered. Enabling again replaces the earlier choice."""
    names = _select(ops, unused)
    from . import tuning

    with _lock:
        _disable_locked()
        lib = torch.library.Library("aten", "IMPL")
        for name in names:
            # The kernel replaced: the fallback, with aten's autograd (or composite) behaviour.
            original = torch.library.get_kernel("aten::" + name, "AutogradCPU")
            twin = _SCALAR_TWIN.get(name)
            scalar_original = torch.library.get_kernel("aten::" + twin, "AutogradCPU") if twin else None
            lib.impl(name, _make_impl(name, original, _HANDLERS[name][1], scalar_original), "AutogradCPU",
                     with_keyset=True)
        _active.update(lib=lib, ops=names, queue=queue)
        if record is not None:
            _active["record_before"] = tuning.recording()
            tuning.record(str(record))
    return list(names)


def _disable_locked() -> None:
    lib = _active["lib"]
    if lib is None:
        return
    lib._destroy()
    if _active["record_before"] is not None:
        from . import tuning

        tuning.record(_active["record_before"] or None)
    _active.update(lib=None, ops=[], record_before=None, queue=None)


def disable() -> None:
    """Gives every op back to torch (and stops recording if enable(record=...) started it)."""
    with _lock:
        _disable_locked()


def is_enabled() -> bool:
    return _active["lib"] is not None


def enabled_ops() -> List[str]:
    return list(_active["ops"])


@contextlib.contextmanager
def use_prism(ops: Optional[Iterable[str]] = None, unused: Iterable[str] = (), record: Optional[str] = None,
              queue: Optional[Queue] = None) -> Iterator[List[str]]:
    """enable() for a block: the earlier state (enabled or not, with its ops) comes back after."""
    before = (list(_active["ops"]), _active["queue"]) if is_enabled() else None
    names = enable(ops, unused, record, queue)
    try:
        yield names
    finally:
        disable()
        if before is not None:
            enable(before[0], (), None, before[1])


def stats() -> Dict[str, Dict[str, Any]]:
    """Per aten overload: calls served by prism and by torch, and the last fallback reason."""
    out: Dict[str, Dict[str, Any]] = {}
    for name, s in _stats.items():
        out[name] = dict(s)
        if name in _reasons:
            out[name]["reason"] = _reasons[name]
    return out


def reset_stats() -> None:
    _stats.clear()
    _reasons.clear()
