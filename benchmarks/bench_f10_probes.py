"""CPU cost of F10's probes and triggers on a k=4 AB FatTree (a script, not a test).

Starts the fabric twice on the embedded target with no traffic: once with
p4src/ecmp.p4 (no detector: the baseline) and once with p4src/f10.p4 at each
probe period asked for, and measures over a window the CPU time of all 20
switch processes (``/proc/PID/stat`` utime + stime), reported as a share of
one core for the whole fabric and per switch; for F10 also how many detector
transitions the idle fabric reported (false alarms: no link failed) and the
generator's skipped periods (the switch process fell behind).

Run as root::

    /opt/testbed-venv/bin/python benchmarks/bench_f10_probes.py [--periods-us 10000,2000] [--window 10]
"""
import argparse
import json
import os
import platform
import time

from testbed.embedded_switch.port_control import request
from testbed.fabrics import Fabric

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def measure(program, window_s, settle_s, mode_params=None):
    """Run the idle fabric; return CPU share, transitions and skipped trigger periods."""
    options = {"controller": "f10"} if program == "f10" else {"controller": "none"}
    with Fabric("abfattree", k=4, program=program, target="embedded", mode_params=mode_params or {},
                **options) as fabric:
        time.sleep(settle_s)
        pids = [switch.process.pid for switch in fabric.switches]
        transitions_before = len(getattr(fabric.controller, "transitions", []))
        start = {pid: cpu_seconds(pid) for pid in pids}
        started = time.monotonic()
        time.sleep(window_s)
        elapsed = time.monotonic() - started
        used = sum(cpu_seconds(pid) - start[pid] for pid in pids)
        transitions = len(getattr(fabric.controller, "transitions", [])) - transitions_before
        skipped = generated = 0
        if program == "f10":
            for switch in fabric.switches:
                for app in request(switch.control_path, {"command": "status"})["packet_generator"].values():
                    skipped += app["skipped"]
                    generated += app["generated"]
    return {"program": program, "mode_params": mode_params or {}, "cpu_share_fabric": used / elapsed,
            "cpu_share_per_switch": used / elapsed / len(pids), "false_transitions": transitions,
            "trigger_generated": generated, "trigger_skipped": skipped}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods-us", default="10000,2000", help="probe periods to measure (comma list)")
    parser.add_argument("--window-periods", type=int, default=3, help="detector window t, in probe periods")
    parser.add_argument("--skip-baseline", action="store_true", help="do not measure the ECMP baseline")
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after start-up before measuring")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args()
    with open("/proc/loadavg") as handle:
        load = handle.read().split()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {load} at start")
    rows = [] if args.skip_baseline else [measure("ecmp", args.window, args.settle)]
    for period in [int(p) for p in args.periods_us.split(",") if p.strip()]:
        window_us = args.window_periods * period
        rows.append(measure("f10", args.window, args.settle,
                            {"probe_period_us": period, "detector_window_periods": args.window_periods,
                             "holddown_us": max(100_000, window_us), "holddown_max_us": max(1_600_000, window_us)}))
    baseline = rows[0]["cpu_share_fabric"] if not args.skip_baseline else 0.0
    for row in rows:
        extra = row["cpu_share_fabric"] - baseline
        print(f"{row['program']:5s} {row['mode_params'] or ''}: fabric {100 * row['cpu_share_fabric']:.1f}% of a "
              f"core ({100 * row['cpu_share_per_switch']:.2f}% per switch), probes and triggers "
              f"{100 * extra:+.1f}%; false transitions {row['false_transitions']}, trigger periods skipped "
              f"{row['trigger_skipped']} of {row['trigger_generated'] + row['trigger_skipped']}")
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
