"""Virtual output queues of an interface node, gated by credit (the ingress side of DSF).

One VOQ per (destination system port, traffic class); each is scheduled on its
own: it asks the destination port's scheduler for credit with a
CREDIT_REQUEST cell, receives CREDIT_GRANT cells, and sends its head packet,
cut into cells, while its credit balance is positive.  The exact rules are
those of ``dsf_voq_enqueue`` and ``dsf_credit_grant`` in p4src/include/dsf.p4.
"""
from collections import deque

from testbed.p4.v1model.dsf.cells import CellHeader, cell_frame, segment
from testbed.p4.v1model.dsf.constants import (CELL_CREDIT_REQUEST, COUNTER_CREDIT_RECEIVED, COUNTER_DROPS,
                                              COUNTER_VOQ_DEQUEUED, COUNTER_VOQ_ENQUEUED, DROP_VOQ_TAIL, PERMILLE,
                                              REQUEST_REFRESH_NS, voq_index)


class Voq:
    """One VOQ: its packets, backlog, credit balance and request state.

    Attributes:
        dst_port, tc: its identity; index: its counter index.
        dst_node: the egress interface node of ``dst_port`` (as the last packet said).
        src_node: this node's number (as the last packet said).
        packets: queued packets (bytes), head first.
        backlog_bytes: their total size.
        balance: credit in bytes (may be negative by up to one packet).
        credits: 1 when gated by credit, 0 when packets leave at once.
        cell_bytes: the cell size for segmentation.
        seq: the sequence number the next packet leaving gets.
        active: the port scheduler was last told the VOQ is backlogged.
        last_signal_ns: when a request or a grant was last exchanged.
        last_grant_bytes: size of the latest grant (the most an empty VOQ keeps).
    """

    __slots__ = ("dst_port", "tc", "index", "dst_node", "src_node", "packets", "backlog_bytes", "balance",
                 "credits", "cell_bytes", "seq", "active", "last_signal_ns", "last_grant_bytes")

    def __init__(self, dst_port, tc):
        self.dst_port = dst_port
        self.tc = tc
        self.index = voq_index(dst_port, tc)
        self.dst_node = 0
        self.src_node = 0
        self.packets = deque()
        self.backlog_bytes = 0
        self.balance = 0
        self.credits = 1
        self.cell_bytes = 0
        self.seq = 0
        self.active = False
        self.last_signal_ns = 0
        self.last_grant_bytes = 0

    def describe(self):
        """JSON-able state."""
        return {"dst_port": self.dst_port, "tc": self.tc, "dst_node": self.dst_node, "depth": len(self.packets),
                "backlog_bytes": self.backlog_bytes, "balance": self.balance, "active": self.active,
                "next_seq": self.seq}


