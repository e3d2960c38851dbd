"""The tests of torch's distributed suite that gloo passes and the tnt
backend does not, each with its reason (docs/torch-distributed.md,
"Conformance"). run_suite.py's table names any other such test "not
explained" and exits 1.

Keys are test names; a value is the reason, or a dict from world size to
the reason where it depends on the world size.
"""

DIFFERENCES = {
}


def reason(test_name, world_size):
    """Why tnt does not pass a test that gloo passes, or None."""
    r = DIFFERENCES.get(test_name)
    if isinstance(r, dict):
        r = r.get(world_size)
    return r
