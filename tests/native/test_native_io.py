"""The native packet loop (testbed.embedded_switch.native_io).

The traffic manager is compared with the Python one (the reference) in-process over seeded random
arrivals, with and without priority flow control (PAUSE frames, lossless classes, paused queues).
The loop itself runs on real veths in namespaces made with ``ip netns`` (no Mininet), with a
pipeline compiled from tests/native_io/fixture_pipeline.c: a fixed port map, a test fixture
standing in for a compiled P4 program.
"""
import contextlib
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
from testbed.errors import ParameterError, TestbedError
from testbed.p4.v1model.device import pause_source_mac
from testbed.p4.v1model.pfc import PRIORITIES, PfcConfig, build_pause, parse_pause
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


def _random_pfc(rng):
    buffer_packets = rng.randint(6, 30)
    headroom = rng.randint(1, buffer_packets - 2)
    xoff = rng.randint(1, buffer_packets - headroom)
    return PfcConfig.checked(rng.sample(range(4), rng.randint(1, 3)), buffer_packets=buffer_packets,
                             xoff_packets=xoff, xon_packets=rng.randint(0, xoff - 1), headroom_packets=headroom,
                             pause_quanta=rng.choice([1, 3, 50, 700, 65535]))


def _pause_quanta(rng):
    """A PAUSE frame's classes as parse_pause gives them (some with quanta 0: resume)."""
    frame = build_pause(bytes(6), [(p, rng.choice([0, 0, 1, 20, 300, 65535])) for p in
                                   sorted(rng.sample(range(PRIORITIES), rng.randint(1, 3)))])
    return parse_pause(frame)


@pytest.mark.parametrize("seed", range(8))
def test_traffic_manager_pfc_matches_python(seed):
    """PFC on: same PAUSE frames (time, port, class, quanta), departures, drops and PFC counters."""
    rng = random.Random(1000 + seed)
    clock = Clock()
    python = TrafficManager(clock_ns=clock, default_depth_packets=rng.randint(2, 8),
                            default_priorities=rng.randint(2, 4))
    native = native_io.NativeTrafficManager(clock_ns=clock, default_depth_packets=python._default_depth,
                                            default_priorities=python._default_priorities)
    native.batch = 3 if seed % 2 else 256
    config = _random_pfc(rng)
    python.set_pfc(config)
    native.set_pfc(config)
    assert native.pfc == python.pfc
    ports = [1, 2, 3, 7]
    for port in ports:
        queue = _random_queue(rng)
        queue["rate_bps"] = rng.choice([1_000_000, 99_999_999, 10_000_000_000, None])
        python.set_queue(port, **queue)
        native.set_queue(port, **queue)
    counted = {"frames": 0, "xon": 0, "departures": 0, "headroom": 0}
    for step in range(5000):
        draining = step // 500 % 2  # odd phases: few arrivals, more time: the queues drain (XON)
        clock.now += rng.choice([0, 0, 1, 37, 500, 5_000, 20_000, 300_000]) * (10 if draining else 1)
        action = rng.random()
        port = rng.choice(ports)
        if draining and action < 0.45:
            action = 0.55 + action
        if action < 0.55:
            nbytes, priority = rng.randint(60, 1500), rng.randint(0, 4)
            when = rng.choice([None, None, clock.now - rng.randint(0, 1000)])
            ingress = rng.choice([None, 1, 2, 3, 7, 7])
            assert native.enqueue(port, step, nbytes, priority, when, ingress) == \
                python.enqueue(port, step, nbytes, priority, when, ingress), step
        elif action < 0.7:
            got = _departures(native.dequeue_ready())
            assert got == _departures(python.dequeue_ready()), step
            counted["departures"] += len(got)
        elif action < 0.8:
            frames = native.pause_frames()
            assert frames == python.pause_frames(), step
            counted["frames"] += len(frames)
            counted["xon"] += sum(1 for frame in frames if frame[3] == 0)
        elif action < 0.86:
            quanta = _pause_quanta(rng)
            native.receive_pause(port, quanta)
            python.receive_pause(port, quanta)
        elif action < 0.9:
            assert native.next_departure_ns() == python.next_departure_ns(), step
            assert native.next_pause_ns() == python.next_pause_ns(), step
        elif action < 0.97:
            assert native.pfc_stats(port) == python.pfc_stats(port), step
            assert native.stats(port) == python.stats(port), step
            counted["headroom"] += python.stats(port)["dropped_headroom"]
        elif action < 0.99:
            queue = _random_queue(rng)
            try:
                python.set_queue(port, **queue)
            except ParameterError:
                with pytest.raises(ParameterError):
                    native.set_queue(port, **queue)
            else:
                native.set_queue(port, **queue)
        else:
            config = _random_pfc(rng)
            try:
                python.set_pfc(config)
            except ParameterError:
                with pytest.raises(ParameterError, match="queued"):
                    native.set_pfc(config)
            else:
                native.set_pfc(config)
    clock.now += 10 ** 12
    assert _departures(native.dequeue_ready()) == _departures(python.dequeue_ready())
    assert native.pause_frames() == python.pause_frames()
    assert counted["departures"] > 500 and counted["frames"] > 10 and counted["xon"] > 0, counted
    for port in ports:
        assert native.pfc_stats(port) == python.pfc_stats(port)
        assert native.stats(port) == python.stats(port)
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

