"""Packets per second of one sender process and one receiver process on this machine.

Run as root::

    /opt/testbed-venv/bin/python benchmarks/bench_traffic.py [--seconds 3] [--json out.json]

It creates two network namespaces joined by a veth pair (names ``tbbench*``
with this process id; removed afterwards, also on errors and Ctrl-C) and
measures:

* ``prebuilt_send_pps``: frames built once (Scapy templates, all per-packet
  fields already patched) sent from a list in a tight loop on the raw socket;
* ``sender_pps``: the real sender (``testbed.traffic.sender``), which patches
  PSN, payload header and timestamp and recomputes the ICRC per packet;
* ``receiver_pps``: packets the receiver (``testbed.traffic.receiver``, UDP
  capture) accounted per second of its active time while the real sender
  floods it, and how many it lost (its socket buffer overflowing);
  ``receiver_pps_under_prebuilt_flood``: the same against the faster
  prebuilt-frame loop, whose repeated PSNs the receiver accounts as
  duplicates (a cheaper path); its limit shows as
  ``receiver_dropped_under_prebuilt_flood``;
* ``receiver_handle_pps``: the receiver's accounting alone, in process, on
  prebuilt packets (no socket);
* ``raw_job_receiver_pps``: the receiver on a raw socket with the kernel job
  filter (what collective agents and streams use), against the real sender.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from testbed.traffic import qp, roce
from testbed.traffic.receiver import RoceReceiver
from testbed.traffic.sender import Endpoint, FrameFactory

SRC_IP, DST_IP = "10.250.0.1", "10.250.0.2"


def sh(*argv, check=True):
    """Run a command, return stdout."""
    return subprocess.run(argv, check=check, capture_output=True, text=True).stdout


class VethPair:
    """Two namespaces joined by a veth pair; a context manager that always cleans up."""

    def __init__(self):
        tag = f"tbbench{os.getpid() % 100000}"
        self.ns_a, self.ns_b = f"{tag}a", f"{tag}b"
        self.if_a, self.if_b = f"{tag}a0", f"{tag}b0"

    def __enter__(self):
        try:
            sh("ip", "netns", "add", self.ns_a)
            sh("ip", "netns", "add", self.ns_b)
            sh("ip", "link", "add", self.if_a, "type", "veth", "peer", "name", self.if_b)
            sh("ip", "link", "set", self.if_a, "netns", self.ns_a)
            sh("ip", "link", "set", self.if_b, "netns", self.ns_b)
            sh("ip", "-n", self.ns_a, "addr", "add", SRC_IP + "/24", "dev", self.if_a)
            sh("ip", "-n", self.ns_b, "addr", "add", DST_IP + "/24", "dev", self.if_b)
            sh("ip", "-n", self.ns_a, "link", "set", self.if_a, "up")
            sh("ip", "-n", self.ns_b, "link", "set", self.if_b, "up")
            self.mac_b = sh("ip", "netns", "exec", self.ns_b, "cat", f"/sys/class/net/{self.if_b}/address").strip()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        sh("ip", "netns", "del", self.ns_a, check=False)  # deleting the namespace deletes the veth
        sh("ip", "netns", "del", self.ns_b, check=False)
        return False

    def run(self, namespace, argv, **kwargs):
        """Start ``argv`` inside ``namespace``; returns the Popen object."""
        return subprocess.Popen(["ip", "netns", "exec", namespace] + argv, **kwargs)


PREBUILT_SCRIPT = r"""
import socket, sys, time
from testbed.traffic import qp, roce
from testbed.traffic.sender import Endpoint, FrameFactory, Transfer, open_raw_socket
intf, dst_mac, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
sock, mac = open_raw_socket(intf)
src, dst = Endpoint(0, "%s", mac), Endpoint(1, "%s", dst_mac)
pairs = qp.make_queue_pairs(0, 1, 4)
transfer = Transfer(src, dst, pairs, 0, [64 * 1024] * 64)
factory = FrameFactory(mac, src.ip)
frames = []
for spec in qp.interleave(transfer.packet_queues()):
    patcher = factory.patcher(dst.mac, dst.ip, spec.qp, spec.payload_length, spec.opcode)
    header = roce.pack_header(0, 0, spec.msg_id, spec.seq, time.time_ns(), spec.msg_bytes, spec.offset)
    reth = roce.pack_reth(spec.qp.remote_qpn, spec.msg_bytes) if patcher.with_reth else None
    frames.append(patcher.frame(spec.opcode, spec.psn, header, spec.ackreq, reth))
send = sock.send
count = 0
end = time.perf_counter() + seconds
start = time.perf_counter()
while time.perf_counter() < end:
    for frame in frames:
        send(frame)
    count += len(frames)
