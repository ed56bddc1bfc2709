"""Benchmark: the switch process's packet path against the machine's limit, in one run over veths.

Run as root (needs the native backend, testbed/p4/native)::

    /opt/testbed-venv/bin/python benchmarks/bench_io_switch.py [--seconds 4]

On the layout of benchmarks/bench_io_methods.py (sender -> switch -> receiver namespaces, made with
``ip netns``; the C sender flat out, pinned to CPU 0; the switch pinned to CPU 1; packets counted
at the receiver's veth), with benchmarks/bench_io_port_map.p4 (port 1 -> port 2, Ethernet parsed
and emitted) as the program, it measures forwarded packets/s and CPU microseconds per packet at 64
and 1500 bytes of

* ``python``: the switch process (``testbed.embedded_switch.switchd``) with the Python pipeline;
* ``native-pyloop``: the native backend's pipeline in the Python packet loop (``TESTBED_NATIVE_LOOP=0``);
* ``native``: the native backend's pipeline in the native packet loop (AF_XDP, traffic manager);
* ``cforwarder``: benchmarks/c_forwarder.c with AF_XDP, no lookup: the machine's limit;
* ``bmv2``: BMv2 ``simple_switch_grpc`` with the program compiled by p4c (where both are installed;
  all its threads pinned to CPU 1 too);

then the ratios the native data plane is held to: native / python (goal >= 10x) and native /
C forwarder (goal >= 75%), in packets/s and in CPU per packet, and each switch's idle CPU and
proportional set size.  ``--overload`` also measures each switch (not the C forwarder) under 10x
overload as ``bench_io_methods.py`` does: the switch process (all its threads) capped with a cgroup
v1 CPU quota to a twentieth of what the sender offers at 64 bytes, its peak the best rate under that
cap with the sender paced at 1.2x and 3x its capacity, then flooded: the rate must stay >= 90% of
the peak (no receive livelock).  The machine is shared: it prints the load average; compare within
one run.
"""
import argparse
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io_methods import build_forwarder, cpu_cap, cpu_seconds, forwarding, pss_kib, send  # noqa: E402

from testbed.controllers.launcher import free_ports  # noqa: E402
from testbed.embedded_switch.native_io.netns import VethLine  # noqa: E402
from testbed.targets import bmv2_available, compile_with_p4c  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_io_port_map.p4")
TARGETS = ("python", "native-pyloop", "native", "cforwarder", "bmv2")
SIZES = (64, 1500)


