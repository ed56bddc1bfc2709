"""Receiver accounting on crafted sequences, collective plans, and the metrics functions."""
import statistics

import pytest

from testbed.errors import ParameterError
from testbed.traffic import collectives, metrics, qp, roce
from testbed.traffic.receiver import RoceReceiver, reconcile
from testbed.traffic.sender import Endpoint, FrameFactory

SRC = Endpoint(0, "10.0.0.1", "00:00:00:00:00:01")
DST = Endpoint(1, "10.0.0.2", "00:00:00:00:00:02")
MS = 1_000_000


class Crafter:
    """Builds the UDP payloads of single-packet messages on one QP, by sequence number."""

    def __init__(self, start_psn=0, payload=1024, stream=0):
        self.pair = qp.make_queue_pairs(0, 1, 1, start_psn=start_psn)[0]
        self.start_psn = start_psn
        self.payload = payload
        self.stream = stream
        self.patcher = FrameFactory(SRC.mac, SRC.ip).patcher(DST.mac, DST.ip, self.pair, payload,
                                                              roce.OP_RDMA_WRITE_MIDDLE)

    def udp_payload(self, seq, tx_ns=0, msg_id=None, msg_bytes=None, offset=0):
        psn = (self.start_psn + seq) % roce.PSN_MODULO
        header = roce.pack_header(roce.KIND_DATA, self.stream, seq if msg_id is None else msg_id, seq, tx_ns,
                                  self.payload if msg_bytes is None else msg_bytes, offset)
        frame = self.patcher.frame(roce.OP_RDMA_WRITE_MIDDLE, psn, header)
        return frame[roce.BTH_OFFSET:]


def feed(sequence, start_psn=0, receiver=None, step_ns=MS):
    """Feed packets with the given per-QP sequence numbers, one per ``step_ns``."""
    receiver = receiver or RoceReceiver(loss_timeout=0.1)
    crafter = Crafter(start_psn)
    for index, seq in enumerate(sequence):
        now = (index + 1) * step_ns
        receiver.handle(SRC.ip, crafter.udp_payload(seq, tx_ns=now - 1000), now_ns=now)
    return receiver


def totals_of(receiver):
    t = receiver.totals()
    return {k: t[k] for k in ("received", "lost", "out_of_sequence", "late", "duplicates", "missing")}


def test_in_order_counts_nothing_wrong():
    receiver = feed(range(10))
    receiver.finish(10 * MS)
    assert totals_of(receiver) == {"received": 10, "lost": 0, "out_of_sequence": 0, "late": 0, "duplicates": 0,
                                   "missing": 0}


def test_reordered_packets_count_one_oos_each_swap():
    receiver = feed([0, 1, 3, 2, 4, 6, 5, 7])
    receiver.finish(10 * MS)
    assert totals_of(receiver) == {"received": 8, "lost": 0, "out_of_sequence": 2, "late": 2, "duplicates": 0,
                                   "missing": 0}


def test_dropped_packets_are_lost_only_after_the_timeout():
    receiver = feed([0, 1, 2, 5, 6, 9])  # 3, 4, 7, 8 dropped
    assert totals_of(receiver)["missing"] == 4 and totals_of(receiver)["lost"] == 0
    assert receiver.expire(6 * MS + 50 * MS) == 0  # 50 ms < 100 ms timeout
    assert receiver.expire(6 * MS + 200 * MS) == 4
    assert totals_of(receiver) == {"received": 6, "lost": 4, "out_of_sequence": 2, "late": 0, "duplicates": 0,
                                   "missing": 0}


def test_finish_declares_remaining_gaps_lost():
    receiver = feed([0, 2])
    receiver.finish(3 * MS)
    assert totals_of(receiver)["lost"] == 1


def test_duplicates_are_counted_and_not_received_twice():
    receiver = feed([0, 1, 1, 2, 2, 2, 0])
    receiver.finish(10 * MS)
    assert totals_of(receiver) == {"received": 3, "lost": 0, "out_of_sequence": 0, "late": 0, "duplicates": 4,
                                   "missing": 0}
    assert receiver.totals()["bytes"] == 3 * 1024


