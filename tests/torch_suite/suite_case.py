"""torch's own distributed test suite (DistributedTest._DistTestBase from
torch.testing._internal.distributed.distributed_test) as one unittest class,
for the backend named by $BACKEND ("tnt" or a built-in one) and $WORLD_SIZE
ranks.

Run through run_suite.py, which sets the environment, puts the expecttest
stand-in and the build's package on PYTHONPATH and keeps the results;
by hand (from the repository root, after a build):

    BACKEND=tnt WORLD_SIZE=2 TEMP_DIR=$(mktemp -d) \
    PYTHONPATH=tests/torch_suite:build/python \
    /usr/bin/python3 tests/torch_suite/suite_case.py TorchSuite.test_all_reduce_sum

Each test spawns $WORLD_SIZE fresh interpreters (torch's MultiProcessTestCase
with the "spawn" start method), which import this file again as
__mp_main__: everything that must hold in the ranks happens at import.
"""
import ast
import json
import os
import sys
import time
import unittest

if __name__ == "__main__":
    # torch's common_utils parses sys.argv when it is imported (and the
    # spawned ranks get the same argv): only unittest's test ids may be
    # there, and only in this process.
    import argparse
    _parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _parser.add_argument("--results", help="append one JSON line per finished test here")
    _parser.add_argument("--list", action="store_true", help="print every test id and exit")
    _parser.add_argument("tests", nargs="*", help="test ids: TorchSuite.test_name")
    _ARGS = _parser.parse_args()
    sys.argv = sys.argv[:1]

BACKEND = os.environ["BACKEND"]

if __name__ != "__main__" and os.environ.get("TNT_TORCH_SUITE_PIDS"):
    # A rank (spawned, so this file is __mp_main__): run_suite.py removes
    # the shared-memory segments of ranks that a test timeout killed, and
    # only those of the pids listed here.
    open(os.path.join(os.environ["TNT_TORCH_SUITE_PIDS"], str(os.getpid())), "w").close()

if BACKEND == "tnt":
    # Registers the backend with torch.distributed, in every rank.
    import tarantella.torch_backend  # noqa: E402,F401

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# What the tnt backend declares to the suite, through the sets torch keeps
# for this purpose (they are read when distributed_test is imported, so
# this must come first). Everything not declared here is tested as it is
# for gloo; see docs/torch-distributed.md, "Conformance".
if BACKEND == "tnt":
    # A third-party backend registered through Backend.register_backend.
    DistTestCases.backend_feature["plugin"].add("tnt")
    # DDP runs over it (tests/python/test_tnt_backend.py checks the weights).
    DistTestCases.backend_feature["ddp"].add("tnt")
    # new_group gives each group its own libtnt communicator.
    DistTestCases.backend_feature["subgroup"].add("tnt")
    # Not declared: "gpu" and "cuda" (CPU tensors only; the device path is
    # not wired into the backend), and no collective is declared missing
    # (skip_collective): send/recv from any source is tested, and counted
    # as failed while the backend lacks it.

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)
try:  # torch 1.13 only: torch 2.0 removed the experiment patched below
    import torch.nn.parallel._replicated_tensor_ddp_utils as _replicated  # noqa: E402
except ImportError:
    _replicated = None

# Tests that torch marks skipped for every backend outside a fixed list of
# names (gloo, nccl, mpi), although they test what tnt implements. Each
# body was read: on the CPU it does the same for any backend (it branches
# only for nccl's devices). They run on tnt when the skip torch recorded
# is exactly this gate, so that any other skip (a newer torch, another
# decorator) stays. Not here, each for its reason: the
# accumulate_gradients_no_sync tests (their body builds the CPU model only
# under "if BACKEND in (mpi, gloo)"), the monitored barrier tests that need
# NCCL and GPUs, test_barrier_timeout_global (also gated to
# file:// starts, which this runner does not use; gloo skips it too),
# sparse all_reduce and batch_isend_irecv.
_GATE_GLOO = {"gloo"}  # require_backend's set, printed in the skip reason
_GATE_GLOO_NCCL = {"gloo", "nccl"}
_GATE_FUTURE = "get_future is only supported on mpi, nccl and gloo"
_GATE_TIMEOUTS = "Only gloo backend supports timeouts"
_REQUIRE_BACKEND = "Test requires backend to be one of "
_GATE_BATCH_P2P = "GLOO Batch Send Recv CPU"


