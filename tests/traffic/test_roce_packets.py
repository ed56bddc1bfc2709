"""RoCEv2 packets: built with scapy.contrib.roce, dissected back, ICRC, PSN wrap, opcodes, QP scaling."""
import random
import time

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.traffic import qp, roce
from testbed.traffic.sender import Endpoint, FrameFactory, Pacer, SendStats, Transfer, transmit

SRC = Endpoint(0, "10.0.0.1", "00:00:00:00:00:01")
DST = Endpoint(1, "10.0.0.2", "00:00:00:00:00:02")


class ListSocket:
    """Collects frames instead of sending them (the frames are the thing under test)."""

    def __init__(self):
        self.frames = []

    def send(self, frame):
        self.frames.append(bytes(frame))


def send_transfer(message_sizes, qps=1, strategy="roundrobin", start_psn=None, mtu=roce.DEFAULT_MTU):
    pairs = qp.make_queue_pairs(SRC.rank, DST.rank, qps, start_psn=start_psn)
    transfer = Transfer(SRC, DST, pairs, 5, message_sizes, strategy, mtu)
    sock = ListSocket()
    stats = transmit(sock, qp.interleave(transfer.packet_queues()), FrameFactory(SRC.mac, SRC.ip))
    return sock.frames, stats, pairs


def scapy_icrc(frame):
    """ICRC as scapy.contrib.roce computes it when the field is left unset."""
    packet = Ether(frame)
    packet[BTH].icrc = None
    return bytes(packet)[-4:]


def test_frame_dissects_back_to_the_same_fields():
    header = roce.pack_header(roce.KIND_DATA, 9, 3, 77, 123456789, 4096, 1024)
    frame = roce.build_frame(SRC.mac, DST.mac, SRC.ip, DST.ip, 50000, 0x1234, 4242, roce.OP_RDMA_WRITE_MIDDLE,
                             header + bytes(1024 - len(header)), ackreq=True)
    packet = Ether(frame)
    assert packet[Ether].dst == DST.mac and packet[Ether].src == SRC.mac
    assert packet[IP].src == SRC.ip and packet[IP].dst == DST.ip
    assert packet[IP].tos >> 2 == roce.DSCP_DATA
    assert packet[UDP].dport == 4791 and packet[UDP].sport == 50000
    bth = packet[BTH]
    assert (bth.opcode, bth.dqpn, bth.psn, bth.ackreq) == (roce.OP_RDMA_WRITE_MIDDLE, 0x1234, 4242, 1)
    parsed = roce.parse_frame(frame)
    assert (parsed.opcode, parsed.dqpn, parsed.psn, parsed.ackreq) == (roce.OP_RDMA_WRITE_MIDDLE, 0x1234, 4242, 1)
    assert (parsed.kind, parsed.stream, parsed.msg_id, parsed.seq, parsed.tx_ns, parsed.msg_bytes, parsed.offset) == \
        (roce.KIND_DATA, 9, 3, 77, 123456789, 4096, 1024)
    assert parsed.payload_length == 1024 and parsed.reth is None and parsed.icrc_ok
    assert len(frame) == roce.FRAME_OVERHEAD + 1024


def test_icrc_equals_scapys_on_random_packets():
    rng = random.Random(4)
    for _ in range(30):
        opcode = rng.choice([roce.OP_RDMA_WRITE_MIDDLE, roce.OP_RDMA_WRITE_LAST, roce.OP_SEND_ONLY])
        payload = bytes(rng.randrange(256) for _ in range(rng.randrange(32, 300)))
        frame = roce.build_frame(SRC.mac, DST.mac, f"10.0.{rng.randrange(256)}.1", "10.1.0.2",
                                 rng.randrange(49152, 65536), rng.randrange(1 << 24), rng.randrange(1 << 24),
                                 opcode, payload, dscp=rng.randrange(64), ttl=rng.randrange(1, 256))
        assert roce.icrc(frame) == frame[-4:] == scapy_icrc(frame)


def test_patched_frames_keep_scapys_icrc_and_fields():
    frames, stats, _ = send_transfer([5000, 700], qps=2, strategy="split")
    assert stats.packets == len(frames) == 6  # 5000 -> 3072 + 1928 (3 + 2 packets), 700 -> 1
    for frame in frames:
        assert frame[-4:] == scapy_icrc(frame), "patched ICRC differs from scapy's"
        assert roce.parse_frame(frame).icrc_ok
    corrupted = bytearray(frames[0])
    corrupted[-10] ^= 0xFF
    assert not roce.parse_frame(bytes(corrupted)).icrc_ok


