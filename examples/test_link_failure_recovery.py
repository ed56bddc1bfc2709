"""After an edge-aggregation link fails, h1's traffic to h16 flows again within 2 s and all pairs still reach.

The static controller reroutes 50 ms after it is told; the bound leaves room for a busy machine.
"""
import pytest

from testbed.testing import assert_all_pairs_reachable, assert_recovers_within


@pytest.mark.fabric("fattree", k=4, program="ecmp", controller="static", detection_delay_ms=50)
def test_traffic_recovers_after_a_link_failure(fabric):
    fail = (0.5, lambda: fabric.link_down("e0_0", "a0_0"))  # 0.5 s after the senders start
    report = fabric.stream([("h1", "h16")], duration=2.5, qps=8, rate_mbps=4, events=[fail])
    assert_recovers_within(report, 2.0)
    assert_all_pairs_reachable(fabric)
