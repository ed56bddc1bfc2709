"""DeadlineWorker: runs at its deadlines or when woken, never on its own while idle.

Waits are bounded generously (seconds) so a loaded machine passes; only
orderings and counts are asserted.
"""
import threading
import time

from testbed.p4runtime.digests import DigestConfig, DigestEngine
from testbed.p4runtime.periodic import DeadlineWorker


class _Recorder(DeadlineWorker):
    """Counts ticks; its deadlines come from a list the test fills."""

    def __init__(self):
        super().__init__("test-deadline-worker")
        self.ticks = 0
        self.deadlines = []
        self.ticked = threading.Condition()

    def tick(self):
        with self.ticked:
            self.ticks += 1
            now = time.monotonic_ns()
            self.deadlines = [d for d in self.deadlines if d > now]
            self.ticked.notify_all()

    def next_deadline_ns(self):
        return min(self.deadlines, default=None)

    def wait_ticks(self, count, timeout=10.0):
        with self.ticked:
            return self.ticked.wait_for(lambda: self.ticks >= count, timeout)


def test_idle_worker_ticks_once_then_only_when_woken_or_due():
    worker = _Recorder()
    worker.start()
    try:
        assert worker.wait_ticks(1)
        time.sleep(0.3)
        assert worker.ticks == 1  # nothing due, nobody woke it: it slept
        worker.wake()
        assert worker.wait_ticks(2)
        worker.deadlines.append(time.monotonic_ns() + 50_000_000)
        worker.wake()  # look at the new deadline
        assert worker.wait_ticks(3)
        started = time.monotonic()
        assert worker.wait_ticks(4)  # the deadline itself
        assert time.monotonic() - started < 10
        time.sleep(0.3)
        assert worker.ticks == 4
    finally:
        worker.stop()
    assert worker._thread is None


def test_stopped_worker_does_not_start_again():
    worker = _Recorder()
    worker.start()
    worker.stop()
    worker.start()
    assert worker._thread is None


def test_digest_list_sent_at_its_timeout_by_the_sleeping_thread():
    sent = []
    arrived = threading.Event()

    def send(message):
        sent.append(message)
        arrived.set()
        return True

    engine = DigestEngine(send)
    engine.configure(1, DigestConfig(max_timeout_ns=30_000_000, max_list_size=100))
    engine.start()
    try:
        assert engine.next_deadline_ns() is None
        engine.offer(1, (5, 6))
        assert engine.next_deadline_ns() is not None
        assert arrived.wait(10)
        assert len(sent) == 1 and sent[0].digest.digest_id == 1 and len(sent[0].digest.data) == 1
        assert engine.next_deadline_ns() is None
    finally:
        engine.stop()