def test_icrc_ignores_the_fields_switches_may_change():
    frames, _, _ = send_transfer([100])
    frame = bytearray(frames[0])
    frame[roce.ETH_LEN + 1] = 0xB8 | 0x03  # DSCP and ECN
    frame[roce.ETH_LEN + 8] = 3  # TTL
    frame[roce.BTH_OFFSET + 4] = 0x80  # FECN
    assert roce.icrc(bytes(frame)) == frames[0][-4:]


def test_psn_wraps_at_2_pow_24():
    frames, _, pairs = send_transfer([5 * 1024], start_psn=(1 << 24) - 2)
    psns = [Ether(frame)[BTH].psn for frame in frames]
    assert psns == [(1 << 24) - 2, (1 << 24) - 1, 0, 1, 2]
    assert pairs[0].next_psn == 3 and pairs[0].next_seq == 5
    assert qp.psn_add((1 << 24) - 1, 1) == 0
    assert qp.psn_delta(1, (1 << 24) - 1) == 2
    assert qp.psn_delta((1 << 24) - 1, 1) == -2
    seqs = [roce.parse_frame(frame).seq for frame in frames]
    assert seqs == [0, 1, 2, 3, 4]


def test_opcode_sequences_first_middle_last_only():
    assert roce.write_opcodes(1) == [roce.OP_RDMA_WRITE_ONLY]
    assert roce.write_opcodes(2) == [roce.OP_RDMA_WRITE_FIRST, roce.OP_RDMA_WRITE_LAST]
    assert roce.write_opcodes(4) == [roce.OP_RDMA_WRITE_FIRST] + [roce.OP_RDMA_WRITE_MIDDLE] * 2 + \
        [roce.OP_RDMA_WRITE_LAST]
    frames, _, _ = send_transfer([3 * 1024 + 10, 600])
    dissected = [Ether(frame)[BTH] for frame in frames]
    assert [b.opcode for b in dissected] == [6, 7, 7, 8, 10]
    assert [b.ackreq for b in dissected] == [0, 0, 0, 1, 1]
    parsed = [roce.parse_frame(frame) for frame in frames]
    assert [p.offset for p in parsed] == [0, 1024, 2048, 3072, 0]
    assert [p.payload_length for p in parsed] == [1024, 1024, 1024, 32, 600]  # 10 bytes padded to the header
    assert [roce.data_bytes(p.payload_length, p.msg_bytes, p.offset) for p in parsed] == [1024, 1024, 1024, 10, 600]
    # FIRST and ONLY carry a RETH whose DMA length is the message length
    assert parsed[0].reth[2] == 3 * 1024 + 10 and parsed[4].reth[2] == 600
    assert parsed[1].reth is None and parsed[3].reth is None
    assert [p.msg_id for p in parsed] == [0, 0, 0, 0, 1]


def test_udp_source_port_follows_the_linux_rdma_rule():
    # worked by hand: 0x11 * 0x22 = 0x242; folds leave it; low 14 bits 0x242, high bits 0
    assert roce.udp_source_port(0x11, 0x22) == 0xC000 | 0x242
    # a product with bits above 20: fl = 0x1000 * 0x1001 = 0x1001000 -> ^ (fl >> 20) = 0x1001010
    flow = (0x1001000 ^ (0x1001000 >> 20)) & 0xFFFFF
    assert roce.udp_source_port(0x1000, 0x1001) == 0xC000 | ((flow & 0x3FFF) ^ (flow >> 14))
    ports = {roce.udp_source_port(qp.queue_pair_number(0, 1, j), qp.queue_pair_number(1, 0, j)) for j in range(16)}
    assert len(ports) > 8 and all(49152 <= port <= 65535 for port in ports)


def test_dscp_separates_data_and_control():
    factory = FrameFactory(SRC.mac, SRC.ip, dscp=roce.DSCP_CONTROL)
    pair = qp.make_queue_pairs(0, 1, 1)[0]
    patcher = factory.patcher(DST.mac, DST.ip, pair, roce.HEADER.size, roce.OP_SEND_ONLY)
    frame = patcher.frame(roce.OP_SEND_ONLY, 0, roce.pack_header(roce.KIND_CTS, 1, 0, 0, 1, 0, 0))
    assert Ether(frame)[IP].tos >> 2 == roce.DSCP_CONTROL != roce.DSCP_DATA
    assert roce.parse_frame(frame).kind == roce.KIND_CTS
    data, _, _ = send_transfer([100])
    assert Ether(data[0])[IP].tos >> 2 == roce.DSCP_DATA


