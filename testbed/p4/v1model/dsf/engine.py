"""The DSF traffic manager of one embedded switch: the parts p4src/include/dsf.p4 declares.

:class:`DSFTrafficManager` joins the VOQs (:mod:`.voq`), the egress port
credit schedulers (:mod:`.scheduler`) and reassembly (:mod:`.reassembly`) to
the device (:class:`testbed.p4.v1model.device.Device`):

* at the end of ingress, the device hands it the packet's extern requests
  (:meth:`DSFTrafficManager.handle`); ``dsf_voq_enqueue`` and ``dsf_reassemble``
  take the packet, the credit externs consume their control cell;
* the frames it makes (cells on :data:`~.constants.CELL_PORT`, reassembled
  packets on :data:`~.constants.DELIVERY_PORT`) go back into ingress when the
  device asks for them (:meth:`DSFTrafficManager.due`), which it does whenever
  :meth:`DSFTrafficManager.next_event_ns` (pending frames: now; else the next
  grant, request refresh or reassembly timeout) has come;
* it counts into the program's counters of dsf.p4 (absent ones are skipped),
  and, once :meth:`DSFTrafficManager.record_history` is called, notes them on a
  time grid (:mod:`.history`) for a reader that wants them every few milliseconds.

Bad parameters (a cell size outside [21, 1500], a VOQ depth of 0, a credit
rate outside [1, 100] % or of 0 kbit/s, a grant of 0 bytes) drop the packet or
control cell into ``dsf_drops[DSF_DROP_BAD_PARAMETER]`` and are logged naming
the field and its range: the controller checks them before writing
(testbed/modes.py), so this only guards against a table written by hand.
"""
from collections import deque

from testbed.p4.v1model.dsf.constants import (CELL_PORT, COUNTER_DROPS, COUNTER_REASSEMBLED, COUNTERS,
                                              DELIVERY_PORT, DROP_BAD_PARAMETER, MAX_CELL_BYTES, MIN_CELL_BYTES)
from testbed.p4.v1model.dsf.history import CounterHistory
from testbed.p4.v1model.dsf.reassembly import Reassembler
from testbed.p4.v1model.dsf.scheduler import CreditSchedulers
from testbed.p4.v1model.dsf.voq import VoqTable


