"""prism from Python: devices, tensors over NumPy/DLPack memory, every op of the op registry,
the dispatch log and the tuning database (docs/python.md).

    import numpy as np, prism
    x = prism.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))   # no copy on CPU devices
    y = prism.ops.softmax(prism.ops.add(x, 1.0), dim=-1)
    print(y.numpy())

Devices are chosen as PRISM_DEVICE chooses them (``prism.set_device("pocl")``, ``"gpu:0"``);
errors are ``prism.Error`` subclasses carrying the C++ message.
"""
from __future__ import annotations

import os as _os

# An installed wheel carries its data files (vendor profiles, shape sets) in the package; a build
# tree's module finds the source tree's on its own.
_share = _os.path.join(_os.path.dirname(__file__), "share", "prism")
if "PRISM_DATA_DIR" not in _os.environ and _os.path.isdir(_os.path.join(_share, "vendors")):
    _os.environ["PRISM_DATA_DIR"] = _share

from . import _prism  # noqa: E402
from ._core import (  # noqa: E402
    Device,
    Error,
    DeviceNotFoundError,
    InvalidArgumentError,
    NotFoundError,
    Queue,
    Tensor,
    UnsupportedError,
    default_queue,
    devices,
    dtypes,
    empty,
    from_dlpack,
    get_device,
    select_device,
    set_device,
    synchronize,
    tensor,
    version,
    zeros,
)
from . import dispatch, ops, tuning  # noqa: E402

__all__ = [
    "Device",
    "DeviceNotFoundError",
    "Error",
    "InvalidArgumentError",
    "NotFoundError",
    "Queue",
    "Tensor",
    "UnsupportedError",
    "default_queue",
    "devices",
    "dispatch",
    "dtypes",
    "empty",
    "from_dlpack",
    "get_device",
    "ops",
    "select_device",
    "set_device",
    "synchronize",
    "tensor",
    "tuning",
    "version",
    "zeros",
]
__version__ = _prism._version()
