"""Shared pytest fixtures: leftover checks for tests that build emulated networks."""
import pytest

from testbed.emulation.cleanup import leftovers


def _comparable(found):
    """Leftovers without process pids that may legitimately differ (keep command lines)."""
    return {kind: sorted(cmd for _, cmd in items) if kind == "processes" else items
            for kind, items in found.items()}


@pytest.fixture
def no_leftovers():
    """Fail the test if it leaves namespaces, interfaces, processes or state files behind.

    Yields the snapshot taken before the test; compares against a new one after it.
    """
    before = leftovers()
    yield before
    after = leftovers()
    assert _comparable(after) == _comparable(before), f"left behind: before={before} after={after}"
