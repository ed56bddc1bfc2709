"""PNG plots of experiment results (matplotlib with the Agg backend; no display needed).

* :func:`plot_link_load`: uplink load per link, one bar group per scheme (a single run is one scheme).
* :func:`plot_timeline`: aggregate receiver throughput over time with markers of failures
  and the controller's reactions, and of what the run's mechanisms mark (detections, pushback...).
* :func:`plot_comparison`: the side-by-side figure of ``testbed compare``: uplink load
  per scheme, and MMR / goodput / out-of-order per scheme.
* :func:`plot_sweep`: out-of-order rate and uplink MMR against a swept parameter
  (the flowlet interval), on two y axes.

Rows of repeated runs (``testbed compare --repeat``) carry ``stats``: their
bars and points are the means, with the 95% confidence intervals as error bars
(:func:`metric_errors`).

Mechanisms draw their own plots in their packages (``testbed/mechanisms/<name>/``).

The ``*_figure`` functions build the figures (the ``plot_*`` functions save and
close them).  So that a figure cannot mislead, the series are prepared by
functions the tests check (:func:`timeline_series`, :func:`byte_scale`,
:func:`mode_colours`, :func:`metric_series`, :func:`link_load_series`,
:func:`event_label_layout`):

* the throughput timeline leaves out the partly observed edge bins (the last
  one, in which the traffic stopped, and a first one that began before time
  zero): they are dropped, not scaled, because how much of such a bin the
  traffic covered is not known, and drawn as they are they look like drops;
* a value that was not measured (a failed run's MMR, goodput or link loads) is
  drawn as missing (no bar and "n/a"; a gap in a line), never as 0;
* a mode keeps one colour in every panel of a comparison, and no two modes share one;
* byte counts are drawn in readable units (kB, MB, GB) without an offset exponent;
* failure labels sit in a band above the highest point of the curve, and the
  legend sits outside the axes, so neither covers the curve.
"""
import contextlib
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first

from testbed.experiment.congestion import cdf, complete  # noqa: E402


#: colours given to modes in order (matplotlib's tab10, the default cycle); more modes take tab20's
MODE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                "tab:gray", "tab:olive", "tab:cyan")
#: (divisor, unit) from the largest to the smallest: SI multiples of a byte
BYTE_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "bytes"))
MISSING_TEXT = "n/a"
LEGEND_COLUMNS = 3          # columns of a bar panel's legend
LEGEND_ROW_FRACTION = 0.07  # height of one legend row (8-point text), as a fraction of the axes
LEGEND_MARGIN = 0.06


def rows_with_runs(rows, runs_by_label):
    """The comparison rows whose mode has runs to draw, their labels and one colour per label.

    Returns:
        tuple: ``(rows, labels, colours)``; empty rows when no mode has a run.
    """
    labels = [row["mode"] for row in rows if runs_by_label.get(row["mode"])]
    return [row for row in rows if row["mode"] in labels], labels, mode_colours(labels)


def mode_colours(modes):
    """One colour per mode, the same in every panel, never shared by two modes.

    Args:
        modes: mode names in order (repeats are ignored).

    Returns:
        dict: ``{mode: colour}``: :data:`MODE_COLOURS` for up to 10 modes, else evenly
        spaced colours of a colour map (tab20 up to 20 modes, turbo beyond).
    """
    unique = list(dict.fromkeys(modes))
    if len(unique) <= len(MODE_COLOURS):
        palette = MODE_COLOURS
    elif len(unique) <= 20:
        palette = [matplotlib.colors.to_hex(colour) for colour in plt.get_cmap("tab20").colors]
    else:
        turbo = plt.get_cmap("turbo")
        palette = [matplotlib.colors.to_hex(turbo(index / (len(unique) - 1))) for index in range(len(unique))]
    return {mode: palette[index] for index, mode in enumerate(unique)}


