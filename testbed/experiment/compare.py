"""Run one spec under several modes and put the results side by side.

:func:`compare_modes` runs the spec once per mode (same seed, so the same
flows and failures), each into ``<out>/<mode>/``, then writes
``comparison.csv``, ``comparison.json``, ``comparison.txt`` (the table) and
``comparison.png`` (uplink load per mode, MMR and goodput per mode) into
``<out>/``.  A mode whose run fails still gets a row (with its error).
"""
import os

from testbed.experiment import plots
from testbed.experiment.results import write_json
from testbed.experiment.runner import ExperimentFailed, run_experiment
from testbed.mechanisms import hooks_for
from testbed.mechanisms.hooks import Column

def _summary(key):
    return lambda results: results.get("summary", {}).get(key)


def _longest_loss_window(results):
    windows = [row["loss_window_s"] for row in results.get("summary", {}).get("recovery", [])
               if row.get("loss_window_s") is not None]
    return max(windows) if windows else None


def _longest_flow_recovery(results):
    recoveries = [row["max_recovery_s"] for row in results.get("summary", {}).get("flow_recovery", [])
                  if row.get("max_recovery_s") is not None]
    return max(recoveries) if recoveries else None


def _extra_hops(results):
    dilation = results.get("summary", {}).get("path_dilation", {}).get("extra_hops", {})
    return ",".join(sorted((k for k in dilation if k != "0"), key=int)) or None


def _drops(key):
    return lambda results: results.get("dataplane", {}).get("drops", {}).get(key)


#: the columns of every comparison (a row's mechanisms add theirs: their run hooks' ``columns``)
COLUMNS = (
    Column("status", "status", "{}", lambda results: results.get("status")),
    Column("uplink_mmr", "uplink MMR", "{:.3f}", _summary("uplink_mmr")),
    Column("uplink_jain", "Jain", "{:.3f}", _summary("uplink_jain")),
    Column("goodput_mbps", "goodput Mb/s", "{:.2f}", _summary("goodput_mbps")),
    Column("sent_packets", "sent", "{}", _summary("sent_packets")),
    Column("lost_packets", "lost", "{}", _summary("lost_packets")),
    Column("loss_rate", "loss", "{:.4f}", _summary("loss_rate")),
    Column("out_of_sequence", "OOS", "{}", _summary("out_of_sequence")),
    Column("out_of_order_rate", "OOS rate", "{:.4f}", _summary("out_of_order_rate")),
    Column("late", "reordered", "{}", _summary("late")),
    Column("fabric_drops", "fabric drops", "{}",
           lambda results: (results.get("dataplane", {}).get("drops_by_place") or {}).get("fabric")),
    Column("loss_window_s", "loss window s", "{:.3f}", _longest_loss_window),
    Column("controller_reaction_s", "reaction s", "{:.3f}", _summary("controller_reaction_s")),
    Column("flow_recovery_s", "flow recovery s", "{:.3f}", _longest_flow_recovery),
    Column("connectivity_drops", "drops: links down", "{}", _drops("connectivity")),
    Column("congestion_drops", "drops: queues", "{}", _drops("congestion")),
    Column("rerouted_extra_hops", "extra hops", "{}", _extra_hops),
    Column("overloaded", "emulator overloaded", "{}",
           lambda results: "YES" if results.get("overload", {}).get("overloaded") else "no"),
)


def columns_for(results_list):
    """The table's columns for these runs: :data:`COLUMNS` and those of the mechanisms any of them is."""
    names = {name for results in results_list for name in results.get("mechanisms", [])}
    return list(COLUMNS) + [column for hooks in hooks_for() if hooks.mechanism.name in names
                            for column in hooks.columns]


def comparison_row(label, results, columns=None):
    """One table row from a run's results (``None`` values where nothing was measured).

    Args:
        label: the row's label (the mode, or ``mode@param=value``).
        results: the run's results.json.
        columns: the table's columns (default: :func:`columns_for` this run).
    """
    row = {"mode": label, "error": results.get("error"),
           "overload_reasons": list(results.get("overload", {}).get("reasons", [])),
           "uplink_loads": results.get("summary", {}).get("uplink_loads", {}),
           "reorder_rate": results.get("summary", {}).get("reorder_rate")}
    for column in columns or columns_for([results]):
        row[column.key] = column.value(results)
    return row


