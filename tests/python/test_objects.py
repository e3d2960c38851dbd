"""tnt.broadcast_object / tnt.allgather_object on picklable Python objects,
through the launcher on 1 and 3 ranks (ranks/ext_objects.py)."""
import pytest

from conftest import check


@pytest.mark.parametrize("ranks", [1, 3])
def test_object_collectives(ranks, launch):
    out = check(launch(ranks, "ext_objects.py", timeout=120), "%d ranks" % ranks)
    for r in range(ranks):
        assert "rank %d: ok 8 checks" % r in out, out
