"""Run one spec under several load-balancing modes and put the results side by side.

:func:`compare_modes` runs the spec once per mode (same seed, so the same
flows and failures), each into ``<out>/<mode>/``, then writes
``comparison.csv``, ``comparison.json``, ``comparison.txt`` (the table) and
``comparison.png`` (uplink load per mode, MMR and goodput per mode) into
``<out>/``.  A mode whose run fails still gets a row (with its error).
"""
import json
import os

from testbed.experiment import plots
from testbed.experiment.results import write_json
from testbed.experiment.runner import ExperimentFailed, run_experiment

#: table columns: (key, header, format)
COLUMNS = (
    ("mode", "mode", "{}"),
    ("status", "status", "{}"),
    ("uplink_mmr", "uplink MMR", "{:.3f}"),
    ("uplink_jain", "Jain", "{:.3f}"),
    ("goodput_mbps", "goodput Mb/s", "{:.2f}"),
    ("sent_packets", "sent", "{}"),
    ("lost_packets", "lost", "{}"),
    ("loss_rate", "loss", "{:.4f}"),
    ("out_of_sequence", "OOS", "{}"),
    ("out_of_order_rate", "OOS rate", "{:.4f}"),
    ("late", "reordered", "{}"),
    ("fabric_drops", "fabric drops", "{}"),
    ("host_port_busy", "host busy", "{:.3f}"),
    ("voq_max_depth", "VOQ max", "{}"),
    ("flowlet_path_changes", "path changes", "{}"),
    ("loss_window_s", "loss window s", "{:.3f}"),
    ("controller_reaction_s", "reaction s", "{:.3f}"),
    ("detection_s", "detection s", "{:.3f}"),
    ("flow_recovery_s", "flow recovery s", "{:.3f}"),
    ("connectivity_drops", "drops: links down", "{}"),
    ("congestion_drops", "drops: queues", "{}"),
    ("rerouted_extra_hops", "extra hops", "{}"),
    ("pushback_messages", "pushback msgs", "{}"),
    ("overloaded", "emulator overloaded", "{}"),
)


def comparison_row(mode, results):
    """One table row from a run's results (``None`` values where nothing was measured)."""
    summary = results.get("summary", {})
    windows = [row["loss_window_s"] for row in summary.get("recovery", []) if row.get("loss_window_s") is not None]
    detections = [row["detection_s"] for row in results.get("controller", {}).get("detections", [])]
    recoveries = [row["max_recovery_s"] for row in summary.get("flow_recovery", [])
                  if row.get("max_recovery_s") is not None]
    dataplane = results.get("dataplane", {})
    drops = dataplane.get("drops", {})
    dilation = summary.get("path_dilation", {}).get("extra_hops", {})
    pushbacks = results.get("controller", {}).get("pushbacks", [])
    dsf = results.get("dsf") or {}
    busy = [row["busy"] for row in dsf.get("host_ports", [])]
    return {"mode": mode, "status": results.get("status"), "error": results.get("error"),
            "uplink_mmr": summary.get("uplink_mmr"), "uplink_jain": summary.get("uplink_jain"),
            "goodput_mbps": summary.get("goodput_mbps"), "sent_packets": summary.get("sent_packets"),
            "lost_packets": summary.get("lost_packets"), "loss_rate": summary.get("loss_rate"),
            "out_of_sequence": summary.get("out_of_sequence"),
            "out_of_order_rate": summary.get("out_of_order_rate"), "late": summary.get("late"),
            "reorder_rate": summary.get("reorder_rate"),
            "flowlet_path_changes": dataplane.get("flowlet_path_changes"),
            "loss_window_s": max(windows) if windows else None,
            "controller_reaction_s": summary.get("controller_reaction_s"),
            "detection_s": max(detections) if detections else None,
            "flow_recovery_s": max(recoveries) if recoveries else None,
            "connectivity_drops": drops.get("connectivity"), "congestion_drops": drops.get("congestion"),
            "rerouted_extra_hops": ",".join(sorted((k for k in dilation if k != "0"), key=int)) or None,
            "pushback_messages": sum(row["messages"] for row in pushbacks) if pushbacks else None,
            "overloaded": "YES" if results.get("overload", {}).get("overloaded") else "no",
            "overload_reasons": list(results.get("overload", {}).get("reasons", [])),
            # fabric measurements (testbed/experiment/dsf_metrics.py): lost inside the fabric, the busiest
            # host port of a DSF topology, the deepest VOQ
            "fabric_drops": (results.get("dataplane", {}).get("drops_by_place") or {}).get("fabric"),
            "host_port_busy": max(busy) if busy else None,
            "voq_max_depth": (dsf.get("voq_depth") or {}).get("max", {}).get("depth_pkts") if dsf else None,
            "uplink_loads": summary.get("uplink_loads", {})}


def format_table(rows):
    """The comparison as an aligned text table."""
    headers = [header for _, header, _ in COLUMNS]
    lines = []
    for row in rows:
        cells = []
        for key, _, fmt in COLUMNS:
            value = row.get(key)
            cells.append("-" if value is None else fmt.format(value))
        lines.append(cells)
    widths = [max(len(headers[i]), *(len(line[i]) for line in lines)) if lines else len(headers[i])
              for i in range(len(headers))]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    for row in rows:
        if row.get("overload_reasons"):
            out.append(f"WARNING {row['mode']}: the emulator did not keep up, its timings and losses are not "
                       f"the network's: {'; '.join(row['overload_reasons'])}")
    return "\n".join(out)