def _is_gate(why, gate):
    """Whether the skip reason torch recorded is exactly this gate.
    require_backend prints a set, whose order changes from one interpreter
    to the next (string hashing), so sets are compared as sets."""
    if not isinstance(why, str):
        return False
    if isinstance(gate, set):
        if not why.startswith(_REQUIRE_BACKEND):
            return False
        try:
            return ast.literal_eval(why[len(_REQUIRE_BACKEND):]) == gate
        except (ValueError, SyntaxError):
            return False
    return why == gate


GATED_BY_NAME = {
    "test_get_future": _GATE_FUTURE,
    "test_all_gather_object_default_pg": _GATE_GLOO_NCCL,
    "test_all_gather_object_subgroup": _GATE_GLOO_NCCL,
    "test_broadcast_object_list": _GATE_GLOO_NCCL,
    "test_gather_object": _GATE_GLOO_NCCL,
    "test_gather_object_subgroup": _GATE_GLOO_NCCL,
    "test_scatter_object_list": _GATE_GLOO,
    # batch_isend_irecv of CPU tensors; nothing in the bodies is gloo's.
    "test_batch_isend_irecv_gloo": _GATE_BATCH_P2P,
    "test_batch_isend_irecv_gloo_tags": _GATE_BATCH_P2P,
    # wait() raises after the group's timeout, saying "Timed out".
    "test_barrier_timeout_full_group": _GATE_TIMEOUTS,
    "test_barrier_timeout_group": _GATE_TIMEOUTS,
    # dist.monitored_barrier, which tarantella lets through for tnt groups
    # (torch_backend.py); the bodies expect gloo's messages, which tnt's
    # monitored_barrier gives.
    "test_monitored_barrier_gloo": _GATE_GLOO,
    "test_monitored_barrier_gloo_subgroup": _GATE_GLOO,
    "test_monitored_barrier_gloo_rank_0_timeout": _GATE_GLOO,
    "test_monitored_barrier_failure_order": _GATE_GLOO,
    "test_monitored_barrier_wait_all_ranks": _GATE_GLOO,
}
for _op in ("sum", "product", "min", "max"):
    for _kind in ("", "group_", "full_group_"):
        GATED_BY_NAME["test_all_reduce_coalesced_%s%s" % (_kind, _op)] = _GATE_GLOO

if BACKEND == "tnt":
    for _name, _gate in GATED_BY_NAME.items():
        _fn = getattr(DistributedTest._DistTestBase, _name)
        if _is_gate(getattr(_fn, "__unittest_skip_why__", None), _gate):
            _fn.__unittest_skip__ = False
            del _fn.__unittest_skip_why__


def _keep_ddp_without_replicated_tensor(value):
    """torch 1.13's TestDistBackend._run switches DDP to its experimental
    ReplicatedTensor mode in every rank, which imports
    torch.distributed._shard; under Python 3.11 (Debian 12) that import
    fails (a dataclass with a mutable default: "ValueError: mutable default
    ... for field tensor_properties"), and every DDP test then fails on
    every backend before any collective runs. DDP stays in its normal
    mode, the one users run (torch 2.0 removed the experiment)."""
    _replicated._DDP_WITH_REPLICATED_TENSOR = False


# _run imports the setter from its module when a rank starts.
if _replicated is not None:
    _replicated._set_ddp_with_replicated_tensor = _keep_ddp_without_replicated_tensor


class TorchSuite(TestDistBackend, DistributedTest._DistTestBase):
    """Every test of _DistTestBase; setUp starts the ranks of one test."""

    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _JsonLinesResult(unittest.TextTestResult):
    """Appends each finished test to a JSON-lines file at once, so that the
    runner keeps what finished if this process dies mid-suite."""

    results_path = None

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        entry = {
            "test": test.id().split(".", 1)[-1],
            "outcome": outcome,
            "seconds": round(time.monotonic() - self._started, 1),
            "detail": detail,
        }
        with open(self.results_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")


def _main(args):
    loader = unittest.TestLoader()
    if args.list:
        for name in loader.getTestCaseNames(TorchSuite):
            print("TorchSuite." + name)
        return 0
    names = args.tests or ["TorchSuite"]
    suite = loader.loadTestsFromNames(names, sys.modules[__name__])
    result_class = unittest.TextTestResult
    if args.results:
        _JsonLinesResult.results_path = args.results
        result_class = _JsonLinesResult
    runner = unittest.TextTestRunner(verbosity=2, resultclass=result_class)
    result = runner.run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(_main(_ARGS))