#: AF_XDP sockets, BPF and namespaces need root; the namespaces and veths are machine-wide like a
#: Mininet network's, so these run (under the Mininet lock) with the network-building tests
needs_root = pytest.mark.mininet


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


def _vxlan_over(line, pairs=(0, 1)):
    """Put a VXLAN device on each veth end of ``pairs`` (0: sender - switch, 1: switch - receiver;
    198.18.0.0/15, RFC 2544's, underneath) and return the line's interface names, over them where
    they are: VXLAN takes no XDP program, as across servers (tests/cluster)."""
    ends = ((line.sender, line.sender_if), (line.switch, line.switch_in), (line.switch, line.switch_out),
            (line.receiver, line.receiver_if))
    names = []
    for index, (namespace, interface) in enumerate(ends):
        pair, side = divmod(index, 2)
        if pair not in pairs:
            names.append(interface)
            continue
        address, peer = f"198.18.{pair}.{1 + side}", f"198.18.{pair}.{2 - side}"
        name = interface + "x"
        for command in (f"addr add {address}/24 dev {interface}",
                        f"link add {name} type vxlan id {7000 + pair} local {address} remote {peer} dstport 4789 "
                        "nolearning", f"link set {name} up"):
            subprocess.run(["ip", "-n", namespace, *command.split()], check=True)
        names.append(name)
    return names


@needs_root
def test_a_port_without_xdp_receives_and_sends_through_af_packet(fixture_pipeline):
    """A VXLAN port (no XDP) falls back to AF_PACKET on its own; frames cross it byte for byte, VLAN
    tags included (the kernel takes them out before a packet socket sees them: the loop puts them back)."""
    with VethLine(prefix=f"tb-v{os.getpid() % 10000}-") as line:
        line.sender_if, line.switch_in, line.switch_out, line.receiver_if = _vxlan_over(line)
        switch = Switch(line, *fixture_pipeline)
        try:
            assert sorted(switch.loop.without_xdp) == [1, 2]
            assert "XDP" in switch.loop.without_xdp[1]  # why: the XDP program could not be attached
            sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
            rng = random.Random(8)
            frames = [_frame(rng, rng.randint(60, 1400), ethertype=rng.choice([0x0800, 0x8100, 0x88a8]))
                      for _ in range(200)]
            for frame in frames:
                sender.send(frame)
                time.sleep(0.0005)
            got = [data for _, data in _receive_tagged(receiver, len(frames))]
            assert got == frames
            assert switch.loop.port_stats(1)["rx_packets"] == len(frames)
            assert switch.loop.port_stats(2)["tx_packets"] == len(frames)
            sender.close(), receiver.close()
        finally:
            switch.close()


