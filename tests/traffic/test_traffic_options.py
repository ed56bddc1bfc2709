"""run_streams and run_collective take their traffic options as a dataclass or as keywords.

No Mininet: the hosts' launcher records the command lines and agent plans the runs
would start, then stops the run before anything is sent.
"""
import dataclasses
import json
import os

import pytest

from testbed.traffic import collectives, streams
from testbed.traffic.hosts import HostHandle


class _Stop(Exception):
    """Ends a run once it has started what the test looks at."""


class _Process:
    """A started process that has announced itself (``line`` on its stdout) and stops the run the first
    time it is waited for; what is written to its stdin goes to ``on_input``."""

    stderr = None
    returncode = 0

    def __init__(self, line=b"", on_input=None):
        read, write = os.pipe()
        os.write(write, line)
        os.close(write)
        self.stdout = os.fdopen(read, "rb")
        self.stdin = _Input(on_input)

    def poll(self):
        return 0

    def communicate(self, timeout=None):
        raise _Stop()

    wait = communicate

    def kill(self):
        pass


class _Input:
    """A process's stdin handing each line written to ``on_input``."""

    closed = False

    def __init__(self, on_input):
        self.on_input = on_input

    def write(self, data):
        if self.on_input is not None:
            self.on_input(data)

    def flush(self):
        pass

    def close(self):
        self.closed = True


def _hosts(count, started):
    """``count`` hosts whose launcher appends to ``started`` each argv (stream processes) or agent plan
    (which the run writes on the agent's stdin)."""
    def launcher(argv, **_popen_kwargs):
        if "--plan" in argv:
            def plan_written(data):
                plan = json.loads(data)
                started.append(plan)
                if plan["rank"] == count - 1:
                    raise _Stop()
            return _Process(on_input=plan_written)
        started.append(list(argv))
        return _Process(b"sending\n" if "testbed.traffic.sender" in argv else b"ready\n")

    return [HostHandle(f"h{i}", f"10.0.0.{i}", f"00:00:00:00:00:{i:02x}", f"h{i}-eth0", launcher)
            for i in range(1, count + 1)]


def _started(run, count, *args, **kwargs):
    """What ``run(hosts, *args, **kwargs)`` starts before the run is stopped."""
    started = []
    with pytest.raises(_Stop):
        run(_hosts(count, started), *args, python="python3", **kwargs)
    return started


STREAM_FIELDS = dict(duration=1.5, size=4096, qps=4, qp_scaling="split", rate_mbps=40.0, mtu=512, on_ms=3.0,
                     off_ms=1.0, bin_ms=5.0, gap_ms=2.0, loss_timeout=0.5, linger=0.25, job=7,
                     udp_sport="per_nic_pair")


def test_stream_options_as_dataclass_or_keywords_start_the_same_processes():
    by_keywords = _started(streams.run_streams, 4, **STREAM_FIELDS)
    by_dataclass = _started(streams.run_streams, 4, streams.StreamOptions(**STREAM_FIELDS))
    assert by_keywords == by_dataclass
    assert len(by_keywords) == 4  # a receiver and a sender per pair
    sender = by_keywords[2]
    assert sender[sender.index("--qps") + 1] == "4" and sender[sender.index("--job") + 1] == "7"
    assert sender[sender.index("--udp-sport") + 1] == "per_nic_pair"


def test_stream_keywords_replace_fields_of_the_options():
    options = streams.StreamOptions(**STREAM_FIELDS)
    combined = _started(streams.run_streams, 2, options, qps=2, rate_mbps=10.0)
    expected = _started(streams.run_streams, 2, dataclasses.replace(options, qps=2, rate_mbps=10.0))
    assert combined == expected
    assert options.qps == 4  # the caller's options are left as they were


def test_stream_options_refuse_unknown_keywords():
    with pytest.raises(TypeError):
        streams.run_streams([], rate=10.0)


COLLECTIVE_FIELDS = dict(qps=3, qp_scaling="split", rate_mbps=None, mtu=700, chunk_bytes=1000, admission=True,
                         channels=4, seed=3, loss_timeout=0.3, bin_ms=2.0, retransmit=False, ack_timeout=0.2,
                         retry_count=2, job=9, timeout=10.0, udp_sport="per_nic_pair")


@pytest.mark.parametrize("pattern", ["allreduce", "alltoallv"])
def test_collective_options_as_dataclass_or_keywords_write_the_same_plans(pattern):
    by_keywords = _started(collectives.run_collective, 3, pattern, 10000, **COLLECTIVE_FIELDS)
    by_dataclass = _started(collectives.run_collective, 3, pattern, 10000,
                            collectives.CollectiveOptions(**COLLECTIVE_FIELDS))
    assert by_keywords == by_dataclass
    assert [plan["rank"] for plan in by_keywords] == [0, 1, 2]
    assert by_keywords[0]["qps"] == 3 and by_keywords[0]["job"] == 9 and by_keywords[0]["step_timeout"] == 3.0


def test_collective_step_timeout_defaults_past_every_retry():
    options = collectives.CollectiveOptions(ack_timeout=0.5, retry_count=3)
    assert options.resolved_step_timeout() == 0.5 + 1.0 + 2.0 + 2.0 + 1.0
    assert dataclasses.replace(options, retransmit=False).resolved_step_timeout() == 3.0
    assert dataclasses.replace(options, step_timeout=9.0).resolved_step_timeout() == 9.0


def test_collective_options_refuse_unknown_keywords():
    with pytest.raises(TypeError):
        collectives.run_collective([], "allreduce", 1000, rate=10.0)
