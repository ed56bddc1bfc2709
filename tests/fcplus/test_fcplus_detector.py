"""Tests of the PFC deadlock detector's wait-for graph and cycle finding (pure functions on snapshots)."""

from testbed.mechanisms.fcplus.detector import DeadlockDetector, find_cycles, wait_for_graph

MS = 1_000_000


def port_state(paused=(), queued=None, dequeued=0, holders=None):
    """pfc_stats of one port: ``paused`` priorities, ``queued``/``holders`` per priority."""
    queued = queued or {}
    holders = holders or {}
    return {"paused": [int(p in paused) for p in range(8)],
            "queued": [queued.get(p, 0) for p in range(8)],
            "dequeued": [dequeued] * 8,
            "holders": [holders.get(p, []) for p in range(8)]}


def ring(n):
    """n switches s0..s(n-1) in a ring: port 1 goes to the next switch's port 2."""
    links = {}
    for i in range(n):
        here, there = f"s{i}", f"s{(i + 1) % n}"
        links[(here, 1)] = (there, 2)
        links[(there, 2)] = (here, 1)
    return links


def deadlocked_ring(n, priority=3, dequeued=0):
    """Every switch's port 1 queue paused, full of packets that came in on port 2 (from the previous switch)."""
    return {f"s{i}": {1: port_state(paused=[priority], queued={priority: 9}, dequeued=dequeued,
                                    holders={priority: [[2, priority]]})}
            for i in range(n)}


def test_cycle_of_paused_queues_is_found():
    graph = wait_for_graph(deadlocked_ring(3), ring(3))
    assert find_cycles(graph) == [[("s0", 1, 3), ("s1", 1, 3), ("s2", 1, 3)]]


def test_no_cycle_when_one_queue_is_not_paused():
    snapshot = deadlocked_ring(3)
    snapshot["s1"][1] = port_state(queued={3: 9}, holders={3: [[2, 3]]})
    assert find_cycles(wait_for_graph(snapshot, ring(3))) == []


def test_no_cycle_when_the_packets_came_from_elsewhere():
    snapshot = deadlocked_ring(3)
    snapshot["s2"][1] = port_state(paused=[3], queued={3: 9}, holders={3: [[5, 3]]})   # from a host port
    assert find_cycles(wait_for_graph(snapshot, ring(3))) == []


def test_priority_transition_breaks_the_dependency():
    # s1's queue waits on packets of priority 3 from s0, but s1 holds them on priority 4 (transition):
    # only a queue of priority 3 holding packets counted against (port 2, priority 3) continues the chain.
    snapshot = deadlocked_ring(3)
    snapshot["s1"][1] = port_state(paused=[4], queued={4: 9}, holders={4: [[2, 4]]})
    assert find_cycles(wait_for_graph(snapshot, ring(3))) == []


def test_detector_needs_the_hold_time_without_progress():
    detector = DeadlockDetector(ring(3), hold_ns=100 * MS)
    assert detector.observe(deadlocked_ring(3), 0) == []
    assert detector.observe(deadlocked_ring(3), 50 * MS) == []
    found = detector.observe(deadlocked_ring(3), 100 * MS)
    assert len(found) == 1
    [row] = detector.report()
    assert row["members"] == [["s0", 1, 3], ["s1", 1, 3], ["s2", 1, 3]]
    assert row["since_s"] == 0 and row["detected_s"] == 0.1


def test_progress_resets_the_hold_time():
    detector = DeadlockDetector(ring(3), hold_ns=100 * MS)
    detector.observe(deadlocked_ring(3, dequeued=1), 0)
    # the queues kept sending (dequeued changed): paused now and then, but no deadlock
    assert detector.observe(deadlocked_ring(3, dequeued=2), 150 * MS) == []
    assert detector.observe(deadlocked_ring(3, dequeued=2), 200 * MS) == []
    assert len(detector.observe(deadlocked_ring(3, dequeued=2), 250 * MS)) == 1
    assert detector.report()[0]["since_s"] == 0.15