@needs_root
def test_a_port_that_is_down_holds_few_of_the_shared_transmit_frames(line_switch):
    """Frames for a port whose interface is down wait in its ring until it is up again; they take at
    most 64 of the switch's 256 transmit frames, the rest are counted as not sent, and the other ports
    keep sending (one down port held them all, and the switch sent nothing more)."""
    line, switch = line_switch
    rng = random.Random(10)
    subprocess.run(["ip", "-n", line.switch, "link", "set", line.switch_out, "down"], check=True)
    sender = _socket(line.sender, line.sender_if)
    for _ in range(600):  # into port 1, out of port 2: more than the whole pool
        sender.send(_frame(rng, 100))
        time.sleep(0.0002)
    deadline = time.monotonic() + 10
    while switch.loop.port_stats(1)["rx_packets"] < 600 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert switch.loop.port_stats(1)["rx_packets"] == 600
    assert 600 - 64 <= switch.loop.port_stats(2)["tx_errors"] < 600
    back = [_frame(rng, rng.randint(60, 1400)) for _ in range(50)]
    for frame in back:  # as if received on port 2: they leave on port 1
        assert switch.loop.inject(2, frame)
    assert [data for _, data in _receive(sender, len(back))] == back
    assert switch.loop.port_stats(1)["tx_errors"] == 0
    sender.close()


@needs_root
def test_ports_with_and_without_xdp_share_the_switch_frames_both_ways(fixture_pipeline):
    """Port 1 without XDP (VXLAN) opens first, so the switch's UMEM is registered through a socket
    whose port then falls back to AF_PACKET; port 2 (a veth) shares that UMEM: frames cross byte for
    byte in both directions."""
    with VethLine(prefix=f"tb-w{os.getpid() % 10000}-") as line:
        line.sender_if, line.switch_in, line.switch_out, line.receiver_if = _vxlan_over(line, pairs=(0,))
        switch = Switch(line, *fixture_pipeline)
        try:
            assert sorted(switch.loop.without_xdp) == [1]
            # its socket was bound before the device refused the program: it registered the UMEM
            assert switch.loop.without_xdp[1].startswith("loading the XDP program")
            sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
            rng = random.Random(9)
            for source, sink in ((sender, receiver), (receiver, sender)):
                frames = [_frame(rng, rng.randint(60, 1400)) for _ in range(100)]
                for frame in frames:
                    source.send(frame)
                    time.sleep(0.0005)
                assert [data for _, data in _receive(sink, len(frames))] == frames
            assert switch.loop.port_stats(1)["tx_errors"] == switch.loop.port_stats(2)["tx_errors"] == 0
            sender.close(), receiver.close()
        finally:
            switch.close()


def _receive_tagged(sock, count, timeout=10.0):
    """:func:`_receive` with VLAN tags put back as the switch sees them (packet_sockets.receive_frame)."""
    from testbed.packet_sockets import enable_vlan_tags, receive_frame

    enable_vlan_tags(sock)
    frames, deadline = [], time.monotonic() + timeout
    while len(frames) < count and time.monotonic() < deadline:
        try:
            data, address = receive_frame(sock, 65535)
        except socket.timeout:
            break
        if address[2] != socket.PACKET_OUTGOING:
            frames.append((time.monotonic(), data))
    return frames


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
def test_pfc_pause_frames_on_the_wire(line_switch):
    """PFC in the loop: a lossless class backs up into PAUSE frames out of its ingress port (the Python
    device's bytes), loses nothing, resumes with quanta 0; a PAUSE arriving holds the egress class."""
    line, switch = line_switch
    loop = switch.loop
    loop.set_pause_frames({port: build_pause(pause_source_mac(port), []) for port in (1, 2)})
    loop.set_pfc(PfcConfig.checked([3], buffer_packets=40, xoff_packets=4, xon_packets=1, headroom_packets=30))
    loop.set_queue(2, rate_pps=20, rate_bps=1_000_000, depth_packets=3, priorities=8)  # 50 ms a packet
    sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
    frames = [bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes([3, i]) + bytes(48) for i in range(10)]
    for frame in frames:
        sender.send(frame)
    got = [data for _, data in _receive(receiver, len(frames), timeout=10)]
    assert [data[15] for data in got] == list(range(10))  # past the queue depth of 3: nothing dropped
    xoff, xon = build_pause(pause_source_mac(1), [(3, 0xFFFF)]), build_pause(pause_source_mac(1), [(3, 0)])
    pauses = []
    while xon not in pauses:  # XOFF, refreshed every 16.7 ms (half of 65535 quanta at 1 Gb/s) until XON
        more = [data for _, data in _receive(sender, 1, timeout=5)]
        assert more, pauses
        pauses += more
    assert pauses[0] == xoff and set(pauses) == {xoff, xon} and pauses.count(xon) == 1
    stats = loop.tm.pfc_stats(1)
    assert stats["pause_sent"][3] == len(pauses) - 1 and stats["resume_sent"][3] == 1 and stats["held"][3] == 0
    assert loop.tm.stats(2)["dropped"] == 0
    # the receiver pauses class 3 of port 2 for 65535 quanta (33 s at 1 Mb/s), then resumes it
    receiver.send(build_pause(bytes.fromhex("020000000099"), [(3, 0xFFFF)]))
    time.sleep(0.3)
    for frame in frames[:3]:
        sender.send(frame)
    time.sleep(0.5)
    assert loop.tm.pfc_stats(2)["paused"][3] == 1 and loop.tm.pfc_stats(2)["queued"][3] == 3
    assert _receive(receiver, 1, timeout=0.5) == []
    receiver.send(build_pause(bytes.fromhex("020000000099"), [(3, 0)]))
    assert [data[15] for _, data in _receive(receiver, 3, timeout=5)] == [0, 1, 2]
    stats = loop.tm.pfc_stats(2)
    assert stats["pause_received"][3] == 1 and stats["resume_received"][3] == 1 and stats["paused_ns"][3] > 5e8
    assert loop.port_stats(2)["rx_packets"] == 2  # the PAUSE frames, consumed: not forwarded to port 1
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