def test_packet_arriving_after_its_loss_timeout_is_late_not_lost():
    receiver = RoceReceiver(loss_timeout=0.001)
    crafter = Crafter()
    receiver.handle(SRC.ip, crafter.udp_payload(0), now_ns=1 * MS)
    receiver.handle(SRC.ip, crafter.udp_payload(2), now_ns=2 * MS)
    assert receiver.expire(10 * MS) == 1
    receiver.handle(SRC.ip, crafter.udp_payload(1), now_ns=11 * MS)
    receiver.handle(SRC.ip, crafter.udp_payload(1), now_ns=12 * MS)
    receiver.finish(20 * MS)
    assert totals_of(receiver) == {"received": 3, "lost": 0, "out_of_sequence": 1, "late": 1, "duplicates": 1,
                                   "missing": 0}


def test_mixed_sequence_reordered_dropped_duplicated():
    # 0 1 | 3 (gap: 2 missing) | 2 late | 2 dup | 6 (gap 4,5) | 5 late | 7 | 7 dup ; 4 never arrives
    receiver = feed([0, 1, 3, 2, 2, 6, 5, 7, 7])
    receiver.finish(20 * MS)
    assert totals_of(receiver) == {"received": 7, "lost": 1, "out_of_sequence": 2, "late": 2, "duplicates": 2,
                                   "missing": 0}
    entry = receiver.report()["per_qp"][0]
    assert entry["received"] + entry["lost"] == 8


def test_accounting_across_the_psn_wrap():
    start = roce.PSN_MODULO - 3
    receiver = feed([0, 1, 2, 3, 4, 6, 5, 7], start_psn=start)
    receiver.finish(20 * MS)
    assert totals_of(receiver) == {"received": 8, "lost": 0, "out_of_sequence": 1, "late": 1, "duplicates": 0,
                                   "missing": 0}
    assert receiver.report()["per_qp"][0]["highest_psn"] == (start + 7) % roce.PSN_MODULO


def test_head_loss_is_seen_from_the_header_sequence():
    receiver = feed([2, 3])
    receiver.finish(10 * MS)
    assert totals_of(receiver)["lost"] == 2 and totals_of(receiver)["out_of_sequence"] == 1


def test_qps_are_accounted_separately():
    receiver = RoceReceiver()
    first = Crafter()
    second = Crafter()
    second.pair = qp.make_queue_pairs(0, 1, 2)[1]
    second.patcher = FrameFactory(SRC.mac, SRC.ip).patcher(DST.mac, DST.ip, second.pair, 1024)
    for seq in range(3):
        receiver.handle(SRC.ip, first.udp_payload(seq), now_ns=MS * (seq + 1))
        receiver.handle(SRC.ip, second.udp_payload(seq), now_ns=MS * (seq + 1))
    assert len(receiver.qps) == 2 and receiver.totals()["out_of_sequence"] == 0


def test_timeline_bins_latency_and_message_completion():
    receiver = RoceReceiver(bin_ms=1.0)
    crafter = Crafter()
    arrivals = [100_000, 900_000, 1_000_000, 1_500_000, 3_200_000]  # bins 0, 0, 1, 1, 3
    for seq, now in enumerate(arrivals):
        receiver.handle(SRC.ip, crafter.udp_payload(seq, tx_ns=now - 20_000, msg_id=7, msg_bytes=5 * 1024,
                                                    offset=seq * 1024), now_ns=now)
    report = receiver.report()
    assert report["timeline"]["bin_ns"] == 1_000_000
    assert report["timeline"]["bins"] == [[0, 2, 2048], [1, 2, 2048], [3, 1, 1024]]
    assert report["latency_ns"]["count"] == 5 and report["latency_ns"]["min"] == report["latency_ns"]["max"] == 20_000
    assert report["message_completion_ns"]["count"] == 1
    assert report["message_completion_ns"]["max"] == 3_200_000 - 80_000
    assert report["streams"][0]["bytes"] == 5 * 1024
    assert metrics.timeline_throughput_mbps(report["timeline"]["bins"], 1_000_000)[2][1] == 0.0


