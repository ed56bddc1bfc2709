"""CPU share of idle embedded switch processes (a script, not a test).

Starts N portless ``python -m testbed.embedded_switch.switchd`` processes (as
tests/lb/test_fabric_app.py does: no Mininet, no interfaces), loads a program in
each (``--program``, default p4src/l3_ecmp.p4), optionally opens a primary
P4Runtime session to each and writes a few routes (``--connect``, the state of a
programmed fabric), waits for start-up to settle, then measures each process's
CPU time over a window, with no traffic:

* from ``/proc/PID/stat`` (utime + stime of all its threads, in clock ticks of
  10 ms), and
* from ``/proc/PID/task/*/schedstat`` (run time of the live threads, in ns),

and prints the share of one core per process (mean and worst) and the thread
count.

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_idle_switch.py [-n 8] [--window 30] [--settle 5] [--connect]
"""
import argparse
import glob
import os
import time

import testbed.p4src
from testbed.p4runtime.client import P4RuntimeClient

from portless_switches import portless_switches  # benchmarks/ helper module

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    """utime + stime of a process (all threads, dead ones included), in clock ticks."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def run_ns(pid):
    """CPU time of the live threads of a process from schedstat, in ns; and their number."""
    total, threads = 0, 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as handle:
                total += int(handle.read().split()[0])
                threads += 1
        except OSError:
            pass  # the thread ended
    return total, threads


def program_switch(address, device_id):
    """A primary session that writes a few routes (kept open while measuring)."""
    client = P4RuntimeClient(address, device_id=device_id, election_id=(0, 1))
    with client.batch():
        for port in range(1, 5):
            client.insert_member("MyIngress.ecmp_selector", port, "MyIngress.set_nhop",
                                 {"dmac": "00:00:00:00:00:01", "smac": "02:00:00:00:00:01", "port": port})
    with client.batch():
        for host in range(16):
            client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (f"10.0.{host}.1", 32)},
                                      member_id=1 + host % 4)
    return client


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=8, help="switch processes (default 8)")
    parser.add_argument("--window", type=float, default=30.0, help="measuring window, seconds")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait before measuring")
    parser.add_argument("--program", default=testbed.p4src.program_path("l3_ecmp"),
                        help="P4 program each switch loads at start ('' for none)")
    parser.add_argument("--connect", action="store_true",
                        help="keep a primary P4Runtime session with a few routes on each switch")
    args = parser.parse_args()

    clients = []
    with portless_switches(args.n, args.program or None) as processes:
        try:
            if args.connect:
                clients = [program_switch(address, device_id) for _, address, device_id in processes]
            time.sleep(args.settle)
            report(args, [process.pid for process, _, _ in processes])
        finally:
            for client in clients:
                client.close()


def report(args, pids):
    """Measure the CPU share of ``pids`` over the window and print it."""
    ticks_before = {pid: cpu_ticks(pid) for pid in pids}
    ns_before = {pid: run_ns(pid)[0] for pid in pids}
    started = time.monotonic()
    time.sleep(args.window)
    elapsed = time.monotonic() - started
    ticks_share = [(cpu_ticks(pid) - ticks_before[pid]) / TICKS_PER_SECOND / elapsed for pid in pids]
    ns_share, threads = [], []
    for pid in pids:
        ns, count = run_ns(pid)
        ns_share.append((ns - ns_before[pid]) / 1e9 / elapsed)
        threads.append(count)
    load = os.getloadavg()
    print(f"{args.n} idle switchd processes, program {os.path.basename(args.program) if args.program else 'none'}, "
          f"{'with' if args.connect else 'without'} a controller session, window {elapsed:.1f} s, "
          f"load average {load[0]:.2f}")
    print(f"  CPU share of one core per process (/proc/PID/stat): mean {100 * sum(ticks_share) / len(pids):.3f}% "
          f"max {100 * max(ticks_share):.3f}% (resolution {100 / TICKS_PER_SECOND / elapsed:.3f}%)")
    print(f"  CPU share of one core per process (schedstat):      mean {100 * sum(ns_share) / len(pids):.3f}% "
          f"max {100 * max(ns_share):.3f}%")
    print(f"  threads per process: {min(threads)}-{max(threads)}; all {args.n} together: "
          f"{100 * sum(ns_share):.2f}% of one core")


if __name__ == "__main__":
    main()
