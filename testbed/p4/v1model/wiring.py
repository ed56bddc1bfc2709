"""Embedded devices wired port to port in one process, on one simulated clock (tests and benchmarks).

:class:`WiredDevices` runs several :class:`~testbed.p4.v1model.device.Device`
objects in queued mode and moves their frames over point-to-point links with a
rate (serialisation), a propagation delay and a tail-drop queue, as veth links
shaped by tc would.  Time is simulated: :meth:`WiredDevices.run` jumps from one
event (a departure, an arrival, a timer of a device) to the next, so a run is
exact and repeatable whatever the machine's load.  Hosts are sinks: a link to a
name that is not a device (:meth:`WiredDevices.attach_host`) delivers into
:attr:`WiredDevices.delivered` under that name, as does a port with no link
(under ``(device, port)``); hosts send with :meth:`WiredDevices.schedule`.

The devices must be built with ``clock_ns=wired.clock`` so they share the clock.
"""
import heapq
from collections import defaultdict, deque
from dataclasses import dataclass, field


class SimClock:
    """A clock the simulation moves (callable: the time in ns)."""

    def __init__(self, start_ns=1_000_000_000):
        self.now_ns = start_ns

    def __call__(self):
        return self.now_ns


@dataclass
class LinkEnd:
    """One direction of a link: where frames go, how fast, and its queue.

    Attributes:
        to: ``(device name, port)`` of the other end.
        rate_bps: serialisation rate (None: no limit).
        delay_ns: propagation delay.
        queue_frames: most frames waiting to be serialised (tail drop beyond).
        free_ns: when the link is next free.
        in_queue: departure times of the frames queued or being sent.
        sent_frames, sent_bytes, dropped_frames: frames and bytes carried, frames tail-dropped.
        down: the link is down (frames sent into it are lost and counted in ``lost_frames``).
    """

    to: tuple
    rate_bps: int = None
    delay_ns: int = 0
    queue_frames: int = 1000
    free_ns: int = 0
    in_queue: deque = field(default_factory=deque)
    sent_frames: int = 0
    sent_bytes: int = 0
    dropped_frames: int = 0
    down: bool = False
    lost_frames: int = 0


class WiredDevices:
    """Devices, links between their ports, and the simulated time.

    Args:
        clock: the :class:`SimClock` every device was built with.
    """

    def __init__(self, clock):
        self.clock = clock
        self.devices = {}
        self.links = {}
        self.delivered = defaultdict(list)  # (device, port) -> [(time ns, frame)]
        self._arrivals = []  # heap of (time ns, order, device, port, frame)
        self._order = 0

    def add(self, name, device):
        """Add a device under ``name``."""
        self.devices[name] = device

    def connect(self, a, a_port, b, b_port, rate_bps=None, delay_ns=0, queue_frames=1000):
        """A full-duplex link between ``a``:``a_port`` and ``b``:``b_port`` (same properties both ways)."""
        self.links[(a, a_port)] = LinkEnd((b, b_port), rate_bps, delay_ns, queue_frames)
        self.links[(b, b_port)] = LinkEnd((a, a_port), rate_bps, delay_ns, queue_frames)

    def attach_host(self, host, name, port, rate_bps=None, queue_frames=1000):
        """A host link from ``name``:``port`` to the sink ``host`` (frames for it go to ``delivered[host]``)."""
        self.links[(name, port)] = LinkEnd((host, 0), rate_bps, 0, queue_frames)

    def set_link(self, a, a_port, up):
        """Take the link at ``a``:``a_port`` (both directions) down (``up`` False) or up again."""
        end = self.links[(a, a_port)]
        end.down = not up
        other = self.links.get(end.to)
        if other is not None:
            other.down = not up

    def send(self, name, port, frame):
        """A frame arrives now on ``name``'s ``port`` (from a host)."""
        self.devices[name].receive(port, bytes(frame))

    def schedule(self, at_ns, name, port, frame):
        """A frame arrives on ``name``'s ``port`` at ``at_ns`` (a host sending)."""
        self._order += 1
        heapq.heappush(self._arrivals, (at_ns, self._order, name, port, bytes(frame)))

    def _transmit(self, name, port, frame, now):
        link = self.links.get((name, port))
        if link is None:
            self.delivered[(name, port)].append((now, frame))
            return
        if link.down:
            link.lost_frames += 1
            return
        queue = link.in_queue
        while queue and queue[0] <= now:
            queue.popleft()
        if len(queue) >= link.queue_frames:
            link.dropped_frames += 1
            return
        start = max(now, link.free_ns)
        done = start + (len(frame) * 8 * 1_000_000_000 // link.rate_bps if link.rate_bps else 0)
        link.free_ns = done
        queue.append(done)
        link.sent_frames += 1
        link.sent_bytes += len(frame)
        self._order += 1
        heapq.heappush(self._arrivals, (done + link.delay_ns, self._order, link.to[0], link.to[1], frame))

    def step(self):
        """Let every device transmit what is due now and deliver the frames arriving now."""
        now = self.clock.now_ns
        busy = set()
        for name, device in self.devices.items():
            upcoming = device.next_departure_ns()
            if upcoming is not None and upcoming <= now:
                busy.add(name)
        while True:
            while self._arrivals and self._arrivals[0][0] <= now:
                at, _, name, port, frame = heapq.heappop(self._arrivals)
                device = self.devices.get(name)
                if device is None:
                    self.delivered[name].append((at, frame))
                else:
                    device.receive(port, frame)
                    busy.add(name)
            if not busy:
                return
            again = set()
            for name in sorted(busy):
                device = self.devices[name]
                sent = device.transmit_ready(now)
                for port, frame in sent:
                    self._transmit(name, port, frame, now)
                upcoming = device.next_departure_ns()
                if sent and upcoming is not None and upcoming <= now:
                    again.add(name)  # its output made more work for now (a recirculation, a delivery)
            busy = again

    def next_event_ns(self):
        """The next time something happens (None: nothing will)."""
        times = [d.next_departure_ns() for d in self.devices.values()]
        times = [t for t in times if t is not None]
        if self._arrivals:
            times.append(self._arrivals[0][0])
        return min(times) if times else None

    def run(self, duration_ns=None, until_ns=None):
        """Run the simulation until ``until_ns`` (or ``duration_ns`` from now), or until nothing is left to do.

        Returns:
            int: the time reached.
        """
        end = until_ns if until_ns is not None else (self.clock.now_ns + duration_ns if duration_ns else None)
        while True:
            self.step()
            upcoming = self.next_event_ns()
            if upcoming is None:
                if end is not None:
                    self.clock.now_ns = max(self.clock.now_ns, end)
                return self.clock.now_ns
            if end is not None and upcoming > end:
                self.clock.now_ns = end
                self.step()
                return end
            # everything due now was done by step(): a timer reported for now or earlier moves time on by 1 ns
            self.clock.now_ns = max(self.clock.now_ns + 1, upcoming)
