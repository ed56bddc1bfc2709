"""RoCEv2 streams on a Mininet Linux-bridge fabric, pcaps dissected by tshark, and the CLI.

The Mininet tests (``@pytest.mark.mininet``) need root; their nodes are named
``tth*`` / ``tts*`` so they never collide with other Mininet tests running in
parallel on the same machine (never ``mn -c`` here).  The CLI option checks at
the top need no network.
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from bridge_fabric import two_bridges
from testbed import cli
from testbed.errors import EmulationError, ParameterError
from testbed.traffic import hosts as host_module
from testbed.traffic import metrics, roce, streams

PREFIX = "tt"


# -- CLI option checks (no network) -------------------------------------------------------------

def run_cli(argv):
    parser = cli.build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("argv, option", [
    (["traffic", "ringreduce", "--hosts", "h1,h2"], "PATTERN"),
    (["traffic", "allreduce", "--hosts", "h1,h2", "--rate-mbps", "0"], "--rate-mbps"),
    (["traffic", "allreduce", "--hosts", "h1,h2", "--rate-mbps", "-1"], "--rate-mbps"),
    (["traffic", "allreduce", "--hosts", "h1,h2", "--size", "0"], "--size"),
    (["traffic", "allreduce", "--hosts", "h1,h2", "--qps", "0"], "--qps"),
    (["traffic", "allreduce", "--hosts", "h1,h2", "--qp-scaling", "hash"], "--qp-scaling"),
    (["traffic", "allreduce", "--hosts", "h1"], "--hosts"),
    (["traffic", "stream", "--hosts", "h1,h2", "--duration", "0"], "--duration"),
])
def test_cli_refuses_bad_options_naming_them(argv, option, tmp_path):
    with pytest.raises(ParameterError) as caught:
        run_cli(argv + ["--state-file", str(tmp_path / "none.json")])
    assert caught.value.field == option


def test_cli_reports_errors_on_one_line(tmp_path, capsys):
    status = cli.main(["traffic", "alltoall", "--hosts", "h1,h2", "--size", "0", "--state-file", str(tmp_path / "x")])
    assert status == 2
    assert "--size" in capsys.readouterr().err


def test_cli_without_a_running_fabric_says_so(tmp_path):
    with pytest.raises(EmulationError, match="testbed net up"):
        run_cli(["traffic", "alltoall", "--hosts", "h1,h2", "--state-file", str(tmp_path / "missing.json")])


def test_state_file_host_not_in_fabric_is_refused(tmp_path):
    state = tmp_path / "net.json"
    me = {"pid": os.getpid(), "ip": "10.0.0.1/8", "mac": "00:00:00:00:00:01", "intf": "h1-eth0"}
    state.write_text(json.dumps({"hosts": {"h1": me, "h2": dict(me, ip="10.0.0.2")}}))
    handles = host_module.load_state(str(state))
    assert handles["h1"].ip == "10.0.0.1" and handles["h2"].intf == "h1-eth0"
    with pytest.raises(ParameterError) as caught:
        run_cli(["traffic", "alltoall", "--hosts", "h1,h9", "--state-file", str(state)])
    assert caught.value.field == "--hosts" and caught.value.value == "h9"


# -- Mininet fabric -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fabric():
    """Four hosts on two Linux bridges: tth1, tth2 on tts1; tth3, tth4 on tts2; tts1-tts2."""
    with two_bridges(PREFIX, 4) as net:
        yield net


def handles(net, *numbers):
    return [host_module.from_mininet(net.get(f"{PREFIX}h{n}")) for n in numbers]


@pytest.mark.mininet
def test_streams_on_a_healthy_fabric_lose_nothing(fabric):
    report = streams.run_streams(handles(fabric, 1, 3, 2, 4), duration=1.0, qps=4, rate_mbps=40.0,
                                 size=256 * 1024, linger=0.5)
    assert report["sent_packets"] > 4000
    assert report["received_packets"] == report["sent_packets"]
    assert report["lost_packets"] == 0 and report["psn_gap_losses"] == 0 and report["duplicates"] == 0
    assert 20 < report["goodput_mbps"] < 100  # 2 x 40 Mbit/s of frames; lower bound loose for a loaded machine
    for pair in report["pairs"]:
        rx = pair["receiver"]
        assert len(rx["per_qp"]) == 4
        assert rx["latency_ns"]["count"] == rx["totals"]["received"] and rx["latency_ns"]["p50"] > 0
        assert rx["timeline"]["bins"] and rx["message_completion_ns"]["count"] > 0
        window = metrics.loss_in_window(pair["sender"]["sent_bins"], rx["rx_by_tx_bin"], rx["timeline"]["bin_ns"],
                                        0, 1 << 62)
        assert window["sent"] == pair["sender"]["packets"] and window["lost"] == 0


@pytest.mark.mininet
def test_link_down_mid_run_counts_loss_and_reports_recovery(fabric):
    times = {}
    timers = []

    def on_start(start_ns):
        def down():
            times["down"] = time.time_ns()
            fabric.configLinkStatus(f"{PREFIX}s1", f"{PREFIX}s2", "down")

        def up():
            fabric.configLinkStatus(f"{PREFIX}s1", f"{PREFIX}s2", "up")
            times["up"] = time.time_ns()

        timers.extend([threading.Timer(1.0, down), threading.Timer(1.5, up)])
        for timer in timers:
            timer.start()

    try:
        report = streams.run_streams(handles(fabric, 1, 3), duration=2.5, qps=2, rate_mbps=40.0, linger=0.5,
                                     on_start=on_start)
    finally:
        for timer in timers:
            timer.join()
        fabric.configLinkStatus(f"{PREFIX}s1", f"{PREFIX}s2", "up")
    down_s = (times["up"] - times["down"]) / 1e9
    assert report["lost_packets"] > 0
    assert report["psn_gap_losses"] == report["lost_packets"]  # the receiver saw every loss as a PSN gap
    assert report["out_of_sequence"] >= 1
    expected_loss = 40e6 / 8 / (1024 + roce.FRAME_OVERHEAD) * down_s
    assert 0.3 * expected_loss < report["lost_packets"] < 1.4 * expected_loss  # about rate x outage
    recovery = metrics.time_to_recover(report["gaps"], times["down"])
    assert recovery is not None
    assert recovery["resumed_ns"] >= times["up"] - 5_000_000  # delivery resumed once the link was up
    assert down_s - 0.05 < recovery["seconds"] < down_s + 0.3
    pair = report["pairs"][0]
    rx = pair["receiver"]
    window = metrics.loss_in_window(pair["sender"]["sent_bins"], rx["rx_by_tx_bin"], rx["timeline"]["bin_ns"],
                                    times["down"] + 20_000_000, times["up"] - 20_000_000)
    assert window["sent"] > 0 and window["loss_rate"] == 1.0
    after = metrics.loss_in_window(pair["sender"]["sent_bins"], rx["rx_by_tx_bin"], rx["timeline"]["bin_ns"],
                                   times["up"] + 50_000_000, 1 << 62)
    assert after["sent"] > 0 and after["lost"] == 0


@pytest.mark.mininet
def test_raw_capture_receiver_checks_icrc_and_sees_dscp(fabric, tmp_path):
    sender_host, receiver_host = fabric.get(f"{PREFIX}h1"), fabric.get(f"{PREFIX}h2")
    ready, rx_json = tmp_path / "ready", tmp_path / "rx.json"
    receiver = receiver_host.popen([sys.executable, "-m", "testbed.traffic.receiver", "--capture", "raw", "--intf",
                                    f"{PREFIX}h2-eth0", "--check-icrc", "--idle-timeout", "1.0", "--ready-file",
                                    str(ready), "--json", str(rx_json)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline and receiver.poll() is None, receiver.stderr.read()
            time.sleep(0.05)
        sender = sender_host.popen([sys.executable, "-m", "testbed.traffic.sender", "--intf", f"{PREFIX}h1-eth0",
                                    "--dst-ip", receiver_host.IP(), "--dst-mac", receiver_host.MAC(), "--size",
                                    "100000", "--messages", "6", "--qps", "3", "--rate-mbps", "100", "--json",
                                    str(tmp_path / "tx.json")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert sender.wait(timeout=30) == 0, sender.stderr.read()
        sender.stderr.close()
        assert receiver.wait(timeout=30) == 0, receiver.stderr.read()
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
        receiver.stderr.close()
    tx = json.loads((tmp_path / "tx.json").read_text())
    rx = json.loads(rx_json.read_text())
    assert tx["src_ip"] == sender_host.IP()  # found from the interface
    assert rx["totals"]["received"] == tx["packets"] == 6 * 98 and rx["icrc_errors"] == 0
    assert rx["totals"]["messages_done"] == 6 and rx["totals"]["bytes"] == 600000
    assert len(rx["per_qp"]) == 3
    assert rx["dscp_counts"] == {str(roce.DSCP_DATA): tx["packets"]}


@pytest.mark.mininet
@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark not installed (scapy dissection is tested anyway)")
def test_pcap_of_the_traffic_dissects_as_roce_in_tshark(fabric, tmp_path):
    sender_host, receiver_host = fabric.get(f"{PREFIX}h1"), fabric.get(f"{PREFIX}h2")
    pcap = tmp_path / "roce.pcap"
    capture = receiver_host.popen(["tcpdump", "-i", f"{PREFIX}h2-eth0", "-w", str(pcap), "-U",
                                   "udp", "port", "4791"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not pcap.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        sender = sender_host.popen([sys.executable, "-m", "testbed.traffic.sender", "--intf", f"{PREFIX}h1-eth0",
                                    "--dst-ip", receiver_host.IP(), "--dst-mac", receiver_host.MAC(),
                                    "--size", "5000", "--messages", "2", "--qps", "2", "--start-psn",
                                    str((1 << 24) - 3), "--json", str(tmp_path / "tx.json")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert sender.wait(timeout=30) == 0, sender.stderr.read()
        sender.stderr.close()
        time.sleep(0.5)
        capture.terminate()  # tcpdump writes out what it captured on SIGTERM
        capture.wait(timeout=10)
    finally:
        if capture.poll() is None:
            capture.kill()
            capture.wait()
        capture.stderr.close()
    fields = ["frame.protocols", "ip.dsfield.dscp", "udp.dstport", "infiniband.bth.opcode",
              "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.reth.dmalen", "infiniband.invariant.crc"]
    command = ["tshark", "-r", str(pcap), "-T", "fields"] + [arg for f in fields for arg in ("-e", f)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    rows = [line.split("\t") for line in out.strip().splitlines()]
    assert len(rows) == 10  # 2 messages x 5 packets (5000 bytes at MTU 1024)
    from scapy.utils import rdpcap

    frames = [bytes(p) for p in rdpcap(str(pcap))]
    by_qp = {}
    for row, frame in zip(rows, frames):
        protocols, dscp, dport, opcode, destqp, psn, dmalen, crc = row
        assert protocols.endswith("udp:infiniband:data")
        assert int(dscp) == roce.DSCP_DATA and int(dport) == 4791
        parsed = roce.parse_frame(frame)
        assert parsed.icrc_ok and int(crc, 16) == int.from_bytes(frame[-4:], "big")
        assert (int(opcode), int(destqp, 16), int(psn)) == (parsed.opcode, parsed.dqpn, parsed.psn)
        if parsed.opcode in (roce.OP_RDMA_WRITE_FIRST, roce.OP_RDMA_WRITE_ONLY):
            assert int(dmalen) == 5000
        by_qp.setdefault(parsed.dqpn, []).append((int(opcode), int(psn)))
    assert len(by_qp) == 2
    for packets in by_qp.values():
        assert [op for op, _ in packets] == [6, 7, 7, 7, 8]
        assert [psn for _, psn in packets] == [(1 << 24) - 3, (1 << 24) - 2, (1 << 24) - 1, 0, 1]


@pytest.mark.mininet
def test_cli_runs_a_collective_on_the_running_fabric(fabric, tmp_path):
    state = tmp_path / "net.json"
    state.write_text(json.dumps({"hosts": {
        h.name: {"pid": h.pid, "ip": h.IP(), "mac": h.MAC(), "intf": str(h.defaultIntf())} for h in fabric.hosts}}))
    out = tmp_path / "report.json"
    names = ",".join(f"{PREFIX}h{i}" for i in range(1, 5))
    status = cli.main(["traffic", "alltoall", "--hosts", names, "--size", "262144", "--qps", "2",
                       "--rate-mbps", "50", "--state-file", str(state), "--json", str(out)])
    assert status == 0
    report = json.loads(out.read_text())
    assert report["complete"] and report["lost_packets"] == 0 and report["missing_bytes"] == 0
    assert report["completion_time_s"] > 0 and report["hosts"] == names.split(",")
    status = cli.main(["traffic", "stream", "--hosts", f"{PREFIX}h1,{PREFIX}h4", "--duration", "0.5",
                       "--rate-mbps", "20", "--state-file", str(state), "--json", str(out)])
    assert status == 0
    report = json.loads(out.read_text())
    assert report["lost_packets"] == 0 and report["sent_packets"] > 0
    with pytest.raises(ParameterError):
        run_cli(["traffic", "alltoall", "--hosts", f"{PREFIX}h1,h99", "--state-file", str(state)])


BPF_PROBE = r"""
import json, select, socket, sys
from testbed.traffic.receiver import attach_filter, job_filter_program
intf, job = sys.argv[1], int(sys.argv[2])
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
attach_filter(sock, job_filter_program(job))
sock.bind((intf, 0x0800))
print("ready", flush=True)
jobs = {}
while select.select([sock], [], [], 2.0)[0]:
    frame = sock.recv(65536)
    top = frame[14 + (frame[14] & 15) * 4 + 8 + 5]
    jobs[str(top)] = jobs.get(str(top), 0) + 1
