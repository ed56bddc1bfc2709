"""Tests of testbed.p4.v1model.traffic_manager with an injected clock (test input, not a mock)."""

import threading

import pytest

from testbed.errors import ParameterError
from testbed.p4.v1model.traffic_manager import DEFAULT_DEPTH_PACKETS, Departure, TrafficManager

MS = 1_000_000
US = 1_000


class FakeClock:
    """A settable nanosecond clock."""

    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return FakeClock(1_000 * MS)


def items(departures):
    return [d.item for d in departures]


def times(departures):
    return [d.deq_timestamp_ns for d in departures]


# --- unlimited ports ---------------------------------------------------------------------------

def test_unlimited_port_passes_immediately(clock):
    tm = TrafficManager(clock)
    assert tm.enqueue(1, "a", 100) == 0
    # "a" left the queue the instant it arrived (an unlimited link is never busy).
    assert tm.enqueue(1, "b", 100) == 0
    assert tm.next_departure_ns() == clock.now
    out = tm.dequeue_ready()
    assert items(out) == ["a", "b"]
    assert all(isinstance(d, Departure) for d in out)
    assert [d.deq_timedelta_ns for d in out] == [0, 0]
    assert [d.enq_qdepth for d in out] == [0, 0]
    assert tm.dequeue_ready() == []
    assert tm.next_departure_ns() is None
    assert tm.depth(1) == 0


def test_unlimited_port_depth_is_zero_once_time_passes(clock):
    tm = TrafficManager(clock)
    tm.enqueue(1, "a", 100)
    clock.now += 1
    # "a" left at its enqueue time, so the next packet finds an empty queue.
    assert tm.enqueue(1, "b", 100) == 0
    out = tm.dequeue_ready()
    assert items(out) == ["a", "b"]
    assert out[0].deq_qdepth == 0


# --- rate limiting ------------------------------------------------------------------------------

def test_pps_rate_exact_departure_times(clock):
    tm = TrafficManager(clock)
    tm.set_queue(2, rate_pps=1000)
    t0 = clock.now
    # Packet 0 finds the link idle and leaves at once; the others wait.
    assert [tm.enqueue(2, i, 1500) for i in range(5)] == [0, 0, 1, 2, 3]
    assert items(tm.dequeue_ready()) == [0]
    assert tm.next_departure_ns() == t0 + 1 * MS
    clock.now = t0 + 1 * MS - 1
    assert tm.dequeue_ready() == []
    clock.now = t0 + 1 * MS
    assert items(tm.dequeue_ready()) == [1]
    clock.now = t0 + 10 * MS   # polled late: departures keep their scheduled times
    out = tm.dequeue_ready()
    assert items(out) == [2, 3, 4]
    assert times(out) == [t0 + 2 * MS, t0 + 3 * MS, t0 + 4 * MS]
    assert [d.deq_timedelta_ns for d in out] == [2 * MS, 3 * MS, 4 * MS]
    assert [d.deq_qdepth for d in out] == [2, 1, 0]
    assert [d.enq_qdepth for d in out] == [1, 2, 3]


def test_bps_rate_uses_packet_sizes(clock):
    tm = TrafficManager(clock)
    tm.set_queue(3, rate_bps=8_000_000)          # 1 byte per microsecond
    t0 = clock.now
    tm.enqueue(3, "big", 1000)                    # occupies the link 1000 us
    tm.enqueue(3, "small", 100)                   # 100 us
    tm.enqueue(3, "next", 10)
    clock.now = t0 + 10 * MS
    out = tm.dequeue_ready()
    assert times(out) == [t0, t0 + 1000 * US, t0 + 1100 * US]


def test_both_rates_are_honoured(clock):
    tm = TrafficManager(clock)
    tm.set_queue(4, rate_pps=1000, rate_bps=8_000_000)  # 1 ms per packet, 1 us per byte
    t0 = clock.now
    tm.enqueue(4, "small", 64)        # pps limits: next at +1 ms
    tm.enqueue(4, "huge", 5000)       # bps limits: 5 ms on the link
    tm.enqueue(4, "after", 64)
    clock.now = t0 + 100 * MS
    assert times(tm.dequeue_ready()) == [t0, t0 + 1 * MS, t0 + 6 * MS]


def test_non_integer_packet_time_does_not_drift(clock):
    tm = TrafficManager(clock)
    tm.set_queue(5, rate_pps=3, depth_packets=1000)   # 333333333.33 ns per packet
    t0 = clock.now
    for i in range(301):
        tm.enqueue(5, i, 100)
    clock.now = t0 + 100 * 1_000_000_000
    out = tm.dequeue_ready()
    assert len(out) == 301
    assert out[300].deq_timestamp_ns == t0 + 100 * 1_000_000_000
    assert out[1].deq_timestamp_ns == t0 + 333_333_334   # rounded up, never early


