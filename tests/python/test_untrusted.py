"""Untrusted files and peer bytes never run code (issue 20): predict's
output description crosses the ranks as plain data.
"""
import json
import os


from conftest import check


def test_predict_description_is_plain_data(launch, tmp_path):
    check(launch(2, "untrusted_predict.py", tmp_path, timeout=120), "untrusted_predict.py")
    res = []
    for r in range(2):
        with open(tmp_path / ("predict.rank%d.json" % r)) as f:
            res.append(json.load(f))
    for r in res:
        # Rank 1 had no sample: its empty columns took the master's shapes.
        assert r["shapes"] == [[1, 2], [1, 1]] and r["dtypes"] == ["<f4", "|b1"], r
        assert r["values"] == res[0]["values"]
        assert "predict" in r["hostile"] and "same tarantella version" in r["hostile"], r
    assert not [n for n in os.listdir(tmp_path) if n.startswith("marker")], \
        "a rank unpickled the master's output description"