class DSFTrafficManager:
    """VOQs, credit schedulers and reassembly of one switch.

    Args:
        state: the switch's :class:`~testbed.p4.state.SwitchState` (its dsf.p4 counters are counted into).
        log: ``log(text)`` for parameter problems, or None.
    """

    def __init__(self, state, log=None):
        self._counters = {name: state.counters[name] for name in COUNTERS if name in state.counters}
        self._log = log
        self._pending = deque()
        self.voqs = VoqTable(self._emit_cell, self._count)
        self.schedulers = CreditSchedulers(self._emit_cell, self._count)
        self.reassembly = Reassembler(self._deliver, self._count)
        self.my_node = 0
        self.history = None

    def record_history(self, names, start_ns, period_ns, capacity):
        """Note counters ``names`` (those the program has) at ``start_ns + k * period_ns`` from now on
        (:class:`~.history.CounterHistory`, in :attr:`history`; replaces an earlier one)."""
        self.history = CounterHistory({name: self._counters[name] for name in names if name in self._counters},
                                      start_ns, period_ns, capacity)

    # -- plumbing ------------------------------------------------------------------------
    def _count(self, name, index, nbytes, packets=1):
        counter = self._counters.get(name)
        if counter is not None:
            counter.count(index, nbytes, packets)
            if self.history is not None:
                self.history.touched(name, index)

    def _emit_cell(self, frame):
        self._pending.append((CELL_PORT, frame))

    def _deliver(self, src_node, dst_port, tc, seq, packet):
        self._count(COUNTER_REASSEMBLED, dst_port, len(packet))
        self._pending.append((DELIVERY_PORT, packet))

    def _bad(self, field, value, allowed, nbytes):
        self._count(COUNTER_DROPS, DROP_BAD_PARAMETER, nbytes)
        if self._log is not None:
            self._log(f"dsf: {field}={value} is not allowed ({allowed}); packet dropped")

    # -- requests from the pipeline --------------------------------------------------------
    def handle(self, requests, packet_bytes, payload, now_ns):
        """Carry out the DSF extern calls of one packet at the end of ingress.

        Args:
            requests: ``[(extern name, argument tuple)]`` in call order.
            packet_bytes: callable returning the packet as ingress left it (deparsed).
            payload: the bytes the parser did not consume (a data cell's payload).
            now_ns: the packet's time.

        Returns:
            bool: True when an extern took the packet (it must not go on to the egress queues).
        """
        if self.history is not None:
            self.history.before(now_ns)
        taken = False
        for name, args in requests:
            if name == "dsf_voq_enqueue":
                if not taken:
                    self._enqueue(now_ns, args, packet_bytes())
                taken = True
            elif name == "dsf_reassemble":
                if not taken:
                    src_node, dst_port, tc, seq, index, last, length, timeout_us = args
                    self.reassembly.cell(now_ns, src_node, dst_port, tc, seq, index, last, payload[:length],
                                         timeout_us * 1000)
                taken = True
            elif name == "dsf_credit_request":
                self._credit_request(now_ns, args)
            elif name == "dsf_credit_grant":
                self.voqs.grant(now_ns, *args)
        return taken

    def _enqueue(self, now_ns, args, packet):
        src_node, dst_node, dst_port, tc, cell_bytes, depth, credits = args
        if not MIN_CELL_BYTES <= cell_bytes <= MAX_CELL_BYTES:
            self._bad("cell_bytes", cell_bytes, f"an integer in [{MIN_CELL_BYTES}, {MAX_CELL_BYTES}] bytes",
                      len(packet))
            return
        if depth < 1:
            self._bad("voq_depth", depth, "an integer >= 1 packets", len(packet))
            return
        self.my_node = src_node
        self.voqs.enqueue(now_ns, src_node, dst_node, dst_port, tc, packet, cell_bytes, depth, credits)

    def _credit_request(self, now_ns, args):
        my_node, src_node, dst_port, tc, backlog, port, rate_kbps, credit_pct, grant_bytes = args
        if not 1 <= credit_pct <= 100:
            self._bad("credit_rate_pct", credit_pct, "an integer in [1, 100] % of the port rate", 0)
            return
        if grant_bytes < 1:
            self._bad("grant_bytes", grant_bytes, "an integer >= 1 bytes", 0)
            return
        if rate_kbps < 1:
            self._bad("port_rate_kbps", rate_kbps, "an integer >= 1 kbit/s", 0)
            return
        self.my_node = my_node
        self.schedulers.request(now_ns, my_node, src_node, dst_port, tc, backlog, port,
                                rate_kbps * 1000 * credit_pct // 100, grant_bytes)

    # -- timers ----------------------------------------------------------------------------
    def due(self, now_ns):
        """Run the timers due by ``now_ns`` and return the frames for ingress: ``[(port, frame)]``."""
        if self.history is not None:
            self.history.before(now_ns)
        self.schedulers.due(now_ns)
        self.voqs.refresh(now_ns)
        self.reassembly.expire(now_ns)
        frames = list(self._pending)
        self._pending.clear()
        return frames

    def next_event_ns(self):
        """When :meth:`due` next has work: 0 while frames are pending, else the next timer (None: none)."""
        if self._pending:
            return 0
        times = [t for t in (self.schedulers.next_grant_ns(), self.voqs.next_refresh_ns(),
                             self.reassembly.next_deadline_ns()) if t is not None]
        return min(times) if times else None

    def describe(self):
        """JSON-able state: VOQs, port schedulers and reassembly contexts."""
        return {"voqs": self.voqs.describe(), "schedulers": self.schedulers.describe(),
                "reassembly": self.reassembly.describe()}