def test_idle_link_sends_new_packet_at_once(clock):
    tm = TrafficManager(clock)
    tm.set_queue(6, rate_pps=100)       # 10 ms per packet
    t0 = clock.now
    tm.enqueue(6, "a", 100)
    clock.now = t0 + 50 * MS            # long idle: no credit is built up
    tm.enqueue(6, "b", 100)
    tm.enqueue(6, "c", 100)
    clock.now = t0 + 100 * MS
    assert times(tm.dequeue_ready()) == [t0, t0 + 50 * MS, t0 + 60 * MS]


def test_rate_never_exceeded_over_random_arrivals(clock):
    import random
    rng = random.Random(5)
    tm = TrafficManager(clock)
    tm.set_queue(7, rate_pps=10_000, depth_packets=10_000)   # 100 us per packet
    departures = []
    for _ in range(2000):
        clock.now += rng.randrange(0, 200 * US)
        tm.enqueue(7, None, 100)
        if rng.random() < 0.3:
            departures += tm.dequeue_ready()
    clock.now += 10_000 * MS
    departures += tm.dequeue_ready()
    assert len(departures) == 2000
    stamps = times(departures)
    assert all(b - a >= 100 * US for a, b in zip(stamps, stamps[1:]))
    assert all(d.deq_timestamp_ns >= d.enq_timestamp_ns for d in departures)


def test_rate_change_takes_effect(clock):
    tm = TrafficManager(clock)
    tm.set_queue(8, rate_pps=1000)
    t0 = clock.now
    for i in range(3):
        tm.enqueue(8, i, 100)
    assert items(tm.dequeue_ready()) == [0]
    tm.set_queue(8)                       # unlimited from now on
    clock.now = t0 + 1 * MS
    assert times(tm.dequeue_ready()) == [t0 + 1 * MS, t0 + 1 * MS]
    assert tm.queue_config(8) == {"rate_pps": None, "rate_bps": None,
                                  "depth_packets": DEFAULT_DEPTH_PACKETS, "priorities": 1}


# --- depth and tail drop ------------------------------------------------------------------------

def test_tail_drop_when_full_and_counted(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1000, depth_packets=3)
    t0 = clock.now
    # 0 leaves at once; 1, 2, 3 fill the queue; 4 and 5 are tail-dropped.
    assert [tm.enqueue(1, i, 100) for i in range(6)] == [0, 0, 1, 2, None, None]
    assert tm.depth(1) == 3
    clock.now = t0 + 1 * MS                  # 1 leaves at t0 + 1 ms
    assert tm.depth(1) == 2
    assert tm.enqueue(1, "x", 100) == 2
    assert tm.stats(1) == {"enqueued": 5, "dequeued": 2, "dropped": 2, "dropped_full": 2,
                           "dropped_priority": 0, "dropped_headroom": 0, "depth": 3, "max_depth": 3}
    clock.now = t0 + 10 * MS
    assert items(tm.dequeue_ready()) == [0, 1, 2, 3, "x"]
    assert tm.stats(1)["dequeued"] == 5 and tm.stats(1)["depth"] == 0


def test_default_depth_is_bmv2s_64(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1)
    results = [tm.enqueue(1, i, 100) for i in range(70)]
    assert results[:65] == [0] + list(range(64))   # the first leaves at once
    assert results[65:] == [None] * 5


def test_deq_qdepth_counts_only_packets_arrived_by_departure(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1000)
    t0 = clock.now
    tm.enqueue(1, "a", 100)             # leaves at t0
    tm.enqueue(1, "b", 100)             # leaves at t0 + 1 ms
    tm.enqueue(1, "c", 100)             # leaves at t0 + 2 ms
    clock.now = t0 + 5 * MS
    tm.enqueue(1, "d", 100)             # arrives after "c" left, before anyone polled
    out = tm.dequeue_ready()
    assert items(out) == ["a", "b", "c", "d"]
    assert [d.deq_qdepth for d in out] == [0, 1, 0, 0]
    assert [d.enq_qdepth for d in out] == [0, 0, 1, 0]


# --- priorities ----------------------------------------------------------------------------------

def test_strict_priority_higher_value_first_fifo_within(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1000, priorities=3)
    t0 = clock.now
    tm.enqueue(1, "first", 100, priority=0)     # link idle: leaves at once
    tm.enqueue(1, "low1", 100, priority=0)
    tm.enqueue(1, "mid1", 100, priority=1)
    tm.enqueue(1, "high1", 100, priority=2)
    tm.enqueue(1, "low2", 100, priority=0)
    tm.enqueue(1, "high2", 100, priority=2)
    clock.now = t0 + 100 * MS
    out = tm.dequeue_ready()
    assert items(out) == ["first", "high1", "high2", "mid1", "low1", "low2"]
    assert [d.priority for d in out] == [0, 2, 2, 1, 0, 0]
    assert times(out) == [t0 + i * MS for i in range(6)]
    assert [d.enq_qdepth for d in out] == [0, 2, 4, 1, 0, 3]


