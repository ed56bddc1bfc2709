"""The DSF traffic manager in C (testbed/p4/native/csrc/tb_dsf.c) against the Python reference.

Both managers get the same seeded random script: packets into VOQs (good and bad parameters,
full VOQs, credit on and off), credit requests and grants, data cells of other nodes' packets
(lost, duplicated, reordered, late), timers at random times with long gaps, and a counter
history started midway and drained with random byte budgets.  After every step the frames each
one made (cells, grants, requests, reassembled packets, in order and on the same port), its
answer, its next timer, its log lines and every cell of the dsf.p4 counters must be equal, and
so must the history's notes and overflows.

``TESTBED_NATIVE_DSF_STEPS`` / ``TESTBED_NATIVE_DSF_SEED`` change the step count / seed.
"""
import os
import random

import pytest

from testbed.p4.loader import load_program
from testbed.p4.native.build import build, compiler
from testbed.p4.native.device import NativeDevice
from testbed.p4.native.dsf import NativeDSFTrafficManager
from testbed.p4.state import SwitchState
from testbed.p4.v1model.dsf.cells import segment
from testbed.p4.v1model.dsf import constants as C
from testbed.p4.v1model.dsf.constants import COUNTERS, HEADER_BYTES
from testbed.p4.v1model.dsf.engine import DSFTrafficManager
from testbed.p4src import program_path

STEPS = int(os.environ.get("TESTBED_NATIVE_DSF_STEPS", "20000"))
SEED = int(os.environ.get("TESTBED_NATIVE_DSF_SEED", "1"))

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")


@pytest.fixture(scope="module")
def program():
    return load_program(program_path("dsf_rdsw.p4"))


class Pair:
    """The Python and the C manager of two equal switch states, with their log lines."""

    def __init__(self, program):
        self.states = (SwitchState(program.info), SwitchState(program.info))
        self.logs = ([], [])
        self.python = DSFTrafficManager(self.states[0], self.logs[0].append)
        self.native = NativeDSFTrafficManager(build(program), self.states[1], self.logs[1].append)

    def both(self, call):
        return call(self.python), call(self.native)

    def check(self, what):
        for name in COUNTERS:
            a, b = (state.counters[name] for state in self.states)
            assert list(a.packets) == list(b.packets) and list(a.bytes) == list(b.bytes), (what, name)
        assert self.logs[0] == self.logs[1], what
        assert self.python.next_event_ns() == self.native.next_event_ns(), what


def _cells(rng, node, dst_port, tc, seq, cell_bytes, size=None):
    """The data cells of one packet of another node (``size`` bytes, else a random size), as reassemble
    calls: [(args, payload)]."""
    packet = rng.randbytes(rng.choice((0, 1, 60, 300, 1000, 1500, 3000)) if size is None else size)
    calls = []
    for frame in segment(packet, node, 1, dst_port, tc, seq, cell_bytes):
        header = frame[14:14 + HEADER_BYTES]
        index, last, length = int.from_bytes(header[12:14], "big"), header[0] >> 3 & 1, int.from_bytes(header[14:16],
                                                                                                        "big")
        calls.append(((node, dst_port, tc, seq, index, last, length), frame[14 + HEADER_BYTES:]))
    return calls