def switch_process(line, target, log):
    """Start the ``target``'s switch process in the switch namespace (pinned to CPU 1); return it once forwarding."""
    if target == "bmv2":
        _p4info, program = compile_with_p4c(PROGRAM)
        thrift, grpc = free_ports(2)  # the switch namespace's own loopback: any two ports
        command = ["simple_switch_grpc", "--device-id", "1", "--thrift-port", str(thrift),
                   "-i", f"1@{line.switch_in}", "-i", f"2@{line.switch_out}", program,
                   "--", "--grpc-server-addr", f"127.0.0.1:{grpc}"]
        env = None
    else:
        command = [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "bench",
                   "--grpc-addr", "127.0.0.1:0", "--port", f"1={line.switch_in}", "--port", f"2={line.switch_out}",
                   "--cpu-port", "255", "--program", PROGRAM,
                   "--backend", "python" if target == "python" else "native"]
        env = dict(os.environ, TESTBED_NATIVE_LOOP="1" if target == "native" else "0")
    process = subprocess.Popen(["ip", "netns", "exec", line.switch, "taskset", "-c", "1", *command], env=env,
                               stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # ready when a frame gets through
        if process.poll() is not None:
            raise RuntimeError(f"{target} exited: see {log.name}")
        before = line.received()
        send(line.binary, line, 64, 0.05, 1000)
        time.sleep(0.2)
        if line.received() > before:
            return process
    process.kill()
    raise RuntimeError(f"{target} forwarded nothing in 60 s: see {log.name}")


def rate_of(line, process, size, seconds, rate=0):
    """``(offered per s, forwarded per s, CPU us per forwarded packet)`` of the switch ``process``."""
    before, cpu_before, started = line.received(), cpu_seconds(process.pid), time.monotonic()
    sent = send(line.binary, line, size, seconds, rate)
    time.sleep(0.1)  # the last frames in flight
    span = time.monotonic() - started
    received, cpu = line.received() - before, cpu_seconds(process.pid) - cpu_before
    return sent / seconds, received / span, 1e6 * cpu / max(received, 1)


def overload(line, process, seconds, cpu_us):
    """The switch under 10x overload at 64 B: ``(cap share, offered / peak, overload rate / peak, peak)``."""
    offered = rate_of(line, process, 64, 1.0)[0]
    capacity = offered / 20.0  # a margin: the sender's rate varies on a shared machine
    cap = min(1.0, capacity * cpu_us / 1e6)
    with cpu_cap(cap) as tasks:
        # cgroup.procs moves every thread of the process (the native loop's and BMv2's threads too)
        with open(os.path.join(os.path.dirname(tasks), "cgroup.procs"), "w") as handle:
            handle.write(str(process.pid))
        try:
            peak = max(rate_of(line, process, 64, seconds, factor * capacity)[1] for factor in (1.2, 3.0))
            flooded, under, _cpu = rate_of(line, process, 64, seconds)
        finally:
            with open(os.path.join(os.path.dirname(os.path.dirname(tasks)), "cgroup.procs"), "w") as handle:
                handle.write(str(process.pid))  # back to the root group, so the capped one can go
    return cap, flooded / max(peak, 1), under / max(peak, 1), peak


def measure_switch(line, target, seconds, log, with_overload=False):
    """``{size: (forwarded/s, CPU us per packet)}``, idle CPU %, PSS MiB of one switch process, and its
    :func:`overload` figures (None without ``with_overload``)."""
    process = switch_process(line, target, log)
    try:
        results = {}
        for size in SIZES:
            results[size] = rate_of(line, process, size, seconds)[1:]
        pss = pss_kib(process.pid) / 1024
        before = cpu_seconds(process.pid)
        time.sleep(3.0)
        idle = 100.0 * (cpu_seconds(process.pid) - before) / 3.0
        overloaded = overload(line, process, seconds, results[64][1]) if with_overload else None
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return results, idle, pss, overloaded


def main():
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="sending time of each measurement")
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help=f"comma-separated, of {', '.join(TARGETS)} (bmv2 skipped where not installed)")
    parser.add_argument("--overload", action="store_true", help="also each switch under 10x overload (64 B)")
    args = parser.parse_args()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown or not targets:
        parser.error(f"--targets: unknown {', '.join(unknown) or '(none given)'}; allowed: {', '.join(TARGETS)}")
    if "bmv2" in targets and not bmv2_available():
        print("bmv2: skipped (simple_switch_grpc and p4c are not both installed)")
        targets.remove("bmv2")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
          f"load average {os.getloadavg()[0]:.1f} (other work shares the cores)")
    directory = tempfile.mkdtemp(prefix=f"testbed-bench-{os.getpid()}-")
    figures = {}
    try:
        binary = build_forwarder(directory)
        with VethLine(prefix="tb-sw-") as line, open(os.path.join(directory, "switchd.log"), "w") as log:
            line.binary = binary
            for target in targets:
                if target == "cforwarder":
                    for size in SIZES:
                        _, rate, cpu_us, pss = forwarding(binary, line, "xdp", size, args.seconds)
                        figures[target, size] = (rate, cpu_us)
                    print(f"{target:13s} PSS {pss / 1024:.1f} MiB", flush=True)
                else:
                    results, idle, pss, overloaded = measure_switch(line, target, args.seconds, log, args.overload)
                    figures.update({(target, size): value for size, value in results.items()})
                    print(f"{target:13s} idle CPU {idle:.2f}% of a core, PSS {pss:.1f} MiB", flush=True)
                    if overloaded is not None:
                        cap, offered, kept, peak = overloaded
                        print(f"{target:13s}   64 B overload: capped at {100 * cap:.1f}% of a core, "
                              f"peak {peak:,.0f}/s, flooded with {offered:.1f}x that: "
                              f"{100 * kept:.0f}% of the peak forwarded (goal >= 90%)", flush=True)
                for size in SIZES:
                    rate, cpu_us = figures[target, size]
                    print(f"{target:13s} {size:4d} B: {rate:,.0f} packets/s forwarded, {cpu_us:.2f} us CPU per packet",
                          flush=True)
            log.flush()
            if os.path.getsize(log.name):
                with open(log.name) as handle:
                    print("switch log (last lines):", *[text.rstrip() for text in handle.readlines()[-5:]],
                          sep="\n  ")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for size in SIZES:
        for a, b, goal in (("native", "python", ">= 10"), ("native", "cforwarder", ">= 0.75")):
            if (a, size) in figures and (b, size) in figures:
                rate = figures[a, size][0] / max(figures[b, size][0], 1)
                cpu = figures[b, size][1] / max(figures[a, size][1], 1e-9)
                print(f"{size:4d} B: {a} / {b} = {rate:.2f} in packets/s, {cpu:.2f} in CPU per packet (goal {goal})")


if __name__ == "__main__":
    main()
