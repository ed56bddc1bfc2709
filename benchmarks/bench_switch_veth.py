"""Benchmark: one P4 switch forwarding over veths, and k=4 FatTree setup time.

Run as root::

    /opt/testbed-venv/bin/python benchmarks/bench_switch_veth.py [--seconds 5] [--skip-fattree] \
        [--targets embedded,bmv2] [--backends python,native]

``--targets embedded,bmv2`` measures both in one run (BMv2 ``simple_switch_grpc`` as the testbed
starts it, no per-packet log, where it is installed) and prints their ratio; ``--backends python,native``
measures the embedded switch with each pipeline backend (testbed.p4.native) and prints native / python.
``cforwarder`` adds the machine's limit: benchmarks/c_forwarder.c (AF_XDP, no lookup) between the same
sender and receiver programs, in namespaces made with ``ip netns`` (sender -> forwarder -> receiver, the
same veth layout without Mininet); the other targets are then also printed as fractions of it.

Measures (1) packets per second forwarded by one switch running
p4src/l3_ecmp.p4 between two Mininet hosts (veth in, veth out), for 64-byte
and 1500-byte frames, with the sender blasting prebuilt frames from a raw
socket and the receiver counting on a raw socket; (2) how long a k=4 FatTree
(16 hosts, 20 embedded switches) takes from nothing to programmed (Mininet
build + switch processes ready + pipeline and routes over P4Runtime).
Sender, receiver and switch share the machine's cores, so figures are a lower
bound of the switch alone; the script prints the machine it ran on.
"""
import argparse
import os
import platform
import sys
import time

from testbed.fabrics import Fabric

PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "p4src", "l3_ecmp.p4")

COUNT = """
import socket, sys, time, select
intf, seconds = sys.argv[1], float(sys.argv[2])
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
sock.bind((intf, 0))
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
sock.settimeout(0.2)
count, first, last, end = 0, None, None, time.monotonic() + seconds
while time.monotonic() < end:
    try:
        data, addr = sock.recvfrom(65535)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    now = time.monotonic()
    first = first or now
    last = now
    count += 1
print(count, (last - first) if first and last else 0.0)
"""


