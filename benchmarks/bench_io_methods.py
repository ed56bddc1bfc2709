"""Benchmark: packet I/O methods for the switch's native packet loop, compared in one run over veths.

Run as root::

    /opt/testbed-venv/bin/python benchmarks/bench_io_methods.py [--seconds 4] [--methods mmsg,ring,ringmmsg,xdp]

The layout is the one of benchmarks/bench_switch_veth.py: a sender namespace, a switch namespace
and a receiver namespace joined by two veth pairs.  In the switch namespace runs
benchmarks/c_forwarder.c (built here with gcc): frames in on one veth, out of the other, no lookup,
with one of the methods

* ``mmsg``: recvmmsg / sendmmsg on AF_PACKET sockets;
* ``ring``: PACKET_MMAP TPACKET_V3 receive ring and transmit ring;
* ``ringmmsg``: TPACKET_V3 receive ring, sendmmsg from the ring's blocks;
* ``xdp``: AF_XDP sockets (copy mode) behind a five-instruction XDP program loaded with bpf();
* ``loop``: the switch's native packet loop (testbed.embedded_switch.native_io: AF_XDP, the
  traffic manager, pipeline calls) with the tests' fixed-port-map pipeline, so the loop's own
  cost against the bare forwarder.

For each method and for 64- and 1500-byte frames it reports

* the forwarded packets/s with the sender (also C, sendmmsg, pinned to CPU 0) flat out, the
  forwarder pinned to CPU 1, and the forwarder's CPU microseconds (user + system) per packet;
* the rate under overload: the forwarder's CPU is capped (cgroup v1 ``cpu.cfs_quota_us``) so that
  the sender offers at least 10x what it can forward; its peak is its best rate under the same cap
  with the sender paced above that (1.2x and 3x); "overload / peak" must stay >= 90% (no receive
  livelock);
* idle CPU: the forwarder's CPU share with no traffic (no busy polling: ~0);
* the forwarder's proportional set size after forwarding (for ``loop``: a Python process with the
  loop's library, two ports with rings of 1024);
* one-way delay at 1,000 packets/s (median and 99th percentile, sender to receiver socket), which
  shows what TPACKET_V3's block retirement costs at low rates.

Packets are counted at the receiver's veth (``rx_packets``), so no receiving process competes for
the cores.  The machine is shared: the script prints its load average; compare figures as ratios
within one run.
"""
import argparse
import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from testbed.embedded_switch import native_io
from testbed.embedded_switch.native_io.netns import VethLine

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "c_forwarder.c")
FIXTURE = os.path.join(os.path.dirname(HERE), "tests", "native_io", "fixture_pipeline.c")
METHODS = ("mmsg", "ring", "ringmmsg", "xdp", "loop")

# The switch's native loop (AF_XDP, traffic manager, batched send) with the tests' fixed-port-map
# pipeline (tests/native_io/fixture_pipeline.c: no lookup, like the forwarder): the loop's own cost.
LOOP = """
import signal, sys, cffi
from testbed.embedded_switch import native_io
library, port_in, port_out = sys.argv[1:4]
ffi = cffi.FFI()
ffi.cdef("void *tb_pipeline_new(void);")
pipeline = ffi.dlopen(library).tb_pipeline_new()
loop = native_io.NativeLoop({1: port_in, 2: port_out}, ring_size=1024)
loop.set_pipeline(library, pipeline)
running = [True]
signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
print("ready", flush=True)
while running[0]:
    loop.run(200)
stats = loop.port_stats(2)
print("forwarded", stats["tx_packets"], "dropped_by_kernel", loop.port_stats(1)["kernel_drops"], flush=True)
loop.close()
"""
SIZES = (64, 1500)
CGROUP_CPU = "/sys/fs/cgroup/cpu"


def build_forwarder(directory):
    """Compile benchmarks/c_forwarder.c into ``directory``; return the executable's path.

    Raises:
        subprocess.CalledProcessError: gcc failed (its message is on stderr).
    """
    digest = hashlib.sha256()
    for source in (SOURCE, os.path.join(os.path.dirname(native_io.__file__), "xsk.h")):
        with open(source, "rb") as handle:
            digest.update(handle.read())
    digest = digest.hexdigest()[:16]
    path = os.path.join(directory, f"c_forwarder-{digest}")
    if not os.path.exists(path):
        subprocess.run(["gcc", "-O2", "-o", path, SOURCE], check=True)
    return path


def build_fixture(directory):
    """Compile the tests' fixed-port-map pipeline into ``directory``; return the shared object's path."""
    path = os.path.join(directory, "fixture_pipeline.so")
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", f'-DTB_PIPELINE_HEADER="{native_io.pipeline_header()}"',
                    "-o", path, FIXTURE], check=True)
    return path


class Binary(str):
    """The forwarder's path, with ``fixture``: the fixture pipeline's for the ``loop`` method."""

    fixture = None


def _in(namespace, *command):
    return subprocess.run(["ip", "netns", "exec", namespace, *command], check=True, capture_output=True,
                          text=True).stdout


