"""Switch and controller log lines carry a wall-clock timestamp (issue 10): ISO 8601, UTC, milliseconds."""
import calendar
import io
import logging
import os
import signal
import subprocess
import sys
import time


from testbed import log_format
from testbed.controllers.launcher import HUB_ENV, free_port


def _line_time_s(line):
    """The timestamp of a log line, in seconds since the epoch; fails the test if the line is not one."""
    match = log_format.LINE_RE.fullmatch(line)
    assert match, f"not a timestamped log line: {line!r}"
    stamp = match["time"]
    whole = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    return whole + int(stamp[20:23]) / 1000


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


def test_timestamps_are_utc_with_milliseconds():
    assert log_format.format_timestamp(1_700_000_000_123_999_999) == "2023-11-14T22:13:20.123Z"
    assert log_format.format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert log_format.TIMESTAMP_RE.fullmatch(log_format.format_timestamp(time.time_ns()))


def test_configured_logging_writes_one_format(monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # pytest's handlers are set aside (not closed) and restored
    monkeypatch.setattr(root, "level", root.level)
    stream = io.StringIO()
    before = time.time()
    log_format.configure_process_logging(logging.INFO, stream=stream)
    logging.captureWarnings(False)  # configure sent Python warnings to logging: not in the test process
    # the root logger: in this process, loggers made after Mininet was imported (by other tests) are
    # MininetLoggers with their own handler and level; switch and controller processes do not import it
    root.info("port %d loss %g", 3, 0.5)
    root.debug("not kept")
    after = time.time()
    (line,) = _lines(stream.getvalue())
    match = log_format.LINE_RE.fullmatch(line)
    assert match["name"] == "root" and match["level"] == "INFO" and match["message"] == "port 3 loss 0.5"
    assert before - 0.001 <= _line_time_s(line) <= after


def _run_logged(argv, timeout=60):
    before = time.time()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return done, before, time.time()


def test_a_switch_logs_with_timestamps(tmp_path):
    """switchd's own lines (started, refused) come from its logger, timestamped, on the run's clock."""
    ready = tmp_path / "ready"
    address = f"127.0.0.1:{free_port()}"
    log_path = tmp_path / "s9.log"
    before = time.time()
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "s9",
                                    "--grpc-addr", address, "--ready-file", str(ready)],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), log_path.read_text()
        deadline = time.monotonic() + 10
        while "P4Runtime on" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    after = time.time()
    lines = _lines(log_path.read_text())
    assert lines, "the switch wrote nothing"
    for line in lines:
        assert before - 0.001 <= _line_time_s(line) <= after
    started = [log_format.LINE_RE.fullmatch(line) for line in lines if "P4Runtime on" in line]
    assert started and started[0]["name"] == "testbed.switchd.s9" and started[0]["level"] == "INFO"
    assert address in started[0]["message"]

    refused, before, after = _run_logged([sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "s9",
                                          "--grpc-addr", f"127.0.0.1:{free_port()}", "--port", "1=tbnosuchintf0"])
    assert refused.returncode == 2
    (line,) = _lines(refused.stderr)
    assert log_format.LINE_RE.fullmatch(line)["level"] == "ERROR"
    assert before - 0.001 <= _line_time_s(line) <= after


def test_the_controller_logs_with_timestamps(tmp_path):
    missing = os.path.join(tmp_path, "missing.conf")
    done, before, after = _run_logged([sys.executable, "-m", "testbed.controllers.launcher", "--config-file", missing])
    assert done.returncode == 2
    lines = _lines(done.stderr)
    assert lines
    for line in lines:
        assert before - 0.001 <= _line_time_s(line) <= after
    match = log_format.LINE_RE.fullmatch(lines[-1])
    assert match["name"] == "testbed.controllers.launcher" and match["level"] == "ERROR"
    assert missing in match["message"]


def test_the_controller_refuses_another_hub_in_a_timestamped_line():
    before = time.time()
    done = subprocess.run([sys.executable, "-m", "testbed.controllers.launcher"], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, **{HUB_ENV: "eventlet"}))
    after = time.time()
    assert done.returncode == 2
    (line,) = _lines(done.stderr)
    assert "native hub" in line and before - 0.001 <= _line_time_s(line) <= after