def byte_scale(largest):
    """The unit to draw byte counts up to ``largest`` in: ``(divisor, unit)``, e.g. ``(1e6, "MB")``."""
    for divisor, unit in BYTE_UNITS:
        if largest >= divisor:
            return divisor, unit
    return BYTE_UNITS[-1]


def _measured(value):
    """``value`` if it is a finite number, else None (not measured)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def metric_series(rows, key):
    """``[(mode, value or None)]`` of one table column; None where nothing was measured (never 0)."""
    return [(row["mode"], _measured(row.get(key))) for row in rows]


def link_load_series(loads_by_scheme, colours=None):
    """The bars of an uplink-load panel.

    Args:
        loads_by_scheme: ``{scheme: {link: bytes}}``; ``{}`` or None for a scheme that measured nothing.
        colours: ``{scheme: colour}`` (default: :func:`mode_colours` of the schemes).

    Returns:
        dict: ``links`` (sorted), ``unit``, ``colours``, ``heights`` ``{scheme: [load in unit
        or None per link]}`` (None: the scheme did not report the link; not 0) and
        ``missing`` (the schemes that reported no link).
    """
    loads_by_scheme = {scheme: loads or {} for scheme, loads in loads_by_scheme.items()}
    links = sorted({link for loads in loads_by_scheme.values() for link in loads})
    largest = max([value for loads in loads_by_scheme.values() for value in loads.values() if _measured(value)]
                  or [0])
    divisor, unit = byte_scale(largest)
    heights = {}
    for scheme, loads in loads_by_scheme.items():
        values = [_measured(loads.get(link)) for link in links]
        heights[scheme] = [None if value is None else value / divisor for value in values]
    return {"links": links, "unit": unit, "colours": colours or mode_colours(loads_by_scheme), "heights": heights,
            "missing": [scheme for scheme, loads in loads_by_scheme.items() if not loads]}


def _bar_heights(values):
    """Bar heights for matplotlib: NaN (no bar) where a value is None."""
    return [math.nan if value is None else value for value in values]


def _plain_numbers(axis):
    """Tick labels as plain numbers: no offset (``+1e6``) and no scientific multiplier."""
    axis.ticklabel_format(axis="y", style="plain", useOffset=False)


def _bars(axis, loads_by_scheme, colours=None):
    series = link_load_series(loads_by_scheme, colours)
    schemes = list(series["heights"])
    width = 0.8 / max(1, len(schemes))
    for position, scheme in enumerate(schemes):
        xs = [index + position * width - 0.4 + width / 2 for index in range(len(series["links"]))]
        label = f"{scheme} ({MISSING_TEXT}: not measured)" if scheme in series["missing"] else scheme
        axis.bar(xs, _bar_heights(series["heights"][scheme]), width, label=label, color=series["colours"][scheme])
    axis.set_xticks(range(len(series["links"])))
    axis.set_xticklabels(series["links"], rotation=30, ha="right", fontsize=7)
    axis.set_ylabel(f"{series['unit']} sent upward")
    _plain_numbers(axis)
    tallest = max([height for heights in series["heights"].values() for height in heights if height] or [1.0])
    if len(schemes) > 1 or series["missing"]:
        # the legend goes in a band above the tallest bar (up to 3 columns), never over a bar
        columns = min(len(schemes), LEGEND_COLUMNS)
        band = LEGEND_MARGIN + LEGEND_ROW_FRACTION * math.ceil(len(schemes) / columns)
        axis.set_ylim(0, tallest / (1 - min(band, 0.6)))
        axis.legend(fontsize=8, loc="upper center", ncols=columns)
    else:
        axis.set_ylim(bottom=0)


def metric_errors(rows, key):
    """Error bar half-widths of one table column: each row's 95% interval (0 for a row run once).

    Returns:
        list: one value per row, or None when no row was run several times (no error bars).
    """
    if not any(key in (row.get("stats") or {}) for row in rows):
        return None
    return [((row.get("stats") or {}).get(key) or {}).get("ci95") or 0.0 for row in rows]


def metric_bars(axis, rows, key, colours, title=None):
    """Bars of one table column per row in the rows' colours, with 95% error bars when repeated.

    A missing value is labelled ("n/a"), not drawn as 0.  Mechanisms' comparison plots
    draw their metrics with it.

    Args:
        axis: the matplotlib axes.
        rows: ``testbed compare``'s table rows.
        key: the column.
        colours: ``{row label: colour}`` (:func:`mode_colours`).
        title: the panel's title.
    """
    series = metric_series(rows, key)
    positions = range(len(series))
    errors = metric_errors(rows, key)
    axis.bar(positions, _bar_heights([value for _, value in series]), color=[colours[mode] for mode, _ in series],
             yerr=errors, capsize=4 if errors else 0, ecolor="black")
    for position, (_, value) in zip(positions, series):
        if value is None:
            axis.text(position, 0, MISSING_TEXT, ha="center", va="bottom", fontsize=8, color="grey")
    axis.set_xticks(list(positions))
    axis.set_xticklabels([mode for mode, _ in series], rotation=30, ha="right")
    axis.set_ylim(bottom=0)
    if title:
        axis.set_title(title + (" (mean, 95% interval)" if errors else ""), fontsize=9)


@contextlib.contextmanager
def _closed_on_error(figure):
    """Close ``figure`` when building it fails (and re-raise)."""
    try:
        yield figure
    except BaseException:
        plt.close(figure)
        raise


def link_load_figure(loads_by_scheme, title="Uplink load per link"):
    """The figure of :func:`plot_link_load` (the caller closes it)."""
    figure, axis = plt.subplots(figsize=(8, 4.5))
    with _closed_on_error(figure):
        if any(loads_by_scheme.values()):
            _bars(axis, loads_by_scheme)
        else:
            axis.text(0.5, 0.5, "no uplink load measured", ha="center", va="center", transform=axis.transAxes)
        axis.set_title(title)
        figure.tight_layout()
    return figure


def _save(figure, path):
    """Write ``figure`` to the PNG ``path`` and close it; returns ``path``."""
    try:
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path


def plot_link_load(loads_by_scheme, path, title="Uplink load per link"):
    """Bar chart of per-link upward load, one bar group per scheme.

    Args:
        loads_by_scheme: ``{scheme: {link: bytes}}``.
        path: PNG file to write.
        title: figure title.

    Returns:
        str: ``path``.
    """
    return _save(link_load_figure(loads_by_scheme, title), path)


def rebin(t_s, values, factor):
    """Average ``values`` over groups of ``factor`` consecutive bins (times: each group's first)."""
    if factor <= 1:
        return list(t_s), list(values)
    times, averaged = [], []
    for start in range(0, len(values), factor):
        chunk = values[start:start + factor]
        times.append(t_s[start])
        averaged.append(sum(chunk) / len(chunk))
    return times, averaged


def timeline_series(timeline, plot_bin_s=0.05):
    """The throughput curve of a timeline: complete bins only, averaged to about ``plot_bin_s``.

    The last bin is dropped (the traffic stopped somewhere inside it), and so is a
    first bin that began before time zero (observed only in part); a bin in between
    without arrivals stays 0 (an outage).

    Args:
        timeline: ``{"bin_s", "t_s": [bin start times], "mbps": [...]}``.
        plot_bin_s: target width of the plotted bins.

    Returns:
        tuple: ``(times, mbps, width_s)``; empty lists when no complete bin remains.
    """
    t_s, mbps = list(timeline.get("t_s") or []), list(timeline.get("mbps") or [])
    bin_s = timeline.get("bin_s") or plot_bin_s
    factor = max(1, int(round(plot_bin_s / bin_s)))
    if t_s:
        t_s, mbps = t_s[:-1], mbps[:-1]
    if t_s and t_s[0] < -1e-9:
        t_s, mbps = t_s[1:], mbps[1:]
    times, averaged = rebin(t_s, mbps, factor)
    return times, averaged, factor * bin_s


LABEL_ROW_FRACTION = 0.07   # height of one row of event labels, as a fraction of the axes (7-point text)
LABEL_TOP_MARGIN = 0.02
LABEL_CHARS_PER_AXIS = 100  # characters of 7-point text that surely fit across the timeline's axes
LABEL_MAX_ROWS = 8          # the band takes at most 2 + 8 * 7 = 58 % of the axes


def event_label_layout(labels, x_min, x_max, curve_top):
    """Where to write event labels so that they do not cover the curve.

    Labels are written horizontally from their event's time (or, for an event
    too near the right edge, ending at the edge, so that the text stays inside
    the axes), in rows in a band above the curve's highest point; a label goes
    to the first row where it does not overlap an earlier one.  With more than
    :data:`LABEL_MAX_ROWS` rows' worth of crowded labels, the surplus goes to the
    row that frees up first (labels may then overlap each other, still never the curve).

    Args:
        labels: ``[(time_s, text)]``.
        x_min, x_max: the x range of the axes.
        curve_top: the highest value the curve reaches (> 0).

    Returns:
        dict: ``y_top`` (the y limit that makes room for the band) and ``labels``
        ``[(x, y, text)]`` with ``x`` where the text begins and ``y`` its top, in data
        units; each label's text lies between ``y - row_height`` and ``y``, all above
        ``curve_top``.  Also ``row_height`` (data units) and ``char_width`` (x units per character).
    """
    char_width = max(x_max - x_min, 1e-9) / LABEL_CHARS_PER_AXIS
    starts = sorted((max(x_min, min(time_s, x_max - (len(text) + 1) * char_width)), text) for time_s, text in labels)
    row_ends = []   # per row: the x where its last label ends
    placed = []
    for start, text in starts:
        end = start + (len(text) + 1) * char_width
        free = [row for row, row_end in enumerate(row_ends) if start >= row_end]
        if free:
            row = free[0]
        elif len(row_ends) < LABEL_MAX_ROWS:
            row = len(row_ends)
            row_ends.append(end)
        else:
            row = min(range(len(row_ends)), key=row_ends.__getitem__)
        row_ends[row] = max(row_ends[row], end)
        placed.append((start, row, text))
    band = LABEL_TOP_MARGIN + LABEL_ROW_FRACTION * len(row_ends)
    y_top = curve_top / (1 - band) if row_ends else curve_top * 1.05
    row_height = LABEL_ROW_FRACTION * y_top
    return {"y_top": y_top, "row_height": row_height, "char_width": char_width,
            "labels": [(start, y_top * (1 - LABEL_TOP_MARGIN) - row * row_height, text)
                       for start, row, text in placed]}


#: how each kind of event is marked on a timeline: (legend label, colour, line style); mechanisms add
#: their own kinds (their run hooks' ``event_styles``)
EVENT_STYLES = {
    "failure": ("failure", "tab:red", "--"),
    "reaction": ("controller reroute", "tab:green", ":"),
}


def timeline_figure(timeline, events, title="Aggregate receiver throughput", plot_bin_s=0.05, styles=None):
    """The figure of :func:`plot_timeline` (the caller closes it); arguments as there."""
    styles = styles or EVENT_STYLES
    figure, axis = plt.subplots(figsize=(10, 4))
    with _closed_on_error(figure):
        times, mbps, width_s = timeline_series(timeline, plot_bin_s)
        if times:
            axis.plot(times, mbps, linewidth=1.0, color="tab:blue", label=f"throughput ({width_s * 1000:.0f} ms bins)")
        else:
            axis.text(0.5, 0.5, "no receiver timeline", ha="center", va="center", transform=axis.transAxes)
        marked = False
        for kind, rows in events.items():
            legend, color, style = styles[kind]
            for index, (time_s, _label) in enumerate(rows):
                axis.axvline(time_s, color=color, linestyle=style, linewidth=1, label=legend if index == 0 else None)
                marked = True
        x_min, x_max = axis.get_xlim()  # autoscaled to the curve and the event lines
        layout = event_label_layout(events.get("failure", []), x_min, x_max, max(mbps, default=0) or 1.0)
        for x, y, label in layout["labels"]:
            axis.text(x, y, " " + label, ha="left", va="top", fontsize=7, color=EVENT_STYLES["failure"][1])
        axis.set_xlim(x_min, x_max)
        axis.set_xlabel("time since start (s)")
        axis.set_ylabel("Mbit/s")
        axis.set_ylim(0, layout["y_top"])  # from 0: a dip must not look like an outage; room for the labels
        axis.set_title(title)
        if marked:
            axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        figure.tight_layout()
    return figure


def plot_timeline(timeline, events, path, title="Aggregate receiver throughput", plot_bin_s=0.05, styles=None):
    """Throughput over time with a vertical line at each event (failure, detection, reroute...).

    Args:
        timeline: ``{"bin_s", "t_s": [...], "mbps": [...]}``.
        events: ``{kind: [(time_s, label)]}`` with kinds of ``styles``; failures are
            also annotated with their label.
        path: PNG file to write.
        title: figure title.
        plot_bin_s: bins are averaged to about this width for the plot (results keep the raw bins).
        styles: ``{kind: (legend label, colour, line style)}`` (default :data:`EVENT_STYLES`; a run
            adds its mechanisms').

    Returns:
        str: ``path``.

    Raises:
        KeyError: an event kind without a style.
    """
    return _save(timeline_figure(timeline, events, title, plot_bin_s, styles), path)


def comparison_figure(rows, loads_by_scheme, title="Load-balancing schemes"):
    """The figure of :func:`plot_comparison` (the caller closes it); arguments as there."""
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4.5),
                                                 gridspec_kw={"width_ratios": [2.2, 1, 1]})
    with _closed_on_error(figure):
        colours = mode_colours([row["mode"] for row in rows] + list(loads_by_scheme))
        if any(loads_by_scheme.values()):
            _bars(left, loads_by_scheme, colours)
        left.set_title("uplink load")
        metric_bars(middle, rows, "uplink_mmr", colours, "uplink MMR (1 = perfect)")
        middle.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        metric_bars(right, rows, "goodput_mbps", colours, "aggregate goodput (Mbit/s)")
        figure.suptitle(title)
        figure.tight_layout()
    return figure


