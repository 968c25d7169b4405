"""prism.tuning: recording the shapes that miss the database, pretuning them with a progress
callback into a database, listing its rows, and the dispatcher using them afterwards."""
import numpy as np
import pytest



def test_record_pretune_and_list(prism, tmp_path):
    shapes = tmp_path / "untuned.yaml"
    db_path = tmp_path / "tuning.db"
    prism.tuning.record(str(shapes))
    assert prism.tuning.recording() == str(shapes)
    x = prism.tensor(np.ones(12345, np.float32))  # a size no other test dispatches
    prism.ops.add(x, x)
    prism.tuning.record(None)
    assert prism.tuning.recording() == ""
    text = shapes.read_text()
    assert "op: add" in text and "n: 12345" in text and "dtype: f32" in text

    calls = []

    def progress(done, total, label, detail, line):
        calls.append((done, total, label, detail, line))

    db = prism.tuning.open(str(db_path))
    assert db.results() == []
    report = prism.tuning.pretune(str(shapes), db=db, backends=["opencl"], ops=["add"], max_candidates=2,
                                  min_runs=1, max_runs=2, progress=progress)
    assert [s["status"] for s in report["shapes"]] == ["tuned"]
    assert report["shapes"][0]["backend"] == "opencl"
    assert 1 <= report["shapes"][0]["calls_per_sample"] <= 20
    assert "add" in report["table"]
    lines = [c for c in calls if c[4]]
    assert lines and "add" in lines[-1][4], calls
    assert any(c[4] == "" and c[2] for c in calls), "no progress of the shape being measured"
    assert all(c[1] == 1 for c in calls)
    rows = db.results(op="add")
    assert len(rows) == 1 and rows[0]["shape"] == report["shapes"][0]["shape"] and rows[0]["p50_ns"] > 0


def test_pretune_callback_errors_and_bad_requests(prism, tmp_path):
    shapes = tmp_path / "one.yaml"
    shapes.write_text("model: t\nsource: test\nshapes:\n  - {op: relu, dtype: f32, n: 4096}\n")
    db = prism.tuning.open(str(tmp_path / "t.db"))

    def failing(*args):
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        prism.tuning.pretune(str(shapes), db=db, backends=["opencl"], max_candidates=1, min_runs=1, max_runs=1,
                             progress=failing)
    with pytest.raises(prism.InvalidArgumentError, match="pipeline_calls 0; valid: 1 to 1000"):
        prism.tuning.pretune(str(shapes), db=db, pipeline_calls=0)
    with pytest.raises(prism.InvalidArgumentError) as e:
        prism.tuning.pretune(str(shapes), db=db, ops=["softmax"])
    assert "nothing to tune" in str(e.value) and "relu" in str(e.value)
    with pytest.raises(prism.InvalidArgumentError, match="exactly one"):
        prism.tuning.pretune()
    with pytest.raises(prism.NotFoundError) as e:
        prism.tuning.pretune(model="no-such-model", db=db)
    assert "shipped" in str(e.value)
    with pytest.raises(prism.Error):
        prism.tuning.pretune(str(tmp_path / "missing.yaml"), db=db)
    assert prism.tuning.shipped_models()


def test_refused_database_file(prism, tmp_path):
    bad = tmp_path / "not-a-db.db"
    bad.write_text("this is not sqlite")
    db = prism.tuning.Database(str(bad))
    assert db.refusal
    assert db.results() == []
    assert bad.read_text() == "this is not sqlite"
