"""The two scripts of issue 25, ported by following docs/porting.md, run in
their ported form (tests/python/ported/): Horovod's synthetic benchmark
(ResNet-18 from torchvision, at a smoke-test size) and pytorch/examples'
mnist with sklearn's digits in MNIST's place."""
import os
import re

import pytest

from conftest import TESTS_DIR, check

PORTED = os.path.join(TESTS_DIR, "ported")
BENCH = os.path.join(PORTED, "pytorch_synthetic_benchmark.py")
MNIST = os.path.join(PORTED, "mnist_main.py")
TEST_LINE = re.compile(r"^Test set: Average loss: ([0-9.]+), Accuracy: (\d+)/360 ", re.M)


def test_synthetic_benchmark_two_ranks(launch):
    pytest.importorskip("torchvision")
    out = check(launch(2, BENCH, "--model", "resnet18", "--batch-size", 2, "--image-size", 32,
                       "--num-warmup-batches", 1, "--num-batches-per-iter", 1, "--num-iters", 2,
                       timeout=240), "the ported synthetic benchmark")
    assert "Number of CPUs: 2" in out, out
    assert len(re.findall(r"^Iter #\d: [0-9.]+ img/sec per CPU$", out, re.M)) == 2, out
    assert re.search(r"^Total img/sec on 2 CPU\(s\): [0-9.]+ \+-[0-9.]+$", out, re.M), out


def test_synthetic_benchmark_refuses_what_has_no_counterpart(run_single):
    pytest.importorskip("torchvision")
    for flag, why in (("--use-adasum", "no Adasum"), ("--fp16-allreduce", "no gradient compression")):
        rc, out, err = run_single(BENCH, flag, timeout=120)
        assert rc == 2 and why in err and "docs/porting.md" in err, (flag, rc, out, err)


def _test_lines(out):
    return [(float(loss), int(correct)) for loss, correct in TEST_LINE.findall(out)]


def test_mnist_digits_one_and_two_ranks(launch, run_single):
    pytest.importorskip("torchvision")
    pytest.importorskip("sklearn")
    two = _test_lines(check(launch(2, MNIST, "--epochs", 2, timeout=300), "mnist on 2 ranks"))
    one = _test_lines(check(run_single(MNIST, "--epochs", 2, timeout=300), "mnist on 1 rank"))
    # Every rank evaluates the whole test set after every epoch, as the
    # original does: the two ranks' lines are equal only when their weights
    # are (broadcast initial weights, every step's gradients averaged).
    pairs = sorted(two)
    assert len(two) == 4 and pairs[0] == pairs[1] and pairs[2] == pairs[3], two
    assert len(one) == 2, one
    # Trained, not guessing (10%); a port that mixes up data or labels stays
    # near 10%.
    for loss, correct in one + two:
        assert correct >= 144, (one, two)  # 40% of 360
    # With dropout, 1 and 2 ranks agree in distribution, not bit for bit
    # (docs/reproducibility.md): the same best accuracy within 15 points.
    # Two epochs, because after one the accuracy is still on the steep part
    # of its curve, where the machine's float rounding alone moved it from
    # about 65% to 56% on one rank (75% on two).
    best_one, best_two = max(c for _, c in one), max(c for _, c in two)
    assert abs(best_one - best_two) <= 54, (one, two)