def plot_comparison(rows, loads_by_scheme, path, title="Load-balancing schemes"):
    """The compare figure: uplink load per scheme (left) and per-scheme metrics (right).

    Args:
        rows: compare table rows (``mode``, ``uplink_mmr``, ``goodput_mbps``, ``out_of_order_rate``).
        loads_by_scheme: ``{scheme: {link: bytes}}``.
        path: PNG file to write.
        title: figure title.

    Returns:
        str: ``path``.
    """
    return _save(comparison_figure(rows, loads_by_scheme, title), path)


def _line_values(rows, key):
    """A line's y values: NaN (a gap in the line) where nothing was measured."""
    return _bar_heights([value for _, value in metric_series(rows, key)])


def plot_sweep(rows, param, path, title="Parameter sweep"):
    """Out-of-order rates (left axis) and uplink MMR (right axis) against a swept parameter.

    Args:
        rows: table rows with ``param_value``, ``out_of_order_rate`` and ``uplink_mmr``.
        param: the parameter's name (x axis label).
        path: PNG file to write.
        title: figure title.

    Returns:
        str: ``path``.
    """
    ordered = sorted(rows, key=lambda row: row["param_value"])
    xs = [row["param_value"] for row in ordered]
    figure, left = plt.subplots(figsize=(7, 4.5))
    with _closed_on_error(figure):
        left.errorbar(xs, _line_values(ordered, "out_of_order_rate"), yerr=metric_errors(ordered, "out_of_order_rate"),
                      fmt="o-", color="tab:red", capsize=4, label="out-of-sequence rate")
        if any(row.get("reorder_rate") is not None for row in ordered):
            left.errorbar(xs, _line_values(ordered, "reorder_rate"), yerr=metric_errors(ordered, "reorder_rate"),
                          fmt="^:", color="tab:purple", capsize=3, label="reordered (late) rate")
        left.legend(fontsize=8, loc="upper center")
        left.set_xlabel(param)
        left.set_ylabel("out-of-order packets / received", color="tab:red")
        if xs and min(xs) > 0 and max(xs) / min(xs) >= 10:
            left.set_xscale("log")
        right = left.twinx()
        # error bars of the two axes would sit on each other: the MMR points go slightly to the right
        shifted = [x * 1.04 if left.get_xscale() == "log" else x + 0.01 * (max(xs) - min(xs)) for x in xs] \
            if metric_errors(ordered, "uplink_mmr") else xs
        right.errorbar(shifted, _line_values(ordered, "uplink_mmr"), yerr=metric_errors(ordered, "uplink_mmr"),
                       fmt="s--", color="tab:blue", capsize=4, label="uplink MMR")
        right.set_ylabel("uplink MMR (1 = perfect balance)", color="tab:blue")
        repeated = metric_errors(ordered, "uplink_mmr") is not None
        left.set_title(title + ("\n(mean of repeated runs, 95% confidence intervals)" if repeated else ""))
        figure.tight_layout()
    return _save(figure, path)


