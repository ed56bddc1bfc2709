"""F10's probes on a k=4 AB FatTree: their CPU cost, the generator's lateness, and detection time (a script).

One run, on the embedded target, each case on a fresh fabric with no traffic:

1. ``ecmp``: p4src/ecmp.p4 and no detector, the idle baseline;
2. ``f10 every link 20 ms``: p4src/f10.p4, probes and triggers on every fabric
   link at the default period;
3. ``f10 every link 2 ms``: the same at 2 ms (more than this machine's cores
   sustain for 20 switch processes: the lateness and skipped periods say how
   far behind the switches fall);
4. ``f10 subset 2 ms``: 2 ms on one monitored link only (``monitored_switches``:
   its two ends), which the machine does sustain.

For each: the CPU time of all 20 switch processes over the window
(``/proc/PID/stat`` utime + stime) as a share of one core, the monitored
switches' share, the packet generator's lateness (``late_max_us``: the latest a
trigger ran after its due time, within a period: whole periods missed are
counted as skipped) and skipped periods, and the transitions the idle fabric
reported (false transitions: no link failed).  A case whose generators skip a
tenth of their periods or more is marked as not sustained.

Then detection: the monitored link (case 2 at 20 ms, case 4 at 2 ms) fails
(``link_down``; the f10 controller only records the failure and matches the
detector's report, it does not reroute) several times, and the detection time
is the detector's down transition on the switch's clock minus the failure's
instant (``controller.detections``).  For comparison, PortLand (mode
``portland``: standard FatTree, ECMP, the controller reroutes after its 65 ms
keepalive timeout) fails the same link and its reaction is measured (65 ms +
recomputing and installing routes, ``controller.reactions``); the ratio
PortLand / F10 is printed for both periods.

Figures are printed with the machine's load; nothing is asserted.  Run as
root (Mininet), one network at a time::

    flock /tmp/testbed-mininet.lock /opt/testbed-venv/bin/python benchmarks/bench_f10_probes.py \\
        [--window 10] [--samples 5] [--json]
"""
import argparse
import json
import os
import platform
import statistics
import time

from testbed.fabrics import Fabric
from testbed.modes import MODES, PARAMETERS

TICKS = os.sysconf("SC_CLK_TCK")
LINK = ("c0", "a0_0")          # an aggregation-core link: F10's case, in both wirings
PORTLAND_DELAY_MS = MODES["portland"].detection_delay_ms


def cpu_seconds(pid):
    """utime + stime of a process in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def load_average():
    """The 1-minute load average."""
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


def idle_cost(fabric, window_s, monitored):
    """CPU share of the idle fabric's switches over ``window_s``, generator state, false transitions.

    Returns:
        dict: ``cpu_share_fabric`` and ``cpu_share_monitored`` (of one core), ``late_max_us``
        (the worst switch), ``skipped`` and ``generated`` trigger periods, ``false_transitions``
        and ``load``.
    """
    switches = fabric.switches
    load = load_average()
    transitions_before = len(getattr(fabric.controller, "transitions", []))
    start = {switch.name: cpu_seconds(switch.process.pid) for switch in switches}
    started = time.monotonic()
    time.sleep(window_s)
    elapsed = time.monotonic() - started
    used = {switch.name: cpu_seconds(switch.process.pid) - start[switch.name] for switch in switches}
    row = {"load": load, "cpu_share_fabric": sum(used.values()) / elapsed,
           "cpu_share_monitored": sum(used[name] for name in monitored) / elapsed if monitored else None,
           "false_transitions": len(getattr(fabric.controller, "transitions", [])) - transitions_before,
           "late_max_us": 0.0, "skipped": 0, "generated": 0}
    for switch in switches:
        for app in switch.packet_generator_status().values():
            row["late_max_us"] = max(row["late_max_us"], app["late_max_us"])
            row["skipped"] += app["skipped"]
            row["generated"] += app["generated"]
    return row


def fail_repeatedly(fabric, samples, wait_s, field, rows_of):
    """Take ``LINK`` down and up ``samples`` times; return the ``field`` of each new row of ``rows_of()``.

    Args:
        fabric: the running fabric (its controller is told of each failure).
        samples: how many failures.
        wait_s: seconds to leave the link down, and then up, each time.
        field: the row field to collect (``detection_s``, ``reaction_s``).
        rows_of: callable returning the controller's rows (detections or reactions) so far.
    """
    values = []
    for _ in range(samples):
        before = len(rows_of())
        fabric.link_down(*LINK)
        time.sleep(wait_s)
        new = [row for row in rows_of()[before:] if row.get("action", "link_down") == "link_down"]
        if new and new[0].get(field) is not None:
            values.append(new[0][field])
        fabric.link_up(*LINK)
        time.sleep(wait_s)
    return values


def run_f10(name, period_us, window_s, samples, monitored=None, detect=True):
    """One F10 case: idle cost, then (``detect``) detection times of ``LINK``.

    Returns:
        dict: the :func:`idle_cost` row with ``case``, ``mode_params`` and ``detection_s`` (list).
    """
    params = {"probe_period_us": period_us}
    options = {"monitored_switches": list(monitored)} if monitored else {}
    with Fabric("abfattree", k=4, program="f10", target="embedded", controller="f10", mode_params=params,
                controller_options=options) as fabric:
        time.sleep(3.0)  # every port watched for a whole window and confirmed
        row = idle_cost(fabric, window_s, monitored or LINK)
        row.update(case=name, mode_params=params, detection_s=[])
        if detect:
            # down and up for the backoff reset each: downs 2 resets apart start at the base hold-down
            wait_s = PARAMETERS["backoff_reset_us"].default / 1e6
            row["detection_s"] = fail_repeatedly(fabric, samples, wait_s, "detection_s",
                                                 lambda: fabric.controller.detections)
    return row


def run_baseline(window_s):
    """The idle fabric with ecmp.p4: no detector, no generator."""
    with Fabric("abfattree", k=4, program="ecmp", target="embedded", controller="none") as fabric:
        time.sleep(3.0)
        row = idle_cost(fabric, window_s, ())
    row.update(case="ecmp (no detector)", mode_params={}, detection_s=[])
    return row


def run_portland(samples):
    """PortLand's reaction to ``LINK`` failing: its keepalive timeout plus recomputing and installing routes."""
    with Fabric("fattree", k=4, program="ecmp", target="embedded", controller="static",
                detection_delay_ms=PORTLAND_DELAY_MS) as fabric:
        time.sleep(2.0)
        return fail_repeatedly(fabric, samples, 1.0, "reaction_s", lambda: fabric.controller.reactions)


