"""Load balancing's plots: uplink MMR, goodput and out-of-order arrivals per mode; the flowlet curve."""
import math
import os

from testbed.experiment.plots import metric_bars, mode_colours, plt


def plot_lb_comparison(rows, out_dir, title):
    """``lb_comparison.png``: uplink MMR, goodput, out-of-sequence packets and (flowlet) path changes per row.

    Each a bar per row in the row's colour, the mean with its 95% interval when the
    comparison was repeated; the path-change panel only when a row measured them.

    Args:
        rows: ``testbed compare``'s rows.
        out_dir: the comparison's folder.
        title: the comparison's title.

    Returns:
        list: the file names written.
    """
    if not rows:
        return []
    panels = [("uplink_mmr", "uplink MMR (1 = perfect)"), ("goodput_mbps", "goodput Mbit/s"),
              ("out_of_sequence", "out-of-sequence packets")]
    if any(row.get("flowlet_path_changes") is not None for row in rows):
        panels.append(("flowlet_path_changes", "flowlet path changes"))
    colours = mode_colours([row["mode"] for row in rows])
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.5), squeeze=False)
    try:
        for axis, (key, heading) in zip(axes[0], panels):
            metric_bars(axis, rows, key, colours, heading)
        axes[0][0].axhline(1.0, color="grey", linestyle=":", linewidth=1)
        figure.suptitle(f"{title}: balance, goodput, reordering")
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, "lb_comparison.png"), dpi=100)
    finally:
        plt.close(figure)
    return ["lb_comparison.png"]


FLOWLET_INTERVAL = "flowlet_interval_us"  # the swept parameter the flowlet curve is drawn against


def _traffic_seconds(results):
    """Seconds the run's streams sent (the longest entry; the run's duration when an entry gives none)."""
    spec = results.get("spec") or {}
    return max([entry.get("duration_s") or spec.get("duration_s") or 0.0 for entry in spec.get("traffic", [])]
               + [0.0])


def flowlet_curve(rows, runs_by_label):
    """The flowlet curve's points: per swept interval, reordering per second and balance.

    Args:
        rows: ``testbed compare --sweep flowlet_interval_us=...`` rows (``param_value``).
        runs_by_label: ``{row label: [results.json of each run]}``.

    Returns:
        dict: ``interval_us``, ``late_per_s`` and ``oos_per_s`` (mean over the row's runs),
        ``uplink_mmr``, ``rtt_us`` (the round trip the links' delays add, from the runs' topology
        record; 0.0 without delays) and ``latency_p50_ms`` (one way, measured, the largest over runs).

    >>> runs = {"flowlet@i=100": [{"spec": {"traffic": [{"duration_s": 2.0}]}, "topology": {"rtt_us": 6000.0},
    ...                            "summary": {"late": 10, "out_of_sequence": 12, "latency": {"p50_ms": 3.2}}}]}
    >>> flowlet_curve([{"mode": "flowlet@i=100", "param": "flowlet_interval_us", "param_value": 100,
    ...                 "uplink_mmr": 1.1}], runs)["late_per_s"]
    [5.0]
    """
    points = {"interval_us": [], "late_per_s": [], "oos_per_s": [], "uplink_mmr": [], "rtt_us": 0.0,
              "latency_p50_ms": None}
    for row in sorted((row for row in rows if row.get("param") == FLOWLET_INTERVAL),
                      key=lambda row: row["param_value"]):
        runs = [results for results in runs_by_label.get(row["mode"], []) if results.get("summary")]
        seconds = [_traffic_seconds(results) for results in runs]
        if not runs or not all(seconds):
            continue
        points["interval_us"].append(row["param_value"])
        for key, counter in (("late_per_s", "late"), ("oos_per_s", "out_of_sequence")):
            points[key].append(sum(results["summary"][counter] / second
                                   for results, second in zip(runs, seconds)) / len(runs))
        points["uplink_mmr"].append(row.get("uplink_mmr"))
        points["rtt_us"] = max([points["rtt_us"]] + [(results.get("topology") or {}).get("rtt_us") or 0.0
                                                      for results in runs])
        latencies = [(results["summary"].get("latency") or {}).get("p50_ms") for results in runs]
        latencies = [value for value in latencies if value is not None]
        if latencies:
            points["latency_p50_ms"] = max([points["latency_p50_ms"] or 0.0] + latencies)
    return points


def plot_flowlet_curve(rows, runs_by_label, out_dir, title):
    """``flowlet_curve.png`` (seed 004 Figure 11): reordered packets per second against the flowlet
    interval (log-log, with the 1 per second line), uplink MMR on the right axis, RTT/2 marked (the
    round trip the links' delays add) and the measured one-way latency (delays and the emulator's
    forwarding time).

    Returns:
        list: the file names written (none when the rows are not a flowlet-interval sweep).
    """
    points = flowlet_curve(rows, runs_by_label)
    if len(points["interval_us"]) < 2:
        return []
    xs = points["interval_us"]
    figure, left = plt.subplots(figsize=(8, 5.6))
    try:
        floor = 0.1  # zero cannot be drawn on a log axis: drawn here, labelled as 0
        lines = (("late_per_s", "o-", "tab:red", "reordered (late) packets / s"),
                 ("oos_per_s", "^:", "tab:orange", "out-of-sequence (PSN skips, loss too) / s"))
        for key, style, colour, label in lines:
            left.plot(xs, [max(value, floor) for value in points[key]], style, color=colour, label=label)
        left.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_ylim(floor / 1.5, None)
        left.set_xlabel("flowlet interval (us)")
        left.set_ylabel(f"packets / s (drawn at {floor:g} when 0)")
        if points["rtt_us"]:
            left.axvline(points["rtt_us"] / 2, color="tab:green", linestyle="--",
                         label=f"RTT/2 of the link delays ({points['rtt_us'] / 2:.0f} us)")
        if points["latency_p50_ms"] is not None:
            measured = 1000 * points["latency_p50_ms"]
            left.axvline(measured, color="tab:olive", linestyle=":",
                         label=f"one-way latency measured (p50 of the worst pair, {measured:.0f} us)")
        right = left.twinx()
        right.plot(xs, [math.nan if value is None else value for value in points["uplink_mmr"]], "s--",
                   color="tab:blue", label="uplink MMR (right axis)")
        handles, labels = left.get_legend_handles_labels()
        more_handles, more_labels = right.get_legend_handles_labels()
        left.legend(handles + more_handles, labels + more_labels, fontsize=7, loc="upper center",
                    bbox_to_anchor=(0.5, -0.14), ncols=2)
        right.set_ylabel("uplink MMR (1 = perfect balance)", color="tab:blue")
        left.set_title(f"{title}: reordering and balance against the flowlet interval", fontsize=9)
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, "flowlet_curve.png"), dpi=100)
    finally:
        plt.close(figure)
    return ["flowlet_curve.png"]
