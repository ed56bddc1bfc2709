"""The native loop's timers while the switch's Python is busy (a script, not a test).

One switchd process (native backend, no ports: bench_p4runtime_write.py's switch and program) runs a
packet generator application every ``--period-us`` (1 ms: F10's trigger period), while this script, its
controller, keeps the switch's Python busy in turn:

1. ``idle``: nothing;
2. ``unbatched writes``: table inserts, one per Write, back to back;
3. ``batched writes``: table inserts, 1,000 per Write, back to back.

Each phase lasts ``--seconds`` and starts the application anew (its counters start at 0). For each, the
generator's counters: periods generated and skipped (a trigger more than a whole period late is skipped),
the longest run of skipped periods, and the latest a trigger ran within its period (``late_max_us``).
A switch whose loop returns to Python between runs stops its timers whenever that Python waits for the
GIL (the P4Runtime server's threads hold it while they decode and apply a Write); a loop in its own
native thread does not.  Nothing is asserted; the machine's load is printed with the figures.

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_loop_timers.py [--seconds 5] [--period-us 1000] [--json]
"""
import argparse
import json
import os
import time

from bench_p4runtime_write import SwitchProcess, insert_updates, set_bench_program
from testbed.embedded_switch import port_control
from testbed.p4runtime.client import P4RuntimeClient

APP = 0
PORT = 5  # an internal port: the frames go through the pipeline, and out of a port with no interface
TEMPLATE = bytes.fromhex("020000000002020000000005") + b"\x86\xdd" + bytes(46)


def run_phase(switch, client, seconds, period_us, batch_size, first_key):
    """Start the application, keep the switch busy with Writes of ``batch_size`` (0: none) for ``seconds``,
    and return the application's counters and the keys written."""
    port_control.set_packet_generator(switch.control_path, APP, port=PORT, period_us=period_us, template=TEMPLATE)
    end = time.monotonic() + seconds
    key = first_key
    while time.monotonic() < end:
        if batch_size == 0:
            time.sleep(0.05)
            continue
        client.write(insert_updates(client, key, batch_size))
        key += batch_size
    state = port_control.switch_status(switch.control_path)["packet_generator"][str(APP)]
    port_control.set_packet_generator(switch.control_path, APP, stop=True)
    return state, key - first_key


def main(argv=None):
    """Print (or with --json, dump) the generator's counters per phase."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each phase (default 5)")
    parser.add_argument("--period-us", type=int, default=1000, help="the application's period (default 1000)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    switch = SwitchProcess()
    results = {"cpus": os.cpu_count(), "period_us": args.period_us, "loadavg_before": os.getloadavg()[0],
               "phases": {}}
    try:
        with P4RuntimeClient(switch.address, device_id=1, election_id=(0, 1), timeout=600) as client:
            set_bench_program(client)
            key = 0
            for name, batch_size in (("idle", 0), ("unbatched writes", 1), ("batched writes", 1000)):
                state, written = run_phase(switch, client, args.seconds, args.period_us, batch_size, key)
                key += written
                results["phases"][name] = {"writes_per_s": round(written / args.seconds),
                                           **{field: state[field] for field in
                                              ("generated", "skipped", "skipped_run_max", "late_max_us")}}
    finally:
        switch.close()
    results["loadavg_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"A {args.period_us} us packet generator application in one switchd process (native loop), "
          f"{results['cpus']} CPUs, load average {results['loadavg_before']:.2f} before, "
          f"{results['loadavg_after']:.2f} after")
    print(f"  {'phase':18} {'entries/s':>9} {'generated':>9} {'skipped':>8} {'run max':>7} {'late max us':>11}")
    for name, row in results["phases"].items():
        print(f"  {name:18} {row['writes_per_s']:9,} {row['generated']:9,} {row['skipped']:8,} "
              f"{row['skipped_run_max']:7} {row['late_max_us']:11,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