def describe(values):
    """``median (min-max, n)`` in ms."""
    if not values:
        return "none"
    return (f"median {1e3 * statistics.median(values):.1f} ms (min {1e3 * min(values):.1f}, "
            f"max {1e3 * max(values):.1f}, n={len(values)})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds of idle CPU measured per case")
    parser.add_argument("--samples", type=int, default=5, help="failures per detection measurement")
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {load_average():.2f} at start")
    rows = [run_baseline(args.window),
            run_f10("f10 every link 20 ms", 20_000, args.window, args.samples),
            run_f10("f10 every link 2 ms", 2_000, args.window, args.samples, detect=False),
            run_f10(f"f10 subset {LINK[0]}-{LINK[1]} 2 ms", 2_000, args.window, args.samples, monitored=LINK)]
    portland = run_portland(args.samples)
    baseline = rows[0]["cpu_share_fabric"]
    print(f"\nidle k=4 AB FatTree, 20 embedded switches, {args.window:g} s each:")
    for row in rows:
        line = (f"  {row['case']:28s} load {row['load']:4.1f}: switches {100 * row['cpu_share_fabric']:5.1f}% of a "
                f"core (probes and triggers {100 * (row['cpu_share_fabric'] - baseline):+5.1f}%)")
        if row["generated"]:
            periods = row["generated"] + row["skipped"]
            line += (f"; {LINK[0]}+{LINK[1]} {100 * row['cpu_share_monitored']:.1f}%; trigger late max "
                     f"{row['late_max_us'] / 1e3:.1f} ms, skipped {row['skipped']} of {periods}; false "
                     f"transitions {row['false_transitions']}")
            if row["skipped"] >= periods / 10:
                line += " -- NOT SUSTAINED on this machine"
        print(line)
    print(f"\ndetection of a failed {LINK[0]}-{LINK[1]} link (switch clock), load {load_average():.2f}:")
    portland_median = statistics.median(portland) if portland else None
    print(f"  portland (keepalive {PORTLAND_DELAY_MS:g} ms + recompute + install): {describe(portland)}")
    for row in rows:
        if row["detection_s"]:
            ratio = (f"; portland / f10 = {portland_median / statistics.median(row['detection_s']):.1f}x"
                     if portland_median else "")
            print(f"  {row['case']:28s}: {describe(row['detection_s'])}{ratio}")
    if args.json:
        print(json.dumps({"rows": rows, "portland_reaction_s": portland}, indent=1))


if __name__ == "__main__":
    main()
