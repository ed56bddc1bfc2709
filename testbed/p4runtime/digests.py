"""Digest batching for the P4Runtime server (DigestEntry config, DigestList, DigestListAck).

Following the specification ("DigestEntry"): a digest is streamed only after the
controller configured it with a DigestEntry.  Digests are gathered into a list that
is sent when it holds ``max_list_size`` entries (0: no size limit; the server refuses
a negative one) or when its oldest entry has waited ``max_timeout_ns`` (0: at once).  Until the list is acked
with DigestListAck (or ``ack_timeout_ns`` passes), the same data is not sent again
(``ack_timeout_ns`` 0: no such suppression); duplicates within a pending list are
dropped too.
"""
import threading
import time

from p4.v1 import p4runtime_pb2

from testbed.p4runtime.convert import p4data_struct
from testbed.p4runtime.periodic import DeadlineWorker


class DigestConfig:
    """The DigestEntry.Config of one digest."""

    def __init__(self, max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0):
        self.max_timeout_ns = max(0, int(max_timeout_ns))
        self.max_list_size = int(max_list_size)
        self.ack_timeout_ns = max(0, int(ack_timeout_ns))


class DigestEngine(DeadlineWorker):
    """Batches digests of the data plane into DigestList messages.

    :meth:`start` runs the timer thread that flushes lists on timeout, :meth:`stop` ends it.
    The thread sleeps until the oldest pending list's ``max_timeout_ns`` or the
    earliest ack timeout, and for good while there is neither.

    Args:
        send: callable(StreamMessageResponse) -> bool that delivers to the primary
            controller (False when there is none; the list is then dropped).
        clock_ns: time source (ns).
    """

    def __init__(self, send, clock_ns=time.monotonic_ns):
        super().__init__("p4rt-digests", clock_ns)
        self._send = send
        self._lock = threading.Lock()
        self.configs = {}  # digest id -> DigestConfig
        self._pending = {}  # digest id -> (first_ns, [values], set(values))
        self._unacked = {}  # list id -> (digest id, set(values), deadline_ns)
        self._next_list_id = 1
        self.dropped = 0

    def reset(self):
        """Forget every config and pending list (pipeline change)."""
        with self._lock:
            self.configs.clear()
            self._pending.clear()
            self._unacked.clear()

    def configure(self, digest_id, config):
        """Set (or with None remove) the config of a digest."""
        with self._lock:
            if config is None:
                self.configs.pop(digest_id, None)
                self._pending.pop(digest_id, None)
            else:
                self.configs[digest_id] = config
        self.wake()  # a shorter max_timeout_ns may make a pending list due earlier

    def offer(self, digest_id, values):
        """One digest from the data plane (any thread)."""
        values = tuple(values)
        ready = None
        new_deadline = False
        with self._lock:
            config = self.configs.get(digest_id)
            if config is None:
                self.dropped += 1
                return
            for list_digest, sent, _deadline in self._unacked.values():
                if list_digest == digest_id and values in sent:
                    return
            pending = self._pending.get(digest_id)
            if pending is None:
                pending = self._pending[digest_id] = (self._clock(), [], set())
                new_deadline = config.max_timeout_ns > 0
            _first, items, seen = pending
            if values in seen:
                return
            items.append(values)
            seen.add(values)
            if config.max_timeout_ns == 0 or (0 < config.max_list_size <= len(items)):
                ready = self._take_locked(digest_id)
                new_deadline = bool(config.ack_timeout_ns)
        if new_deadline:
            self.wake()
        if ready is not None:
            self._deliver(*ready)

    def ack(self, digest_id, list_id):
        """A DigestListAck: the data of that list may be sent again.

        Returns:
            bool: False for an unknown (or already acked/expired) list.
        """
        with self._lock:
            entry = self._unacked.get(list_id)
            if entry is None or entry[0] != digest_id:
                return False
            del self._unacked[list_id]
            return True

    def _take_locked(self, digest_id):
        _first, items, seen = self._pending.pop(digest_id)
        list_id = self._next_list_id
        self._next_list_id += 1
        config = self.configs[digest_id]
        if config.ack_timeout_ns:
            self._unacked[list_id] = (digest_id, seen, self._clock() + config.ack_timeout_ns)
        return digest_id, list_id, items

    def _deliver(self, digest_id, list_id, items):
        response = p4runtime_pb2.StreamMessageResponse()
        digest = response.digest
        digest.digest_id = digest_id
        digest.list_id = list_id
        digest.timestamp = time.time_ns()
        for values in items:
            p4data_struct(values, digest.data.add())
        if not self._send(response):
            self.dropped += len(items)
            with self._lock:
                self._unacked.pop(list_id, None)

    def next_deadline_ns(self):
        """The earliest list timeout or ack timeout to come (None: none pending)."""
        with self._lock:
            deadlines = [first + self.configs[digest_id].max_timeout_ns
                         for digest_id, (first, _items, _seen) in self._pending.items()
                         if digest_id in self.configs]
            deadlines.extend(deadline for _d, _s, deadline in self._unacked.values())
        return min(deadlines, default=None)

    def tick(self):
        """Send the lists whose max_timeout_ns passed; forget unacked lists whose ack timeout passed."""
        now = self._clock()
        ready = []
        with self._lock:
            for digest_id, (first, _items, _seen) in list(self._pending.items()):
                config = self.configs.get(digest_id)
                if config is not None and now - first >= config.max_timeout_ns:
                    ready.append(self._take_locked(digest_id))
            for list_id, (_d, _s, deadline) in list(self._unacked.items()):
                if now >= deadline:
                    del self._unacked[list_id]
        for item in ready:
            self._deliver(*item)
