"""Collectives over 8 Mininet hosts on two Linux bridges (needs root).

Nodes are named ``tch*`` / ``tcs*`` so they never collide with other Mininet
tests running in parallel on this machine.
"""
import subprocess
import threading
import time

import pytest

from bridge_fabric import two_bridges
from testbed.traffic import collectives, metrics
from testbed.traffic import hosts as host_module

PREFIX = "tc"
HOSTS = 8

pytestmark = pytest.mark.mininet


def agents_running():
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "testbed.traffic.agent" in line and "testbed-collective-" in line]


@pytest.fixture(scope="module")
def fabric():
    """tch1..tch4 on tcs1, tch5..tch8 on tcs2, one link tcs1-tcs2."""
    with two_bridges(PREFIX, HOSTS) as net:
        yield net
    assert not agents_running(), "traffic agents still running"


def all_hosts(net):
    return [host_module.from_mininet(net.get(f"{PREFIX}h{i}")) for i in range(1, HOSTS + 1)]


# Healthy runs use a long ACK timeout so that CPU contention from tests running in parallel
# (receivers queueing for hundreds of ms) cannot cause spurious retransmissions.
HEALTHY = {"rate_mbps": 100.0, "ack_timeout": 5.0}


def assert_clean(report):
    assert report["complete"], report["ranks_report"]
    assert report["lost_packets"] == 0 and report["unrecovered_packets"] == 0
    assert report["missing_bytes"] == 0 and report["duplicates"] == 0
    assert report["received_packets"] == report["sent_packets"] > 0
    assert report["completion_time_s"] > 0
    # reliable connection: every message acknowledged once, nothing retransmitted
    assert report["acks_sent"] == report["acks_received"] > 0
    assert report["naks_sent"] == 0 and report["local_ack_timeouts"] == 0 and report["retransmitted_packets"] == 0
    # each QP sends its messages in order; the bridges do not reorder (allow a rare scheduling hiccup)
    assert metrics.out_of_order_rate(report["late"], report["received_packets"]) < 0.001


def test_ring_allreduce_on_8_hosts_completes_without_loss(fabric):
    report = collectives.run_collective(all_hosts(fabric), "allreduce", 2 << 20, qps=2, **HEALTHY)
    assert_clean(report)
    assert report["steps"] == 14
    assert report["qps_per_host"] == 2  # ring: one peer x 2 QPs
    assert report["received_bytes"] == report["expected_bytes"] == 8 * 14 * (2 << 20) // 8
    for rank in report["ranks_report"]:
        steps = rank["steps"]
        assert len(steps) == 14
        # dependent steps: each starts after the previous one's data arrived
        assert all(later["start_ns"] >= earlier["done_ns"] for earlier, later in zip(steps, steps[1:]))
    # 14 steps of 256 KiB at 100 Mbit/s cannot take less than ~0.29 s
    assert report["completion_time_s"] > 14 * (256 * 1024 * 8) / 100e6


