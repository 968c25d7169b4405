"""The tuning database from Python: open one, list its rows, and pretune shape sets with a
progress callback (docs/tuning.md). prism.tuning.record() turns on recording of the shapes that
missed the database (what PRISM_RECORD_UNTUNED does) into a shape set pretune reads."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from . import _prism
from ._core import Device, InvalidArgumentError, select_device

__all__ = ["Database", "default_path", "open", "pretune", "record", "recording", "shipped_models"]

Progress = Callable[[int, int, str, str, str], None]


class Database:
    """One tuning database file (SQLite). Opening never creates or changes a file; pretune's
    first write creates it."""

    def __init__(self, path: Optional[str] = None):
        self._db = _prism._Database(path or default_path())

    @property
    def path(self) -> str:
        return self._db.path

    @property
    def writable(self) -> bool:
        return self._db.writable

    @property
    def refusal(self) -> str:
        """Why an existing file is not used ("" when it is): not SQLite, damaged, another program's."""
        return self._db.refusal

    def results(self, device: str = "", op: str = "", dtype: str = "") -> List[Dict[str, object]]:
        """The tuned rows (dicts: device, op, dtype, shape, backend, config, p50_ns, default_ns,
        speedup, ...), filtered by device fingerprint prefix, op and dtype."""
        return self._db.results(device, op, dtype)

    list = results

    def export_json(self) -> str:
        return self._db.export_json()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<prism.tuning.Database {self.path!r}>"


def default_path() -> str:
    """PRISM_TUNING_DB, else ${XDG_CACHE_HOME:-~/.cache}/prism/tuning.db."""
    return _prism._default_db_path()


def open(path: Optional[str] = None) -> Database:  # noqa: A001 (the module's verb)
    return Database(path)


def shipped_models() -> List[str]:
    """The shape sets prism ships (prism pretune --model NAME)."""
    return list(_prism._shipped_models())


def pretune(shapes: Optional[str] = None, *, model: Optional[str] = None, db: Optional[Database] = None,
            device: Optional[Device] = None, ops: Sequence[str] = (), dtypes: Sequence[str] = (),
            backends: Sequence[str] = (), budget_s: float = 0.0, max_candidates: int = 12, min_runs: int = 3,
            max_runs: int = 25, pipeline_calls: int = 20, force: bool = False,
            progress: Optional[Progress] = None) -> Dict[str, object]:
    """Measures the backend/config candidates of every shape of a shape set (`shapes`: a YAML
    file, e.g. what record() wrote; or `model`: a shipped set) on `device` (default: the default
    selection) and stores the fastest per shape in `db` (default: the process's database), as
    `prism pretune` does. progress(done, total, label, detail, line) is called as it goes: `line`
    is set for each finished shape, else label/detail describe the shape being measured.
    A timed run holds up to `pipeline_calls` calls back to back for shapes whose default route is
    short (1: one finished call a run).
    Returns {"shapes": [dicts: op, dtype, shape, status, backend, config, p50_ns, default_ns,
    calls_per_sample],
    "seconds", "budget_exhausted", "table"}. An exception raised by `progress` is raised when
    pretune returns (the rows measured until then are kept)."""
    if (shapes is None) == (model is None):
        raise InvalidArgumentError("prism.tuning.pretune: give exactly one of shapes=FILE.yaml or model=NAME "
                                   f"(shipped: {', '.join(shipped_models())})")
    if progress is not None and not callable(progress):
        raise TypeError("prism.tuning.pretune: progress must be callable(done, total, label, detail, line)")
    database = db if db is not None else Database()
    dev = device if device is not None else select_device()
    return _prism._pretune(dev, database._db, shapes or "", model or "", list(ops), list(dtypes), list(backends),
                           float(budget_s), int(max_candidates), int(min_runs), int(max_runs),
                           int(pipeline_calls), bool(force), progress)


def record(path: Optional[str]) -> None:
    """Appends every (op, dtype, shape) dispatched from now on that misses the tuning database to
    the shape set at `path` (one per log2 bucket, as PRISM_RECORD_UNTUNED); None stops.
    `prism pretune --shapes PATH` (or pretune(PATH)) tunes them."""
    _prism._set_record_path(path or "")


def recording() -> str:
    """The file record() (or PRISM_RECORD_UNTUNED) writes to; "" when none."""
    return _prism._record_path()
