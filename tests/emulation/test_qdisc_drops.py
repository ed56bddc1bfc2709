"""qdisc_drops counts each frame a shaped link's queue dropped once, with or without a leaf qdisc,
and the congestion sampler puts each drop in its interval.

A veth end gets Mininet's shaping (htb root, class 5:1) and, in the second case, the tail-drop
leaf a DSF fabric link gets (pfifo under 5:1); frames sent faster than the class's rate overflow
it.  The leaf's own counter (or, without a leaf, the root's) is the truth.  Root only: the
interfaces live in the root namespace and are removed afterwards, also on failure.
"""
import json
import os
import socket
import subprocess
import time

import pytest

from testbed.emulation.links import set_queue_frames
from testbed.emulation.network import FabricNetwork, qdisc_drops
from testbed.errors import EmulationError, ParameterError
from testbed.experiment.congestion import QueueDropSampler, interval_drops

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veths and tc)")


def tc(*argv):
    subprocess.run(["tc", *argv], check=True, capture_output=True)


def shown(dev):
    return json.loads(subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], check=True,
                                     capture_output=True, text=True).stdout)


@pytest.fixture
def veth():
    name = f"tbqd{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", f"{name}a", "type", "veth", "peer", "name", f"{name}b"], check=True)
    try:
        for end in ("a", "b"):
            subprocess.run(["ip", "link", "set", f"{name}{end}", "up"], check=True)
        yield f"{name}a"
    finally:
        subprocess.run(["ip", "link", "del", f"{name}a"], check=False, capture_output=True)


def flood(dev, frames=300):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        sock.bind((dev, 0))
        frame = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb5" + bytes(986)
        for _ in range(frames):
            try:
                sock.send(frame)
            except OSError:  # ENOBUFS: the queue refused it, which is what is counted
                pass
    finally:
        sock.close()


@pytest.mark.parametrize("leaf", [False, True], ids=["htb only", "htb with a pfifo leaf"])
def test_each_dropped_frame_counts_once(veth, leaf):
    # without a leaf, the class's default queue takes the device's queue length when it is made
    subprocess.run(["ip", "link", "set", veth, "txqueuelen", "5"], check=True)
    tc("qdisc", "add", "dev", veth, "root", "handle", "5:", "htb", "default", "1")
    tc("class", "add", "dev", veth, "parent", "5:", "classid", "5:1", "htb", "rate", "1mbit")
    if leaf:
        tc("qdisc", "add", "dev", veth, "parent", "5:1", "handle", "10:", "pfifo", "limit", "5")
    flood(veth)
    qdiscs = shown(veth)
    truth = next(q for q in qdiscs if q.get("parent") == "5:1" or not leaf and q.get("root"))["drops"]
    assert truth > 200  # 300 frames of 1000 bytes into a 1 Mbit/s class with 5 frames of room
    assert qdisc_drops([veth]) == {veth: truth}
    assert qdisc_drops()[veth] == truth
    assert qdisc_drops(["tbqd-none"]) == {"tbqd-none": 0}


def test_the_sampler_puts_each_drop_in_the_interval_it_happened(veth):
    subprocess.run(["ip", "link", "set", veth, "txqueuelen", "5"], check=True)
    tc("qdisc", "add", "dev", veth, "root", "handle", "5:", "htb", "default", "1")
    tc("class", "add", "dev", veth, "parent", "5:", "classid", "5:1", "htb", "rate", "1mbit")
    sampler = QueueDropSampler(lambda: qdisc_drops([veth]), interval_s=0.1)
    t0_ns = time.time_ns()
    sampler.start(t0_ns)
    try:
        time.sleep(0.3)  # quiet intervals first
        flood(veth)
        time.sleep(0.3)
    finally:
        sampler.stop()
    sampler.stop()  # a second stop changes nothing
    ends, drops = interval_drops(sampler.samples, t0_ns)
    assert sum(drops) == qdisc_drops([veth])[veth] > 200
    assert len(ends) >= 6 and ends == sorted(ends)
    assert drops[0] == 0 and drops[-1] == 0  # nothing before the flood, nothing once it was over
    assert max(drops) >= sum(drops) / 2  # the flood lasts well under an interval: one or two intervals hold it


class RootShell:
    """A node whose shell is this machine's root namespace (what set_queue_frames needs of a Mininet node)."""

    @staticmethod
    def cmd(line):
        result = subprocess.run(line, shell=True, capture_output=True, text=True)
        return result.stdout + result.stderr


def test_a_set_queue_length_is_where_the_link_starts_dropping(veth):
    tc("qdisc", "add", "dev", veth, "root", "handle", "5:", "htb", "default", "1")
    tc("class", "add", "dev", veth, "parent", "5:", "classid", "5:1", "htb", "rate", "1mbit")
    set_queue_frames([(RootShell(), veth)], 20)
    leaf = next(q for q in shown(veth) if q.get("parent") == "5:1")
    assert leaf["kind"] == "pfifo" and leaf["options"]["limit"] == 20
    flood(veth, frames=100)
    leaf = next(q for q in shown(veth) if q.get("parent") == "5:1")
    # 1 Mbit/s passes about one 1000-byte frame in 8 ms: nearly all beyond the 20 queued are dropped
    assert leaf["qlen"] <= 20 and leaf["drops"] >= 100 - 20 - leaf["packets"] > 0
    assert qdisc_drops([veth])[veth] == leaf["drops"]
    with pytest.raises(EmulationError, match="tbqd-none"):
        set_queue_frames([(RootShell(), "tbqd-none")], 20)


def test_a_queue_length_needs_shaped_links():
    from testbed.topologies.clos import ClosTopo

    topo = ClosTopo(leaves=1, spines=1, hosts_per_leaf=1)
    with pytest.raises(ParameterError, match="queue_frames.*only with shape_links"):
        FabricNetwork(topo, queue_frames=64)
    with pytest.raises(ParameterError, match=r"queue_frames.*\[1, 100000\]"):
        FabricNetwork(topo, shape_links=True, queue_frames=0)


@pytest.mark.mininet
@pytest.mark.bmv2
def test_bmv2s_queues_are_named_as_not_read(tmp_path):
    """BMv2's ports are in its namespaces, where the root namespace's tc does not see their queues:
    queue_drops leaves them out and switch_interfaces(in_namespace=True) names them (results record them)."""
    from testbed.topologies.clos import ClosTopo

    network = FabricNetwork(ClosTopo(leaves=2, spines=1, hosts_per_leaf=1), switch="bmv2", shape_links=True,
                            log_dir=str(tmp_path))
    network.start()
    try:
        ports = network.switch_interfaces()
        assert len(ports) == 6 and sorted(network.switch_interfaces(in_namespace=True)) == sorted(ports)
        assert network.switch_interfaces(in_namespace=False) == [] and network.queue_drops() == {}
    finally:
        network.stop()
