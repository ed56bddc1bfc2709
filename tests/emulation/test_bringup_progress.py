"""Bring-up helpers without a network: progress lines, the worker pool, neighbour batch lines."""
import subprocess
import sys
import textwrap
import threading

import pytest

from testbed.emulation.hosts import neighbour_lines
from testbed.emulation.parallel import for_each
from testbed.emulation.progress import Progress


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_count_reports_first_last_and_at_most_every_interval(tmp_path):
    clock, lines = FakeClock(), []
    log = tmp_path / "fabric.log"
    progress = Progress(lines.append, str(log), min_interval_s=0.5, clock=clock)
    progress.begin("up")
    count = progress.count("switches started", 4)
    count.add()            # first value: reported
    clock.now += 0.1
    count.add()            # too soon: not reported
    clock.now += 0.5
    count.add()            # interval passed: reported
    clock.now += 0.1
    count.add()            # last value: always reported
    count.reach(4)         # unchanged: not repeated
    assert lines == ["switches started 1/4 (0.0 s)", "switches started 3/4 (0.6 s)",
                     "switches started 4/4 (0.7 s)"]
    logged = log.read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in logged] == [f"[up] {line}" for line in lines]


def test_event_counts_from_the_phase_start_and_silent_progress_only_logs(tmp_path):
    clock = FakeClock()
    progress = Progress(None, str(tmp_path / "fabric.log"), clock=clock)
    progress.begin("down")
    clock.now += 1.25
    assert progress.event("links removed") == "links removed (1.2 s)"
    assert "[down] links removed (1.2 s)" in (tmp_path / "fabric.log").read_text()


def test_a_terminal_that_went_away_stops_terminal_lines_but_not_the_log(tmp_path):
    # a closed pipe or a hung-up tty must not abort the teardown the lines report
    log, shown = tmp_path / "fabric.log", []

    def report(line):
        if shown:
            raise BrokenPipeError(32, "Broken pipe")
        shown.append(line)

    progress = Progress(report=report, log_path=str(log))
    progress.event("switches stopped 1/2")
    progress.event("switches stopped 2/2")
    progress.event("links removed")
    assert len(shown) == 1
    assert [line.split("] ", 1)[1].split(" (")[0] for line in log.read_text().splitlines()] == [
        "switches stopped 1/2", "switches stopped 2/2", "links removed"]


def test_for_each_keeps_order_and_tells_done_in_the_calling_thread():
    caller, seen = threading.current_thread(), []

    def done(item, result):
        assert threading.current_thread() is caller
        seen.append((item, result))

    assert for_each(range(10), lambda n: n * n, 3, done=done) == [n * n for n in range(10)]
    assert sorted(seen) == [(n, n * n) for n in range(10)]
    assert for_each([], lambda n: n, 3) == []


def test_for_each_raises_the_first_error_sets_cancel_and_starts_nothing_more():
    cancel, started = threading.Event(), []

    def work(n):
        started.append(n)
        if n == 0:
            raise ValueError("item 0 failed")
        cancel.wait(timeout=60)  # a long step gives up when told
        return n

    with pytest.raises(ValueError, match="item 0 failed"):
        for_each(range(50), work, 2, cancel=cancel)
    assert cancel.is_set()
    # two workers: item 0, then at most the two items that were waiting for the cancel
    assert 0 in started and set(started) <= {0, 1, 2}


def test_an_interrupt_while_work_is_handed_out_leaves_no_work_running_after_for_each_raised():
    # signals at random moments of 200 steps of 64 items. Seen before: one landing inside
    # ThreadPoolExecutor.submit (while it started a worker thread) left a thread the pool did not
    # wait for (a switch started after the teardown had stopped the others); one landing inside
    # concurrent.futures.wait left a future's lock held and the pool's shutdown waiting forever
    program = textwrap.dedent("""
        import os, random, signal, threading, time
        from testbed.emulation.parallel import for_each
        # a test run started as a background job inherits SIGINT ignored: take it back
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rng, late, interrupted = random.Random(7), [], 0
        for trial in range(200):
            returned = threading.Event()
            def work(item):
                time.sleep(0.002)
                if returned.is_set():
                    late.append(item)
            killer = threading.Timer(rng.uniform(0, 0.004), os.kill, (os.getpid(), signal.SIGINT))
            try:
                killer.start()  # on a loaded machine the signal may come before start() returns
                for_each(range(64), work, 64)
                killer.join()  # the signal was sent after for_each returned: it lands here
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    time.sleep(0.001)
            except KeyboardInterrupt:
                interrupted += 1
            returned.set()
            killer.join()
        time.sleep(0.05)
        print(interrupted, len(late))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    interrupted, late = map(int, done.stdout.split())
    assert interrupted == 200  # every signal became an interrupt: none was lost
    assert late == 0


def test_neighbour_lines_are_permanent_replace_entries():
    assert neighbour_lines("h1-eth0", [("10.0.0.2", "00:00:0a:00:00:02"), ("10.0.0.3", "00:00:0a:00:00:03")]) == [
        "neigh replace 10.0.0.2 lladdr 00:00:0a:00:00:02 dev h1-eth0 nud permanent",
        "neigh replace 10.0.0.3 lladdr 00:00:0a:00:00:03 dev h1-eth0 nud permanent"]
