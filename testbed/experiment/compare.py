"""Run one spec under several modes and put the results side by side.

:func:`compare_modes` runs the spec once per mode (same seed, so the same
flows and failures), each into ``<out>/<mode>/``, then writes
``comparison.csv``, ``comparison.json``, ``comparison.txt`` (the table) and
``comparison.png`` (uplink load per mode, MMR and goodput per mode) into
``<out>/``, and each mechanism of the runs adds its own comparison plots
(its run hooks' ``comparison_plots``).  A mode whose run fails still gets a
row (with its error).

With ``repeat`` N (``--repeat``, or the spec's ``repeat``) every mode runs N
times with the seeds of :func:`testbed.experiment.repeats.repeat_seeds` (the
same seeds for every mode), each run into ``<out>/<mode>/run<i>-seed<seed>/`` with
its own results.json; each metric of the table is then the runs' mean with
its 95% confidence interval and min/max, and the metrics whose intervals
overlap between rows are flagged "not separable" (:func:`noise_flags`).
"""
import os

from testbed.experiment import plots, repeats
from testbed.experiment.congestion import complete
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


def _congestion_rate(results):
    """Queue drops over stream packets sent, over the congestion timeline's intervals (shaped links; None
    when some ports' queues were not read)."""
    timeline = (results.get("dataplane") or {}).get("congestion_timeline")
    sent = sum(timeline["sent"]) if complete(timeline) else 0
    return sum(timeline["drops"]) / sent if sent else None


def _drops(key):
    return lambda results: results.get("dataplane", {}).get("drops", {}).get(key)


#: the columns of every comparison (a row's mechanisms add theirs: their run hooks' ``columns``)
COLUMNS = (
    Column("status", "status", "{}", lambda results: results.get("status")),
    Column("uplink_mmr", "uplink MMR", "{:.3f}", _summary("uplink_mmr")),
    Column("uplink_jain", "Jain", "{:.3f}", _summary("uplink_jain")),
    Column("goodput_mbps", "goodput Mb/s", "{:.2f}", _summary("goodput_mbps")),
    Column("sent_packets", "sent", "{}", _summary("sent_packets"), compared=False),
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
    Column("congestion_rate", "queue drops / sent", "{:.4f}", _congestion_rate),
    Column("rerouted_extra_hops", "extra hops", "{}", _extra_hops),
    Column("overloaded", "emulator overloaded", "{}",
           lambda results: "YES" if results.get("overload", {}).get("overloaded") else "no"),
    Column("reordering_unreliable", "OOS may be emulator's", "{}",
           lambda results: None if "reordering_unreliable" not in results.get("overload", {})
           else "YES" if results["overload"]["reordering_unreliable"] else "no"),
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
           "reordering_reasons": list(results.get("overload", {}).get("reordering_reasons", [])),
           "uplink_loads": results.get("summary", {}).get("uplink_loads", {}),
           "reorder_rate": results.get("summary", {}).get("reorder_rate")}
    for column in columns or columns_for([results]):
        row[column.key] = column.value(results)
    return row


def aggregate_row(label, runs, seeds, columns):
    """One table row of a mode (or sweep point) run several times.

    Each numeric column holds the runs' mean, and ``stats[key]`` its
    :func:`~testbed.experiment.repeats.describe` (mean, 95% interval, min, max);
    a text column holds :func:`~testbed.experiment.repeats.tally` of the runs'
    values.  ``repeats`` keeps every run's own row.  Every run counts, also one
    marked overloaded (the overload column tallies them; ``testbed reproduce``
    leaves them out).

    Args:
        label: the row's label.
        runs: the runs' results.json, in seed order.
        seeds: the runs' seeds.
        columns: the table's columns.
    """
    singles = [comparison_row(label, results, columns) for results in runs]
    names = [f"run {index} (seed {seed})" for index, seed in enumerate(seeds, 1)]
    row = {"mode": label, "runs": len(runs), "seeds": list(seeds),
           "error": "; ".join(f"{name}: {single['error']}" for name, single in zip(names, singles)
                              if single["error"]) or None,
           "overload_reasons": [f"{name}: {reason}" for name, single in zip(names, singles)
                                for reason in single["overload_reasons"]],
           "reordering_reasons": [f"{name}: {reason}" for name, single in zip(names, singles)
                                  for reason in single["reordering_reasons"]],
           "reordering_runs": sum(1 for single in singles if single["reordering_reasons"]),
           "stats": {}}
    links = sorted({link for single in singles for link in single["uplink_loads"]})
    row["uplink_loads"] = {link: repeats.describe([single["uplink_loads"].get(link) for single in singles])["mean"]
                           for link in links}
    row["stats"]["reorder_rate"] = repeats.describe([single["reorder_rate"] for single in singles])
    row["reorder_rate"] = row["stats"]["reorder_rate"]["mean"]
    for column in columns:
        values = [single[column.key] for single in singles]
        if repeats.numeric(values):
            row["stats"][column.key] = repeats.describe(values)
            row[column.key] = row["stats"][column.key]["mean"]
        else:
            row[column.key] = repeats.tally(values)
    row["repeats"] = [{key: value for key, value in single.items() if key != "uplink_loads"} for single in singles]
    return row


