"""The tests of torch's distributed suite that gloo passes and the tnt
backend does not, each with its reason (docs/torch-distributed.md,
"Conformance"). run_suite.py's table names any other such test "not
explained" and exits 1.

Keys are test names; a value is the reason, or a dict from world size to
the reason where it depends on the world size.
"""

_NO_SYNC = ("torch's test body builds its CPU model only for gloo and mpi "
            "(`if BACKEND == \"mpi\" or BACKEND == \"gloo\"`), so torch skips it for "
            "any other backend")
_SPARSE = ("sparse tensors: not supported (the backend raises at the call; torch runs "
           "the test for gloo only)")

DIFFERENCES = {
    "test_accumulate_gradients_no_sync": _NO_SYNC,
    "test_accumulate_gradients_no_sync_allreduce_hook": _NO_SYNC,
    "test_accumulate_gradients_no_sync_allreduce_with_then_hook": _NO_SYNC,
    "test_accumulate_gradients_no_sync_grad_is_view": _NO_SYNC,
    "test_sparse_all_reduce_sum": _SPARSE,
}


def reason(test_name, world_size):
    """Why tnt does not pass a test that gloo passes, or None."""
    r = DIFFERENCES.get(test_name)
    if isinstance(r, dict):
        r = r.get(world_size)
    return r
