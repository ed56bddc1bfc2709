"""A signal at any point of a k=4 FatTree's bring-up or teardown leaves nothing behind and prints one line.

Each case starts ``testbed net up fattree k=4 --program ecmp --no-cli`` in a child process, waits for
one of its progress lines (a step of the bring-up or teardown has begun) and sends SIGINT or SIGTERM.
Where exactly the signal lands after that line depends on the machine's load; every case checks the
same outcome whatever the step: the run ends by itself, prints exactly one line about the
interruption and no traceback, leaves no namespace, interface, process or state file
(``no_leftovers``) and no temporary file (the child's TMPDIR is empty).
"""
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

pytestmark = pytest.mark.mininet

LINE_TIMEOUT_S = 300  # generous: a loaded two-core machine
TEARDOWN_TIMEOUT_S = 300

# (progress line prefix to wait for, signal sent when it appears); the first ones are bring-up steps,
# "up:" is a running fabric, "switches stopped" is in the middle of the teardown that a first SIGTERM began
POINTS = [
    ("node shells started", signal.SIGINT),
    ("links created", signal.SIGTERM),
    ("hosts configured", signal.SIGINT),
    ("switches started", signal.SIGTERM),
    ("pipelines pushed", signal.SIGINT),
    ("route entries written", signal.SIGTERM),
    ("up:", signal.SIGTERM),
]


class Child:
    """``testbed net up`` in a child process, its output read line by line in a thread."""

    def __init__(self, tmp_path, *options, sigint_ignored=False):
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        self.state_file = tmp_path / "net.json"
        # faulthandler: a child that does not end in time is sent SIGABRT and prints every thread's stack
        env = dict(os.environ, TMPDIR=str(self.tmpdir), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "testbed.cli", "net", "up", "fattree", "k=4", "--program", "ecmp", "--no-cli",
             "--state-file", str(self.state_file), *options],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            # as a background job of a non-interactive shell (a script's `testbed net up ... &`, a CI job) starts
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None)
        self.lines = []
        self._queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, prefix):
        """Block until a line starting with ``prefix`` was printed; fail if the child ended first."""
        while True:
            try:
                line = self._queue.get(timeout=LINE_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"no line {prefix!r} within {LINE_TIMEOUT_S} s:\n" + self.output())
            if line is None:
                pytest.fail(f"the child ended before printing {prefix!r}:\n" + self.output())
            if line.startswith(prefix):
                return

    def finish(self):
        """Wait until the child exits; return its status (fail with its threads' stacks if it hangs)."""
        try:
            status = self.process.wait(timeout=TEARDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)  # faulthandler dumps every thread into the output
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            self._reader.join(timeout=30)
            pytest.fail(f"the child did not end within {TEARDOWN_TIMEOUT_S} s:\n" + self.output())
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=30)
        return status

    def output(self):
        return "\n".join(self.lines)


def check_one_line_and_nothing_left(child, status):
    output = child.output()
    assert status == 0, output
    assert "Traceback" not in output
    assert len([line for line in child.lines if "interrupted" in line]) == 1, output
    assert not child.state_file.exists()
    assert not os.listdir(child.tmpdir), f"temporary files left: {os.listdir(child.tmpdir)}\n{output}"


@pytest.mark.parametrize("prefix,signum", POINTS, ids=[f"{p.rstrip(':')}-{s.name}" for p, s in POINTS])
def test_signal_during_bringup_leaves_nothing(tmp_path, no_leftovers, prefix, signum):
    child = Child(tmp_path)
    try:
        child.wait_for(prefix)
        child.process.send_signal(signum)
    finally:
        status = child.finish()
    check_one_line_and_nothing_left(child, status)
    assert f"interrupted ({signum.name})" in child.output()


def test_second_signal_during_teardown_does_not_cut_it_short(tmp_path, no_leftovers):
    child = Child(tmp_path)
    try:
        # the summary `net up` prints once start() returned ("up:" is start's last event: a signal
        # landing right after it interrupts the bring-up, whose teardown then runs before the line)
        child.wait_for("fattree: 16 hosts")
        child.process.send_signal(signal.SIGTERM)
        child.wait_for("switches stopped")
        child.process.send_signal(signal.SIGINT)
    finally:
        status = child.finish()
    check_one_line_and_nothing_left(child, status)
    assert child.lines[-1].startswith("down"), child.output()


def test_quiet_bringup_prints_no_progress_and_one_line_when_interrupted(tmp_path, no_leftovers):
    log_dir = tmp_path / "logs"
    child = Child(tmp_path, "-q", "--log-dir", str(log_dir))
    try:
        child.wait_for("fattree: 16 hosts")  # the summary: the fabric is up
        child.process.send_signal(signal.SIGINT)
    finally:
        status = child.finish()
    check_one_line_and_nothing_left(child, status)
    assert not [line for line in child.lines if "/" in line and "started" in line], child.output()
    events = (log_dir / "fabric.log").read_text()  # the progress still goes to the run's log
    assert "switches started 20/20" in events and "switches stopped 20/20" in events


def test_sigint_stops_a_run_started_with_sigint_ignored(tmp_path, no_leftovers):
    child = Child(tmp_path, sigint_ignored=True)
    try:
        child.wait_for("fattree: 16 hosts")
        child.process.send_signal(signal.SIGINT)
    finally:
        status = child.finish()
    check_one_line_and_nothing_left(child, status)
    assert "interrupted (SIGINT)" in child.output()


def test_sigterm_after_the_terminal_went_away_still_tears_everything_down(tmp_path, no_leftovers):
    # `testbed net up ... | head`, or a terminal closed under it: its output pipe is gone when the
    # signal comes, and the teardown's progress lines must not cut the teardown short
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "net", "up", "fattree", "k=4", "--program", "ecmp", "--no-cli",
         "--state-file", str(tmp_path / "net.json")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        seen = []
        for line in process.stdout:
            seen.append(line)
            if line.startswith("fattree: 16 hosts"):
                break
        assert seen and seen[-1].startswith("fattree: 16 hosts"), "".join(seen)
        process.stdout.close()
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=TEARDOWN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert status == 0
    assert not (tmp_path / "net.json").exists()
    assert not os.listdir(tmpdir), f"temporary files left: {os.listdir(tmpdir)}"
