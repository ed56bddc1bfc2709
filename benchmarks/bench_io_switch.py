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

then the ratios the native data plane is held to: native / python (goal >= 10x) and native /
C forwarder (goal >= 75%), in packets/s and in CPU per packet, and each switch's idle CPU and
proportional set size.  The machine is shared: it prints the load average; compare within one run.
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
from bench_io_methods import build_forwarder, cpu_seconds, forwarding, pss_kib, send  # noqa: E402

from testbed.embedded_switch.native_io.netns import VethLine  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_io_port_map.p4")
TARGETS = ("python", "native-pyloop", "native", "cforwarder")
SIZES = (64, 1500)


def switch_process(line, backend, native_loop, log):
    """Start the switch process in the switch namespace (pinned to CPU 1); return it once forwarding."""
    env = dict(os.environ, TESTBED_NATIVE_LOOP="1" if native_loop else "0")
    process = subprocess.Popen(
        ["ip", "netns", "exec", line.switch, "taskset", "-c", "1", sys.executable, "-m",
         "testbed.embedded_switch.switchd", "--name", "bench", "--grpc-addr", "127.0.0.1:0",
         "--port", f"1={line.switch_in}", "--port", f"2={line.switch_out}", "--cpu-port", "255",
         "--program", PROGRAM, "--backend", backend], env=env, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # ready when a frame gets through
        if process.poll() is not None:
            raise RuntimeError(f"switchd --backend {backend} exited: see {log.name}")
        before = line.received()
        send(line.binary, line, 64, 0.05, 1000)
        time.sleep(0.2)
        if line.received() > before:
            return process
    process.kill()
    raise RuntimeError(f"switchd --backend {backend} forwarded nothing in 60 s: see {log.name}")


def measure_switch(line, target, seconds, log):
    """``{size: (forwarded/s, CPU us per packet)}``, idle CPU %, PSS MiB of one switch process."""
    backend = "python" if target == "python" else "native"
    process = switch_process(line, backend, target == "native", log)
    try:
        results = {}
        for size in SIZES:
            before, cpu_before, started = line.received(), cpu_seconds(process.pid), time.monotonic()
            send(line.binary, line, size, seconds)
            time.sleep(0.1)
            span = time.monotonic() - started
            received, cpu = line.received() - before, cpu_seconds(process.pid) - cpu_before
            results[size] = (received / span, 1e6 * cpu / max(received, 1))
        pss = pss_kib(process.pid) / 1024
        before = cpu_seconds(process.pid)
        time.sleep(3.0)
        idle = 100.0 * (cpu_seconds(process.pid) - before) / 3.0
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return results, idle, pss


def main():
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="sending time of each measurement")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    args = parser.parse_args()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown or not targets:
        parser.error(f"--targets: unknown {', '.join(unknown) or '(none given)'}; allowed: {', '.join(TARGETS)}")
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
                    results, idle, pss = measure_switch(line, target, args.seconds, log)
                    figures.update({(target, size): value for size, value in results.items()})
                    print(f"{target:13s} idle CPU {idle:.2f}% of a core, PSS {pss:.1f} MiB", flush=True)
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
