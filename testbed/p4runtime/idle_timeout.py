"""Idle-timeout notifications (P4Runtime spec, "Idle-timeout"): entries not hit for their TTL.

The data plane records hits (``TableState.record_hit``); a watcher thread asks each
table that supports idle timeout for expired entries and streams one
IdleTimeoutNotification per scan to the primary controller.  An entry is reported
once per expiry: again only after it was hit (or modified) and expired anew.
"""
import threading
import time

from p4.v1 import p4runtime_pb2

from testbed.p4runtime.convert import matches_to_proto


class IdleTimeoutWatcher:
    """Scans the target's tables and sends IdleTimeoutNotification messages.

    Args:
        target: the EmbeddedTarget.
        send: callable(StreamMessageResponse) -> bool (to the primary).
        period_s: scan period.
        clock_ns: the clock the data plane records hits with.
    """

    def __init__(self, target, send, period_s=0.05, clock_ns=time.monotonic_ns):
        self.target = target
        self._send = send
        self._period = period_s
        self._clock = clock_ns
        self._reported = {}  # id(entry) -> last_hit_ns when reported
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        """Start scanning in a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="p4rt-idle-timeout", daemon=True)
            self._thread.start()

    def stop(self):
        """Stop scanning."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def reset(self):
        """Forget what was reported (pipeline change)."""
        self._reported.clear()

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

    def _run(self):
        while not self._stop.wait(self._period):
            try:
                self.scan()
            except Exception:  # a table changing under the scan: try again next period
                continue