def test_c_manager_equals_python_manager(program):
    rng = random.Random(SEED)
    pair = Pair(program)
    now = 10_000_000
    streams = {}  # (node, dst_port, tc) -> next seq of the other nodes' packets
    cells = []  # cells of other nodes on their way here, in flight (reordered, lost, duplicated)
    history_on = False
    for step in range(STEPS):
        now += rng.choice((0, 1_000, 50_000, 400_000, 2_000_000)) if rng.random() < 0.97 else rng.randrange(10**8)
        kind = rng.random()
        if kind < 0.3:  # a packet for our VOQs, perhaps with credit signals of the same packet
            requests = []
            if rng.random() < 0.2:
                requests.append(("dsf_credit_grant", (rng.randrange(4), rng.randrange(2), rng.choice((256, 1500, 9000)),
                                                      rng.choice((0, 500, 1000, 1200)))))
            cell_bytes = rng.choice((21, 64, 256, 512, 1500)) if rng.random() < 0.98 else rng.choice((20, 1501))
            depth = rng.choice((1, 4, 64)) if rng.random() < 0.99 else 0
            requests.append(("dsf_voq_enqueue", (1, rng.choice((2, 3)), rng.randrange(4), rng.randrange(2), cell_bytes,
                                                 depth, 1 if rng.random() < 0.85 else 0)))
            packet = rng.randbytes(rng.choice((0, 14, 64, 500, 1082, 1514, 4000)))
            answers = pair.both(lambda m: m.handle(requests, lambda: packet, b"", now))
        elif kind < 0.5:  # a grant from a remote scheduler
            requests = [("dsf_credit_grant", (rng.randrange(4), rng.randrange(2), rng.choice((256, 1500, 4096)),
                                              rng.choice((1000, 1000, 333, 0, 1001))))]
            answers = pair.both(lambda m: m.handle(requests, lambda: b"", b"", now))
        elif kind < 0.65:  # a request from a remote VOQ to one of our port schedulers
            rate = rng.choice((1000, 100_000, 1_000_000, 10_000_000)) if rng.random() < 0.98 else 0
            pct = rng.choice((1, 50, 95, 100)) if rng.random() < 0.98 else rng.choice((0, 101))
            grant = rng.choice((256, 1500, 4096)) if rng.random() < 0.98 else 0
            requests = [("dsf_credit_request", (1, rng.choice((2, 3, 4)), rng.randrange(4), rng.randrange(2),
                                                rng.choice((0, 0, 1, 5000, 2**32 - 1)), rng.randrange(1, 4), rate,
                                                pct, grant))]
            answers = pair.both(lambda m: m.handle(requests, lambda: b"", b"", now))
        elif kind < 0.9:  # a data cell of another node's packet
            if len(cells) < 40:
                key = (rng.choice((2, 3)), rng.randrange(2), rng.randrange(2))
                seq = streams.get(key, 0)
                if rng.random() < 0.02:
                    # beyond the window (1500, 2000: it moves) or half the seq space ahead (late)
                    seq = (seq + rng.choice((700, 1500, 2000, 2**31))) & 0xFFFFFFFF
                elif rng.random() < 0.05:
                    seq = (seq + 1) & 0xFFFFFFFF  # a packet lost whole
                streams[key] = (seq + 1) & 0xFFFFFFFF
                made = _cells(rng, *key, seq, rng.choice((64, 256, 512)))
                if rng.random() < 0.05:
                    made.pop(rng.randrange(len(made)))  # a lost cell
                cells.extend(made)
            if not cells:
                continue
            pick = rng.randrange(min(len(cells), 4))  # mostly in order
            args, payload = cells[pick] if rng.random() < 0.03 else cells.pop(pick)  # some twice
            extra = rng.randbytes(rng.choice((0, 0, 4)))  # bytes after the cell (Ethernet padding)
            timeout_us = rng.choice((100, 1000, 50_000))
            requests = [("dsf_reassemble", (*args, timeout_us))]
            answers = pair.both(lambda m: m.handle(requests, lambda: b"", payload + extra, now))
        else:  # the timers
            answers = pair.both(lambda m: m.due(now))
            if not history_on and rng.random() < 0.05:
                names = rng.sample(COUNTERS, rng.randrange(1, len(COUNTERS) + 1))
                period = rng.choice((100_000, 2_000_000))
                capacity = rng.choice((2, 50, 1000))
                start = now - rng.randrange(10**6)
                pair.both(lambda m: m.record_history(names, start, period, capacity))
                history_on = True
        assert answers[0] == answers[1], (step, kind)
        if kind >= 0.9 or rng.random() < 0.1:
            frames = pair.both(lambda m: m.due(now))
            assert frames[0] == frames[1], step
        if history_on and rng.random() < 0.05:
            budget = rng.choice((None, 100, 2000))
            for manager in (pair.python, pair.native):
                manager.history.before(now)
            notes = pair.both(lambda m: (m.history.drain(max_bytes=budget), m.history.overflows,
                                         bool(m.history.notes)))
            assert notes[0] == notes[1], step
        pair.check(step)
    made = sum(pair.states[0].counters["dsf_voq_dequeued"].packets)
    delivered = sum(pair.states[0].counters["dsf_reassembled"].packets)
    drops = pair.states[0].counters["dsf_drops"].packets
    # the script reached every part: cells sent and reassembled, and every drop place
    assert made > 100 and delivered > 100 and all(count > 0 for count in drops), (made, delivered, list(drops))
    assert sum(pair.states[0].counters["dsf_credit_granted"].packets) > 100