class VoqTable:
    """Every VOQ of one interface node.

    Args:
        emit: ``emit(frame)`` hands a cell frame to the pipeline (it enters ingress on the cell port).
        count: ``count(counter name, index, nbytes)`` counts into the program's counters.
    """

    def __init__(self, emit, count):
        self._emit = emit
        self._count = count
        self.voqs = {}

    def _voq(self, dst_port, tc):
        voq = self.voqs.get((dst_port, tc))
        if voq is None:
            voq = self.voqs[(dst_port, tc)] = Voq(dst_port, tc)
        return voq

    def enqueue(self, now_ns, src_node, dst_node, dst_port, tc, packet, cell_bytes, depth, credits):
        """A packet joins the tail of VOQ (dst_port, tc), or is dropped when it is full.

        Args:
            now_ns: the time.
            src_node: this node; dst_node: the egress node.
            dst_port, tc: the VOQ.
            packet: the packet's bytes.
            cell_bytes: cell size (checked by the caller).
            depth: the most packets the VOQ holds (>= 1, checked by the caller).
            credits: 1 to gate by credit, 0 to send at once.

        Returns:
            bool: True when admitted.
        """
        voq = self._voq(dst_port, tc)
        if len(voq.packets) >= depth:
            self._count(COUNTER_DROPS, DROP_VOQ_TAIL, len(packet))
            return False
        voq.src_node, voq.dst_node, voq.cell_bytes, voq.credits = src_node, dst_node, cell_bytes, credits
        voq.packets.append(packet)
        voq.backlog_bytes += len(packet)
        self._count(COUNTER_VOQ_ENQUEUED, voq.index, len(packet))
        self._send(voq, now_ns)
        return True

    def grant(self, now_ns, dst_port, tc, credit_bytes, share_permille):
        """A CREDIT_GRANT for VOQ (dst_port, tc): add ``credit_bytes * share_permille / 1000`` and send.

        A grant for a VOQ that has nothing to send is answered with a request of 0
        (the scheduler must stop), at most once per refresh period.
        """
        self._count(COUNTER_CREDIT_RECEIVED, voq_index(dst_port, tc), credit_bytes)
        voq = self.voqs.get((dst_port, tc))
        if voq is None:
            return
        share = min(share_permille, PERMILLE)
        voq.balance += credit_bytes * share // PERMILLE
        voq.last_grant_bytes = credit_bytes
        if not voq.packets:
            voq.balance = min(voq.balance, credit_bytes)  # an empty VOQ keeps at most one grant
            if not voq.active and now_ns - voq.last_signal_ns >= REQUEST_REFRESH_NS:
                self._request(voq, now_ns, False)  # a grant it did not want: the scheduler must stop
                return
        voq.last_signal_ns = now_ns
        self._send(voq, now_ns)

    def refresh(self, now_ns):
        """Repeat the request of every active VOQ that heard nothing for a refresh period (it may be lost)."""
        for voq in self.voqs.values():
            if voq.active and now_ns - voq.last_signal_ns >= REQUEST_REFRESH_NS:
                self._request(voq, now_ns, True)

    def next_refresh_ns(self):
        """When :meth:`refresh` next has work (None: no active VOQ)."""
        times = [voq.last_signal_ns + REQUEST_REFRESH_NS for voq in self.voqs.values() if voq.active]
        return min(times) if times else None

    def _request(self, voq, now_ns, active):
        """Tell the destination port's scheduler whether the VOQ wants credit (its backlog; 0: stop)."""
        backlog = max(voq.backlog_bytes, 1) if active else 0
        header = CellHeader(CELL_CREDIT_REQUEST, voq.src_node, voq.dst_node, voq.dst_port, voq.tc,
                            credit_bytes=min(backlog, 0xFFFFFFFF))
        self._emit(cell_frame(header))
        voq.active = active
        voq.last_signal_ns = now_ns

    def _send(self, voq, now_ns):
        """Send head packets while allowed, then tell the scheduler if the VOQ's want of credit changed.

        A credit-gated VOQ wants credit while it holds packets, and also while it is empty
        with no positive balance (so the next packet can leave at once); an empty VOQ with
        credit in hand stops the scheduler.
        """
        packets = voq.packets
        while packets and (not voq.credits or voq.balance > 0):
            packet = packets.popleft()
            voq.backlog_bytes -= len(packet)
            if voq.credits:
                voq.balance -= len(packet)
            for frame in segment(packet, voq.src_node, voq.dst_node, voq.dst_port, voq.tc, voq.seq,
                                 voq.cell_bytes):
                self._emit(frame)
            voq.seq = (voq.seq + 1) & 0xFFFFFFFF
            self._count(COUNTER_VOQ_DEQUEUED, voq.index, len(packet))
        if voq.credits:
            wanted = bool(packets) or voq.balance <= 0
            if wanted != voq.active:
                self._request(voq, now_ns, wanted)

    def describe(self):
        """JSON-able state of every VOQ."""
        return [voq.describe() for _, voq in sorted(self.voqs.items())]