def test_ports_opened_in_the_background_give_their_loop_or_their_error():
    """The switch daemon opens its ports in a thread (the kernel attaches XDP programs one at a time) and
    its run takes the loop from it, or the error that stopped it; a loop that never runs is closed."""
    from testbed.embedded_switch.native_io.daemon import _Opening

    class Loop:
        closed = False

        def close(self):
            self.closed = True

    loop, opened_in = Loop(), []

    def open_loop():
        opened_in.append(threading.current_thread().name)
        return loop
    assert _Opening(open_loop).result() is loop and opened_in == ["native-io-open"]
    _Opening(open_loop).discard()
    assert loop.closed

    def fail():
        raise TestbedError("port 1 (s1-eth1): no such device")
    with pytest.raises(TestbedError, match="no such device"):
        _Opening(fail).result()
    _Opening(fail).discard()  # nothing to close


@contextlib.contextmanager
def _daemon_with_server(line, program, control=None):
    """A NativeSwitchDaemon forwarding ``program`` on the line's switch ports (1 = in, 2 = out) in a
    thread, with its P4Runtime server; yields (daemon, client) once the loop runs the pipeline."""
    from testbed.embedded_switch.native_io.daemon import NativeSwitchDaemon
    from testbed.embedded_switch.p4runtime_target import EmbeddedTarget
    from testbed.p4runtime.client import P4RuntimeClient
    from testbed.p4runtime.server import P4RuntimeServer

    target = EmbeddedTarget(cpu_port=255, backend="native")
    target.load_program_file(os.path.join(REPO, program))
    with in_namespace(line.switch):
        daemon = NativeSwitchDaemon(target, {1: line.switch_in, 2: line.switch_out}, name="s1",
                                    control_path=control)
    server = P4RuntimeServer(target, device_id=1, address="127.0.0.1:0")

    def forward():
        with in_namespace(line.switch):
            daemon.run()
    thread = threading.Thread(target=forward, daemon=True)
    server.start()
    thread.start()
    client = None
    try:
        deadline = time.monotonic() + 30
        while daemon._device is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon.loop is not None and daemon._device is not None
        client = P4RuntimeClient(f"127.0.0.1:{server.port}", device_id=1, election_id=(0, 1), timeout=5)
        client.load_p4info()
        yield daemon, client
    finally:
        if client is not None:
            client.close()
        daemon.stop()
        thread.join(10)
        server.stop()
        daemon.close()
        target.close()
    assert not thread.is_alive()