def test_qp_scaling_strategies():
    sizes = [4096] * 6
    assert qp.assign_messages(sizes, 4, "roundrobin") == [[4096, 4096], [4096, 4096], [4096], [4096]]
    assert qp.assign_messages(sizes, 4, "split") == [[1024] * 6] * 4
    assert qp.assign_messages([2500], 4, "split") == [[1024], [1024], [452], []]
    assert qp.split_message(10 * 1024 + 1, 3) == [4096, 4096, 2049]
    with pytest.raises(ValueError):
        qp.assign_messages(sizes, 4, "hash")
    # round-robin: each message whole on its QP; split: every QP carries part of each message
    frames, _, _ = send_transfer([2048] * 4, qps=4, strategy="roundrobin")
    per_qp = {}
    for frame in frames:
        parsed = roce.parse_frame(frame)
        per_qp.setdefault(parsed.dqpn, set()).add(parsed.msg_bytes)
    assert len(per_qp) == 4 and all(sizes == {2048} for sizes in per_qp.values())
    frames, _, _ = send_transfer([4096], qps=4, strategy="split")
    parsed = [roce.parse_frame(frame) for frame in frames]
    assert len({p.dqpn for p in parsed}) == 4 and {p.msg_bytes for p in parsed} == {1024}
    assert len({p.sport for p in parsed}) == 4


def test_packets_are_interleaved_across_qps():
    frames, _, _ = send_transfer([3072, 3072], qps=2)
    assert [roce.parse_frame(f).dqpn for f in frames] == [0x1000, 0x1001] * 3


def test_send_stats_count_what_went_out():
    frames, stats, _ = send_transfer([10000], qps=1)
    assert stats.packets == len(frames) == 10
    assert stats.data_bytes == 10000
    assert stats.bytes == sum(len(f) for f in frames)
    entry = next(iter(stats.per_qp.values()))
    assert entry["packets"] == 10 and entry["messages"] == 1
    assert sum(stats.sent_bins.values()) == 10
    assert isinstance(stats, SendStats)


class TimedSocket(ListSocket):
    """Records when each frame went out."""

    def __init__(self):
        super().__init__()
        self.times = []

    def send(self, frame):
        self.times.append(time.perf_counter_ns())
        super().send(frame)


def test_pacer_holds_the_target_rate():
    pairs = qp.make_queue_pairs(0, 1, 1)
    transfer = Transfer(SRC, DST, pairs, 0, [200 * 1024])
    sock = TimedSocket()
    pacer = Pacer(rate_mbps=50.0, burst_bytes=2048)
    stats = transmit(sock, qp.interleave(transfer.packet_queues()), FrameFactory(SRC.mac, SRC.ip), pacer)
    elapsed = (sock.times[-1] - sock.times[0]) / 1e9
    expected = (stats.bytes - len(sock.frames[0])) * 8 / 50e6
    assert expected * 0.95 <= elapsed <= expected * 20  # upper bound loose: the machine may be loaded


def test_on_off_bursts_stay_silent_in_the_off_periods():
    pairs = qp.make_queue_pairs(0, 1, 1)
    transfer = Transfer(SRC, DST, pairs, 0, [400 * 1024])
    sock = TimedSocket()
    pacer = Pacer(rate_mbps=100.0, on_ms=10.0, off_ms=15.0, burst_bytes=2048)
    transmit(sock, qp.interleave(transfer.packet_queues()), FrameFactory(SRC.mac, SRC.ip), pacer)
    phases = [(t - pacer.origin) % 25_000_000 for t in sock.times]
    # nothing is sent in an off period (1 ms slack; a descheduled process on a loaded machine may
    # send the odd packet late, which the pacer cannot prevent)
    assert sum(phase > 11_000_000 for phase in phases) <= 3
    periods = {(t - pacer.origin) // 25_000_000 for t in sock.times}
    assert len(periods) >= 3  # 400 KiB at 100 Mbit/s needs ~33 ms of on time: several bursts


def test_qp_numbers_carry_the_job_in_their_top_byte():
    assert qp.queue_pair_number(0, 1, 2) == 0x1000 + 256 + 2
    assert qp.queue_pair_number(0, 239, 255, job=255) == 0x1000 + (255 << 16) + 239 * 256 + 255 < 1 << 24
    assert qp.job_of_qpn(qp.queue_pair_number(3, 7, 1, job=42)) == 42
    pairs = qp.make_queue_pairs(2, 5, 3, job=9)
    assert {qp.job_of_qpn(p.local_qpn) for p in pairs} == {qp.job_of_qpn(p.remote_qpn) for p in pairs} == {9}
    assert [p.remote_qpn for p in pairs] == [qp.queue_pair_number(5, 2, j, job=9) for j in range(3)]
    for bad in ({"peer_rank": 240}, {"index": 256}, {"job": 256}):
        arguments = {"owner_rank": 0, "peer_rank": 1, "index": 0, "job": 0}
        arguments.update(bad)
        with pytest.raises(ValueError):
            qp.queue_pair_number(**arguments)
    jobs = [qp.allocate_job() for _ in range(255)]
    assert len(set(jobs)) == 255 and all(1 <= job <= 255 for job in jobs)
