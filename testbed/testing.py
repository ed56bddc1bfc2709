"""Assertions and waits for tests on emulated fabrics (used with the pytest plugin, or alone).

Each assertion raises ``AssertionError`` with a message that says what was
measured, so a failing test explains itself::

    from testbed.testing import assert_all_pairs_reachable, assert_no_loss, assert_recovers_within

    def test_fabric(fabric):
        assert_all_pairs_reachable(fabric)
        report = fabric.stream([("h1", "h4")], duration=1.0, events=[(0.3, lambda: fabric.link_down("l0", "s0"))])
        assert_recovers_within(report, 0.5)
"""
import time


def assert_all_pairs_reachable(fabric, pairs=None, timeout_s=1.0, attempts=2):
    """Every (ordered) host pair answers a ping.

    A pair that fails is probed again (``attempts`` in all), so one ping lost to a
    busy machine does not fail a test; a pair that never answers does.

    Args:
        fabric: a running :class:`~testbed.fabrics.Fabric`.
        pairs: ``[(src, dst)]`` host names (default: all ordered pairs).
        timeout_s: each ping's wait.
        attempts: probes per pair before it counts as unreachable.

    Raises:
        AssertionError: listing the unreachable pairs.
    """
    unreachable = fabric.unreachable_pairs(pairs, timeout_s=timeout_s)
    for _ in range(attempts - 1):
        if not unreachable:
            break
        unreachable = fabric.unreachable_pairs(unreachable, timeout_s=timeout_s)
    assert not unreachable, f"{len(unreachable)} host pairs unreachable: {unreachable[:20]}"


def assert_no_loss(report):
    """A traffic report (stream or collective) lost no packet and saw no out-of-sequence arrival.

    Raises:
        AssertionError: with the counts.
    """
    lost = report.get("lost_packets", 0)
    out_of_sequence = report.get("out_of_sequence", 0)
    assert lost == 0 and out_of_sequence == 0, (
        f"lost {lost} of {report.get('sent_packets')} packets, {out_of_sequence} out of sequence")


def recovery_seconds(report):
    """The time to recover a traffic report measured around its failure (0 when nothing stopped).

    Returns:
        float: seconds from the failure to the first packet delivered again on the
        flow that waited longest.

    Raises:
        AssertionError: the report has no failure time (run the stream with ``events``).
    """
    assert report.get("failure_ns") is not None, "the report has no failure time (give stream() events)"
    recovery = report.get("recovery")
    return float(recovery["seconds"]) if recovery else 0.0


def assert_recovers_within(report, seconds):
    """Traffic interrupted by a failure flows again within ``seconds`` on every flow.

    Raises:
        AssertionError: with the measured recovery time.
    """
    measured = recovery_seconds(report)
    assert measured <= seconds, f"traffic recovered after {measured * 1000:.1f} ms, bound {seconds * 1000:.1f} ms"


def wait_until(predicate, timeout_s=10.0, interval_s=0.05, what="the condition"):
    """Poll ``predicate()`` until it returns a true value; return that value.

    Raises:
        AssertionError: it stayed false for ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} did not hold within {timeout_s:g} s")
        time.sleep(interval_s)


def settled(read, timeout_s=10.0, quiet_s=0.3, interval_s=0.05):
    """Read a value until it stops changing for ``quiet_s`` (counters after a burst of packets); return it.

    A switch may still be forwarding when the sender returns (BMv2 is much slower
    than the sender), so counters are read once they are stable, not at once.

    Raises:
        AssertionError: it kept changing for ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    value = read()
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        again = read()
        if again != value:
            value, stable_since = again, time.monotonic()
        elif time.monotonic() - stable_since >= quiet_s:
            return value
    raise AssertionError(f"the value kept changing for {timeout_s:g} s (last {value!r})")
