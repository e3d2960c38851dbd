"""Gradient clipping after the reduction, through the launcher: compile's
clipnorm / clipvalue and a custom loop's synchronize() + clip +
skip_synchronize() equal serial torch with the same clipping (one reduction
per step); and the porting example (python/examples/ported_loop.py) on 2
ranks, interrupted and resumed from its checkpoint."""
import os
import re

import pytest

from conftest import REPO_DIR, check

CHECKS = ("compile_clipnorm", "compile_clipvalue", "loop_clipnorm", "loop_resync",
          "skip_without_synchronize")


@pytest.mark.parametrize("ranks", [1, 3])
def test_clipping_matches_serial(ranks, launch):
    out = check(launch(ranks, "model_clip.py", timeout=300), "%d ranks" % ranks)
    for name in CHECKS:
        assert out.count("OK %s" % name) == ranks, out


def test_ported_loop_example(launch, tmp_path):
    """The tutorial's script: DataLoader workers, bf16 autocast, clipping,
    a checkpoint per epoch. Stopped after epoch 2 and resumed, it ends with
    exactly the weights of an uninterrupted run."""
    script = os.path.join(REPO_DIR, "python", "examples", "ported_loop.py")
    full, part = tmp_path / "full", tmp_path / "part"
    out = check(launch(2, script, "--checkpoint-dir", full, timeout=300, interpreter=False),
                "ported_loop.py on 2 ranks")
    assert out.count("epoch 4/4") == 1, out
    check(launch(2, script, "--checkpoint-dir", part, "--stop-after", 2, timeout=300,
                 interpreter=False), "first half")
    out2 = check(launch(2, script, "--checkpoint-dir", part, timeout=300, interpreter=False),
                 "resumed")
    assert "resumed from epoch 2" in out2, out2
    digest = re.compile(r"weights digest ([0-9a-f]+)")
    assert digest.findall(out) and digest.findall(out) == digest.findall(out2), (out, out2)
