"""The packet generator in native code (native_io/pktgen.c) against the Python one, and in the native loop.

The C timers are compared with :class:`~testbed.p4.v1model.packet_generator.PacketGenerator`
(the reference) in-process over seeded random configurations and clock steps: same frames, ports,
order, counters and next due time.  Then the loop: a ``PacketGenerator`` attached to a
:class:`~testbed.embedded_switch.native_io.NativeLoop` (no ports, so no root; the fixture pipeline
of test_native_io.py) has its frames enter ingress on their ports from the loop's own timer, while
Python waits in one ``run`` call.  Timing is asserted as bounds that hold on a loaded machine: the
periods counted (generated + skipped) are those between the configuration and the end of the run.
"""
import random
import time

import pytest

from test_native_io import fixture_pipeline  # noqa: F401 (a fixture)
from testbed.embedded_switch import native_io
from testbed.p4.v1model.packet_generator import MAX_FRAME, MAX_APPS, MIN_FRAME, MIN_PERIOD_NS, PacketGenerator

CPU_PORT = 255
BROADCAST = b"\xff" * 6  # the fixture pipeline sends a broadcast frame to the CPU port, others from port p != 1 to 1


class Clock:
    def __init__(self):
        self.now = 5_000_000

    def __call__(self):
        return self.now


def _template(rng):
    return bytes(rng.getrandbits(8) for _ in range(rng.choice([MIN_FRAME, 60, rng.randint(MIN_FRAME, MAX_FRAME),
                                                                 MAX_FRAME])))


def test_the_first_frame_comes_at_the_next_multiple_of_the_period():
    """Two generators configured at different instants fire in step (switches of one period together)."""
    clock = Clock()
    first, second = PacketGenerator(clock), PacketGenerator(clock)
    template = bytes(MIN_FRAME)
    clock.now = 1_234_567
    first.configure(0, 1, 1_000_000, template)
    clock.now = 1_900_000
    second.configure(0, 1, 1_000_000, template)
    assert first.next_due_ns() == second.next_due_ns() == 2_000_000
    clock.now = 2_000_000
    second.configure(0, 1, 1_000_000, template)  # on a multiple: the next one, never now
    assert second.next_due_ns() == 3_000_000


@pytest.mark.parametrize("seed", range(5))
def test_native_generator_matches_python(seed):
    """Same configurations, stops and clock steps: same frames (bytes, ports, order), next due time and status;
    after detach the Python timers carry on from the native ones' state."""
    rng = random.Random(seed)
    clock = Clock()
    python = PacketGenerator(clock)
    attached = PacketGenerator(clock)
    native = native_io.NativePacketGenerator()
    attached.attach(native)
    frames = 0
    for step in range(3000):
        clock.now += rng.choice([0, 1, 999, 50_000, 100_000, 250_000, 1_000_000, 7_777_777])
        action = rng.random()
        if action < 0.08:
            app, port = rng.randrange(MAX_APPS), rng.randrange(512)
            period = rng.choice([MIN_PERIOD_NS, 1_000_000, rng.randint(MIN_PERIOD_NS, 20_000_000)])
            template = _template(rng)
            python.configure(app, port, period, template)
            attached.configure(app, port, period, template)
        elif action < 0.1:
            app = rng.randrange(MAX_APPS)
            python.stop(app)
            attached.stop(app)
        elif action < 0.8:
            got = native.due(clock.now)
            assert got == python.due(), step
            assert attached.due() == []  # the attached timers inject (here: the test takes them)
            frames += len(got)
        elif action < 0.9:
            assert native.next_due_ns() == python.next_due_ns(), step
            assert attached.next_due_ns() is None
        else:
            assert attached.status() == python.status(), step
    assert frames > 500
    assert attached.status() == python.status()
    assert any(state["skipped"] for state in python.status().values())  # late calls were compared too
    assert any(state["skipped_run_max"] > 1 for state in python.status().values())
    attached.detach()
    assert native.next_due_ns() is None  # detached timers stop
    for _ in range(50):
        clock.now += rng.choice([1, 300_000, 2_000_000])
        assert attached.due() == python.due()
        assert attached.next_due_ns() == python.next_due_ns()
    assert attached.status() == python.status()


@pytest.fixture
def loop_with_generator(fixture_pipeline):  # noqa: F811
    """A portless NativeLoop with the fixture pipeline and a PacketGenerator attached to it."""
    loop = native_io.NativeLoop({}, cpu_port=CPU_PORT, clock_origin_ns=time.monotonic_ns())
    loop.set_pipeline(*fixture_pipeline)
    generator = PacketGenerator(time.monotonic_ns)
    generator.attach(loop.packet_generator)
    try:
        yield loop, generator
    finally:
        generator.detach()
        loop.close()