def test_delivery_gaps_are_recorded():
    receiver = RoceReceiver(gap_ms=5.0)
    crafter = Crafter()
    for seq, now in enumerate([1 * MS, 2 * MS, 30 * MS, 31 * MS]):
        receiver.handle(SRC.ip, crafter.udp_payload(seq), now_ns=now)
    assert receiver.report()["gaps"] == [[2 * MS, 30 * MS]]


def test_foreign_packets_are_ignored():
    receiver = RoceReceiver()
    assert not receiver.handle(SRC.ip, b"\x00" * 20)
    assert receiver.foreign == 1 and receiver.totals()["received"] == 0


def test_reconcile_counts_tail_loss():
    sender_report = {"src_ip": SRC.ip, "per_qp": {"x": {"dqpn": 0x1000, "packets": 10}}}
    receiver = feed([0, 1, 2, 3, 4, 5, 6])  # 7, 8, 9 lost at the tail: no PSN gap shows them
    receiver.finish(20 * MS)
    assert receiver.totals()["lost"] == 0
    assert reconcile(sender_report, receiver.report())["lost"] == 3


# -- collective plans --------------------------------------------------------------------------

def test_ring_allreduce_has_2_n_minus_1_dependent_steps():
    plan = collectives.build_plan("allreduce", 8, 8 * 1000)
    assert all(len(steps) == 14 for steps in plan)
    assert plan[0][0] == {"sends": [[1, 1000]], "recvs": [[7, 1000]]}
    assert len(collectives.build_plan("allgather", 8, 800)[3]) == 7
    assert len(collectives.build_plan("reducescatter", 4, 800)[0]) == 3


def test_alltoall_incast_permutation_plans_balance():
    for pattern in ("alltoall", "alltoallv", "permutation", "incast"):
        plan = collectives.build_plan(pattern, 6, 6000, seed=3)
        sent = {}
        received = {}
        for rank, steps in enumerate(plan):
            for step in steps:
                for peer, amount in step["sends"]:
                    sent[(rank, peer)] = sent.get((rank, peer), 0) + amount
                for peer, amount in step["recvs"]:
                    received[(peer, rank)] = received.get((peer, rank), 0) + amount
        assert sent == received, pattern
        assert all(src != dst for src, dst in sent)
    assert len(collectives.build_plan("alltoall", 6, 6000)[0][0]["sends"]) == 5
    incast = collectives.build_plan("incast", 5, 100)
    assert incast[0][0]["recvs"] == [[1, 100], [2, 100], [3, 100], [4, 100]]
    perm = collectives.build_plan("permutation", 7, 10, seed=1)
    assert sorted(step[0]["sends"][0][0] for step in perm) == list(range(7))


@pytest.mark.parametrize("kwargs, option", [
    ({"pattern": "ring"}, "PATTERN"),
    ({"size": 0}, "--size"),
    ({"qps": 0}, "--qps"),
    ({"rate_mbps": 0}, "--rate-mbps"),
    ({"rate_mbps": -5.0}, "--rate-mbps"),
    ({"qp_scaling": "hash"}, "--qp-scaling"),
])
def test_bad_options_are_refused_naming_the_option(kwargs, option):
    options = {"pattern": "allreduce", "size": 1000, "qps": 1, "rate_mbps": 100.0, "qp_scaling": "split"}
    options.update(kwargs)
    with pytest.raises(ParameterError) as caught:
        collectives.validate_options(**options)
    assert caught.value.field == option
    assert option in str(caught.value)


# -- metrics -----------------------------------------------------------------------------------

def test_max_mean_ratio_and_jain():
    assert metrics.max_mean_ratio([5, 5, 5, 5]) == 1.0
    assert metrics.max_mean_ratio([8, 0, 0, 0]) == 4.0
    assert metrics.max_mean_ratio([3, 1]) == 1.5
    assert metrics.jain_fairness([1, 1, 1]) == 1.0
    assert metrics.jain_fairness([1, 0, 0, 0]) == 0.25
    assert metrics.jain_fairness([3, 1]) == pytest.approx(16 / 20)
    with pytest.raises(ValueError):
        metrics.max_mean_ratio([])
    with pytest.raises(ValueError):
        metrics.jain_fairness([-1])


