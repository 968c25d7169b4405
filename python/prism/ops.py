"""Every op of prism's op registry as a function: prism.ops.<name>(inputs..., attrs..., out=None,
queue=None). Generated at import from the op descriptors (the names, inputs, attributes and
defaults of the C++ ops, docs/ops.md); nothing here lists an op by hand.

- Inputs are prism.Tensor, or anything prism.tensor() takes (NumPy arrays, torch CPU tensors:
  no copy on CPU devices). A number for a binary op's second operand is its `scalar`
  attribute; a number elsewhere becomes a 0-d tensor of the first tensor's dtype.
- Attributes are keyword arguments (or positional after the inputs), with the descriptors'
  defaults; an attribute left out takes its default.
- out: a Tensor (or a sequence, one per output) to write into; queue: where to run (default
  prism.default_queue()).
- The result is the output tensor, or a tuple for ops with several outputs.
"""
from __future__ import annotations

import inspect
import keyword
from typing import Any, Dict, List

from . import _prism
from ._core import InvalidArgumentError, Tensor, default_queue, tensor as _to_tensor

__all__: List[str] = []

_UNSET = object()


def _py_name(name: str) -> str:
    n = name.replace(".", "_")
    return n + "_" if keyword.iskeyword(n) else n


class OpInfo:
    """What an op declares: name, summary, inputs [(name, optional)], outputs [(name, in_place_of)],
    variadic (the last input takes a list), attrs [(name, default, optional, help)], dtypes."""

    __slots__ = ("name", "family", "summary", "inputs", "outputs", "variadic", "attrs", "dtypes", "key_names", "id")

    def __init__(self, d: Dict[str, Any], op_id: int):
        for k in ("name", "family", "summary", "inputs", "outputs", "variadic", "attrs", "dtypes", "key_names"):
            setattr(self, k, d[k])
        self.id = op_id

    def __repr__(self) -> str:
        return f"<prism op {self.name}: {self.summary}>"


def _scalar_tensor(value: Any, like: Any, q: Any) -> Tensor:
    import numpy as np

    dtype = like.dtype if like is not None else "f32"
    np_dtype = {"f32": np.float32, "f16": np.float16, "bf16": np.float32, "i32": np.int32, "i64": np.int64,
                "bool": np.bool_}[dtype]
    t = _to_tensor(np.array(value, dtype=np_dtype), queue=q, copy=True)
    if dtype == "bf16":
        t = globals()["cast"](t, dtype="bf16", queue=q)
    return t


def _input(value: Any, q: Any, op: str, arg: str) -> Any:
    if value is None or isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float)):
        return ("scalar", value)
    try:
        return _to_tensor(value, queue=q)
    except (TypeError, ValueError) as e:
        if isinstance(e, InvalidArgumentError):
            raise InvalidArgumentError(f"ops::{op}: input '{arg}': {e}") from None
        raise TypeError(
            f"ops::{op}: input '{arg}' is a {type(value).__name__}; valid: a prism.Tensor, a NumPy array, "
            "a CPU torch tensor or a number") from e


def _finish_inputs(ins: list, q: Any) -> list:
    # Numbers that are not a binary op's scalar operand: 0-d tensors of the first tensor's dtype.
    like = next((t for t in ins if isinstance(t, Tensor)), None)
    return [_scalar_tensor(t[1], like, q) if isinstance(t, tuple) else t for t in ins]


def _outputs(out: Any, n: int, op: str) -> Any:
    if out is None:
        return None
    if isinstance(out, Tensor):
        outs = [out]
    else:
        outs = list(out)
    if len(outs) != n:
        raise InvalidArgumentError(f"ops::{op}: out= gave {len(outs)} tensors; the op has {n} output(s)")
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"ops::{op}: out= takes prism.Tensor objects; got {type(o).__name__}")
    return outs