def test_context_recovers_after_a_gap_beyond_its_window(program):
    """A run of lost packets longer than the reassembly window (1,024) costs those packets, not the
    context: the next packet, far ahead, moves the window; both managers deliver it and what follows,
    and count the skipped packets given up (with the bytes received of the ones partly there)."""
    rng = random.Random(SEED)
    pair = Pair(program)
    now = 10_000_000
    key = (2, 1, 0)
    delivered = ([], [])

    def send(seqs, drop_last_cell=False):
        nonlocal now
        for seq in seqs:
            made = _cells(rng, *key, seq, 256, size=1000)
            if drop_last_cell:
                made.pop()
            for args, payload in made:
                now += 1_000
                requests = [("dsf_reassemble", (*args, 50_000))]
                assert pair.both(lambda m: m.handle(requests, lambda: b"", payload, now)) == (True, True)
                frames = pair.both(lambda m: m.due(now))
                assert frames[0] == frames[1], seq
                for got, frames_of in zip(delivered, frames):
                    got.extend(frame for _, frame in frames_of)
            pair.check(seq)

    send(range(10))
    send(range(10, 22), drop_last_cell=True)  # incomplete: pending, then skipped by the gaps
    assert [len(got) for got in delivered] == [10, 10]
    drops = pair.states[0].counters["dsf_drops"]
    send([1036])  # 3 beyond the window: 10, 11 and 12 are given up at once, with their bytes received
    assert [len(got) for got in delivered] == [10, 10]
    assert drops.packets[C.DROP_REASSEMBLY_TIMEOUT] == 3 and drops.bytes[C.DROP_REASSEMBLY_TIMEOUT] > 0
    send(range(3000, 3010))  # 22 .. 2999 lost whole but 1036 (an overload burst), 13 .. 21 incomplete
    # the first cell of 3000 moves the window to [1977, 3000], that of 3001 to [1978, 3001] ...: 10 .. 1985
    # are given up at once
    assert drops.packets[C.DROP_REASSEMBLY_TIMEOUT] == 1986 - 10
    assert drops.bytes[C.DROP_REASSEMBLY_TIMEOUT] > 0
    # 1986 .. 2999 in the window cost one timeout, then 3000 .. 3009 are delivered
    assert pair.python.next_event_ns() == pair.native.next_event_ns() is not None
    now += 50_000_000
    frames = pair.both(lambda m: m.due(now))
    assert frames[0] == frames[1]
    assert [len(frames_of) for frames_of in frames] == [10, 10]
    assert drops.packets[C.DROP_REASSEMBLY_TIMEOUT] == 3000 - 10
    pair.check("after the gap")
    assert pair.python.next_event_ns() is None  # nothing pending: nothing left to time out
    send([3010])  # and the context goes on in order
    assert [len(got) for got in delivered] == [11, 11]


def test_native_device_runs_the_c_manager(program):
    """A native device hands DSF externs to the C manager; ``dsf_engine = "python"`` keeps the reference."""
    device = NativeDevice(program, SwitchState(program.info))
    assert isinstance(device._dsf_manager(), NativeDSFTrafficManager)
    device = NativeDevice(program, SwitchState(program.info))
    device.dsf_engine = "python"
    assert isinstance(device._dsf_manager(), DSFTrafficManager)


@pytest.mark.mininet
def test_dsf_switches_forward_in_the_native_loop_with_history(no_leftovers, tmp_path):
    """A DSF fabric on the native backend forwards in the native packet loop (no Python per packet), in
    order and without loss, counts into the dsf.p4 counters P4Runtime reads, and notes the counter history."""
    import time

    from testbed.fabrics import Fabric

    with Fabric("dsf", clusters=1, rdsw_per_cluster=2, fdsw_per_cluster=1, sdsw=0, hosts_per_rdsw=1,
                hosts_link_mbps=100, fabric_link_mbps=100, shape_links=False, program="dsf", controller="dsf",
                target="embedded", backend="native", log_dir=str(tmp_path / "logs")) as fabric:
        fabric.switch("rdsw0").record_dsf_history(["dsf_voq_enqueued", "dsf_credit_received"],
                                                  time.monotonic_ns(), 2000, 10_000)
        report = fabric.stream([("h1", "h2")], duration=1.5, qps=2, rate_mbps=5)
        assert report["lost_packets"] == 0 and report["out_of_sequence"] == 0
        enqueued = sum(packets for packets, _ in fabric.read_counter("rdsw0", "dsf_voq_enqueued").values())
        reassembled = sum(packets for packets, _ in fabric.read_counter("rdsw1", "dsf_reassembled").values())
        assert enqueued > 100 and reassembled >= enqueued * 0.9
        notes, overflows = fabric.switch("rdsw0").read_dsf_history()
        assert overflows == 0 and len(notes) > 10
        assert any(cells for _, counters in notes for cells in counters.values())
    for name in ("rdsw0", "fdsw0", "rdsw1"):
        with open(tmp_path / "logs" / f"{name}.log") as handle:
            text = handle.read()
        assert "native packet loop on ports" in text and "forwarding in Python" not in text, name