def _rows(labelled):
    """Table rows of ``[(label, results)]`` with the columns of all of them."""
    columns = columns_for([results for _label, results in labelled])
    return [comparison_row(label, results, columns) for label, results in labelled], columns


def format_table(rows, columns=None):
    """The comparison as an aligned text table (``columns``: as :func:`columns_for`; default :data:`COLUMNS`)."""
    columns = [Column("mode", "mode", "{}", None)] + list(columns or COLUMNS)
    headers = [column.header for column in columns]
    lines = []
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column.key)
            cells.append("-" if value is None else column.fmt.format(value))
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


def write_comparison(rows, out_dir, title, columns=None, results_by_label=None):
    """Write comparison.csv / .json / .txt / .png (and the mechanisms' comparison plots) into ``out_dir``.

    Returns:
        list: the file names written.
    """
    columns = list(columns or COLUMNS)
    keys = ["mode"] + [column.key for column in columns] + ["error"]
    with open(os.path.join(out_dir, "comparison.csv"), "w") as handle:
        handle.write(",".join(keys) + "\n")
        for row in rows:
            cells = ["" if row.get(key) is None else str(row.get(key)).replace(",", ";") for key in keys]
            handle.write(",".join(cells) + "\n")
    write_json({"title": title, "rows": rows}, os.path.join(out_dir, "comparison.json"))
    table = format_table(rows, columns)
    with open(os.path.join(out_dir, "comparison.txt"), "w") as handle:
        handle.write(title + "\n\n" + table + "\n")
    plots.plot_comparison(rows, {row["mode"]: row["uplink_loads"] for row in rows},
                          os.path.join(out_dir, "comparison.png"), title=title)
    files = ["comparison.csv", "comparison.json", "comparison.txt", "comparison.png"]
    results_by_label = results_by_label or {}
    names = {name for results in results_by_label.values() for name in results.get("mechanisms", [])}
    for hooks in hooks_for():
        if hooks.mechanism.name in names:
            files += hooks.comparison_plots(rows, results_by_label, out_dir, title)
    return files


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
    labelled = []
    title = f"{spec.name}: " + " vs ".join(modes)
    try:
        for position, (mode, mode_spec) in enumerate(specs, 1):
            progress(f"=== mode {mode} ({position}/{len(specs)}) ===")
            try:
                results = run_experiment(mode_spec, os.path.join(out_dir, mode), target=target, progress=progress)
            except ExperimentFailed as error:
                results = error.results or {"status": "error", "error": str(error)}
            labelled.append((mode, results))
    finally:
        rows, columns = _rows(labelled)
        if rows:
            write_comparison(rows, out_dir, title, columns, dict(labelled))
            progress("\n" + format_table(rows, columns))
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
    labelled = []
    title = f"{spec.name}: {mode} over {param}"
    try:
        for position, value in enumerate(values, 1):
            label = f"{mode}@{param}={value:g}"
            progress(f"=== {label} ({position}/{len(values)}) ===")
            run_spec = replace(base, mode_params=dict(base.mode_params, **{param: value}),
                               seeded_params=[name for name in base.seeded_params if name != param])
            try:
                results = run_experiment(run_spec, os.path.join(out_dir, f"{param}-{value:g}"), target=target,
                                         progress=progress)
            except ExperimentFailed as error:
                results = error.results or {"status": "error", "error": str(error)}
            labelled.append((label, results))
    finally:
        rows, columns = _rows(labelled)
        for row, value in zip(rows, values):
            row["param"], row["param_value"] = param, value
        if rows:
            write_comparison(rows, out_dir, title, columns, dict(labelled))
            plots.plot_sweep(rows, param, os.path.join(out_dir, "sweep.png"), title=title)
            progress("\n" + format_table(rows, columns))
            progress(f"sweep in {out_dir}")
    return rows