def cpu_seconds(pid):
    """User + system CPU seconds process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def cpu_cap(fraction):
    """A cgroup v1 cpu group limited to ``fraction`` of one core (None: no group); yields its tasks file."""
    if fraction is None:
        yield None
        return
    path = os.path.join(CGROUP_CPU, f"tbio-bench-{os.getpid()}")
    os.mkdir(path)
    try:
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as handle:
            handle.write("100000")
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as handle:
            handle.write(str(max(1000, int(100000 * fraction))))
        yield os.path.join(path, "tasks")
    finally:
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.1)  # the forwarder is still leaving the group


@contextlib.contextmanager
def forwarder(binary, line, method, tasks_file=None):
    """Run the forwarder (``loop``: the native loop) in the switch namespace, pinned to CPU 1; yield its process."""
    if method == "loop":
        command = [sys.executable, "-c", LOOP, binary.fixture]
    else:
        command = [binary, "forward", method]
    process = subprocess.Popen(["ip", "netns", "exec", line.switch, "taskset", "-c", "1", *command, line.switch_in,
                                line.switch_out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if method == "loop":
            process.stdout.readline()  # "ready", or nothing when it failed
        time.sleep(0.3)
        if process.poll() is not None:
            raise RuntimeError(f"forwarder {method} failed: {process.stderr.read().strip()}")
        if tasks_file:
            with open(tasks_file, "w") as handle:
                handle.write(str(process.pid))
        yield process
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
        process.summary = out.strip() or err.strip()


def send(binary, line, size, seconds, rate=0):
    """Run the sender (pinned to CPU 0) for ``seconds``; return the number of frames it sent."""
    out = _in(line.sender, "taskset", "-c", "0", binary, "send", line.sender_if, str(size), str(seconds),
              str(rate))
    return int(out.split()[-1])


def pss_kib(pid):
    """Proportional set size of process ``pid`` in KiB."""
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for text in handle:
            if text.startswith("Pss:"):
                return int(text.split()[1])
    return 0


def forwarding(binary, line, method, size, seconds, rate=0, cap=None):
    """Return ``(sent per s, forwarded per s, forwarder CPU us per forwarded packet, forwarder PSS KiB)``."""
    with cpu_cap(cap) as tasks, forwarder(binary, line, method, tasks) as process:
        before, cpu_before, started = line.received(), cpu_seconds(process.pid), time.monotonic()
        sent = send(binary, line, size, seconds, rate)
        time.sleep(0.1)  # the last frames in flight
        span = time.monotonic() - started
        received, cpu = line.received() - before, cpu_seconds(process.pid) - cpu_before
        pss = pss_kib(process.pid)
    return sent / seconds, received / span, 1e6 * cpu / max(received, 1), pss


def idle_cpu_percent(binary, line, method, seconds):
    """Percent of a core the forwarder uses with no traffic for ``seconds``."""
    with forwarder(binary, line, method) as process:
        before = cpu_seconds(process.pid)
        time.sleep(seconds)
        return 100.0 * (cpu_seconds(process.pid) - before) / seconds


def latency_us(binary, line, method, rate=1000, count=1000):
    """Median and 99th percentile one-way delay (us) of stamped frames at ``rate`` frames/s."""
    with forwarder(binary, line, method):
        receiver = subprocess.Popen(["ip", "netns", "exec", line.receiver, binary, "latency", line.receiver_if,
                                     str(count), str(count / rate + 3)], stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        send(binary, line, 64, count / rate + 0.5, rate)
        out, _ = receiver.communicate(timeout=count / rate + 10)
    n, median, p99 = out.split()
    return int(n), float(median), float(p99)


def main():
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="sending time of each measurement")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        parser.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; allowed: {', '.join(METHODS)}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
          f"load average {os.getloadavg()[0]:.1f} (other work shares the cores)")
    directory = tempfile.mkdtemp(prefix=f"testbed-bench-{os.getpid()}-")  # testbed cleanup knows the pattern
    try:
        binary = Binary(build_forwarder(directory))
        binary.fixture = build_fixture(directory)
        native_io.build()  # the loop's process finds it cached
        with VethLine() as line:
            peak = {}
            for method in methods:
                for size in SIZES:
                    offered, rate, cpu_us, pss = forwarding(binary, line, method, size, args.seconds)
                    peak[method, size] = rate
                    print(f"{method:8s} {size:4d} B: sender {offered:,.0f}/s, forwarded {rate:,.0f} packets/s, "
                          f"{cpu_us:.2f} us forwarder CPU per packet, forwarder PSS {pss / 1024:.1f} MiB", flush=True)
            for method in methods:
                for size in SIZES:
                    # cap the forwarder to a tenth of what the sender offers, then flood it
                    offered, _, cpu_us, _ = forwarding(binary, line, method, size, 1.0)
                    capacity = offered / 20.0  # a margin: the sender's rate varies on a shared machine
                    cap = min(1.0, capacity * cpu_us / 1e6)
                    # peak: the best of two paced loads above what the cap allows
                    capped_peak = max(forwarding(binary, line, method, size, args.seconds, factor * capacity, cap)[1]
                                      for factor in (1.2, 3.0))
                    flooded, overloaded, _, _ = forwarding(binary, line, method, size, args.seconds, 0, cap)
                    print(f"{method:8s} {size:4d} B overload: forwarder capped at {100 * cap:.1f}% of a core, "
                          f"peak {capped_peak:,.0f}/s (best of offered {1.2 * capacity:,.0f}/s and "
                          f"{3 * capacity:,.0f}/s), "
                          f"under {flooded:,.0f}/s "
                          f"offered ({flooded / max(capped_peak, 1):.1f}x) {overloaded:,.0f}/s = "
                          f"{100 * overloaded / max(capped_peak, 1):.0f}% of peak", flush=True)
            for method in methods:
                idle = idle_cpu_percent(binary, line, method, 3.0)
                n, median, p99 = latency_us(binary, line, method)
                print(f"{method:8s} idle CPU {idle:.2f}% of a core; one-way delay at 1,000/s: median {median:.0f} us, "
                      f"99th percentile {p99:.0f} us ({n} frames)", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
