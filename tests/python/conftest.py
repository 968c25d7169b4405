"""Shared fixtures of the Python suites (tests/python): the module under test is imported from
PYTHONPATH (the build tree's package, or a pip --target directory)."""
import os

import pytest


@pytest.fixture(scope="session")
def prism():
    import prism as module

    return module


@pytest.fixture()
def log_file(tmp_path, prism):
    """The dispatch log into a fresh CSV file for one test; the earlier settings come back after."""
    path = tmp_path / "dispatch.csv"
    before = prism.dispatch.log_settings()
    prism.dispatch.set_log("1", file=str(path))
    yield path
    prism.dispatch.set_log(before["mode"], file=before["file"] or None, filter=before["filter"] or None)


def log_lines(path, event=None):
    """The dispatch log's records as dicts (after the header line)."""
    import csv

    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = list(csv.reader(f))
    header = rows[0]
    names = header[2:]  # "prism_dispatch_header", version, fields...
    out = []
    for r in rows[1:]:
        rec = dict(zip(names, r[2:]))
        if event is None or rec.get("event") == event:
            out.append(rec)
    return out
