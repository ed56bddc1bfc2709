"""PFC deadlock detection from the switches' pause state: cycles of paused queues that make no progress.

A queue is ``(switch, egress port, priority)``.  It *waits on* the
downstream switch when it holds packets and is paused: the neighbour at the
other end of its link paused it because the packets that came in on that
link with that priority, wherever they wait in the neighbour, reached XOFF.
So it waits on every queue of the neighbour holding such packets (the
traffic manager's ``holders``).  A cycle of waiting queues none of which
sends anything for ``hold_ns`` is a deadlock: no PAUSE in it can end.

The input is what each switch's ``pfc_status`` control request answers
(:meth:`testbed.p4.v1model.traffic_manager.TrafficManager.pfc_stats` per port)
and the wiring ``{(switch, port): (neighbour, neighbour port)}``.
"""
from typing import Dict, List, Tuple

import networkx as nx

Queue = Tuple[str, int, int]

#: the most elementary cycles reported per observation (a large strongly connected set has many)
MAX_CYCLES = 64


def wait_for_graph(snapshot, links, stuck=None):
    """The wait-for graph of the paused, non-empty queues.

    Args:
        snapshot: ``{switch: {port: pfc_stats}}`` (ports as ints or strings).
        links: ``{(switch, port): (neighbour, neighbour port)}`` of the fabric links.
        stuck: only these queues are nodes (None: every paused queue holding packets).

    Returns:
        networkx.DiGraph over ``(switch, port, priority)``: an edge ``a -> b``
        when ``a`` waits on ``b``.

    >>> ring = {("a", 1): ("b", 2), ("b", 1): ("a", 2), ("b", 2): ("a", 1), ("a", 2): ("b", 1)}
    >>> def paused(holder): return {"paused": [0, 0, 0, 1, 0, 0, 0, 0], "queued": [0, 0, 0, 5, 0, 0, 0, 0],
    ...                             "holders": [[], [], [], [holder], [], [], [], []]}
    >>> snap = {"a": {1: paused([2, 3])}, "b": {1: paused([2, 3])}}
    >>> sorted(wait_for_graph(snap, ring).edges())
    [(('a', 1, 3), ('b', 1, 3)), (('b', 1, 3), ('a', 1, 3))]
    """
    graph = nx.DiGraph()
    waiting = {}
    for switch, ports in snapshot.items():
        for port, stats in ports.items():
            for priority, is_paused in enumerate(stats["paused"]):
                node = (switch, int(port), priority)
                if is_paused and stats["queued"][priority] and (stuck is None or node in stuck):
                    waiting[node] = stats
                    graph.add_node(node)
    # (switch, ingress port, priority) -> the waiting queues holding packets counted against it
    held_by = {}
    for (switch, port, priority), stats in waiting.items():
        for in_port, in_priority in stats["holders"][priority]:
            held_by.setdefault((switch, int(in_port), int(in_priority)), []).append((switch, port, priority))
    for node in waiting:
        switch, port, priority = node
        far = links.get((switch, port))
        if far is None:
            continue
        for target in held_by.get((far[0], int(far[1]), priority), ()):
            graph.add_edge(node, target)
    return graph


def find_cycles(graph, limit=MAX_CYCLES):
    """The elementary cycles of ``graph``, each rotated to start at its smallest member, sorted.

    >>> find_cycles(nx.DiGraph([(2, 3), (3, 1), (1, 2), (3, 4)]))
    [[1, 2, 3]]
    """
    cycles = []
    for cycle in nx.simple_cycles(graph):
        start = cycle.index(min(cycle))
        cycles.append(cycle[start:] + cycle[:start])
        if len(cycles) >= limit:
            break
    return sorted(cycles)


class DeadlockDetector:
    """Watches successive snapshots; reports each cycle of queues paused without progress for ``hold_ns``.

    Args:
        links: ``{(switch, port): (neighbour, neighbour port)}``.
        hold_ns: how long every member must have been paused, holding packets,
            without a departure, before its cycle counts.

    Attributes:
        cycles: ``{members tuple: {"members", "since_ns", "detected_ns", "last_seen_ns"}}``:
            ``since_ns`` the latest time a member stopped moving, ``detected_ns`` the
            observation that first found it, ``last_seen_ns`` the latest that still did.
    """

    def __init__(self, links, hold_ns):
        self.links = dict(links)
        self.hold_ns = int(hold_ns)
        self._progress: Dict[Queue, Tuple[int, int]] = {}   # queue -> (dequeued, since when unchanged and paused)
        self.cycles = {}

    def observe(self, snapshot, now_ns):
        """Take one snapshot (all switches read at about ``now_ns``); return the cycles it finds."""
        stuck = set()
        progress = {}
        for switch, ports in snapshot.items():
            for port, stats in ports.items():
                for priority, is_paused in enumerate(stats["paused"]):
                    node = (switch, int(port), priority)
                    if not (is_paused and stats["queued"][priority]):
                        continue
                    dequeued = stats["dequeued"][priority]
                    before = self._progress.get(node)
                    since = before[1] if before is not None and before[0] == dequeued else now_ns
                    progress[node] = (dequeued, since)
                    if now_ns - since >= self.hold_ns:
                        stuck.add(node)
        self._progress = progress
        found = find_cycles(wait_for_graph(snapshot, self.links, stuck))
        for cycle in found:
            key = tuple(cycle)
            entry = self.cycles.get(key)
            if entry is None:
                self.cycles[key] = {"members": [list(member) for member in cycle],
                                    "since_ns": max(progress[member][1] for member in cycle),
                                    "detected_ns": now_ns, "last_seen_ns": now_ns}
            else:
                entry["last_seen_ns"] = now_ns
        return found

    def report(self, t0_ns=0) -> List[dict]:
        """The cycles found, times in seconds from ``t0_ns``, in order of detection."""
        rows = []
        for entry in sorted(self.cycles.values(), key=lambda e: (e["detected_ns"], e["members"])):
            rows.append({"members": entry["members"],
                         "since_s": (entry["since_ns"] - t0_ns) / 1e9,
                         "detected_s": (entry["detected_ns"] - t0_ns) / 1e9,
                         "last_seen_s": (entry["last_seen_ns"] - t0_ns) / 1e9})
        return rows