@needs_root
@pytest.mark.skipif(not _has_native_backend(), reason="the native backend (testbed/p4/native) is not in this tree")
def test_native_switch_daemon_pfc_status_and_p4runtime_counters(tmp_path):
    """The switch daemon's native loop: queue and pfc requests reach its traffic manager, a PAUSE frame
    arriving is consumed and pauses the class, and pfc_status and the program's PFC counters (P4Runtime)
    show it as the Python switch's do."""
    from testbed.embedded_switch.port_control import request

    control = str(tmp_path / "control.sock")
    with VethLine(prefix=f"tb-p{os.getpid() % 10000}-") as line, \
            _daemon_with_server(line, os.path.join("p4src", "fcplus.p4"), control) as (daemon, client):
        deadline = time.monotonic() + 30
        assert request(control, {"command": "queue", "port": 2, "rate_bps": 1_000_000, "priorities": 8}) == \
            {"ok": True}
        assert request(control, {"command": "pfc", "lossless": [3], "xoff_packets": 4, "xon_packets": 1,
                                 "buffer_packets": 40, "headroom_packets": 30}) == {"ok": True}
        assert daemon.loop.tm.queue_config(2)["rate_bps"] == 1_000_000 and daemon.loop.pfc == daemon.target.pfc
        receiver = _socket(line.receiver, line.receiver_if)
        receiver.send(build_pause(bytes.fromhex("020000000099"), [(3, 1000)]))  # 512 ms at 1 Mb/s
        cell = 2 * PRIORITIES + 3
        while client.read_counter("MyIngress.pfc_pause_received", cell) != (1, 60) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.read_counter("MyIngress.pfc_pause_received", cell) == (1, 60)
        status = request(control, {"command": "pfc_status"})
        assert status["pfc"]["lossless"] == [3] and status["pfc"]["xoff_packets"] == 4
        port = status["ports"]["2"]
        assert port["pause_received"][3] == 1 and port["paused"][3] == 1 and port["paused_ns"][3] > 0
        assert port["queue"]["dropped_headroom"] == 0 and port["pipeline_drops"] == 0
        time.sleep(0.6)  # the pause is over: its whole time is counted
        while client.read_counter("MyIngress.pfc_paused_us", cell)[0] < 512_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.read_counter("MyIngress.pfc_paused_us", cell) == (512_000, 0)
        receiver.close()


@needs_root
@pytest.mark.skipif(not _has_native_backend(), reason="the native backend (testbed/p4/native) is not in this tree")
def test_a_frame_sent_after_a_write_returned_sees_the_write():
    """The native loop keeps its own copy of the tables; a Write RPC answers only once the loop holds
    what it wrote (BMv2 applies a write before answering it). Each round inserts a route and at once
    sends a frame to it (the table's default drops): every frame must come out."""
    rounds = 250
    with VethLine(prefix=f"tb-w{os.getpid() % 10000}-") as line, \
            _daemon_with_server(line, os.path.join("tests", "p4lang", "programs", "basic.p4")) as (_daemon, client):
        sender, receiver = _socket(line.sender, line.sender_if), _socket(line.receiver, line.receiver_if)
        for number in range(rounds):
            client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": f"10.0.{number}.0/24"},
                                      "MyIngress.ipv4_forward", {"dstAddr": "02:00:00:00:00:03", "port": 2})
            sender.send(bytes.fromhex("020000000002020000000001") + b"\x08\x00" + _ipv4_to(0x0A000001 | number << 8))
        got = _receive(receiver, rounds, timeout=10)
        sender.close(), receiver.close()
    destinations = [socket.inet_ntoa(data[30:34]) for _, data in got]
    assert destinations == [f"10.0.{n}.1" for n in range(rounds)]


def _ipv4_to(address):
    """A 20-byte IPv4 header (UDP, TTL 64, checksum 0: basic.p4 checks none) and 8 bytes of payload."""
    return struct.pack("!BBHHHBBHII", 0x45, 0, 28, 0, 0, 64, 17, 0, 0x0A000001, address) + bytes(8)


@needs_root
def test_bad_interface_named(fixture_pipeline):
    with pytest.raises(Exception, match="no-such-if0"):
        native_io.NativeLoop({1: "no-such-if0"})


def test_sanitized_run():
    """This file's tests and the packet generator's (the loop's own thread included) once more with the
    loop and the fixture built with ASan and UBSan: no report."""
    preload = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(preload):
        pytest.skip("no libasan for gcc")
    env = dict(os.environ, TESTBED_NATIVE_SANITIZE="1", LD_PRELOAD=preload,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    pktgen_tests = os.path.join(os.path.dirname(__file__), "test_native_pktgen.py")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                             os.path.abspath(__file__), pktgen_tests, "-k", "not sanitized_run"], env=env,
                            capture_output=True, text=True, timeout=1200)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-4000:]
    assert "ERROR: AddressSanitizer" not in report and "runtime error:" not in report, report[-4000:]