def _rows(labelled, seeds=None):
    """Table rows of ``[(label, [results of each run])]`` with the columns of all of them.

    A label run once gets :func:`comparison_row`; run several times, :func:`aggregate_row`
    (``seeds``: the runs' seeds).
    """
    columns = columns_for([results for _label, runs in labelled for results in runs])
    rows = []
    for label, runs in labelled:
        if not seeds or len(seeds) == 1:
            rows.append(comparison_row(label, runs[0], columns))
        else:
            rows.append(aggregate_row(label, runs, (seeds or [])[:len(runs)], columns))
    return rows, columns


def noise_flags(rows, columns):
    """``{key: [(label, label)]}``: the numeric columns whose repeated rows cannot be told apart.

    Only rows with statistics (run several times) take part: see
    :func:`testbed.experiment.repeats.separability`.
    """
    repeated = [row for row in rows if row.get("stats")]
    if len(repeated) < 2:
        return {}
    keys = [column.key for column in columns
            if column.compared and any(column.key in row["stats"] for row in repeated)]
    return repeats.separability([row["mode"] for row in repeated], {row["mode"]: row["stats"] for row in repeated},
                                keys)


def _cell(row, column, flagged):
    """A table cell: the value; with repeats ``mean ±ci95 [min,max]``, ``~`` when not separable."""
    value = row.get(column.key)
    stats = (row.get("stats") or {}).get(column.key)
    if stats and stats["n"] > 0:
        # an integer column's mean and interval are fractions; its extremes are its own values
        spread = column.fmt if "." in column.fmt else "{:.1f}"
        extreme = column.fmt if "." in column.fmt else "{:g}"
        text = (f"{spread.format(stats['mean'])} ±{spread.format(stats['ci95'])} "
                f"[{extreme.format(stats['min'])},{extreme.format(stats['max'])}]")
        return text + (" ~" if flagged else "")
    return "-" if value is None else column.fmt.format(value)


def format_table(rows, columns=None):
    """The comparison as an aligned text table (``columns``: as :func:`columns_for`; default :data:`COLUMNS`).

    Rows run several times show ``mean ±ci95 [min,max]`` per metric, ``~`` on the
    metrics whose intervals overlap another row's (listed under the table:
    "not separable at N runs"); columns no row measured are then left out.
    """
    columns = list(columns or COLUMNS)
    flags = noise_flags(rows, columns)
    if any(row.get("stats") for row in rows):
        # repeated rows make wide cells: leave out the columns nothing measured (comparison.csv keeps them)
        columns = [column for column in columns if any(row.get(column.key) is not None for row in rows)]
    flagged = {(label, key) for key, pairs in flags.items() for pair in pairs for label in pair}
    shown = [Column("mode", "mode", "{}", None)] + columns
    headers = [column.header for column in shown]
    lines = []
    for row in rows:
        cells = [row["mode"]]
        for column in columns:
            cells.append(_cell(row, column, (row["mode"], column.key) in flagged))
        lines.append(cells)
    widths = [max(len(headers[i]), *(len(line[i]) for line in lines)) if lines else len(headers[i])
              for i in range(len(headers))]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    runs = sorted({row["runs"] for row in rows if row.get("runs")})
    if runs:
        out.append(f"mean ±95% confidence interval (Student t) [min,max] over {'/'.join(map(str, runs))} runs "
                   f"per row (seeds in comparison.json)")
    headers_by_key = {column.key: column.header for column in columns}
    for key, pairs in flags.items():
        out.append(f"~ {headers_by_key[key]}: not separable at {'/'.join(map(str, runs))} runs (95% intervals "
                   f"overlap): " + ", ".join(f"{a} ~ {b}" for a, b in pairs))
    for row in rows:
        if row.get("overload_reasons"):
            out.append(f"WARNING {row['mode']}: the emulator did not keep up, its timings and losses are not "
                       f"the network's: {'; '.join(row['overload_reasons'])}")
    for row in rows:
        if row.get("reordering_reasons") and row.get("runs"):
            out.append(f"NOTE {row['mode']}: in {row['reordering_runs']} of {row['runs']} runs the emulator's delays "
                       f"exceeded the time between a queue pair's packets: their out-of-order counts may be the "
                       f"emulator's (reasons in comparison.json)")
        elif row.get("reordering_reasons"):
            out.append(f"NOTE {row['mode']}: {'; '.join(row['reordering_reasons'])}")
    return "\n".join(out)


