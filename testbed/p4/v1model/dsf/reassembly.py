"""Reassembly of cells into packets at the egress interface node, in order per source VOQ.

A context per (source node, destination system port, class), i.e. per source
VOQ, expects sequence numbers 0, 1, 2 ... (the VOQ numbers the packets it
sends).  A packet is delivered when all its cells are there and every earlier
packet was delivered or given up.  The context is *blocked* while it holds
cells but cannot deliver its next packet; the next packet is given up when the
context has been blocked for the timeout, measured from the first cell of that
packet if any arrived, else from the earliest cell it holds (so a run of lost
packets costs one timeout, not one each).  A context holds a window of
MAX_PENDING_PACKETS sequence numbers from the one expected; a cell beyond it
(but less than 2**31 ahead: not a late one) moves the window so that its packet
is the window's last, giving up every packet before the new window at once
(counted like a timeout), so that a run of lost packets longer than the window
costs those packets, not the context.  The exact rules are those of
``dsf_reassemble`` in p4src/include/dsf.p4.
"""
from testbed.p4.v1model.dsf.constants import (COUNTER_DROPS, DROP_LATE_CELL, DROP_REASSEMBLY_TIMEOUT,
                                              MAX_PENDING_PACKETS)

_HALF = 1 << 31
_MASK = (1 << 32) - 1


class PartialPacket:
    """The cells of one packet received so far."""

    __slots__ = ("cells", "last_index", "first_ns", "nbytes")

    def __init__(self, first_ns):
        self.cells = {}
        self.last_index = None
        self.first_ns = first_ns
        self.nbytes = 0

    @property
    def complete(self):
        """True when every cell from 0 to the last one is there."""
        return self.last_index is not None and len(self.cells) == self.last_index + 1

    def data(self):
        """The packet's bytes (complete packets only)."""
        return b"".join(self.cells[index] for index in range(self.last_index + 1))


class ReassemblyContext:
    """One source VOQ's reassembly state.

    Attributes:
        key: ``(src_node, dst_port, tc)``.
        expected: the sequence number delivered next.
        pending: ``{seq: PartialPacket}`` of later or incomplete packets.
        timeout_ns: the latest timeout given.
        delivered, given_up: counts.
    """

    __slots__ = ("key", "expected", "pending", "timeout_ns", "delivered", "given_up")

    def __init__(self, key):
        self.key = key
        self.expected = 0
        self.pending = {}
        self.timeout_ns = 0
        self.delivered = 0
        self.given_up = 0

    def deadline_ns(self):
        """When the next packet is given up if nothing changes (None: not blocked)."""
        if not self.pending:
            return None
        head = self.pending.get(self.expected)
        if head is None:
            # pending keeps insertion order and time only grows: its first packet arrived first
            head = next(iter(self.pending.values()))
        return head.first_ns + self.timeout_ns

    def describe(self):
        """JSON-able state."""
        return {"src_node": self.key[0], "dst_port": self.key[1], "tc": self.key[2], "expected": self.expected,
                "pending": len(self.pending), "delivered": self.delivered, "given_up": self.given_up}


class Reassembler:
    """Every reassembly context of one interface node.

    Args:
        deliver: ``deliver(src_node, dst_port, tc, seq, packet bytes)`` for each packet, in order.
        count: ``count(counter name, index, nbytes, packets=1)`` counts into the program's counters.
    """

    def __init__(self, deliver, count):
        self._deliver = deliver
        self._count = count
        self.contexts = {}

    def cell(self, now_ns, src_node, dst_port, tc, seq, cell_index, last, payload, timeout_ns):
        """Take one data cell; deliver what became deliverable.

        Args:
            now_ns: the time.
            src_node, dst_port, tc: the source VOQ.
            seq, cell_index, last: the cell's position.
            payload: its payload bytes.
            timeout_ns: the reassembly timeout.
        """
        key = (src_node, dst_port, tc)
        context = self.contexts.get(key)
        if context is None:
            context = self.contexts[key] = ReassemblyContext(key)
        context.timeout_ns = timeout_ns
        distance = (seq - context.expected) & _MASK
        if distance >= _HALF:
            self._count(COUNTER_DROPS, DROP_LATE_CELL, len(payload))  # given up or delivered already
            return
        if distance >= MAX_PENDING_PACKETS:
            self._resync(context, distance - MAX_PENDING_PACKETS + 1)
        packet = context.pending.get(seq)
        if packet is None:
            packet = context.pending[seq] = PartialPacket(now_ns)
        if cell_index in packet.cells:
            self._count(COUNTER_DROPS, DROP_LATE_CELL, len(payload))  # a duplicate
            return
        packet.cells[cell_index] = payload
        packet.nbytes += len(payload)
        if last:
            packet.last_index = cell_index
        self._drain(context)

    def _resync(self, context, skipped):
        """Give up the next ``skipped`` packets of ``context`` at once (a cell beyond its window came)."""
        nbytes = 0
        start = context.expected
        pending = context.pending
        if skipped < len(pending):  # look the skipped ones up, else go through what is pending
            seqs = [(start + k) & _MASK for k in range(skipped)]
        else:
            seqs = [seq for seq in pending if (seq - start) & _MASK < skipped]
        for seq in seqs:
            packet = pending.pop(seq, None)
            if packet is not None:
                nbytes += packet.nbytes
        self._count(COUNTER_DROPS, DROP_REASSEMBLY_TIMEOUT, nbytes, skipped)
        context.given_up += skipped
        context.expected = (start + skipped) & _MASK

    def _drain(self, context):
        """Deliver the packets at the head that are complete."""
        pending = context.pending
        while True:
            head = pending.get(context.expected)
            if head is None or not head.complete:
                return
            del pending[context.expected]
            self._deliver(context.key[0], context.key[1], context.key[2], context.expected, head.data())
            context.delivered += 1
            context.expected = (context.expected + 1) & _MASK

    def expire(self, now_ns):
        """Give up the next packet of every context blocked for its timeout; deliver what follows."""
        for context in self.contexts.values():
            deadline = context.deadline_ns()
            while deadline is not None and deadline <= now_ns:
                head = context.pending.pop(context.expected, None)
                self._count(COUNTER_DROPS, DROP_REASSEMBLY_TIMEOUT, head.nbytes if head is not None else 0)
                context.given_up += 1
                context.expected = (context.expected + 1) & _MASK
                self._drain(context)
                deadline = context.deadline_ns()

    def next_deadline_ns(self):
        """When :meth:`expire` next has work (None: no context is blocked)."""
        times = [d for d in (c.deadline_ns() for c in self.contexts.values()) if d is not None]
        return min(times) if times else None

    def describe(self):
        """JSON-able state of every context."""
        return [context.describe() for _, context in sorted(self.contexts.items())]