def congestion_cdf_figure(runs_by_label, title="Congestion loss per interval"):
    """CDF of the congestion loss rate over the runs' intervals, one curve per row (seed 002 Figure 9).

    Args:
        runs_by_label: ``{row label: [results.json of each run]}``; runs without a
            ``dataplane.congestion_timeline`` (unshaped links), or with one that did not read every
            port (:func:`~testbed.experiment.congestion.complete`), are left out, and so are their rows.
            Runs the overload check marked are not counted (the legend says how many).
        title: figure title.

    Returns:
        matplotlib Figure, or None when no run has a congestion timeline.
    """
    curves = {}
    for label, runs in runs_by_label.items():
        rates, interval_s, counted, marked = [], None, 0, 0
        for results in runs:
            timeline = (results.get("dataplane") or {}).get("congestion_timeline")
            if not complete(timeline):
                continue
            if (results.get("overload") or {}).get("overloaded"):
                marked += 1
                continue
            counted += 1
            rates += timeline["rate"]
            interval_s = timeline["interval_s"]
        if counted or marked:
            curves[label] = (cdf(rates), interval_s, counted, marked)
    if not curves:
        return None
    colours = mode_colours(list(curves))
    figure, axis = plt.subplots(figsize=(6.5, 4.5))
    with _closed_on_error(figure):
        for label, ((values, fractions), interval_s, counted, marked) in curves.items():
            left_out = f"; {marked} overloaded run{'s' if marked > 1 else ''} left out" if marked else ""
            what = f"{len(values)} intervals of {interval_s * 1000:g} ms, {counted} run{'s' if counted > 1 else ''}" \
                if counted else "no run counted"
            axis.step(values, fractions, where="post", color=colours[label], label=f"{label} ({what}{left_out})")
        axis.set_xlabel("congestion loss rate in an interval (queue drops / packets sent)")
        axis.set_ylabel("fraction of intervals")
        axis.set_ylim(0, 1.02)
        axis.legend(fontsize=8, loc="lower right")
        axis.set_title(title)
        figure.tight_layout()
    return figure


def plot_congestion_cdf(runs_by_label, path, title="Congestion loss per interval"):
    """Write :func:`congestion_cdf_figure` to the PNG ``path``; returns ``path``, or None without a figure."""
    figure = congestion_cdf_figure(runs_by_label, title)
    return None if figure is None else _save(figure, path)