def test_loop_injects_the_frames_on_their_ports(loop_with_generator):
    """Broadcast templates reach the CPU port byte for byte; each frame entered ingress on its app's port."""
    loop, generator = loop_with_generator
    first = BROADCAST + bytes.fromhex("020000000007") + b"\x86\xdd" + bytes(range(46))
    second = BROADCAST + bytes.fromhex("020000000009") + b"\x88\xcc" + bytes(range(100, 200))
    generator.configure(3, 7, 2_000_000, first)
    generator.configure(1, 9, 3_000_000, second)
    punted = []
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline:
        if loop.run(50) == native_io.PUNTED:
            punted.extend(loop.punted())
    generator.stop(3)
    generator.stop(1)
    loop.run(20)  # what is still queued toward the CPU port
    punted.extend(loop.punted())
    assert set(punted) == {first, second}
    for template, port in ((first, 7), (second, 9)):
        count = punted.count(template)
        assert loop.port_stats(port)["rx_packets"] == count > 0
        assert loop.port_stats(port)["rx_bytes"] == count * len(template)
    loop.run(20)
    assert loop.punted() == [] and loop.port_stats(7)["rx_packets"] == punted.count(first)  # stopped: no more


def test_loop_generates_on_its_own_timer(loop_with_generator):
    """A 1 ms application runs while Python waits in one run call (no wake-up, no punt): every period between
    configuration and the end of the call is counted once (generated or skipped), each frame entered ingress,
    and no frame went out a whole period late; detach hands the timer and counters back to Python."""
    loop, generator = loop_with_generator
    period_ns = 1_000_000
    template = bytes.fromhex("020000000002020000000005") + b"\x86\xdd" + bytes(46)  # to port 1 (no interface)
    before = time.monotonic_ns()
    generator.configure(0, 5, period_ns, template)
    after = time.monotonic_ns()
    called = time.monotonic_ns()
    assert loop.run(500) == native_io.STOPPED
    ended = time.monotonic_ns()
    state = generator.status()[0]
    periods = state["generated"] + state["skipped"]
    # due times are the period's multiples on the clock: those in (before, ended], at most one more than
    # whole periods between the two
    assert (called + 500_000_000 - after) // period_ns <= periods <= (ended - before) // period_ns + 1
    assert state["generated"] >= 1 and state["late_max_us"] < period_ns / 1000
    assert loop.port_stats(5)["rx_packets"] == state["generated"]
    generator.detach()
    assert generator.status()[0] == state
    loop.run(20)  # detached: the loop only sends what is queued
    assert loop.port_stats(5)["rx_packets"] == state["generated"]
    assert loop.port_stats(1)["tx_packets"] == state["generated"] and loop.punted() == []  # forwarded to port 1
    assert generator.next_due_ns() is not None
    later = generator.due(time.monotonic_ns() + period_ns)
    assert later == [(5, template)]
    assert generator.status()[0]["generated"] == state["generated"] + 1


def test_loop_thread_runs_while_python_holds_the_gil(loop_with_generator):
    """In its own thread the loop fires a 1 ms application and forwards its frames while the only Python
    thread holds the GIL for 300 ms (a busy loop: no call releases it); run() returns the same way its
    thread would (a 1 ms period on an unloaded machine gives about 300 frames; 10 survive a loaded one)."""
    loop, generator = loop_with_generator
    template = bytes.fromhex("020000000002020000000005") + b"\x86\xdd" + bytes(46)  # to port 1 (no interface)
    generator.configure(0, 5, 1_000_000, template)
    loop.start()
    try:
        with pytest.raises(native_io.TestbedError, match="own thread"):
            loop.run(0)
        before = loop.port_stats(1)["tx_packets"]
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
        during = loop.port_stats(1)["tx_packets"] - before
    finally:
        loop.stop()
    assert during >= 10
    assert loop.run(0) in (native_io.STOPPED, native_io.WOKEN)  # stopped: the caller's loop again


def test_loop_thread_notes_punts_wakes_and_bounds_the_cpu_queue(loop_with_generator):
    """wait() answers PUNTED when frames for the CPU port wait, WOKEN after wake(), nothing at its timeout;
    frames nobody takes stop queueing at 1,024 (the rest counted as errors), so a held-up reader costs
    no more memory and forwarding keeps its packet slots."""
    loop, generator = loop_with_generator
    frame = BROADCAST + bytes.fromhex("020000000007") + b"\x86\xdd" + bytes(46)
    loop.set_queue(CPU_PORT, depth_packets=4096)
    loop.start()
    try:
        assert loop.wait(0) == frozenset()
        loop.wake()
        assert loop.wait(1000) == {native_io.WOKEN}
        assert loop.inject(7, frame)
        assert native_io.PUNTED in loop.wait(5000)
        assert loop.punted() == [frame]
        errors = loop.errors()
        for _ in range(1100):
            assert loop.inject(7, frame)
        deadline = time.monotonic() + 10
        while loop.port_stats(CPU_PORT)["tx_packets"] < 1101 and time.monotonic() < deadline:
            loop.wait(100)
    finally:
        loop.stop()
    assert loop.port_stats(CPU_PORT)["tx_packets"] == 1101
    assert len(loop.punted()) == 1024 and loop.errors() - errors == 1100 - 1024