def write_comparison(rows, out_dir, title, columns=None, runs_by_label=None):
    """Write comparison.csv / .json / .txt / .png (and the mechanisms' comparison plots) into ``out_dir``.

    With repeated rows the csv has, after each numeric column, its ``_ci95``,
    ``_min`` and ``_max``, and the json the rows' ``stats``, ``seeds``, every run's
    own row (``repeats``) and the metrics not separable (``not_separable``).

    Args:
        rows: the table rows.
        out_dir: the comparison's folder.
        title: the comparison's title.
        columns: the table's columns (default :data:`COLUMNS`).
        runs_by_label: ``{row label: [results.json of each run]}`` for the mechanisms' plots.

    Returns:
        list: the file names written.
    """
    columns = list(columns or COLUMNS)
    repeated = any(row.get("stats") for row in rows)
    keys = ["mode"]
    for column in columns:
        keys.append(column.key)
        if repeated and any(column.key in (row.get("stats") or {}) for row in rows):
            keys += [f"{column.key}_ci95", f"{column.key}_min", f"{column.key}_max"]
    keys += ["runs", "seeds", "error"] if repeated else ["error"]
    with open(os.path.join(out_dir, "comparison.csv"), "w") as handle:
        handle.write(",".join(keys) + "\n")
        for row in rows:
            flat = dict(row)
            for key, stats in (row.get("stats") or {}).items():
                flat.update({f"{key}_ci95": stats["ci95"], f"{key}_min": stats["min"], f"{key}_max": stats["max"]})
            if row.get("seeds"):
                flat["seeds"] = " ".join(str(seed) for seed in row["seeds"])
            cells = ["" if flat.get(key) is None else str(flat.get(key)).replace(",", ";") for key in keys]
            handle.write(",".join(cells) + "\n")
    flags = noise_flags(rows, columns)
    write_json({"title": title, "rows": rows,
                "not_separable": {key: [list(pair) for pair in pairs] for key, pairs in flags.items()}},
               os.path.join(out_dir, "comparison.json"))
    table = format_table(rows, columns)
    with open(os.path.join(out_dir, "comparison.txt"), "w") as handle:
        handle.write(title + "\n\n" + table + "\n")
    plots.plot_comparison(rows, {row["mode"]: row["uplink_loads"] for row in rows},
                          os.path.join(out_dir, "comparison.png"), title=title)
    files = ["comparison.csv", "comparison.json", "comparison.txt", "comparison.png"]
    runs_by_label = runs_by_label or {}
    if plots.plot_congestion_cdf(runs_by_label, os.path.join(out_dir, "congestion_cdf.png"), title=title):
        files.append("congestion_cdf.png")
    names = {name for runs in runs_by_label.values() for results in runs for name in results.get("mechanisms", [])}
    for hooks in hooks_for():
        if hooks.mechanism.name in names:
            files += hooks.comparison_plots(rows, runs_by_label, out_dir, title)
    return files


def _run_repeats(runs, label, make_spec, seeds, out_dir, target, progress):
    """Run ``make_spec(seed)`` once per seed into ``out_dir`` (one run) or ``out_dir/run<i>-seed<seed>`` (several).

    Each run's results (a failed run's record, or ``{"status": "error", ...}``) are appended
    to ``runs`` as soon as it ends, so that an interruption keeps the runs done.
    """
    for index, seed in enumerate(seeds, 1):
        if len(seeds) > 1:
            progress(f"--- {label}: run {index}/{len(seeds)} (seed {seed}) ---")
        run_dir = out_dir if len(seeds) == 1 else os.path.join(out_dir, f"run{index}-seed{seed}")
        try:
            results = run_experiment(make_spec(seed), run_dir, target=target, progress=progress)
        except ExperimentFailed as error:
            results = error.results or {"status": "error", "error": str(error)}
        runs.append(results)


def _seeds(spec, repeat, same_seed=False):
    """The seeds of ``repeat`` runs (default: the spec's ``repeat``; ``same_seed``: the spec's seed each time)."""
    return repeats.repeat_seeds(spec.seed, repeat or spec.repeat, same=same_seed)


