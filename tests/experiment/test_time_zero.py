"""An experiment's time zero waits for every stream entry's processes, and an aborted run releases them.

testbed.experiment.traffic_jobs.TimeZero and the sender's ``--start-at-stdin``
(traffic/sender.py): the start time is set when the last entry is ready, so a
failure planned at ``at_s`` hits flowing traffic however long the processes
took to start on a busy machine.
"""
import io
import threading
import time

import pytest

from testbed.errors import ParameterError
from testbed.experiment.traffic_jobs import TimeZero
from testbed.traffic.sender import read_start_time


def _arrive_in_thread(time_zero, results):
    def body():
        try:
            results.append(time_zero.arrive())
        except RuntimeError as error:
            results.append(error)
    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_time_zero_is_set_when_the_last_entry_is_ready_and_after_it():
    time_zero = TimeZero(2, margin_s=0.05)
    results = []
    first = _arrive_in_thread(time_zero, results)
    first.join(timeout=0.3)
    assert first.is_alive() and time_zero.wait(0.05) is None   # one entry still starting
    last_ready_ns = time.time_ns()
    second = _arrive_in_thread(time_zero, results)
    for thread in (first, second):
        thread.join(timeout=10)
    assert len(results) == 2 and results[0] == results[1] == time_zero.wait(0)
    assert results[0] >= last_ready_ns + int(0.05e9)


def test_without_stream_entries_time_zero_is_set_at_once():
    time_zero = TimeZero(0, margin_s=0.0)
    assert time_zero.wait(0) is not None


def test_an_aborted_run_releases_the_waiting_entries_with_an_error():
    time_zero = TimeZero(2)
    results = []
    waiting = _arrive_in_thread(time_zero, results)
    time_zero.abort("traffic[1] failed")
    waiting.join(timeout=10)
    assert isinstance(results[0], RuntimeError) and "traffic[1] failed" in str(results[0])
    with pytest.raises(RuntimeError):
        time_zero.wait(0)


def test_the_sender_reads_its_start_time_from_a_line_and_refuses_anything_else():
    assert read_start_time(io.StringIO("1700000000123456789\n")) == 1700000000123456789
    with pytest.raises(ParameterError, match="--start-at-stdin"):
        read_start_time(io.StringIO(""))          # the run was aborted: stdin closed
    with pytest.raises(ParameterError, match="integer"):
        read_start_time(io.StringIO("soon\n"))