def test_ecmp_hashing_1000_flows_on_16_links_has_mean_mmr_above_1_2():
    ratios = [metrics.ecmp_mmr_trial(1000, 16, seed) for seed in range(100)]
    assert statistics.mean(ratios) > 1.2
    assert min(ratios) > 1.0


def test_out_of_order_goodput_and_loss_in_window():
    assert metrics.out_of_order_rate(5, 100) == 0.05
    assert metrics.out_of_order_rate(5, 0) == 0.0
    assert metrics.goodput_mbps(1_250_000, 0.1) == pytest.approx(100.0)
    sent = {"10": 100, "11": 100, "12": 100, "13": 100}
    received = {"10": 100, "11": 40, "12": 0, "13": 100}
    window = metrics.loss_in_window(sent, received, 10 * MS, 110 * MS, 130 * MS)
    assert window == {"sent": 200, "received": 40, "lost": 160, "loss_rate": 0.8}
    assert metrics.loss_in_window(sent, received, 10 * MS, 0, 1000 * MS)["lost"] == 160


def test_time_to_recover_picks_the_longest_gap_around_the_failure():
    arrivals = [0, 1, 2, 10, 11, 50, 51, 52, 60]
    gaps = metrics.delivery_gaps(arrivals, 5)
    assert gaps == [(2, 10), (11, 50), (52, 60)]
    recovery = metrics.time_to_recover(gaps, failure_ns=5)
    assert (recovery["stopped_ns"], recovery["resumed_ns"]) == (11, 50)
    assert recovery["seconds"] == pytest.approx(39e-9)
    assert metrics.time_to_recover(gaps, failure_ns=5, window_ns=3)["resumed_ns"] == 10
    assert metrics.time_to_recover(gaps, failure_ns=100) is None


def test_ack_requests_and_sequence_errors_drive_rc_acks_and_naks():
    acks, naks = [], []
    receiver = RoceReceiver(on_ack_request=lambda src, dqpn, msg, dup: acks.append((dqpn, msg, dup)),
                            on_sequence_error=lambda src, dqpn, first, end: naks.append((dqpn, first, end)))
    crafter = Crafter()
    pair = crafter.pair
    patcher = crafter.patcher

    def packet(seq, msg_id, offset, ackreq):
        header = roce.pack_header(roce.KIND_DATA, 0, msg_id, seq, 0, 2048, offset)
        return patcher.frame(roce.OP_RDMA_WRITE_MIDDLE, seq, header, ackreq)[roce.BTH_OFFSET:]

    # message 0 = seq 0, 1; message 1 = seq 2, 3; seq 2 is lost, then retransmitted with seq 3 again
    for step, (seq, msg, offset, ackreq) in enumerate([(0, 0, 0, False), (1, 0, 1024, True), (3, 1, 1024, True),
                                                       (2, 1, 0, False), (3, 1, 1024, True), (1, 0, 1024, True)]):
        receiver.handle(SRC.ip, packet(seq, msg, offset, ackreq), now_ns=(step + 1) * MS)
    assert naks == [(pair.remote_qpn, 2, 3)]  # the gap opened by seq 3: seq 2 missing
    # message 0 completes (ACK), message 1 completes when seq 2 arrives late (ACK), the retransmitted
    # seq 3 and the duplicate of message 0's last packet are re-ACKed
    assert acks == [(pair.remote_qpn, 0, False), (pair.remote_qpn, 1, False), (pair.remote_qpn, 1, True),
                    (pair.remote_qpn, 0, True)]
    assert totals_of(receiver) == {"received": 4, "lost": 0, "out_of_sequence": 1, "late": 1, "duplicates": 2,
                                   "missing": 0}