print(json.dumps(jobs), flush=True)
"""


@pytest.mark.mininet
def test_kernel_filter_keeps_only_the_jobs_packets(fabric, tmp_path):
    sender_host, receiver_host = fabric.get(f"{PREFIX}h1"), fabric.get(f"{PREFIX}h2")
    probe = receiver_host.popen([sys.executable, "-c", BPF_PROBE, f"{PREFIX}h2-eth0", "7"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert probe.stdout.readline().strip() == "ready", probe.stderr.read()
        for job in (7, 9, 7):
            sender = sender_host.popen([sys.executable, "-m", "testbed.traffic.sender", "--intf",
                                        f"{PREFIX}h1-eth0", "--dst-ip", receiver_host.IP(), "--dst-mac",
                                        receiver_host.MAC(), "--size", "10240", "--messages", "1", "--job",
                                        str(job), "--json", str(tmp_path / f"tx{job}.json")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert sender.wait(timeout=30) == 0, sender.stderr.read()
            sender.stderr.close()
        counts = json.loads(probe.stdout.readline())
        probe.wait(timeout=10)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
        probe.stdout.close()
        probe.stderr.close()
    assert counts == {"7": 20}  # two runs of 10 packets of job 7; job 9's 10 packets filtered in the kernel


@pytest.mark.mininet
def test_two_jobs_share_a_receiving_host(fabric):
    results = {}

    def run(name, src, dst):
        results[name] = streams.run_streams(handles(fabric, src, dst), duration=1.0, qps=2, rate_mbps=20.0,
                                            linger=0.5)

    threads = [threading.Thread(target=run, args=("a", 1, 3)), threading.Thread(target=run, args=("b", 2, 3))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results["a"]["options"]["job"] != results["b"]["options"]["job"]
    for name, src in (("a", 1), ("b", 2)):
        report = results[name]
        assert report["lost_packets"] == 0 and report["received_packets"] == report["sent_packets"] > 1000
        rx = report["pairs"][0]["receiver"]
        assert {entry["src"] for entry in rx["per_qp"]} == {fabric.get(f"{PREFIX}h{src}").IP()}
        assert rx["foreign_packets"] == 0
