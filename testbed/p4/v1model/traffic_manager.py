"""Per-port egress queues of the embedded v1model switch, so queue depths are real.

Between ingress and egress, BMv2 simple_switch keeps one logical queue per
egress port, split into priority queues, each holding at most ``depth``
packets (tail drop beyond), drained at a configurable rate.  This module is
that traffic manager for the embedded target.

What follows BMv2 (p4lang/behavioral-model ``include/bm/bm_sim/queueing.h``,
class ``QueueingLogicPriRL``, and ``targets/simple_switch/simple_switch.cpp``):

* ``enq_qdepth`` is the number of packets in all of the port's priority queues
  just before this one is added; ``deq_qdepth`` the number left in them just
  after it leaves.
* Strict priority: the P4 priority value ``p`` goes to BMv2's internal queue
  ``priorities - 1 - p`` and internal queue 0 is served first, so a *higher*
  priority value is served first; FIFO within a priority.  A priority
  ``>= priorities`` is dropped (BMv2 logs "Priority out of range, dropping
  packet").
* The depth limit applies to each priority queue (BMv2's ``set_capacity``
  sets every priority queue of the port); the default depth is 64 packets.
* Rates are enforced by departure-time scheduling, not a token bucket: no
  burst allowance, consecutive departures are at least one packet time apart.

Where it differs, on purpose: BMv2 gives every priority queue its own
``last_sent`` clock, so a port with N priority queues can send N times the
configured rate.  Here the rate belongs to the port (its link): the next
departure is decided when the link becomes free, taking the highest-priority
packet that had arrived by then, and the link is busy for
``max(1 / rate_pps, nbytes * 8 / rate_bps)`` after it.  Both rates are
honoured when both are given.  No rate means no limit (BMv2's rate 0).

A packet that finds its port's link free leaves at its arrival instant, so it
is not counted in the depth a packet arriving at that same instant sees (on an
unlimited port every ``enq_qdepth`` is 0).  Time is simulated exactly,
independent of when the caller polls: a departure is
stamped with the time the schedule gives it (not the time ``dequeue_ready``
happens to run), and the depths it reports count only packets that had arrived
by then.  Times are integer nanoseconds from the injected clock; BMv2 exposes
``enq_timestamp`` and ``deq_timedelta`` in microseconds, which is the device's
conversion to make.

Priority flow control (IEEE 802.1Qbb), off until :meth:`TrafficManager.set_pfc`
(BMv2 has none; a native backend must do exactly this):

* Accounting.  A packet enqueued with an ``ingress_port`` and a priority the
  :class:`~testbed.p4.v1model.pfc.PfcConfig` lists as lossless is counted
  against ``(ingress_port, priority)`` from its enqueue until its departure,
  whatever its egress port.  Packets without an ingress port (clones,
  recirculations, generated frames) and lossy priorities are not counted.
* XOFF.  The enqueue that brings a count to ``xoff_packets`` queues a PAUSE
  for that ingress port and priority asking ``pause_quanta`` (stamped with the
  enqueue time).  While the count stays at or above ``xon_packets`` the PAUSE
  is sent again once half its pause time has passed (:meth:`pause_frames`).
* XON.  The departure that brings a paused count to ``xon_packets`` or below
  queues a PAUSE with quanta 0 (stamped with the departure time).
* Drops.  A lossless packet is never tail dropped at ``depth_packets``;
  it is dropped only when its ``(ingress_port, priority)`` already holds
  ``buffer_packets`` (a headroom overrun, counted as ``dropped_headroom``).
  Lossy priorities drop at ``depth_packets`` as above.
* Honouring.  :meth:`receive_pause` at time t with quanta q for priority p
  on port P makes queue p of port P ineligible until ``t + q * 512 bit
  times`` of P's ``rate_bps`` (512 ns per quantum when P has no bit rate);
  quanta 0 makes it eligible at t.  A later frame replaces the earlier
  window.  A paused queue keeps its packets; the link serves the highest
  eligible priority; a packet already departing is not recalled.
* Counters per port and priority: PAUSE frames sent and received (XOFF and
  refreshes), resumes (quanta 0) sent and received, and nanoseconds paused
  (the time queue p was ineligible because of PAUSE frames, up to now).
"""

