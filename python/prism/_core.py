"""Devices, queues and tensors: the Python side of prism's runtime (prism._prism holds the C++)."""
from __future__ import annotations

import threading
from typing import Any, Optional, Sequence, Union

from . import _prism

Error = _prism.Error
InvalidArgumentError = _prism.InvalidArgumentError
NotFoundError = _prism.NotFoundError
DeviceNotFoundError = _prism.DeviceNotFoundError
UnsupportedError = _prism.UnsupportedError
Device = _prism.Device
Queue = _prism.Queue
Tensor = _prism.Tensor

#: The dtypes prism stores, by prism's names; NumPy/PyTorch names are accepted too.
dtypes = ("f32", "f16", "bf16", "i32", "i64", "bool")
_dtype_aliases = {
    "f32": "f32", "float32": "f32", "float": "f32",
    "f16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
    "i32": "i32", "int32": "i32",
    "i64": "i64", "int64": "i64", "long": "i64",
    "bool": "bool", "boolean": "bool",
}


def dtype_name(dtype: Any) -> str:
    """prism's name of a dtype given as a prism name, a NumPy dtype or a torch.dtype."""
    text = str(dtype)
    for prefix in ("torch.", "numpy.", "<class 'numpy."):
        if text.startswith(prefix):
            text = text[len(prefix):].rstrip("'>")
    if hasattr(dtype, "name") and isinstance(dtype.name, str) and text not in _dtype_aliases:
        text = dtype.name  # numpy.dtype('float32')
    try:
        return _dtype_aliases[text]
    except KeyError:
        raise InvalidArgumentError(
            f"prism: dtype {dtype!r} is not one prism stores; valid: {', '.join(dtypes)} "
            "(or their NumPy/PyTorch names: float32, float16, bfloat16, int32, int64, bool)") from None


# ---- devices ----------------------------------------------------------------------------------

def devices() -> list:
    """Every OpenCL device, in the order PRISM_DEVICE's indices count them."""
    return _prism._devices()


def select_device(spec: Optional[str] = None) -> Device:
    """The device a PRISM_DEVICE-style spec selects (e.g. "pocl", "gpu:0", "cpu", "1"): the first
    match. None: PRISM_DEVICE when set, else the first GPU, else a CPU."""
    if spec is None:
        return _prism._default_device()
    if not isinstance(spec, str):
        raise TypeError(f"prism.select_device: spec must be a str like 'gpu:0' or 'pocl'; got {type(spec).__name__}")
    return _prism._devices_matching(spec)[0]


_state = threading.local()
_default = {"queue": None}
_lock = threading.Lock()


def default_queue() -> Queue:
    """The queue ops and tensors use when none is given: set_device()'s, else one on
    select_device() (created on first use)."""
    q = getattr(_state, "queue", None)
    if q is not None:
        return q
    q = _default["queue"]
    if q is None:
        with _lock:
            if _default["queue"] is None:
                _default["queue"] = Queue(select_device())
            q = _default["queue"]
    return q


def set_device(device: Union[str, Device, Queue, None]) -> Queue:
    """Makes `device` (a spec string, a Device or a Queue; None = the default selection) the
    default for ops and tensors created from now on, process-wide. Returns its queue."""
    if isinstance(device, Queue):
        q = device
    elif isinstance(device, Device):
        q = Queue(device)
    else:
        q = Queue(select_device(device))
    with _lock:
        _default["queue"] = q
    return q


def get_device() -> Device:
    """The default queue's device."""
    return default_queue().device


def synchronize(queue: Optional[Queue] = None) -> None:
    """Waits for every command submitted to `queue` (default: the default queue)."""
    (queue or default_queue()).wait()


def version() -> str:
    return _prism._version()


# ---- tensors ----------------------------------------------------------------------------------

def _queue_for(queue: Optional[Queue]) -> Queue:
    if queue is None:
        return default_queue()
    if not isinstance(queue, Queue):
        raise TypeError(f"queue must be a prism.Queue; got {type(queue).__name__}")
    return queue


def tensor(data: Any, dtype: Any = None, *, queue: Optional[Queue] = None, copy: Optional[bool] = None) -> Tensor:
    """A prism tensor from a NumPy array (or anything NumPy converts: lists, scalars) or a DLPack
    producer on the CPU (a torch tensor).

    copy=None: the array's own memory where the device shares host memory (CPU devices, PoCL) and
    the array is writable, else a copy. copy=False: the array's memory or an error saying why not.
    copy=True: always a copy. A dtype other than the array's converts it (a copy)."""
    import numpy as np

    q = _queue_for(queue)
    if isinstance(data, Tensor):
        raise InvalidArgumentError("prism.tensor: data is already a prism.Tensor; use prism.ops.copy or .numpy()")
    if not isinstance(data, np.ndarray) and hasattr(data, "__dlpack__") and dtype is None:
        return from_dlpack(data, queue=q, copy=copy)
    arr = data if isinstance(data, np.ndarray) else np.asarray(data)
    if dtype is not None:
        name = dtype_name(dtype)
        if name == "bf16":
            raise InvalidArgumentError(
                "prism.tensor: NumPy has no bfloat16; make an f32 tensor and cast it (prism.ops.cast(t, dtype='bf16'))")
        want = np.dtype({"bool": "bool", "f32": "float32", "f16": "float16", "i32": "int32", "i64": "int64"}[name])
        if arr.dtype != want:
            if copy is False:
                raise InvalidArgumentError(
                    f"prism.tensor: converting {arr.dtype} to {name} needs a copy, and copy=False was given")
            arr = arr.astype(want)
    if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)  # Python floats: prism computes in f32
    mode = "never" if copy else ("require" if copy is False else "auto")
    if copy is True or (mode == "auto" and not arr.flags.c_contiguous and not q.device.shares_host_memory):
        arr = np.ascontiguousarray(arr)
    return _prism._from_array(q, arr, mode)


def from_dlpack(obj: Any, *, queue: Optional[Queue] = None, copy: Optional[bool] = None) -> Tensor:
    """A prism tensor over a DLPack producer's CPU memory (kDLCPU): torch tensors, NumPy arrays,
    capsules. Zero copy where the device shares host memory; copy as in prism.tensor. Memory on
    another device (CUDA, ...) raises InvalidArgumentError naming it."""
    q = _queue_for(queue)
    if hasattr(obj, "__dlpack_device__"):
        kind, index = obj.__dlpack_device__()
        if int(kind) not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise InvalidArgumentError(
                f"prism.from_dlpack: the tensor lives on DLPack device type {int(kind)} (index {index}); "
                "prism takes CPU memory (kDLCPU = 1): move it to the CPU first (e.g. t.cpu())")
    if getattr(obj, "requires_grad", False):
        obj = obj.detach()  # torch refuses to export tensors that require grad; prism has no autograd
    mode = "never" if copy else ("require" if copy is False else "auto")
    return _prism._from_array(q, obj, mode)


def empty(shape: Sequence[int], dtype: Any = "f32", *, queue: Optional[Queue] = None) -> Tensor:
    """An uninitialised contiguous tensor (host memory on CPU devices)."""
    return _prism._empty(_queue_for(queue), [int(s) for s in shape], dtype_name(dtype))


def zeros(shape: Sequence[int], dtype: Any = "f32", *, queue: Optional[Queue] = None) -> Tensor:
    """A contiguous tensor of zeros."""
    from . import ops

    return ops.zeros(shape=[int(s) for s in shape], dtype=dtype_name(dtype), queue=queue)
