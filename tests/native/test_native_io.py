"""The native packet loop (testbed.embedded_switch.native_io).

The traffic manager is compared with the Python one (the reference) in-process over seeded random
arrivals.  The loop itself runs on real veths in namespaces made with ``ip netns`` (no Mininet),
with a pipeline compiled from tests/native_io/fixture_pipeline.c: a fixed port map, a test
fixture standing in for a compiled P4 program.
"""
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from repo_paths import REPO
from testbed.embedded_switch import native_io
from testbed.embedded_switch.native_io.netns import VethLine, in_namespace
from testbed.errors import ParameterError
from testbed.p4.v1model.traffic_manager import TrafficManager

SO_RCVBUFFORCE = 33  # <asm-generic/socket.h>; Python does not name it
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native_io", "fixture_pipeline.c")


# ------------------------------------------------------------------ traffic manager, differential


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


def _departures(departures):
    return [(d.port, d.item, d.nbytes, d.priority, d.enq_timestamp_ns, d.deq_timestamp_ns, d.deq_timedelta_ns,
             d.enq_qdepth, d.deq_qdepth) for d in departures]


def _random_queue(rng):
    return dict(rate_pps=rng.choice([None, None, 1000, 33_333, 1_000_000]),
                rate_bps=rng.choice([None, 1_000_000, 99_999_999, 10_000_000_000, 40_000_000_000]),
                depth_packets=rng.randint(1, 12), priorities=rng.randint(1, 4))


@pytest.mark.parametrize("seed", range(6))
def test_traffic_manager_matches_python(seed):
    """Same operations at the same times: same drops, depths, departures (order and metadata), stats."""
    rng = random.Random(seed)
    clock = Clock()
    python = TrafficManager(clock_ns=clock, default_depth_packets=rng.randint(1, 8),
                            default_priorities=rng.randint(1, 3))
    native = native_io.NativeTrafficManager(clock_ns=clock, default_depth_packets=python._default_depth,
                                            default_priorities=python._default_priorities)
    native.batch = 3 if seed % 2 else 256  # odd seeds: batches cut short by the caller's buffer
    ports = [1, 2, 3, 7]
    for port in rng.sample(ports, 2):
        config = _random_queue(rng)
        python.set_queue(port, **config)
        native.set_queue(port, **config)
    compared = 0
    for step in range(4000):
        clock.now += rng.choice([0, 0, 1, 37, 500, 5_000, 20_000, 300_000])
        action = rng.random()
        port = rng.choice(ports)
        if action < 0.6:
            nbytes = rng.randint(60, 1500)
            priority = rng.randint(0, 4)
            when = rng.choice([None, None, clock.now - rng.randint(0, 1000)])
            assert native.enqueue(port, step, nbytes, priority, when) == python.enqueue(port, step, nbytes, priority,
                                                                                         when), step
        elif action < 0.85:
            got = _departures(native.dequeue_ready())
            assert got == _departures(python.dequeue_ready()), step
            compared += len(got)
        elif action < 0.9:
            assert native.next_departure_ns() == python.next_departure_ns(), step
        elif action < 0.95:
            assert native.depth(port) == python.depth(port), step
            assert native.stats(port) == python.stats(port), step
        else:
            config = _random_queue(rng)
            try:
                python.set_queue(port, **config)
            except ParameterError:
                with pytest.raises(ParameterError):
                    native.set_queue(port, **config)
            else:
                native.set_queue(port, **config)
    clock.now += 10 ** 12
    assert _departures(native.dequeue_ready()) == _departures(python.dequeue_ready())
    assert compared > 500  # the comparison saw real traffic
    for port in ports:
        assert native.stats(port) == python.stats(port)
        assert native.queue_config(port) == python.queue_config(port)
    assert native.ports() == python.ports()


def test_traffic_manager_rejects_bad_settings():
    native = native_io.NativeTrafficManager(clock_ns=Clock())
    with pytest.raises(ParameterError, match="rate_pps"):
        native.set_queue(1, rate_pps=-5)
    with pytest.raises(ParameterError, match="priorities"):
        native.set_queue(1, priorities=65)
    native.set_queue(1, rate_pps=1, priorities=2)
    native.enqueue(1, "a", 100, 0)
    native.enqueue(1, "b", 100, 0)
    with pytest.raises(ParameterError, match="packets queued"):
        native.set_queue(1, priorities=3)


# ------------------------------------------------------------------ the loop on veths

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="AF_XDP sockets, BPF and namespaces need root")