def compare_modes(spec, modes, out_dir=None, target=None, progress=print, repeat=None, same_seed=False):
    """Run ``spec`` under each mode (``repeat`` times each) and write the side-by-side comparison.

    Args:
        spec: a validated :class:`~testbed.experiment.spec.ExperimentSpec`.
        modes: mode names (each must have its program; checked before anything runs).
        out_dir: output folder (default: ``<spec.out_dir>-compare``).
        target: P4 target override.
        progress: progress callback.
        repeat: runs per mode (default: the spec's ``repeat``); the seeds are
            :func:`~testbed.experiment.repeats.repeat_seeds` of the spec's, each mode runs
            with the same ones, each run into ``<out>/<mode>/run<i>-seed<seed>/``.
        same_seed: repeat with the spec's own seed (the emulator's run-to-run noise only).

    Returns:
        list[dict]: the table rows (one per mode, in order).

    Raises:
        ParameterError: an unknown mode or one whose program is missing (before any run).
        KeyboardInterrupt: interrupted (the current run is torn down; the table is written).
    """
    seeds = _seeds(spec, repeat, same_seed)
    for mode in modes:
        spec.with_mode(mode)   # an unknown mode fails before anything runs
    out_dir = os.path.abspath(out_dir or (spec.out_dir.rstrip("/") + "-compare"))
    os.makedirs(out_dir, exist_ok=True)
    labelled = []
    title = f"{spec.name}: " + " vs ".join(modes)
    try:
        for position, mode in enumerate(modes, 1):
            progress(f"=== mode {mode} ({position}/{len(modes)}) ===")
            labelled.append((mode, []))
            _run_repeats(labelled[-1][1], mode, lambda seed, mode=mode: spec.with_seed(seed).with_mode(mode), seeds,
                         os.path.join(out_dir, mode), target, progress)
    finally:
        rows = _finish(labelled, seeds, out_dir, title, progress, "comparison")
    return rows


def _finish(labelled, seeds, out_dir, title, progress, what, param=None, values=()):
    """Write the table and plots of the runs done so far (also after an interruption); returns the rows."""
    labelled = [(label, runs) for label, runs in labelled if runs]
    rows, columns = _rows(labelled, seeds)
    for row, value in zip(rows, values):
        row["param"], row["param_value"] = param, value
    if rows:
        write_comparison(rows, out_dir, title, columns, dict(labelled))
        if param is not None:
            plots.plot_sweep(rows, param, os.path.join(out_dir, "sweep.png"), title=title)
        progress("\n" + format_table(rows, columns))
        progress(f"{what} in {out_dir}")
    return rows


def sweep_mode_param(spec, param, values, mode=None, out_dir=None, target=None, progress=print, repeat=None,
                     same_seed=False):
    """Run ``spec`` once (or ``repeat`` times) per value of one mode parameter (e.g. the flowlet interval).

    Rows are labelled ``<mode>@<param>=<value>`` and carry ``param_value``; the
    figure (``sweep.png``) plots out-of-order rate and uplink MMR against the
    value, the flowlet trade-off of seed 004 section 4.5 (with error bars when repeated).

    Args:
        spec: a validated spec.
        param: a ``mode_params`` key (``flowlet_interval_us``, ``hash_seed``).
        values: the values to try, in order.
        mode: the mode to run (default: the spec's).
        out_dir / target / progress / repeat / same_seed: as :func:`compare_modes` (runs go into
            ``<out>/<param>-<value>/run<i>-seed<seed>/``).

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
    seeds = _seeds(spec, repeat, same_seed)
    mode = mode or spec.mode
    if mode:
        spec.with_mode(mode)   # an unknown mode fails before anything runs
    out_dir = os.path.abspath(out_dir or (spec.out_dir.rstrip("/") + f"-sweep-{param}"))
    os.makedirs(out_dir, exist_ok=True)
    labelled = []
    title = f"{spec.name}: {mode} over {param}"

    def make_spec(seed, value):
        base = spec.with_seed(seed)
        base = base.with_mode(mode) if mode else base
        return replace(base, mode_params=dict(base.mode_params, **{param: value}),
                       seeded_params=[name for name in base.seeded_params if name != param])

    try:
        for position, value in enumerate(values, 1):
            label = f"{mode}@{param}={value:g}"
            progress(f"=== {label} ({position}/{len(values)}) ===")
            labelled.append((label, []))
            _run_repeats(labelled[-1][1], label, lambda seed, value=value: make_spec(seed, value), seeds,
                         os.path.join(out_dir, f"{param}-{value:g}"), target, progress)
    finally:
        rows = _finish(labelled, seeds, out_dir, title, progress, "sweep", param, values)
    return rows
