"""Idle-timeout notifications (P4Runtime spec, "Idle-timeout"): entries not hit for their TTL.

The data plane records hits (``TableState.record_hit``); a watcher thread asks each
table that supports idle timeout for expired entries and streams one
IdleTimeoutNotification per scan to the primary controller.  It scans every
``period_s`` only while the loaded program has a table that supports idle
timeout; otherwise it sleeps until the next pipeline change.  An entry is reported
once per expiry: again only after it was hit (or modified) and expired anew.
"""
import time

from p4.v1 import p4runtime_pb2

from testbed.p4runtime.convert import matches_to_proto
from testbed.p4runtime.periodic import DeadlineWorker


class IdleTimeoutWatcher(DeadlineWorker):
    """Scans the target's tables and sends IdleTimeoutNotification messages.

    :meth:`start` begins scanning every ``period_s`` in a daemon thread, :meth:`stop` ends it.

    Args:
        target: the EmbeddedTarget.
        send: callable(StreamMessageResponse) -> bool (to the primary).
        period_s: scan period.
        clock_ns: the clock the data plane records hits with.
    """

    def __init__(self, target, send, period_s=0.05, clock_ns=time.monotonic_ns):
        super().__init__("p4rt-idle-timeout", clock_ns)
        self.target = target
        self._send = send
        self._period_ns = int(period_s * 1e9)
        self._reported = {}  # id(entry) -> last_hit_ns when reported

    def reset(self):
        """Forget what was reported and look at the new program's tables (pipeline change)."""
        self._reported.clear()
        self.wake()

    def next_deadline_ns(self):
        """One period from now if a table of the program supports idle timeout, else None."""
        state = self.target.state
        if state is None or not any(table.info.idle_timeout for table in state.tables.values()):
            return None
        return self._clock() + self._period_ns

    def scan(self):
        """One scan; returns the number of entries reported."""
        target = self.target
        state, index = target.state, target.index
        if state is None or index is None:
            return 0
        now = self._clock()
        response = p4runtime_pb2.StreamMessageResponse()
        notification = response.idle_timeout_notification
        live = set()
        with target.lock:
            for table_info in index.all("tables"):
                table = state.tables.get(table_info.preamble.name)
                if table is None or not table.info.idle_timeout:
                    continue
                for entry in table.expired(now):
                    live.add(id(entry))
                    if self._reported.get(id(entry)) == entry.last_hit_ns:
                        continue
                    self._reported[id(entry)] = entry.last_hit_ns
                    out = notification.table_entry.add(table_id=table_info.preamble.id)
                    matches_to_proto(table_info, entry.matches, out.match)
                    if entry.priority:
                        out.priority = entry.priority
                    out.idle_timeout_ns = entry.idle_timeout_ns
                    out.controller_metadata = entry.controller_metadata
                    out.metadata = entry.metadata
        for key in [k for k in self._reported if k not in live]:
            del self._reported[key]
        if not notification.table_entry:
            return 0
        notification.timestamp = time.time_ns()
        self._send(response)
        return len(notification.table_entry)

    def tick(self):
        """One periodic scan (errors are ignored: the next scan tries again)."""
        try:
            self.scan()
        except Exception:  # a table changing under the scan: try again next period
            pass