import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from testbed.errors import ParameterError
from testbed.p4.v1model.pfc import PRIORITIES, PfcConfig, quantum_ns

__all__ = ["Departure", "TrafficManager", "DEFAULT_DEPTH_PACKETS"]

#: BMv2 simple_switch's default queue depth, in packets.
DEFAULT_DEPTH_PACKETS = 64

# A queued packet: (item, nbytes, enq_timestamp_ns, enq_qdepth, (ingress port, priority) it is
# counted against under PFC, or None).
_Entry = Tuple[Any, int, int, int, Optional[Tuple[int, int]]]


class Departure:
    """A packet leaving its egress queue.

    Attributes:
        port: egress port.
        item: what was enqueued (the packet state the device carries to egress).
        nbytes: the size given at enqueue.
        priority: the P4 priority value it was queued with.
        enq_timestamp_ns: when it was enqueued.
        deq_timestamp_ns: when it left the queue (its scheduled departure).
        deq_timedelta_ns: ``deq_timestamp_ns - enq_timestamp_ns``.
        enq_qdepth: packets in the port's queues before it was added.
        deq_qdepth: packets left in the port's queues when it left.
    """

    __slots__ = ("port", "item", "nbytes", "priority", "enq_timestamp_ns", "deq_timestamp_ns",
                 "deq_timedelta_ns", "enq_qdepth", "deq_qdepth")

    def __init__(self, port: int, item: Any, nbytes: int, priority: int, enq_timestamp_ns: int,
                 deq_timestamp_ns: int, enq_qdepth: int, deq_qdepth: int):
        self.port = port
        self.item = item
        self.nbytes = nbytes
        self.priority = priority
        self.enq_timestamp_ns = enq_timestamp_ns
        self.deq_timestamp_ns = deq_timestamp_ns
        self.deq_timedelta_ns = deq_timestamp_ns - enq_timestamp_ns
        self.enq_qdepth = enq_qdepth
        self.deq_qdepth = deq_qdepth

    def __repr__(self) -> str:
        return (f"Departure(port={self.port}, priority={self.priority}, nbytes={self.nbytes}, "
                f"enq={self.enq_timestamp_ns}, deq={self.deq_timestamp_ns}, "
                f"enq_qdepth={self.enq_qdepth}, deq_qdepth={self.deq_qdepth})")