@pytest.fixture(scope="module")
def fixture_pipeline(tmp_path_factory):
    """The fixture pipeline's shared object and one tb_pipeline_t of it (cffi)."""
    import cffi

    path = str(tmp_path_factory.mktemp("pipeline") / "fixture_pipeline.so")
    flags = native_io.SANITIZE_FLAGS if native_io.sanitizing() else ("-O2",)
    subprocess.run(["gcc", *flags, "-fPIC", "-shared", f'-DTB_PIPELINE_HEADER="{native_io.pipeline_header()}"',
                    "-o", path, FIXTURE], check=True)
    ffi = cffi.FFI()
    ffi.cdef("void *tb_pipeline_new(void); void tb_pipeline_free(void *);")
    lib = ffi.dlopen(path)
    pipeline = lib.tb_pipeline_new()
    yield path, pipeline
    lib.tb_pipeline_free(pipeline)


class Switch:
    """A NativeLoop on the line's switch ports (1 = in, 2 = out, CPU port 255), run by a thread."""

    def __init__(self, line, pipeline_path, pipeline):
        with in_namespace(line.switch):
            ports = {1: line.switch_in, 2: line.switch_out}
            self.via_qdisc = native_io.ports_with_qdisc(ports)
            self.loop = native_io.NativeLoop(ports, cpu_port=255, clock_origin_ns=time.monotonic_ns(),
                                             ring_size=1024, via_qdisc=self.via_qdisc)
        self.loop.set_pipeline(pipeline_path, pipeline)
        self.punted = []
        self.events = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            if self.loop.run(-1) == native_io.PUNTED:
                self.punted.extend(self.loop.punted())
                self.events.extend(self.loop.events())

    def close(self):
        self.running = False
        self.loop.wake()
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.loop.close()


@pytest.fixture
def line_switch(fixture_pipeline):
    with VethLine(prefix=f"tb-t{os.getpid() % 10000}-") as line:
        switch = Switch(line, *fixture_pipeline)
        try:
            yield line, switch
        finally:
            switch.close()