def test_alltoall_on_8_hosts_completes_without_loss(fabric):
    report = collectives.run_collective(all_hosts(fabric), "alltoall", 1 << 20, qps=4, qp_scaling="split",
                                        **HEALTHY)
    assert_clean(report)
    assert report["steps"] == 1
    assert report["received_bytes"] == 8 * 7 * ((1 << 20) // 8)
    assert report["qps_per_host"] == 7 * 4  # full mesh: 7 peers x 4 QPs (split uses them all)


def test_allreduce_with_receiver_driven_admission(fabric):
    report = collectives.run_collective(all_hosts(fabric), "allreduce", 1 << 20, qps=2, **HEALTHY,
                                        admission=True, chunk_bytes=32 * 1024, channels=1)
    assert_clean(report)
    # every chunk (128 KiB per step / 32 KiB) needed a clear-to-send: 8 ranks x 14 steps x 4 chunks
    assert report["cts_sent"] - report["cts_resent"] == 8 * 14 * 4


@pytest.mark.parametrize("pattern", ["allgather", "reducescatter", "alltoallv", "incast", "permutation"])
def test_other_collectives_complete(fabric, pattern):
    report = collectives.run_collective(all_hosts(fabric), pattern, 512 * 1024, qps=2, **HEALTHY,
                                        admission=pattern == "incast")
    assert_clean(report)


def fail_link_during(fabric, run, down_after=0.4, down_for=0.3):
    """Run ``run(on_start)`` while the tcs1-tcs2 link goes down ``down_after`` s into it for ``down_for`` s."""
    times = {}
    timers = []
    left, right = f"{PREFIX}s1", f"{PREFIX}s2"

    def on_start(start_ns):
        def down():
            times["down"] = time.time_ns()
            fabric.configLinkStatus(left, right, "down")

        def up():
            # taken as the command starts, as "down" is: frames may flow before configLinkStatus returns
            times["up"] = time.time_ns()
            fabric.configLinkStatus(left, right, "up")

        delay = (start_ns - time.time_ns()) / 1e9
        timers.extend([threading.Timer(delay + down_after, down), threading.Timer(delay + down_after + down_for, up)])
        for timer in timers:
            timer.start()
        return start_ns + int(down_after * 1e9)

    try:
        report = run(on_start)
    finally:
        for timer in timers:
            timer.cancel()  # a link still down when the run ended comes up below
            timer.join()
        fabric.configLinkStatus(left, right, "up")
    return report, times


def test_link_down_mid_allreduce_is_recovered_by_retransmission(fabric):
    report, times = fail_link_during(fabric, lambda on_start: collectives.run_collective(
        all_hosts(fabric), "allreduce", 8 << 20, qps=2, rate_mbps=100.0, on_start=on_start))
    outage = (times["up"] - times["down"]) / 1e9
    assert report["lost_packets"] > 0 and report["out_of_sequence"] > 0
    # recovered by NAKs (a gap seen after the link came back) or by local ACK timeouts
    assert report["naks_received"] + report["local_ack_timeouts"] > 0 and report["retransmitted_packets"] > 0
    assert 0 < report["late"] <= report["lost_packets"]  # dropped packets came back as late retransmissions
    # go-back to the unacknowledged messages: everything arrived in the end
    assert report["complete"] and report["missing_bytes"] == 0 and report["unrecovered_packets"] == 0
    assert report["completion_time_s"] > outage
    recovery = report["recovery"]
    assert recovery is not None
    assert recovery["resumed_ns"] > times["up"] and recovery["seconds"] >= outage * 0.8
    measured = metrics.time_to_recover(report["gaps"], times["down"])
    assert measured["resumed_ns"] > times["up"]


def test_link_down_without_retransmission_leaves_the_loss(fabric):
    report, times = fail_link_during(fabric, lambda on_start: collectives.run_collective(
        all_hosts(fabric), "allreduce", 8 << 20, qps=2, rate_mbps=100.0, retransmit=False, step_timeout=1.0,
        on_start=on_start))
    assert report["lost_packets"] > 0 and report["unrecovered_packets"] > 0 and report["out_of_sequence"] > 0
    assert not report["complete"] and report["missing_bytes"] > 0
    assert report["retransmitted_packets"] == 0 and report["acks_sent"] == 0 and report["naks_sent"] == 0
    recovery = report["recovery"]
    assert recovery is not None and recovery["resumed_ns"] > times["up"]


def test_link_down_during_admission_recovers(fabric):
    report, times = fail_link_during(fabric, lambda on_start: collectives.run_collective(
        all_hosts(fabric), "allreduce", 8 << 20, qps=2, rate_mbps=100.0, admission=True, chunk_bytes=128 * 1024,
        channels=1, on_start=on_start))
    # lost data comes back by retransmission, a lost clear-to-send by a repeated grant
    assert report["lost_packets"] + report["cts_resent"] > 0
    assert report["complete"] and report["missing_bytes"] == 0 and report["unrecovered_packets"] == 0
    assert report["recovery"] is not None and report["recovery"]["resumed_ns"] > times["up"]


def test_a_lasting_failure_aborts_the_collective_quickly(fabric):
    started = time.monotonic()
    report, _ = fail_link_during(fabric, lambda on_start: collectives.run_collective(
        all_hosts(fabric), "allreduce", 8 << 20, qps=2, rate_mbps=100.0, ack_timeout=0.05, retry_count=2,
        on_start=on_start), down_after=0.3, down_for=60.0)
    assert time.monotonic() - started < 55  # well before the link came back
    assert not report["complete"] and report["aborted"]
    assert report["retry_exhausted"] > 0 and report["missing_bytes"] > 0