def test_control_packets_go_to_the_control_callback_not_the_accounting():
    seen = []
    receiver = RoceReceiver(on_control=lambda src, kind, fields: seen.append((src, kind, fields[3])))
    pair = qp.make_queue_pairs(0, 1, 1)[0]
    patcher = FrameFactory(SRC.mac, SRC.ip, roce.DSCP_CONTROL).patcher(DST.mac, DST.ip, pair, roce.HEADER.size,
                                                                        roce.OP_ACKNOWLEDGE)
    frame = patcher.frame(roce.OP_ACKNOWLEDGE, 0, roce.pack_header(roce.KIND_ACK, 42, 7, 0, 0, pair.local_qpn, 0),
                          extension=roce.pack_aeth(7))
    assert roce.parse_frame(frame).aeth == 7 and roce.parse_frame(frame).icrc_ok
    receiver.handle(SRC.ip, frame[roce.BTH_OFFSET:])
    assert seen == [(SRC.ip, roce.KIND_ACK, 42)]
    assert receiver.totals()["received"] == 0 and receiver.control_packets == 1


def stamped_on_arrival(capture, out, address):
    """Wait until the kernel stamps packets as they arrive (a packet it has not stamped is stamped when
    read).  The first socket on the machine that asks for receive timestamps turns them on from a work
    queue, a moment later; until then every packet looks as late as its reader."""
    import time

    crafter = Crafter(stream=9)
    for _ in range(100):
        probe = RoceReceiver()
        out.sendto(bytes(crafter.udp_payload(0, tx_ns=time.time_ns())), (address, roce.ROCE_UDP_PORT))
        time.sleep(0.02)
        capture.pump(probe)
        if probe.report()["latency_ns"]["max"] < 10 * MS:
            return
    pytest.fail("the kernel never stamped a packet on arrival")


def test_a_descheduled_receiver_times_arrivals_by_the_kernel_stamp():
    """A receiver that reads its socket 80 ms late still times each packet when the kernel queued it."""
    import socket
    import time

    from testbed.traffic.receiver import Capture

    address = "127.93.41.7"   # a loopback address of this test's own (the most specific bind gets the packets)
    capture = Capture(mode="udp", bind_ip=address)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        stamped_on_arrival(capture, out, address)
        receiver = RoceReceiver()
        crafter = Crafter()
        for seq in range(3):
            out.sendto(bytes(crafter.udp_payload(seq, tx_ns=time.time_ns())), (address, roce.ROCE_UDP_PORT))
        time.sleep(0.08)
        assert capture.pump(receiver) == 3
        # without the kernel's stamps every latency would be at least the 80 ms the reader slept
        assert receiver.report()["latency_ns"]["max"] < 40 * MS
    finally:
        out.close()
        capture.close()


def test_the_receiver_reads_in_batches_and_keeps_the_arrival_spacing():
    """run_receiver wakes once per batch_s while packets come, and still sees them 2 ms apart.

    A gap is 12 ms here: stamps taken when a 20 ms batch is read would show ~18 ms between batches,
    while the sender thread, sharing this process's interpreter (a 5 ms GIL switch interval), can be
    held up a few ms beyond its 2 ms."""
    import socket
    import threading
    import time

    from testbed.traffic.receiver import Capture, run_receiver

    address = "127.93.41.8"
    capture = Capture(mode="udp", bind_ip=address)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    reads = []
    pump = capture.pump

    def counted_pump(receiver, **kwargs):
        got = pump(receiver, **kwargs)
        if got:
            reads.append(got)
        return got

    capture.pump = counted_pump
    crafter = Crafter()
    sending = {}

    def send():
        sending["begin"] = time.monotonic()
        for seq in range(30):
            out.sendto(bytes(crafter.udp_payload(seq, tx_ns=time.time_ns())), (address, roce.ROCE_UDP_PORT))
            time.sleep(0.002)
        sending["end"] = time.monotonic()

    sender = threading.Thread(target=send)
    try:
        stamped_on_arrival(capture, out, address)
        reads.clear()
        sender.start()
        report = run_receiver(RoceReceiver(gap_ms=12.0), capture, idle_timeout=0.3, batch_s=0.02)
        sender.join()
    finally:
        out.close()
        capture.close()
    assert report["totals"]["received"] == 30 and sum(reads) == 30
    # one read per 20 ms of sending at most (plus the first and the last)
    assert len(reads) <= (sending["end"] - sending["begin"]) / 0.02 + 2
    if (sending["end"] - sending["begin"]) < 0.1:  # the sender thread was not held up: 2 ms spacing held
        assert report["gaps"] == []  # timed by the kernel's stamps, not by the 20 ms reads