def _make(info: OpInfo):
    """Builds the function of one op from its declaration (generated source: no per-call
    argument parsing)."""
    py = _py_name(info.name)
    ins = [(_py_name(n), opt) for n, opt in info.inputs]
    attrs = [(_py_name(n), n, default, opt, help_) for n, default, opt, help_ in info.attrs]
    has_scalar = any(n == "scalar" for _, n, *_ in attrs)
    params, body = [], []
    for n, opt in ins:
        params.append(f"{n}=None" if opt else n)
    # Required inputs after optional ones would be a syntax error: make them keyword-default None
    # and check them in the body.
    seen_default = False
    for i, p in enumerate(params):
        if p.endswith("=None"):
            seen_default = True
        elif seen_default:
            params[i] = p + "=None"
    for pn, _, _, _, _ in attrs:
        params.append(f"{pn}=_UNSET")
    params += ["*", "out=None", "queue=None"]
    body.append("q = queue if queue is not None else _dq()")
    in_exprs = []
    for i, (n, opt) in enumerate(ins):
        variadic = info.variadic and i == len(ins) - 1
        if variadic:
            body.append(f"if not isinstance({n}, (list, tuple)):")
            body.append(f"    raise TypeError('ops::{info.name}: {n} takes a list of tensors; got ' + type({n}).__name__)")
            in_exprs.append(f"*[_in(x, q, {info.name!r}, {n!r}) for x in {n}]")
        else:
            in_exprs.append(f"_in({n}, q, {info.name!r}, {n!r})")
    body.append(f"ins = [{', '.join(in_exprs)}]")
    body.append("a = {}")
    for pn, name, _, _, _ in attrs:
        body.append(f"if {pn} is not _UNSET: a[{name!r}] = {pn}")
    if has_scalar and len(ins) >= 2:
        # The second operand as a number: the op's `scalar` attribute, as the C++ overloads do.
        body.append("if isinstance(ins[1], tuple):")
        body.append("    a['scalar'] = ins[1][1]; ins[1] = None")
    body.append("if any(type(t) is tuple for t in ins): ins = _fin(ins, q)")
    n_out = len(info.outputs)
    body.append(f"r = _call(q, {info.id}, ins, a, _outs(out, {n_out}, {info.name!r}) if out is not None else None)")
    body.append("return r[0]" if n_out == 1 else "return tuple(r)")
    src = f"def {py}({', '.join(params)}):\n" + "\n".join("    " + line for line in body) + "\n"
    env = {"_UNSET": _UNSET, "_dq": default_queue, "_in": _input, "_fin": _finish_inputs, "_call": _prism._call,
           "_outs": _outputs, "Tensor": Tensor}
    exec(compile(src, f"<prism.ops.{py}>", "exec"), env)
    fn = env[py]
    fn.__module__ = __name__
    fn.__qualname__ = py
    fn.__doc__ = _doc(info)
    sig_params = []
    for (n, _), p in zip(ins, params):
        sig_params.append(inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=None if p.endswith("=None") else inspect.Parameter.empty))
    for pn, _, default, _, _ in attrs:
        sig_params.append(inspect.Parameter(pn, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    sig_params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    sig_params.append(inspect.Parameter("queue", inspect.Parameter.KEYWORD_ONLY, default=None))
    fn.__signature__ = inspect.Signature(sig_params)
    fn.info = info
    return fn


def _doc(info: OpInfo) -> str:
    lines = [info.summary, ""]
    lines.append("Inputs:")
    for i, (n, opt) in enumerate(info.inputs):
        extra = " (optional)" if opt else ""
        if info.variadic and i == len(info.inputs) - 1:
            extra += " (a list of tensors)"
        lines.append(f"    {n}{extra}")
    if info.attrs:
        lines.append("Attributes:")
        for n, default, opt, help_ in info.attrs:
            d = "absent" if opt else repr(default)
            lines.append(f"    {n} = {d}: {help_}")
    lines.append("Outputs: " + ", ".join(n + (f" (in place of {ip})" if ip else "") for n, ip in info.outputs))
    lines.append("dtypes: " + ", ".join(info.dtypes))
    lines.append(f"(the C++ op `{info.name}`; family {info.family})")
    return "\n".join(lines)


_infos: Dict[str, OpInfo] = {}
for _i, _d in enumerate(_prism._op_infos()):
    _info = OpInfo(_d, _i)
    _infos[_info.name] = _info
    _fn = _make(_info)
    globals()[_py_name(_info.name)] = _fn
    __all__.append(_py_name(_info.name))


def names() -> List[str]:
    """Every op's name, sorted (the C++ registry's names)."""
    return sorted(_infos)


def info(name: str) -> OpInfo:
    """What op `name` declares. Raises NotFoundError listing the valid names."""
    try:
        return _infos[name]
    except KeyError:
        return _infos[_prism._op_infos()[_prism._op_id(name)]["name"]]  # raises NotFoundError


def __getattr__(name: str):
    # An unknown op: the registry's error, which lists the valid names (closest first).
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        _prism._op_id(name)
    except _prism.NotFoundError as e:
        raise AttributeError(f"prism.ops has no op '{name}': {e}") from None
    raise AttributeError(name)
