"""The dispatcher from Python: the dispatch log (what PRISM_LOG_DISPATCH, _FILE and _FILTER set at
start-up, changeable at run time), per-op statistics and the backends (docs/dispatch.md)."""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List, Optional

from . import _prism

__all__ = ["backends", "log", "log_settings", "reset_statistics", "set_log", "statistics"]


def log_settings() -> Dict[str, str]:
    """The current log settings: {"mode": "0"|"1"|"profile"|"dispatch"|"all", "file", "filter"}."""
    mode, file, filter_ = _prism._get_log()
    return {"mode": mode, "file": file, "filter": filter_}


def set_log(mode: str = "1", file: Optional[str] = None, filter: Optional[str] = None) -> None:
    """Sets the dispatch log from now on. mode: "0"/"off", "1", "profile", "dispatch", "all"
    (comma-combinable, as PRISM_LOG_DISPATCH); file: a CSV file to append to (None = stderr);
    filter: a regex lines must match. Raises InvalidArgumentError for a bad mode or filter."""
    _prism._set_log(str(mode), file or "", filter or "")


@contextlib.contextmanager
def log(mode: str = "1", file: Optional[str] = None, filter: Optional[str] = None) -> Iterator[None]:
    """Logs dispatches inside the block, then restores the previous settings."""
    before = log_settings()
    set_log(mode, file, filter)
    try:
        yield
    finally:
        _prism._set_log(before["mode"], before["file"], before["filter"])


def statistics() -> List[Dict[str, object]]:
    """Calls per (op, backend, tier) since start or reset_statistics(): dicts with op, backend,
    tier, calls, fallbacks, time_ns (time only in "profile" mode)."""
    return _prism._statistics()


def reset_statistics() -> None:
    _prism._reset_statistics()


def backends() -> List[str]:
    """prism's backends in built-in preference order."""
    return list(_prism._backend_names())