def _check_rate(field: str, value) -> Optional[int]:
    """Return ``value`` as a positive int, None for no limit; raise ParameterError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
            or (isinstance(value, float) and not value.is_integer()):
        raise ParameterError(field, value, "a positive whole number, or None for no limit")
    return int(value)


class _PortQueues:
    """The priority queues of one egress port and its link schedule.

    Times in the schedule are kept in units of ``1 / scale`` ns, where ``scale``
    is ``rate_pps * rate_bps`` (or whichever is set, or 1), so one packet time
    ``1e9 / rate_pps`` ns and one serialisation time ``nbytes * 8e9 / rate_bps``
    ns are both whole numbers of units and the schedule never drifts.
    """

    __slots__ = ("queues", "depth_packets", "rate_pps", "rate_bps", "scale", "pps_units",
                 "bps_units_per_byte", "link_free", "count", "arrivals", "arrived", "departed",
                 "enqueued", "dequeued", "dropped", "dropped_full", "dropped_priority", "max_depth",
                 "last_arrival", "paused_until", "pause_since", "paused_ns", "pause_sent",
                 "resume_sent", "pause_received", "resume_received", "dequeued_by_priority",
                 "dropped_headroom")

    def __init__(self, depth_packets: int, priorities: int):
        self.queues: List[Deque[_Entry]] = [deque() for _ in range(priorities)]
        self.depth_packets = depth_packets
        self.rate_pps: Optional[int] = None
        self.rate_bps: Optional[int] = None
        self.scale = 1
        self.pps_units = 0
        self.bps_units_per_byte = 0
        self.link_free = 0          # in units: the link is busy until then
        self.count = 0              # packets queued, all priorities
        self.arrivals: Deque[int] = deque()   # enq times of queued packets not yet counted as arrived
        self.arrived = 0            # packets whose arrival is at or before the last departure time
        self.departed = 0
        self.enqueued = 0
        self.dequeued = 0
        self.dropped = 0
        self.dropped_full = 0
        self.dropped_priority = 0
        self.max_depth = 0
        self.last_arrival = 0
        # PFC, per priority 0..7: queue p may not start a departure before paused_until[p] (ns)
        self.paused_until = [0] * PRIORITIES
        self.pause_since = [0] * PRIORITIES   # start of the current (or last) pause window
        self.paused_ns = [0] * PRIORITIES     # paused time of the windows before it
        self.pause_sent = [0] * PRIORITIES
        self.resume_sent = [0] * PRIORITIES
        self.pause_received = [0] * PRIORITIES
        self.resume_received = [0] * PRIORITIES
        self.dequeued_by_priority = [0] * PRIORITIES
        self.dropped_headroom = 0

    def set_rates(self, rate_pps: Optional[int], rate_bps: Optional[int]) -> None:
        """Change the rates, keeping the link-free time (rounded up to a whole ns)."""
        link_free_ns = -(-self.link_free // self.scale)
        scale = (rate_pps or 1) * (rate_bps or 1)
        self.rate_pps, self.rate_bps, self.scale = rate_pps, rate_bps, scale
        self.pps_units = 1_000_000_000 * scale // rate_pps if rate_pps else 0
        self.bps_units_per_byte = 8_000_000_000 * scale // rate_bps if rate_bps else 0
        self.link_free = link_free_ns * scale

    def next_choice(self) -> Tuple[int, int]:
        """Return ``(time in units, priority index)`` of the next departure; the port must be non-empty.

        The departure happens when the link is free and a packet is eligible
        (arrived, its priority not paused); the packet is the highest-priority
        eligible one then.
        """
        scale = self.scale
        paused_until = self.paused_until
        earliest = None
        for index, queue in enumerate(self.queues):
            if queue:
                eligible = queue[0][2]
                if index < PRIORITIES and paused_until[index] > eligible:
                    eligible = paused_until[index]
                eligible *= scale
                if earliest is None or eligible < earliest:
                    earliest = eligible
        start = self.link_free if self.link_free > earliest else earliest
        for index in range(len(self.queues) - 1, -1, -1):
            queue = self.queues[index]
            if queue and queue[0][2] * scale <= start and \
                    (index >= PRIORITIES or paused_until[index] * scale <= start):
                return start, index
        raise AssertionError("a non-empty port always has a packet arrived by its start time")


class TrafficManager:
    """BMv2-like egress queues: per port, strict-priority FIFO queues, tail drop, rate limit.

    Args:
        clock_ns: function returning the current time in integer nanoseconds
            (a monotonic clock; tests inject their own).
        default_depth_packets: depth of each priority queue of a port never
            configured with ``set_queue``.
        default_priorities: number of priority queues of such a port
            (BMv2's ``--priority-queues``; 1 = no priorities).

    Raises:
        ParameterError: for a depth or priority count below 1.

    All methods are thread-safe.
    """

    def __init__(self, clock_ns: Callable[[], int] = time.monotonic_ns,
                 default_depth_packets: int = DEFAULT_DEPTH_PACKETS, default_priorities: int = 1):
        _check_positive_int("default_depth_packets", default_depth_packets)
        _check_positive_int("default_priorities", default_priorities)
        self._clock_ns = clock_ns
        self._default_depth = default_depth_packets
        self._default_priorities = default_priorities
        self._ports: Dict[int, _PortQueues] = {}
        self._busy: Dict[int, _PortQueues] = {}   # ports with packets queued
        self._ready: List[Departure] = []         # departed (by schedule) but not yet returned
        self._lock = threading.Lock()
        self._pfc: Optional[PfcConfig] = None
        self._held: Dict[Tuple[int, int], int] = {}        # (ingress port, priority) -> packets held
        self._xoff: Dict[Tuple[int, int], int] = {}        # (ingress port, priority) paused -> last PAUSE ns
        self._pauses: List[Tuple[int, int, int, int]] = []  # PAUSE frames to send: (ns, port, priority, quanta)

    # --- configuration ------------------------------------------------------------------------

    def set_queue(self, port: int, rate_pps: Optional[int] = None, rate_bps: Optional[int] = None,
                  depth_packets: int = DEFAULT_DEPTH_PACKETS, priorities: int = 1) -> None:
        """Configure the egress queues of ``port``.

        Args:
            port: egress port number.
            rate_pps: maximum packets per second, None for no limit.
            rate_bps: maximum bits per second (packet sizes as given to
                ``enqueue``), None for no limit.  With both, both hold.
            depth_packets: capacity of each priority queue, in packets.
            priorities: number of priority queues (P4 priorities 0..priorities-1).

        Raises:
            ParameterError: for a rate that is not a positive whole number or
                None, a depth or priority count below 1, or a change of the
                number of priorities while packets are queued on the port.
        """
        rate_pps = _check_rate("rate_pps", rate_pps)
        rate_bps = _check_rate("rate_bps", rate_bps)
        _check_positive_int("depth_packets", depth_packets)
        _check_positive_int("priorities", priorities)
        with self._lock:
            now = self._clock_ns()
            state = self._ports.get(port)
            if state is None:
                state = self._ports[port] = _PortQueues(depth_packets, priorities)
                state.link_free = now
            else:
                self._advance(port, state, now)
                if priorities != len(state.queues):
                    if state.count:
                        raise ParameterError("priorities", priorities, f"{len(state.queues)} (unchanged)",
                                             reason=f"port {port} has {state.count} packets queued")
                    state.queues = [deque() for _ in range(priorities)]
                state.depth_packets = depth_packets
            state.set_rates(rate_pps, rate_bps)

    def set_pfc(self, config: Optional[PfcConfig]) -> None:
        """Turn priority flow control on with ``config`` (None: off).

        Raises:
            ParameterError: when packets are queued (the accounting starts empty).
        """
        with self._lock:
            queued = sum(state.count for state in self._ports.values())
            if queued:
                raise ParameterError("pfc", config, "a change while no packets are queued",
                                     reason=f"{queued} packets are queued")
            self._pfc = config
            self._held.clear()
            self._xoff.clear()

    @property
    def pfc(self) -> Optional[PfcConfig]:
        """The PFC settings, None when PFC is off."""
        return self._pfc

    def receive_pause(self, port: int, quanta: List[Tuple[int, int]], now_ns: Optional[int] = None) -> None:
        """Honour a PFC PAUSE frame that arrived on ``port``.

        Args:
            port: the port it arrived on (whose egress queues it pauses).
            quanta: ``(priority, quanta)`` of its enabled classes
                (:func:`testbed.p4.v1model.pfc.parse_pause`).
            now_ns: its arrival time; None reads the clock.
        """
        with self._lock:
            now = self._clock_ns() if now_ns is None else now_ns
            state = self._ports.get(port) or self._port(port, now)
            if state.count:
                self._advance(port, state, now)
            quantum = quantum_ns(state.rate_bps)
            for priority, value in quanta:
                until = now + int(value * quantum)
                if state.paused_until[priority] > now:   # still paused: close the window at now
                    state.paused_ns[priority] += now - state.pause_since[priority]
                else:
                    state.paused_ns[priority] += state.paused_until[priority] - state.pause_since[priority]
                state.pause_since[priority] = now
                state.paused_until[priority] = until
                if value:
                    state.pause_received[priority] += 1
                else:
                    state.resume_received[priority] += 1
            if state.count:
                self._busy[port] = state

    def pause_frames(self, now_ns: Optional[int] = None) -> List[Tuple[int, int, int, int]]:
        """Return the PAUSE frames to send now, each once: ``(ns, port, priority, quanta)``.

        ``port`` is the ingress port whose upstream neighbour is paused
        (quanta > 0) or resumed (quanta 0).  Refreshes of pauses still in
        force are among them when due.
        """
        with self._lock:
            now = self._clock_ns() if now_ns is None else now_ns
            for port, state in list(self._busy.items()):
                self._advance(port, state, now)
            if self._xoff:
                quanta = self._pfc.pause_quanta
                for key, sent in self._xoff.items():
                    if now >= sent + self._refresh_ns(key[0]):
                        self._xoff[key] = now
                        self._pause(now, key[0], key[1], quanta)
            frames, self._pauses = self._pauses, []
            return frames

    def next_pause_ns(self) -> Optional[int]:
        """When :meth:`pause_frames` next has a refresh to send (None: no pause in force)."""
        with self._lock:
            if self._pauses:
                return min(frame[0] for frame in self._pauses)
            if not self._xoff:
                return None
            return min(sent + self._refresh_ns(key[0]) for key, sent in self._xoff.items())

    def _refresh_ns(self, port: int) -> int:
        state = self._ports.get(port)
        return int(self._pfc.pause_quanta * quantum_ns(state.rate_bps if state else None)) // 2

    def _pause(self, now: int, port: int, priority: int, quanta: int) -> None:
        state = self._ports.get(port) or self._port(port, now)
        if quanta:
            state.pause_sent[priority] += 1
        else:
            state.resume_sent[priority] += 1
        self._pauses.append((now, port, priority, quanta))

    def _port(self, port: int, now: int) -> _PortQueues:
        state = self._ports.get(port)
        if state is None:
            state = self._ports[port] = _PortQueues(self._default_depth, self._default_priorities)
            state.link_free = now
        return state

    # --- data path ----------------------------------------------------------------------------

    def enqueue(self, port: int, item: Any, nbytes: int, priority: int = 0,
                now_ns: Optional[int] = None, ingress_port: Optional[int] = None) -> Optional[int]:
        """Queue a packet for ``port``.

        Args:
            port: egress port.
            item: anything; returned in the packet's ``Departure``.
            nbytes: packet size in bytes (for ``rate_bps``).
            priority: P4 priority value, 0..priorities-1 (higher is served first).
            now_ns: the enqueue time; None reads the clock.  A time before
                the port's previous enqueue is taken as that time.
            ingress_port: the port it came in on, for PFC accounting (None:
                not counted, as for clones and recirculations).

        Returns:
            enq_qdepth (packets in the port's queues before this one), or None
            when the packet was dropped: its priority queue was full (tail
            drop, lossy priorities), its ingress buffer was full (lossless
            priorities, see the module's PFC contract) or the priority is out
            of range.  Drops are counted.
        """
        with self._lock:
            now = self._clock_ns() if now_ns is None else now_ns
            state = self._ports.get(port) or self._port(port, now)
            if now < state.last_arrival:
                now = state.last_arrival  # arrivals are kept in time order
            if state.count:
                self._advance(port, state, now)
            if not 0 <= priority < len(state.queues):
                state.dropped += 1
                state.dropped_priority += 1
                return None
            queue = state.queues[priority]
            pfc = self._pfc
            key = None
            if pfc is not None and ingress_port is not None and priority in pfc.lossless:
                key = (ingress_port, priority)
                held = self._held.get(key, 0)
                if held >= pfc.buffer_packets:
                    state.dropped += 1
                    state.dropped_headroom += 1
                    return None
                self._held[key] = held + 1
                if held + 1 >= pfc.xoff_packets and key not in self._xoff:
                    self._xoff[key] = now
                    self._pause(now, ingress_port, priority, pfc.pause_quanta)
            elif len(queue) >= state.depth_packets:
                state.dropped += 1
                state.dropped_full += 1
                return None
            depth = state.count
            queue.append((item, nbytes, now, depth, key))
            state.arrivals.append(now)
            state.last_arrival = now
            state.count = depth + 1
            state.enqueued += 1
            if depth + 1 > state.max_depth:
                state.max_depth = depth + 1
            if depth == 0:
                self._busy[port] = state
            return depth

    def _advance(self, port: int, state: _PortQueues, now: int) -> None:
        """Move every departure the schedule gives ``port`` up to ``now`` into the ready list."""
        scale = state.scale
        now_units = now * scale
        queues = state.queues
        ready = self._ready
        arrivals = state.arrivals
        while state.count:
            start, index = state.next_choice()
            if start > now_units:
                break
            item, nbytes, enq_ns, enq_qdepth, key = queues[index].popleft()
            state.count -= 1
            state.link_free = start + max(state.pps_units, nbytes * state.bps_units_per_byte)
            departure_ns = -(-start // scale)
            if index < PRIORITIES:
                state.dequeued_by_priority[index] += 1
            if key is not None:
                held = self._held[key] - 1
                self._held[key] = held
                if held <= self._pfc.xon_packets and key in self._xoff:
                    del self._xoff[key]
                    self._pause(departure_ns, key[0], key[1], 0)
            # Count the packets that had arrived by the departure time.
            while arrivals and arrivals[0] <= departure_ns:
                arrivals.popleft()
                state.arrived += 1
            state.departed += 1
            state.dequeued += 1
            ready.append(Departure(port, item, nbytes, index, enq_ns, departure_ns, enq_qdepth,
                                   state.arrived - state.departed))
        if not state.count:
            self._busy.pop(port, None)

    def dequeue_ready(self, now_ns: Optional[int] = None) -> List[Departure]:
        """Return the packets whose scheduled departure is at or before now.

        Args:
            now_ns: the current time; None reads the clock.

        Returns:
            The departures in departure-time order (ties: in port, then
            schedule order), each returned exactly once.
        """
        with self._lock:
            now = self._clock_ns() if now_ns is None else now_ns
            for port, state in list(self._busy.items()):
                self._advance(port, state, now)
            ready = self._ready
            if not ready:
                return []
            self._ready = []
        if len(ready) > 1:
            ready.sort(key=_departure_time)
        return ready

    def next_departure_ns(self) -> Optional[int]:
        """Return when ``dequeue_ready`` will next return something, or None when all queues are empty.

        A time in the past means packets are ready now.
        """
        with self._lock:
            best = None
            if self._ready:
                best = min(d.deq_timestamp_ns for d in self._ready)
            for state in self._busy.values():
                start, _ = state.next_choice()
                start_ns = -(-start // state.scale)
                if best is None or start_ns < best:
                    best = start_ns
            return best

    # --- observation --------------------------------------------------------------------------

    def depth(self, port: int, now_ns: Optional[int] = None) -> int:
        """Return the number of packets queued on ``port`` (all priorities) at now."""
        with self._lock:
            state = self._ports.get(port)
            if state is None:
                return 0
            if state.count:
                self._advance(port, state, self._clock_ns() if now_ns is None else now_ns)
            return state.count

    def stats(self, port: int) -> Dict[str, int]:
        """Return counters of ``port``.

        Returns:
            dict with ``enqueued``, ``dequeued``, ``dropped`` (all drops),
            ``dropped_full`` (tail drops), ``dropped_priority`` (priority out of
            range), ``dropped_headroom`` (lossless ingress buffer full), ``depth``
            (packets queued now) and ``max_depth`` (the most ever queued at
            once); zeros for a port never used.
        """
        with self._lock:
            state = self._ports.get(port)
            if state is None:
                return {"enqueued": 0, "dequeued": 0, "dropped": 0, "dropped_full": 0,
                        "dropped_priority": 0, "dropped_headroom": 0, "depth": 0, "max_depth": 0}
            if state.count:
                self._advance(port, state, self._clock_ns())
            return {"enqueued": state.enqueued, "dequeued": state.dequeued, "dropped": state.dropped,
                    "dropped_full": state.dropped_full, "dropped_priority": state.dropped_priority,
                    "dropped_headroom": state.dropped_headroom, "depth": state.count, "max_depth": state.max_depth}

    def pfc_stats(self, port: int, now_ns: Optional[int] = None) -> Dict[str, List[int]]:
        """Return ``port``'s PFC counters, each a list indexed by priority 0..7.

        Returns:
            dict with ``pause_sent``, ``resume_sent``, ``pause_received``,
            ``resume_received``, ``paused_ns`` (time paused up to now),
            ``paused`` (1 where the priority is paused now), ``queued``
            (packets waiting), ``dequeued`` (departures so far), ``held``
            (packets counted against the port as ingress) and ``holders`` (per
            priority, the sorted ``[ingress port, priority]`` pairs the waiting
            packets are counted against: whose pause waits on this queue),
            and ``dropped_headroom`` (one number: lossless packets this port
            dropped as egress because their ingress buffer was full); zeros
            (empty lists) for a port never used.
        """
        with self._lock:
            now = self._clock_ns() if now_ns is None else now_ns
            state = self._ports.get(port)
            if state is None:
                zeros = [0] * PRIORITIES
                stats = {name: list(zeros) for name in ("pause_sent", "resume_sent", "pause_received",
                                                        "resume_received", "paused_ns", "paused",
                                                        "queued", "dequeued", "held")}
                stats["holders"] = [[] for _ in range(PRIORITIES)]
                stats["dropped_headroom"] = 0
                return stats
            if state.count:
                self._advance(port, state, now)
            paused_ns = []
            for p in range(PRIORITIES):
                end = min(now, state.paused_until[p])
                paused_ns.append(state.paused_ns[p] + max(0, end - state.pause_since[p]))
            queued = [len(state.queues[p]) if p < len(state.queues) else 0 for p in range(PRIORITIES)]
            holders = []
            for p in range(PRIORITIES):
                keys = {entry[4] for entry in state.queues[p]} if p < len(state.queues) else ()
                holders.append(sorted(list(key) for key in keys if key is not None))
            return {"pause_sent": list(state.pause_sent), "resume_sent": list(state.resume_sent),
                    "pause_received": list(state.pause_received),
                    "resume_received": list(state.resume_received), "paused_ns": paused_ns,
                    "paused": [int(state.paused_until[p] > now) for p in range(PRIORITIES)],
                    "queued": queued, "dequeued": list(state.dequeued_by_priority),
                    "held": [self._held.get((port, p), 0) for p in range(PRIORITIES)], "holders": holders,
                    "dropped_headroom": state.dropped_headroom}

    def ports(self) -> List[int]:
        """Return the ports that have queues (configured or used), sorted."""
        with self._lock:
            return sorted(self._ports)

    def queue_config(self, port: int) -> Dict[str, Optional[int]]:
        """Return ``port``'s configuration: rate_pps, rate_bps, depth_packets, priorities."""
        with self._lock:
            state = self._ports.get(port)
            if state is None:
                return {"rate_pps": None, "rate_bps": None, "depth_packets": self._default_depth,
                        "priorities": self._default_priorities}
            return {"rate_pps": state.rate_pps, "rate_bps": state.rate_bps,
                    "depth_packets": state.depth_packets, "priorities": len(state.queues)}


def _departure_time(departure: Departure) -> int:
    return departure.deq_timestamp_ns


def _check_positive_int(field: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(field, value, "an integer >= 1")