def _socket(namespace, interface):
    with in_namespace(namespace):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        sock.bind((interface, 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 1 << 23)  # the test reads after sending all
    sock.settimeout(5)
    return sock


def _receive(sock, count, timeout=10.0):
    """Up to ``count`` incoming frames (outgoing ones are the socket's own)."""
    frames, deadline = [], time.monotonic() + timeout
    while len(frames) < count and time.monotonic() < deadline:
        try:
            data, address = sock.recvfrom(65535)
        except socket.timeout:
            break
        if address[2] != socket.PACKET_OUTGOING:
            frames.append((time.monotonic(), data))
    return frames


def _frame(rng, size, ethertype=0x0800, tos=0):
    header = bytes.fromhex("020000000002020000000001") + struct.pack("!H", ethertype)
    body = bytes([0x45, tos]) + bytes(rng.getrandbits(8) for _ in range(size - 16))
    return header + body


@needs_root
def test_frames_forwarded_byte_identical(line_switch):
    line, switch = line_switch
    rng = random.Random(5)
    sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
    frames = [_frame(rng, rng.randint(60, 1514)) for _ in range(300)]
    for frame in frames:
        sender.send(frame)
        time.sleep(0.0005)  # below the port's ring size in flight: nothing dropped by the kernel
    got = [data for _, data in _receive(receiver, len(frames))]
    assert got == frames
    stats = switch.loop.port_stats(2)
    assert stats["tx_packets"] == len(frames) and stats["queue"]["dequeued"] == len(frames)
    assert switch.loop.port_stats(1)["rx_packets"] == len(frames)
    sender.send(b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x99\x99" + bytes(50))  # the fixture drops 0x9999
    time.sleep(0.3)
    assert switch.loop.port_stats(1)["drops"] == 1
    sender.close(), receiver.close()


@needs_root
def test_a_port_shaped_with_tc_sends_at_the_shaped_rate(fixture_pipeline):
    """AF_XDP's transmit bypasses the qdisc: a shaped port's frames leave through one that passes it."""
    with VethLine(prefix=f"tb-q{os.getpid() % 10000}-") as line:
        for command in ("qdisc add dev {} root handle 5: htb default 1",
                        "class add dev {} parent 5: classid 5:1 htb rate 1mbit ceil 1mbit"):
            subprocess.run(["ip", "netns", "exec", line.switch, "tc", *command.format(line.switch_out).split()],
                           check=True)
        switch = Switch(line, *fixture_pipeline)
        try:
            assert switch.via_qdisc == {2}
            sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
            frames = [_frame(random.Random(i), 1000) for i in range(200)]  # 1.6 Mbit: 1.6 s at 1 Mbit/s
            started = time.monotonic()
            for frame in frames:
                sender.send(frame)
                time.sleep(0.0005)
            got = _receive(receiver, len(frames), timeout=15)
            assert [data for _, data in got] == frames  # queued in the qdisc, none dropped
            assert got[-1][0] - started > 1.2  # unshaped, they all arrive within milliseconds
            sender.close(), receiver.close()
        finally:
            switch.close()


@needs_root
def test_priority_order_and_queue_metadata_match_python(line_switch):
    """A burst into a slow port leaves in the order, with the depths, the Python traffic manager gives."""
    line, switch = line_switch
    switch.loop.set_queue(2, rate_pps=5, depth_packets=3, priorities=8)  # 200 ms a packet
    rng = random.Random(11)
    priorities = [rng.randint(0, 7) for _ in range(16)]
    frames = [bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes([p, i]) + bytes(8) + bytes(40)
              for i, p in enumerate(priorities)]
    sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
    for frame in frames:
        sender.send(frame)  # all within a few ms, long before the second departure
    got = [data for _, data in _receive(receiver, len(frames), timeout=15)]  # the last leaves after ~3 s
    clock = Clock()
    python = TrafficManager(clock_ns=clock)
    python.set_queue(2, rate_pps=5, depth_packets=3, priorities=8)
    for i, priority in enumerate(priorities):
        clock.now += 1000
        python.enqueue(2, i, len(frames[i]), priority)
    expected = python.dequeue_ready(clock.now + 10 ** 10)
    assert [(d[15], struct.unpack("!II", d[16:24])) for d in got] == \
        [(d.item, (d.enq_qdepth, d.deq_qdepth)) for d in expected]
    stats = switch.loop.port_stats(2)["queue"]
    assert stats["dropped_full"] == python.stats(2)["dropped_full"] > 0
    sender.close(), receiver.close()


@needs_root
def test_rate_limit_honoured(line_switch):
    line, switch = line_switch
    switch.loop.set_queue(2, rate_bps=1_200_000, depth_packets=100)  # 1500-byte frames: 100 per second
    rng = random.Random(3)
    sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
    frames = [_frame(rng, 1500) for _ in range(40)]
    for frame in frames:
        sender.send(frame)
    got = _receive(receiver, len(frames))
    assert [data for _, data in got] == frames
    span = got[-1][0] - got[0][0]
    assert span >= 0.9 * 39 / 100  # 39 packet times at least (a busy machine only makes it later)
    sender.close(), receiver.close()


@needs_root
def test_idle_loop_uses_no_cpu(line_switch):
    _line, switch = line_switch
    time.sleep(0.2)
    with open(f"/proc/self/task/{switch.thread.native_id}/stat") as handle:
        before = handle.read().rsplit(")", 1)[1].split()
    time.sleep(2.0)
    with open(f"/proc/self/task/{switch.thread.native_id}/stat") as handle:
        after = handle.read().rsplit(")", 1)[1].split()
    ticks = sum(int(after[i]) - int(before[i]) for i in (11, 12))
    assert ticks / os.sysconf("SC_CLK_TCK") < 0.02  # < 1% of a core over 2 s


@needs_root
def test_cpu_port_punt_and_inject(line_switch):
    line, switch = line_switch
    sender = _socket(line.sender, line.sender_if)
    broadcast = b"\xff" * 6 + bytes.fromhex("020000000001") + b"\x08\x06" + bytes(46)
    sender.send(broadcast)
    deadline = time.monotonic() + 5
    while not switch.punted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert switch.punted == [broadcast]
    packet_out = bytes.fromhex("020000000001020000000002") + b"\x08\x00" + bytes(46)
    assert switch.loop.inject(255, packet_out)  # from the CPU port: the fixture sends it to port 1
    got = _receive(sender, 1)
    assert [data for _, data in got] == [packet_out]
    sender.close()


@needs_root
def test_replication_clones_resubmit_recirculate(line_switch):
    """Each end-of-stage decision of device.py: what reaches port 2 and the CPU port, with its metadata."""
    line, switch = line_switch
    switch.loop.set_multicast_group(1, [(2, 7), (255, 8)])
    switch.loop.set_clone_session(5, [(255, 0)])
    switch.loop.set_clone_session(6, [(255, 3)])
    sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)

    def exchange(ethertype, punts):
        switch.punted.clear()
        sender.send(bytes.fromhex("020000000002020000000001") + struct.pack("!H", ethertype) + bytes(50))
        got = [tuple(data[14:17]) for _, data in _receive(receiver, 1, timeout=5)]
        deadline = time.monotonic() + 5
        while len(switch.punted) < punts and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # anything more would show up now
        return got, [tuple(data[14:17]) for data in switch.punted]

    # (instance_type, egress_rid, egress_port) of what port 2 sent and of what the CPU port got
    assert exchange(0x88b6, 1) == ([(5, 7, 2)], [(5, 8, 255)])    # multicast: a replica each
    assert exchange(0x88b7, 1) == ([(0, 0, 2)], [(1, 0, 255)])    # I2E clone
    assert exchange(0x88b8, 1) == ([(0, 0, 2)], [(2, 3, 255)])    # E2E clone
    assert exchange(0x88b9, 0) == ([(6, 0, 2)], [])               # resubmitted once
    assert exchange(0x88ba, 0) == ([(4, 0, 2)], [])               # recirculated once
    assert switch.loop.errors() == 0


@needs_root
def test_events_reach_python(line_switch):
    """Digests and log_msg calls the pipeline reports come out of the loop, marked by stage."""
    line, switch = line_switch
    sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
    sender.send(bytes.fromhex("020000000002020000000001") + b"\x88\xbb\x2a" + bytes(49))
    assert len(_receive(receiver, 1)) == 1
    deadline = time.monotonic() + 5
    while len(switch.events) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    # site 0 from a successful ingress (a digest is sent), site 1 from egress (log lines only)
    assert switch.events == [(0, True, (0x2a,) + (0,) * 15), (1, False, (2,) + (0,) * 15)]
    sender.close(), receiver.close()
    sender.close(), receiver.close()


def _has_native_backend():
    try:
        import testbed.p4.native  # noqa: F401
    except ImportError:
        return False
    return True


@needs_root
@pytest.mark.skipif(not _has_native_backend(), reason="the native backend (testbed/p4/native) is not in this tree")
def test_switchd_forwards_in_the_native_loop(tmp_path):
    """switchd --backend native runs its pipeline in the native loop: frames forwarded byte for byte."""
    program = os.path.join(REPO, "benchmarks",
                           "bench_io_port_map.p4")
    log_path = tmp_path / "switchd.log"
    with VethLine(prefix=f"tb-d{os.getpid() % 10000}-") as line, open(log_path, "w") as log:
        process = subprocess.Popen(
            ["ip", "netns", "exec", line.switch, sys.executable, "-m", "testbed.embedded_switch.switchd",
             "--name", "s1", "--grpc-addr", "127.0.0.1:0", "--port", f"1={line.switch_in}",
             "--port", f"2={line.switch_out}", "--cpu-port", "255", "--program", program, "--backend", "native"],
            stderr=log, env=dict(os.environ, TESTBED_NATIVE_LOOP="1"))
        try:
            sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
            deadline = time.monotonic() + 60
            while "native packet loop" not in log_path.read_text() and time.monotonic() < deadline:
                assert process.poll() is None, log_path.read_text()
                time.sleep(0.1)
            rng = random.Random(9)
            frames = [_frame(rng, rng.randint(60, 1514)) for _ in range(100)]
            for frame in frames:
                sender.send(frame)
                time.sleep(0.0005)
            assert [data for _, data in _receive(receiver, len(frames))] == frames
            sender.close(), receiver.close()
        finally:
            process.send_signal(2)
            assert process.wait(20) == 0
    assert "native packet loop on ports [1, 2]" in log_path.read_text()


@needs_root
def test_bad_interface_named(fixture_pipeline):
    with pytest.raises(Exception, match="no-such-if0"):
        native_io.NativeLoop({1: "no-such-if0"})


def test_sanitized_run():
    """This file's tests once more with the loop and the fixture built with ASan and UBSan: no report."""
    preload = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(preload):
        pytest.skip("no libasan for gcc")
    env = dict(os.environ, TESTBED_NATIVE_SANITIZE="1", LD_PRELOAD=preload,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                             os.path.abspath(__file__), "-k", "not sanitized_run"], env=env, capture_output=True,
                            text=True, timeout=1200)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-4000:]
    assert "ERROR: AddressSanitizer" not in report and "runtime error:" not in report, report[-4000:]