elapsed = time.perf_counter() - start
print(count, count / elapsed)
""" % (SRC_IP, DST_IP)


def bench_handle(count=100_000):
    """Receiver accounting speed without sockets (packets/s), on distinct in-order packets."""
    src = Endpoint(0, SRC_IP, "00:00:00:00:00:01")
    dst = Endpoint(1, DST_IP, "00:00:00:00:00:02")
    pair = qp.make_queue_pairs(0, 1, 1)[0]
    patcher = FrameFactory(src.mac, src.ip).patcher(dst.mac, dst.ip, pair, 1024)
    payloads = [patcher.frame(roce.OP_RDMA_WRITE_MIDDLE, pair.next_psn + i,
                              roce.pack_header(0, 0, i // 64, i, time.time_ns(), 64 * 1024, (i % 64) * 1024))
                [roce.BTH_OFFSET:] for i in range(count)]
    receiver = RoceReceiver()
    handle = receiver.handle
    start = time.perf_counter()
    for payload in payloads:
        handle(SRC_IP, payload)
    elapsed = time.perf_counter() - start
    assert receiver.totals()["received"] == count
    return count / elapsed


def run_receiver_during(veth, workdir, python, name, load, capture=()):
    """Start a receiver in namespace B, run ``load()`` (the sender), return the receiver's report."""
    rx_json = os.path.join(workdir, f"rx-{name}.json")
    ready = os.path.join(workdir, f"ready-{name}")
    receiver = veth.run(veth.ns_b, [python, "-m", "testbed.traffic.receiver", "--idle-timeout", "1.0",
                                    "--ready-file", ready, "--json", rx_json] + list(capture))
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            if time.monotonic() > deadline or receiver.poll() is not None:
                raise RuntimeError("receiver did not start")
            time.sleep(0.05)
        load()
        receiver.wait(timeout=60)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    with open(rx_json) as handle:
        return json.load(handle)


def main(argv=None):
    """Run the benchmarks; print (and optionally save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    python = sys.executable
    results = {"receiver_handle_pps": round(bench_handle())}
    with VethPair() as veth, tempfile.TemporaryDirectory() as workdir:
        prebuilt = {}

        def flood_prebuilt():
            out = subprocess.run(["ip", "netns", "exec", veth.ns_a, python, "-c", PREBUILT_SCRIPT, veth.if_a,
                                  veth.mac_b, str(args.seconds)], check=True, capture_output=True, text=True)
            count, pps = out.stdout.split()
            prebuilt.update(count=int(count), pps=float(pps))

        rx = run_receiver_during(veth, workdir, python, "prebuilt", flood_prebuilt)
        active = (rx["last_rx_ns"] - rx["first_rx_ns"]) / 1e9
        # the prebuilt list repeats, so the receiver sees its PSNs again as duplicates: count both
        accounted = rx["totals"]["received"] + rx["totals"]["duplicates"]
        results.update({"prebuilt_send_pps": round(prebuilt["pps"]), "prebuilt_sent": prebuilt["count"],
                        # over the sender's sending time (the receiver's own last-arrival
                        # stamp only moves on new PSNs); duplicates are cheaper to account
                        "receiver_pps_under_prebuilt_flood": round(accounted / (prebuilt["count"] / prebuilt["pps"])),
                        "receiver_dropped_under_prebuilt_flood": prebuilt["count"] - accounted})
        tx_json = os.path.join(workdir, "tx.json")

        def run_sender():
            subprocess.run(["ip", "netns", "exec", veth.ns_a, python, "-m", "testbed.traffic.sender", "--intf",
                            veth.if_a, "--dst-ip", DST_IP, "--dst-mac", veth.mac_b, "--size", "65536", "--qps",
                            "4", "--duration", str(args.seconds), "--json", tx_json], check=True)

        rx = run_receiver_during(veth, workdir, python, "sender", run_sender)
        with open(tx_json) as handle:
            tx = json.load(handle)
        active = (rx["last_rx_ns"] - rx["first_rx_ns"]) / 1e9
        results.update({
            "sender_pps": round(tx["pps"]), "sender_mbps": round(tx["rate_mbps"], 1),
            "receiver_pps": round(rx["totals"]["received"] / active),
            "receiver_received": rx["totals"]["received"], "sender_sent": tx["packets"],
            "receiver_lost": tx["packets"] - rx["totals"]["received"],
            "frame_bytes": 1024 + roce.FRAME_OVERHEAD, "cpus": os.cpu_count(),
        })
        rx = run_receiver_during(veth, workdir, python, "raw", run_sender,
                                 capture=("--capture", "raw", "--intf", veth.if_b, "--job", "0"))
        with open(tx_json) as handle:
            tx = json.load(handle)
        active = (rx["last_rx_ns"] - rx["first_rx_ns"]) / 1e9
        results.update({"raw_job_receiver_pps": round(rx["totals"]["received"] / active),
                        "raw_job_receiver_lost": tx["packets"] - rx["totals"]["received"],
                        "raw_sender_pps": round(tx["pps"])})
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