def cpu_seconds(pid):
    """User + system CPU seconds process ``pid`` (all its threads) has used."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forwarding_rate(seconds, sizes, target="embedded", backend=None):
    """Return ``{size: (sent, received, received per second, switch CPU us per forwarded packet)}``.

    The switch is the only one of a one-leaf Clos, between two Mininet hosts.
    """
    results = {}
    with Fabric("clos", leaves=1, spines=1, hosts_per_leaf=2, program=PROGRAM, target=target,
                backend=backend) as fabric:
        src, dst = fabric.hosts[0], fabric.hosts[1]
        switch = fabric.switch("leaf0")
        for size in sizes:
            receiver = dst.popen([sys.executable, "-c", COUNT, dst.defaultIntf().name, str(seconds + 3)])
            time.sleep(1.0)
            cpu_before = cpu_seconds(switch.process.pid)
            sent = int(src.cmd(f"{sys.executable} -m testbed.traffic.flood --intf {src.defaultIntf().name} "
                               f"--src-mac {src.MAC()} --dst-mac {dst.MAC()} --src-ip {src.IP()} --dst-ip {dst.IP()} "
                               f"--size {size} --seconds {seconds}").split()[-1])
            out, _ = receiver.communicate(timeout=seconds + 30)
            cpu = cpu_seconds(switch.process.pid) - cpu_before
            received, span = out.split()
            received, span = int(received), float(span)
            results[size] = (sent, received, received / span if span else 0.0, 1e6 * cpu / max(received, 1))
    return results


def cforwarder_rate(seconds, sizes, method="xdp"):
    """:func:`forwarding_rate` of benchmarks/c_forwarder.c (``method``) in place of a P4 switch."""
    import shutil
    import subprocess
    import tempfile

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_io_methods import build_forwarder

    from testbed.embedded_switch.native_io.netns import VethLine

    results = {}
    directory = tempfile.mkdtemp(prefix=f"testbed-bench-{os.getpid()}-")  # testbed cleanup knows the pattern
    try:
        binary = build_forwarder(directory)
        with VethLine(prefix="tb-cf-") as line:
            forwarder = subprocess.Popen(["ip", "netns", "exec", line.switch, binary, "forward", method,
                                          line.switch_in, line.switch_out], stdout=subprocess.PIPE, text=True)
            try:
                time.sleep(0.5)
                for size in sizes:
                    receiver = subprocess.Popen(["ip", "netns", "exec", line.receiver, sys.executable, "-c", COUNT,
                                                 line.receiver_if, str(seconds + 3)], stdout=subprocess.PIPE, text=True)
                    time.sleep(1.0)
                    cpu_before = cpu_seconds(forwarder.pid)
                    sent = int(subprocess.run(
                        ["ip", "netns", "exec", line.sender, sys.executable, "-m", "testbed.traffic.flood",
                         "--intf", line.sender_if, "--src-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:02",
                         "--src-ip", "198.18.0.1", "--dst-ip", "198.18.0.2", "--size", str(size),
                         "--seconds", str(seconds)], capture_output=True, text=True, check=True).stdout.split()[-1])
                    out, _ = receiver.communicate(timeout=seconds + 30)
                    cpu = cpu_seconds(forwarder.pid) - cpu_before
                    received, span = out.split()
                    received, span = int(received), float(span)
                    results[size] = (sent, received, received / span if span else 0.0, 1e6 * cpu / max(received, 1))
            finally:
                forwarder.terminate()
                forwarder.communicate(timeout=10)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return results


def fattree_setup_seconds(target="embedded"):
    """Seconds from nothing to a programmed k=4 FatTree: (network and switches up, programmed, entries, loss %)."""
    marks = {}

    def progress(line):
        if line.startswith("controller"):
            marks["built"] = time.monotonic()

    started = time.monotonic()
    with Fabric("fattree", k=4, program=PROGRAM, target=target, progress=progress) as fabric:
        programmed = time.monotonic()
        pairs = len(fabric.hosts) * (len(fabric.hosts) - 1)
        loss = 100.0 * len(fabric.unreachable_pairs(timeout_s=3)) / pairs
        entries = fabric.controller.entries_written
    return marks["built"] - started, programmed - marks["built"], entries, loss


def main():
    """Run the benchmarks and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="sending time per frame size")
    parser.add_argument("--skip-fattree", action="store_true", help="only the forwarding rate")
    parser.add_argument("--targets", default="embedded",
                        help="comma-separated targets to measure in this run: embedded, bmv2 (bmv2 needs "
                             "simple_switch_grpc and p4c: the Vagrant VM), cforwarder (the C forwarder: the "
                             "machine's limit)")
    parser.add_argument("--backends", default="python",
                        help="comma-separated pipeline backends of the embedded switch: python, native")
    args = parser.parse_args()
    targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    if not backends or set(backends) - {"python", "native"}:
        parser.error(f"--backends: {args.backends!r}; allowed: python, native")
    unknown = sorted(set(targets) - {"embedded", "bmv2", "cforwarder"})
    if unknown or not targets:
        parser.error(f"--targets: unknown {', '.join(unknown) or '(none given)'}; allowed: embedded, bmv2, "
                     "cforwarder")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    rates, cpu = {}, {}
    runs = [(target, backend) for target in targets for backend in (backends if target == "embedded" else [None])]
    for target, backend in runs:
        label = target if backend in (None, "python") else f"{target} ({backend})"
        if target == "cforwarder":
            measured, what = cforwarder_rate(args.seconds, (64, 1500)), "C forwarder (AF_XDP, no lookup)"
        else:
            measured, what = forwarding_rate(args.seconds, (64, 1500), target, backend), f"{label} switch, l3_ecmp"
        for size, (sent, received, rate, cpu_us) in measured.items():
            rates[label, size], cpu[label, size] = rate, cpu_us
            print(f"{what}, {size:4d}-byte frames: sent {sent}, forwarded {received} "
                  f"({100.0 * received / max(sent, 1):.1f}%), {rate:,.0f} packets/s forwarded, "
                  f"{cpu_us:.1f} us of switch CPU per packet")
    for size in (64, 1500):
        if ("embedded", size) in rates and ("embedded (native)", size) in rates and rates["embedded", size]:
            print(f"{size:4d}-byte frames: embedded native / python = "
                  f"{rates['embedded (native)', size] / rates['embedded', size]:.2f}")
    for size in (64, 1500):
        if ("embedded", size) in rates and ("bmv2", size) in rates and rates["bmv2", size]:
            print(f"{size:4d}-byte frames: embedded / bmv2 = {rates['embedded', size] / rates['bmv2', size]:.2f}")
        limit = rates.get(("cforwarder", size))
        for target in ("embedded", "embedded (native)", "bmv2"):
            if limit and (target, size) in rates:
                # the Python sender and receiver bound the forwarder's rate here: its CPU per packet is
                # the better measure of the limit (benchmarks/bench_io_methods.py measures it flat out)
                print(f"{size:4d}-byte frames: {target} / C forwarder = {rates[target, size] / limit:.3f} "
                      f"in packets/s, {cpu['cforwarder', size] / max(cpu[target, size], 1e-9):.3f} in CPU per packet")
    if not args.skip_fattree:
        for target in [t for t in targets if t != "cforwarder"]:
            build, program, entries, loss = fattree_setup_seconds(target)
            print(f"k=4 FatTree (20 {target} switches, 16 hosts): Mininet + switches ready {build:.1f} s, "
                  f"pipeline + {entries} routes over P4Runtime {program:.1f} s, pingall loss {loss:.0f}%")


if __name__ == "__main__":
    main()