def test_priority_decided_at_departure_time_not_at_poll_time(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1000, priorities=2)
    t0 = clock.now
    tm.enqueue(1, "a", 100, priority=0)
    tm.enqueue(1, "low", 100, priority=0)          # link free again at t0 + 1 ms
    tm.enqueue(1, "high", 100, priority=1, now_ns=t0 + 1 * MS + 1)  # arrives just after
    clock.now = t0 + 10 * MS
    assert items(tm.dequeue_ready()) == ["a", "low", "high"]


def test_depth_limit_is_per_priority_queue(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1, depth_packets=2, priorities=2)
    assert [tm.enqueue(1, i, 100, priority=0) for i in range(4)] == [0, 0, 1, None]
    assert [tm.enqueue(1, i, 100, priority=1) for i in range(3)] == [2, 3, None]


def test_priority_out_of_range_is_dropped(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, priorities=2)
    assert tm.enqueue(1, "x", 100, priority=2) is None
    assert tm.enqueue(1, "y", 100, priority=-1) is None
    stats = tm.stats(1)
    assert stats["dropped"] == 2 and stats["dropped_priority"] == 2 and stats["enqueued"] == 0


def test_default_priorities_from_constructor(clock):
    tm = TrafficManager(clock, default_depth_packets=2, default_priorities=8)
    assert tm.enqueue(9, "x", 100, priority=7) == 0
    assert tm.queue_config(9)["priorities"] == 8
    assert tm.queue_config(10) == {"rate_pps": None, "rate_bps": None, "depth_packets": 2,
                                   "priorities": 8}


# --- several ports, next_departure ---------------------------------------------------------------

def test_ports_are_independent_and_merged_in_time_order(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1000)
    tm.set_queue(2, rate_pps=400)          # 2.5 ms per packet
    t0 = clock.now
    for i in range(3):
        tm.enqueue(1, f"p1-{i}", 100)
        tm.enqueue(2, f"p2-{i}", 100)
    assert tm.next_departure_ns() == t0
    clock.now = t0 + 100 * MS
    out = tm.dequeue_ready()
    assert [(d.port, d.deq_timestamp_ns - t0) for d in out] == [
        (1, 0), (2, 0), (1, 1 * MS), (1, 2 * MS), (2, 2_500_000), (2, 5 * MS)]
    assert tm.ports() == [1, 2]


def test_next_departure_tracks_the_schedule(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1000)
    assert tm.next_departure_ns() is None
    t0 = clock.now
    tm.enqueue(1, "a", 100)
    tm.enqueue(1, "b", 100)
    assert tm.next_departure_ns() == t0
    tm.dequeue_ready()
    assert tm.next_departure_ns() == t0 + 1 * MS
    clock.now = t0 + 1 * MS
    tm.dequeue_ready()
    assert tm.next_departure_ns() is None


def test_stats_of_unused_port_are_zero(clock):
    tm = TrafficManager(clock)
    assert tm.stats(42) == {"enqueued": 0, "dequeued": 0, "dropped": 0, "dropped_full": 0,
                            "dropped_priority": 0, "dropped_headroom": 0, "depth": 0, "max_depth": 0}
    assert tm.depth(42) == 0


# --- configuration errors and threads ------------------------------------------------------------

@pytest.mark.parametrize("kwargs, field", [
    ({"rate_pps": 0}, "rate_pps"), ({"rate_pps": -5}, "rate_pps"), ({"rate_bps": 1.5}, "rate_bps"),
    ({"rate_bps": "fast"}, "rate_bps"), ({"depth_packets": 0}, "depth_packets"),
    ({"priorities": 0}, "priorities")])
def test_bad_configuration_names_the_field(clock, kwargs, field):
    tm = TrafficManager(clock)
    with pytest.raises(ParameterError, match=field):
        tm.set_queue(1, **kwargs)


def test_priorities_cannot_change_under_queued_packets(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_pps=1, priorities=2)
    tm.enqueue(1, "a", 100)
    tm.enqueue(1, "b", 100)
    with pytest.raises(ParameterError, match="priorities"):
        tm.set_queue(1, rate_pps=1, priorities=4)
    tm.set_queue(1, rate_pps=1, priorities=2, depth_packets=10)   # same count is fine
    assert tm.queue_config(1)["depth_packets"] == 10


def test_float_whole_rates_are_accepted(clock):
    tm = TrafficManager(clock)
    tm.set_queue(1, rate_bps=1e9, rate_pps=1e6)
    assert tm.queue_config(1)["rate_bps"] == 1_000_000_000


def test_concurrent_enqueue_and_dequeue_lose_nothing():
    tm = TrafficManager()   # the real monotonic clock
    total = 4 * 2000
    received = []
    done = threading.Event()

    def producer(port):
        for i in range(2000):
            while tm.enqueue(port, (port, i), 100) is None:
                pass

    def consumer():
        while not done.is_set() or tm.next_departure_ns() is not None:
            received.extend(tm.dequeue_ready())

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(4)]
    drain = threading.Thread(target=consumer)
    drain.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    drain.join(timeout=30)
    assert len(received) == total
    for port in range(4):
        assert [d.item[1] for d in received if d.port == port] == list(range(2000))
