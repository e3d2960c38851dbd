"""Stand-in for the ``expecttest`` package, for running torch's distributed
test suite where ``expecttest`` is not installed (Debian ships no package
for it).

torch's test utilities (``torch.testing._internal.common_utils``) import
``expecttest`` only for the base class of their ``TestCase`` and its
``ACCEPT`` flag (rewriting expected output in place). The distributed
suite compares no inline expectations, so this stand-in gives the base
class and the flag and refuses ``assertExpectedInline`` loudly instead of
passing it. Only tests/torch_suite/run_suite.py puts this directory on
PYTHONPATH; where the real package is installed, install it and drop this.
"""
import unittest

__all__ = ["ACCEPT", "TestCase"]

#: The real package's "rewrite expectations" switch; never set here.
ACCEPT = False


class TestCase(unittest.TestCase):
    """The real ``expecttest.TestCase`` adds ``assertExpectedInline`` to
    ``unittest.TestCase``; this stand-in adds it as a hard failure, so a
    test that needs the real comparison fails instead of passing."""

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (expecttest's name)
        raise AssertionError(
            "assertExpectedInline needs the real 'expecttest' package; this is "
            "tests/torch_suite/expecttest, a stand-in that only provides the base class "
            "(pip install expecttest, and take tests/torch_suite off PYTHONPATH)")
