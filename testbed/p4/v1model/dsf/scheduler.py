"""Egress port credit schedulers of an interface node (the egress side of DSF's credit loop).

One scheduler per local host port.  VOQs of other nodes tell it their state
(CREDIT_REQUEST: backlogged or empty); while any VOQ is backlogged it issues
one CREDIT_GRANT of ``grant_bytes`` every ``grant_bytes * 8 / credit rate``
seconds, to the backlogged VOQs in turn, where the credit rate is the port's
rate times ``credit_rate_pct`` / 100.  The exact rules are those of
``dsf_credit_request`` in p4src/include/dsf.p4.

Grants are scheduled on an exact timeline (``next_grant_ns`` advances by one
interval per grant), so the long-run rate is the configured one however late
the switch process polls; if it fell more than :data:`MAX_CATCH_UP` grants
behind, the missed grants are skipped (counted in ``skipped``) rather than
sent in a burst.
"""
from collections import OrderedDict

from testbed.p4.v1model.dsf.cells import CellHeader, cell_frame
from testbed.p4.v1model.dsf.constants import CELL_CREDIT_GRANT, COUNTER_CREDIT_GRANTED

MAX_CATCH_UP = 8


class PortScheduler:
    """The credit scheduler of one local port.

    Attributes:
        port: the local port; system_port: its system port number.
        my_node: this node's number (the grants' source).
        rate_bps: the credit rate (bits of packet per second).
        grant_bytes: the size of one grant.
        active: backlogged VOQs ``(src_node, tc)``, in round-robin order.
        next_grant_ns: when the next grant is due (None before the first request).
        granted, skipped: grants issued, and grants skipped while the switch was behind.
    """

    def __init__(self, port, system_port, my_node):
        self.port = port
        self.system_port = system_port
        self.my_node = my_node
        self.rate_bps = 0
        self.grant_bytes = 0
        self.active = OrderedDict()
        self.next_grant_ns = None
        self.granted = 0
        self.skipped = 0

    @property
    def interval_ns(self):
        """Time between two grants at the credit rate."""
        return self.grant_bytes * 8 * 1_000_000_000 / self.rate_bps

    def describe(self):
        """JSON-able state."""
        return {"port": self.port, "system_port": self.system_port, "rate_bps": self.rate_bps,
                "grant_bytes": self.grant_bytes, "active": [list(key) for key in self.active],
                "granted": self.granted, "skipped": self.skipped}


class CreditSchedulers:
    """The port schedulers of one interface node.

    Args:
        emit: ``emit(frame)`` hands a grant cell to the pipeline.
        count: ``count(counter name, index, nbytes)`` counts into the program's counters.
    """

    def __init__(self, emit, count):
        self._emit = emit
        self._count = count
        self.ports = {}

    def request(self, now_ns, my_node, src_node, dst_port, tc, backlog_bytes, port, rate_bps, grant_bytes):
        """A VOQ of ``src_node`` for ``dst_port`` (local ``port``) reports its backlog.

        Args:
            now_ns: the time.
            my_node: this node.
            src_node, tc: the VOQ's node and class; dst_port: the system port.
            backlog_bytes: > 0 backlogged, 0 empty.
            port: the local port of ``dst_port``.
            rate_bps: the credit rate (> 0, checked by the caller).
            grant_bytes: bytes per grant (> 0, checked by the caller).
        """
        scheduler = self.ports.get(port)
        if scheduler is None:
            scheduler = self.ports[port] = PortScheduler(port, dst_port, my_node)
        scheduler.system_port, scheduler.my_node = dst_port, my_node
        scheduler.rate_bps, scheduler.grant_bytes = rate_bps, grant_bytes
        key = (src_node, tc)
        if backlog_bytes > 0:
            was_idle = not scheduler.active
            scheduler.active[key] = True
            if was_idle and (scheduler.next_grant_ns is None or scheduler.next_grant_ns < now_ns):
                scheduler.next_grant_ns = now_ns  # idle until now: no credit was saved up
        else:
            scheduler.active.pop(key, None)

    def due(self, now_ns):
        """Issue every grant due by ``now_ns``."""
        for scheduler in self.ports.values():
            if not scheduler.active or scheduler.next_grant_ns is None or scheduler.next_grant_ns > now_ns:
                continue
            interval = scheduler.interval_ns
            behind = int((now_ns - scheduler.next_grant_ns) // interval) + 1
            if behind > MAX_CATCH_UP:
                scheduler.skipped += behind - MAX_CATCH_UP
                scheduler.next_grant_ns += (behind - MAX_CATCH_UP) * interval
            while scheduler.active and scheduler.next_grant_ns <= now_ns:
                src_node, tc = next(iter(scheduler.active))
                scheduler.active.move_to_end((src_node, tc))
                header = CellHeader(CELL_CREDIT_GRANT, scheduler.my_node, src_node, scheduler.system_port, tc,
                                    credit_bytes=scheduler.grant_bytes)
                self._emit(cell_frame(header))
                self._count(COUNTER_CREDIT_GRANTED, scheduler.port, scheduler.grant_bytes)
                scheduler.granted += 1
                scheduler.next_grant_ns += interval

    def next_grant_ns(self):
        """When :meth:`due` next has work (None: no scheduler has a backlogged VOQ)."""
        times = [s.next_grant_ns for s in self.ports.values() if s.active and s.next_grant_ns is not None]
        return int(min(times)) if times else None

    def describe(self):
        """JSON-able state of every port scheduler."""
        return [scheduler.describe() for _, scheduler in sorted(self.ports.items())]