def write_comparison(rows, out_dir, title):
    """Write comparison.csv / .json / .txt / .png into ``out_dir``; returns the file names."""
    keys = [key for key, _, _ in COLUMNS] + ["error"]
    with open(os.path.join(out_dir, "comparison.csv"), "w") as handle:
        handle.write(",".join(keys) + "\n")
        for row in rows:
            cells = ["" if row.get(key) is None else str(row.get(key)).replace(",", ";") for key in keys]
            handle.write(",".join(cells) + "\n")
    write_json({"title": title, "rows": rows}, os.path.join(out_dir, "comparison.json"))
    table = format_table(rows)
    with open(os.path.join(out_dir, "comparison.txt"), "w") as handle:
        handle.write(title + "\n\n" + table + "\n")
    plots.plot_comparison(rows, {row["mode"]: row["uplink_loads"] for row in rows},
                          os.path.join(out_dir, "comparison.png"), title=title)
    return ["comparison.csv", "comparison.json", "comparison.txt", "comparison.png"]


def compare_modes(spec, modes, out_dir=None, target=None, progress=print):
    """Run ``spec`` under each mode and write the side-by-side comparison.

    Args:
        spec: a validated :class:`~testbed.experiment.spec.ExperimentSpec`.
        modes: mode names (each must have its program; checked before anything runs).
        out_dir: output folder (default: ``<spec.out_dir>-compare``).
        target: P4 target override.
        progress: progress callback.

    Returns:
        list[dict]: the table rows (one per mode, in order).

    Raises:
        ParameterError: an unknown mode or one whose program is missing (before any run).
        KeyboardInterrupt: interrupted (the current run is torn down; the table is written).
    """
    specs = [(mode, spec.with_mode(mode)) for mode in modes]
    out_dir = os.path.abspath(out_dir or (spec.out_dir.rstrip("/") + "-compare"))
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    title = f"{spec.name}: " + " vs ".join(modes)
    try:
        for position, (mode, mode_spec) in enumerate(specs, 1):
            progress(f"=== mode {mode} ({position}/{len(specs)}) ===")
            try:
                results = run_experiment(mode_spec, os.path.join(out_dir, mode), target=target, progress=progress)
            except ExperimentFailed as error:
                results = error.results or {"status": "error", "error": str(error)}
            rows.append(comparison_row(mode, results))
    finally:
        if rows:
            write_comparison(rows, out_dir, title)
            progress("\n" + format_table(rows))
            progress(f"comparison in {out_dir}")
    return rows


def sweep_mode_param(spec, param, values, mode=None, out_dir=None, target=None, progress=print):
    """Run ``spec`` once per value of one mode parameter (e.g. the flowlet interval) and compare.

    Rows are labelled ``<mode>@<param>=<value>`` and carry ``param_value``; the
    figure (``sweep.png``) plots out-of-order rate and uplink MMR against the
    value, the flowlet trade-off of seed 004 section 4.5.

    Args:
        spec: a validated spec.
        param: a ``mode_params`` key (``flowlet_interval_us``, ``hash_seed``).
        values: the values to try, in order.
        mode: the mode to run (default: the spec's).
        out_dir / target / progress: as :func:`compare_modes`.

    Returns:
        list[dict]: the table rows.

    Raises:
        ParameterError: unknown parameter or mode, or a value out of the parameter's range.
    """
    from dataclasses import replace

    from testbed.errors import ParameterError
    from testbed.modes import PARAMETERS

    if param not in PARAMETERS:
        raise ParameterError("--sweep", param, "one of: " + ", ".join(PARAMETERS))
    values = [PARAMETERS[param].check(value, f"--sweep {param}") for value in values]
    mode = mode or spec.mode
    base = spec.with_mode(mode) if mode else spec
    out_dir = os.path.abspath(out_dir or (spec.out_dir.rstrip("/") + f"-sweep-{param}"))
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    title = f"{spec.name}: {mode} over {param}"
    try:
        for position, value in enumerate(values, 1):
            label = f"{mode}@{param}={value:g}"
            progress(f"=== {label} ({position}/{len(values)}) ===")
            run_spec = replace(base, mode_params=dict(base.mode_params, **{param: value}))
            try:
                results = run_experiment(run_spec, os.path.join(out_dir, f"{param}-{value:g}"), target=target,
                                         progress=progress)
            except ExperimentFailed as error:
                results = error.results or {"status": "error", "error": str(error)}
            row = comparison_row(label, results)
            row["param"], row["param_value"] = param, value
            rows.append(row)
    finally:
        if rows:
            write_comparison(rows, out_dir, title)
            plots.plot_sweep(rows, param, os.path.join(out_dir, "sweep.png"), title=title)
            progress("\n" + format_table(rows))
            progress(f"sweep in {out_dir}")
    return rows


def load_comparison(path):
    """Read a comparison.json (or the folder holding it)."""
    if os.path.isdir(path):
        path = os.path.join(path, "comparison.json")
    with open(path) as handle:
        return json.load(handle)
