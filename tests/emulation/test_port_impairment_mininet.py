"""Per-port loss and delay of the embedded switch process, set over its control socket (no Mininet).

The switch (``python -m testbed.embedded_switch.switchd``) runs inside a network namespace the
test creates (``tbimp*``) on two veth pairs; its P4Runtime server and control socket
are Unix sockets (file paths cross network namespaces).  Frames are sent and
counted by a small script run inside the namespace.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from testbed.errors import ParameterError
from testbed.embedded_switch.port_control import parse_request, port_status, request, set_port_impairment
from testbed.p4runtime.client import P4RuntimeClient

from repo_paths import REPO

PROGRAM = os.path.join(REPO, "p4src", "l3_ecmp.p4")
N_FRAMES = 400

# Sends COUNT numbered UDP frames into port 1 (10.0.2.9, routed to port 2) and prints, as
# JSON, the sequence numbers seen on port 2 and each one's one-way latency in ms.
TRAFFIC_SCRIPT = textwrap.dedent("""
    import json, socket, struct, sys, time
    count, gap_s = int(sys.argv[1]), float(sys.argv[2])
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); tx.bind(("tbimpb1", 0))
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); rx.bind(("tbimpb2", 0))
    rx.setblocking(False)
    base = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:aa") / IP(src="10.0.1.1", dst="10.0.2.9")
                 / UDP(sport=1000, dport=4791))
    magic = b"TBIMP"
    seen = {}

    def drain():
        while True:
            try:
                data = rx.recv(2048)
            except BlockingIOError:
                return
            at = data.find(magic)
            if at >= 0:
                seq, sent = struct.unpack("!Id", data[at + 5:at + 17])
                seen.setdefault(seq, (time.monotonic() - sent) * 1e3)

    for seq in range(count):
        # the IP length is not checked by the program; the payload rides after UDP
        tx.send(base + magic + struct.pack("!Id", seq, time.monotonic()) + bytes(20))
        drain()
        time.sleep(gap_s)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        drain()
        time.sleep(0.005)
    print(json.dumps({"received": sorted(seen), "latency_ms": [seen[s] for s in sorted(seen)]}))
""")

pytestmark = pytest.mark.mininet  # needs root: namespaces, veths, raw sockets


def _run(*argv, check=True):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


def _wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def namespace():
    """A network namespace holding veth pairs tbimpa1/tbimpb1 and tbimpa2/tbimpb2; removed afterwards."""
    name = f"tbimp{os.getpid() % 100000}"
    _run("ip", "netns", "add", name)
    try:
        for index in (1, 2):
            _run("ip", "netns", "exec", name, "ip", "link", "add", f"tbimpa{index}", "type", "veth",
                 "peer", "name", f"tbimpb{index}")
            for interface in (f"tbimpa{index}", f"tbimpb{index}"):
                _run("ip", "netns", "exec", name, "sysctl", "-qw", f"net.ipv6.conf.{interface}.disable_ipv6=1",
                     check=False)
                _run("ip", "netns", "exec", name, "ip", "link", "set", interface, "up")
        yield name
    finally:
        _run("ip", "netns", "del", name, check=False)


class RunningSwitch:
    """A switchd process in ``namespace`` with the route 10.0.2.0/24 -> port 2 programmed."""

    def __init__(self, namespace, directory, seed):
        self.namespace = namespace
        self.grpc = f"unix:{directory}/grpc.sock"
        self.control_path = os.path.join(directory, "switch.ctl")
        ready = os.path.join(directory, "ready")
        self.log = open(os.path.join(directory, "switch.log"), "ab")
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, sys.executable, "-m", "testbed.embedded_switch.switchd",
             "--name", "tbimp",
             "--grpc-addr", self.grpc, "--port", "1=tbimpa1", "--port", "2=tbimpa2", "--cpu-port", "255",
             "--program", PROGRAM, "--seed", str(seed), "--ready-file", ready,
             "--control-socket", self.control_path],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            assert _wait(lambda: os.path.exists(ready) or self.process.poll() is not None, 60)
            assert self.process.poll() is None, open(self.log.name).read()
            with P4RuntimeClient(self.grpc, device_id=1, election_id=(0, 1), timeout=10) as sw:
                sw.load_p4info()
                sw.insert_member("MyIngress.ecmp_selector", 1, "MyIngress.set_nhop",
                                 {"dmac": "02:00:00:00:00:02", "smac": "02:00:00:00:00:aa", "port": 2})
                sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)}, member_id=1)
        except BaseException:
            self.stop()
            raise

    def traffic(self, count, gap_s=0.001):
        """Send ``count`` frames into port 1; returns ``(received sequence numbers, latencies in ms)``."""
        result = _run("ip", "netns", "exec", self.namespace, sys.executable, "-c", TRAFFIC_SCRIPT,
                      str(count), str(gap_s))
        data = json.loads(result.stdout.strip().splitlines()[-1])
        return data["received"], data["latency_ms"]

    def stop(self):
        """SIGTERM the switch (SIGKILL if it hangs); returns its exit status."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            return self.process.returncode
        finally:
            self.log.close()


@pytest.fixture
def make_switch(namespace, tmp_path):
    """Start switches (one at a time) in the namespace; every one is stopped afterwards."""
    started = []

    def start(seed=7):
        directory = tmp_path / f"switch{len(started)}"
        directory.mkdir()
        switch = RunningSwitch(namespace, str(directory), seed)
        started.append(switch)
        return switch

    try:
        yield start
    finally:
        for switch in started:
            switch.stop()


