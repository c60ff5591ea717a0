import pandas as pd

from helpers import results


def test_save_and_load_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    frame = pd.DataFrame([{"hardware": "h", "profile": "cpu", "method": "ngram", "k": 4, "speedup": 1.1}])
    path = results.save(frame, "x")
    assert path.parent == tmp_path and path.exists()
    pd.testing.assert_frame_equal(results.load("x"), frame)
    assert results.load("missing") is None