def test_loss_is_binomial_reproducible_and_counted(make_switch):
    switch = make_switch(seed=7)
    received, _ = switch.traffic(50)
    assert received == list(range(50))  # the route works and nothing is lost without an impairment
    assert set_port_impairment(switch.control_path, 2, loss=0.5) == {"ok": True}
    first, _ = switch.traffic(N_FRAMES)
    # Binomial(400, 0.5): mean 200, sd 10; 5 sd either side
    assert 150 <= len(first) <= 250, len(first)
    status = port_status(switch.control_path)
    assert status[2]["loss"] == 0.5 and status[2]["drops"] == N_FRAMES - len(first)
    assert status[1]["drops"] == 0
    # clearing the loss restores delivery
    set_port_impairment(switch.control_path, 2, loss=0.0)
    received, _ = switch.traffic(50)
    assert len(received) == 50
    assert switch.stop() == 0

    # the same seed drops exactly the same frames; another seed drops others
    again = make_switch(seed=7)
    set_port_impairment(again.control_path, 2, loss=0.5)
    second, _ = again.traffic(N_FRAMES)
    assert second == first
    again.stop()
    other = make_switch(seed=8)
    set_port_impairment(other.control_path, 2, loss=0.5)
    third, _ = other.traffic(N_FRAMES)
    assert third != first and 150 <= len(third) <= 250


def test_delay_holds_frames_back(make_switch):
    switch = make_switch()
    _, plain = switch.traffic(40, gap_s=0.005)
    set_port_impairment(switch.control_path, 2, delay_ms=40.0)
    received, delayed = switch.traffic(40, gap_s=0.005)
    assert received == list(range(40))  # delay alone loses nothing and keeps the order
    assert min(delayed) >= 39.0
    assert sorted(plain)[len(plain) // 2] < 20.0 and sorted(delayed)[len(delayed) // 2] < 80.0


def test_bad_requests_are_answered_with_the_field(make_switch):
    switch = make_switch()
    path = switch.control_path
    cases = [({"port": 9, "loss": 0.1}, "port"), ({"port": 2, "loss": 1.5}, "loss"),
             ({"port": 2, "loss": -0.1}, "loss"), ({"port": 2, "delay_ms": -1}, "delay_ms"),
             ({"port": 2, "loss": "lots"}, "loss"), ({"port": 2, "jitter_ms": 1}, "jitter_ms"),
             ({"loss": 0.1}, "port"), ({"command": "reboot"}, "command")]
    for message, field in cases:
        answer = request(path, message)
        assert answer.get("field") == field and answer["error"].startswith(f"{field}: "), (message, answer)
    with pytest.raises(ParameterError) as excinfo:
        set_port_impairment(path, 2, loss=2.0)
    assert excinfo.value.field == "loss"
    with pytest.raises(ParameterError) as excinfo:
        set_port_impairment(path, 5, loss=0.1)
    assert excinfo.value.field == "port" and "1, 2" in str(excinfo.value)
    status = port_status(path)[2]
    assert {key: status[key] for key in ("loss", "delay_ms", "drops")} == \
        {"loss": 0.0, "delay_ms": 0.0, "drops": 0}  # nothing was applied


def test_control_socket_is_removed_on_sigterm(make_switch):
    switch = make_switch()
    assert os.path.exists(switch.control_path)
    assert switch.stop() == 0
    assert not os.path.exists(switch.control_path)


def test_parse_request_without_a_switch():
    assert parse_request(b'{"port": 1, "loss": 0.25}', {1: "a"}) == \
        {"command": "set", "port": 1, "loss": 0.25, "delay_ms": 0.0}
    assert parse_request(b'{"command": "status"}', {1: "a"}) == {"command": "status"}
    for data, field in ((b"not json", "message"), (b"[1]", "message"), (b'{"port": true}', "port"),
                        (b'{"port": 1, "delay_ms": 1e9}', "delay_ms")):
        with pytest.raises(ValueError) as excinfo:
            parse_request(data, {1: "a"})
        assert excinfo.value.field == field


def test_a_dsf_history_request_is_checked_field_by_field():
    start = b'{"command": "dsf_history", "names": ["dsf_voq_enqueued"], "start_ns": 5, "period_us": 2000, ' \
            b'"capacity": 100}'
    assert parse_request(start, {1: "a"}) == {"command": "dsf_history", "read": False, "names": ["dsf_voq_enqueued"],
                                               "start_ns": 5, "period_ns": 2_000_000, "capacity": 100}
    assert parse_request(b'{"command": "dsf_history", "read": true}', {}) == {"command": "dsf_history", "read": True}
    for good, bad, field, allowed in ((b'"period_us": 2000', b'"period_us": 10', "period_us", "[100, 1e+06]"),
                                      (b'"capacity": 100', b'"capacity": 0', "capacity", "[1, 100000]"),
                                      (b'"start_ns": 5', b'"start_ns": -1', "start_ns", "CLOCK_MONOTONIC"),
                                      (b'["dsf_voq_enqueued"]', b'[]', "names", "counter names"),
                                      (b'"capacity": 100', b'"capacity": 100, "x": 1', "x", "names, start_ns")):
        with pytest.raises(ValueError) as excinfo:
            parse_request(start.replace(good, bad), {1: "a"})
        assert excinfo.value.field == field and allowed in excinfo.value.allowed
