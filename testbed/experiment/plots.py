"""PNG plots of experiment results (matplotlib with the Agg backend; no display needed).

* :func:`plot_link_load`: uplink load per link, one bar group per scheme (a single run is one scheme).
* :func:`plot_timeline`: aggregate receiver throughput over time with markers of failures,
  detections, reroutes, pushback and rescheduling
  (and the controller's reactions).
* :func:`plot_comparison`: the side-by-side figure of ``testbed compare``: uplink load
  per scheme, and MMR / goodput / out-of-order per scheme.
* :func:`plot_sweep`: out-of-order rate and uplink MMR against a swept parameter
  (the flowlet interval), on two y axes.
* :func:`plot_dsf`: runs on a DSF topology: VOQ depth, credit grants and uplink rates
  over time, and the load of every fabric link per tier.
"""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first


def _bars(axis, loads_by_scheme, ylabel="bytes sent upward"):
    schemes = list(loads_by_scheme)
    links = sorted({link for loads in loads_by_scheme.values() for link in loads})
    width = 0.8 / max(1, len(schemes))
    for position, scheme in enumerate(schemes):
        xs = [index + position * width - 0.4 + width / 2 for index in range(len(links))]
        axis.bar(xs, [loads_by_scheme[scheme].get(link, 0) for link in links], width, label=scheme)
    axis.set_xticks(range(len(links)))
    axis.set_xticklabels(links, rotation=30, ha="right", fontsize=7)
    axis.set_ylabel(ylabel)
    if len(schemes) > 1:
        axis.legend(fontsize=8)


def plot_link_load(loads_by_scheme, path, title="Uplink load per link"):
    """Bar chart of per-link upward load, one bar group per scheme.

    Args:
        loads_by_scheme: ``{scheme: {link: bytes}}``.
        path: PNG file to write.
        title: figure title.

    Returns:
        str: ``path``.
    """
    figure, axis = plt.subplots(figsize=(8, 4.5))
    try:
        if any(loads_by_scheme.values()):
            _bars(axis, loads_by_scheme)
        else:
            axis.text(0.5, 0.5, "no uplink load measured", ha="center", va="center", transform=axis.transAxes)
        axis.set_title(title)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path


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


#: how each kind of event is marked on a timeline: (legend label, colour, line style)
EVENT_STYLES = {
    "failure": ("failure", "tab:red", "--"),
    "detection": ("detector: port down (local reroute)", "tab:orange", "-."),
    "reaction": ("controller reroute", "tab:green", ":"),
    "pushback": ("pushback installed", "tab:purple", ":"),
    "reschedule": ("rescheduler: new weights", "tab:brown", (0, (1, 3))),
}


def plot_timeline(timeline, events, path, title="Aggregate receiver throughput", plot_bin_s=0.05):
    """Throughput over time with a vertical line at each event (failure, detection, reroute...).

    Args:
        timeline: ``{"bin_s", "t_s": [...], "mbps": [...]}``.
        events: ``{kind: [(time_s, label)]}`` with kinds of :data:`EVENT_STYLES`; failures are
            also annotated with their label.
        path: PNG file to write.
        title: figure title.
        plot_bin_s: bins are averaged to about this width for the plot (results keep the raw bins).

    Returns:
        str: ``path``.

    Raises:
        KeyError: an event kind without a style.
    """
    figure, axis = plt.subplots(figsize=(8, 4))
    try:
        if timeline.get("t_s"):
            bin_s = timeline.get("bin_s") or plot_bin_s
            factor = max(1, int(round(plot_bin_s / bin_s)))
            times, mbps = rebin(timeline["t_s"], timeline["mbps"], factor)
            axis.plot(times, mbps, linewidth=1.0, color="tab:blue",
                      label=f"throughput ({factor * bin_s * 1000:.0f} ms bins)")
        else:
            axis.text(0.5, 0.5, "no receiver timeline", ha="center", va="center", transform=axis.transAxes)
        marked = False
        for kind, rows in events.items():
            legend, color, style = EVENT_STYLES[kind]
            for index, (time_s, label) in enumerate(rows):
                axis.axvline(time_s, color=color, linestyle=style, linewidth=1, label=legend if index == 0 else None)
                marked = True
                if kind == "failure":
                    axis.annotate(label, (time_s, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                                  va="top", ha="right", fontsize=7, color=color)
        axis.set_xlabel("time since start (s)")
        axis.set_ylabel("Mbit/s")
        axis.set_ylim(bottom=0)  # a dip must not look like an outage
        axis.set_title(title)
        if marked:
            axis.legend(fontsize=8, loc="lower right")
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path


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
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4.5),
                                                 gridspec_kw={"width_ratios": [2.2, 1, 1]})
    try:
        if any(loads_by_scheme.values()):
            _bars(left, loads_by_scheme)
        left.set_title("uplink load")
        modes = [row["mode"] for row in rows]
        mmr = [row.get("uplink_mmr") or 0.0 for row in rows]
        middle.bar(modes, mmr, color="tab:orange")
        middle.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        middle.set_title("uplink MMR (1 = perfect)")
        goodput = [row.get("goodput_mbps") or 0.0 for row in rows]
        right.bar(modes, goodput, color="tab:green")
        right.set_title("aggregate goodput (Mbit/s)")
        for axis in (middle, right):
            axis.tick_params(axis="x", rotation=30)
        figure.suptitle(title)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path


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
    try:
        left.plot(xs, [row.get("out_of_order_rate") or 0.0 for row in ordered], "o-", color="tab:red",
                  label="out-of-sequence rate")
        if any(row.get("reorder_rate") is not None for row in ordered):
            left.plot(xs, [row.get("reorder_rate") or 0.0 for row in ordered], "^:", color="tab:purple",
                      label="reordered (late) rate")
        left.legend(fontsize=8, loc="upper center")
        left.set_xlabel(param)
        left.set_ylabel("out-of-order packets / received", color="tab:red")
        if xs and min(xs) > 0 and max(xs) / min(xs) >= 10:
            left.set_xscale("log")
        right = left.twinx()
        right.plot(xs, [row.get("uplink_mmr") or 0.0 for row in ordered], "s--", color="tab:blue",
                   label="uplink MMR")
        right.set_ylabel("uplink MMR (1 = perfect balance)", color="tab:blue")
        left.set_title(title)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path


def plot_dsf(record, out_dir):
    """The DSF figures of a run on a DSF topology (results.json's ``dsf`` section).

    * ``dsf_timeline.png``: VOQ depth per interface node, credit grants per second per
      egress port, and each interface node's uplink rate over time, with the failures marked;
    * ``dsf_fabric_load.png``: bytes (of cells, with the DSF programs) on every directed
      fabric link, one panel per tier and direction, with its MMR.

    Args:
        record: the results dict (with ``dsf``).
        out_dir: the run's folder.

    Returns:
        list: the file names written.
    """
    dsf = record["dsf"]
    label = record.get("mode") or os.path.basename(record.get("program", ""))
    failures = [row["applied_at_s"] for row in record.get("failures", []) if row.get("applied_at_s") is not None]
    figure, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    try:
        depth = dsf["voq_depth"]
        for rdsw, values in sorted(depth["depth_pkts"].items()):
            axes[0].plot(depth["t_s"], values, label=rdsw)
        axes[0].set_ylabel("VOQ depth (packets)")
        credits = dsf["credits"]
        for port, values in sorted(credits["grants_per_s"].items()):
            axes[1].plot(credits["t_s"], values, label=port)
        axes[1].set_ylabel("credit grants / s")
        uplinks = dsf["uplink_rates"]
        for rdsw, values in sorted(uplinks["bytes_per_s"].items()):
            axes[2].plot(uplinks["t_s"], [value * 8 / 1e6 for value in values], label=rdsw)
        axes[2].set_ylabel("uplink Mbit/s")
        axes[2].set_xlabel("time since t0 (s)")
        for axis in axes:
            for at in failures:
                axis.axvline(at, color="red", linestyle="--", linewidth=1)
            if axis.get_legend_handles_labels()[0]:
                axis.legend(fontsize=7, ncol=4)
            axis.set_ylim(bottom=0)
        figure.suptitle(f"{record['name']}: VOQs, credits and uplink rates ({label})")
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, "dsf_timeline.png"), dpi=110)
    finally:
        plt.close(figure)
    tiers = {tier: data for tier, data in dsf["tiers"].items() if data["loads"]}
    figure, axes = plt.subplots(max(1, len(tiers)), 1, figsize=(9, 2.6 * max(1, len(tiers))), squeeze=False)
    try:
        for axis, (tier, data) in zip(axes[:, 0], sorted(tiers.items())):
            links = sorted(data["loads"])
            axis.bar(range(len(links)), [data["loads"][link] for link in links], color="tab:blue")
            axis.set_xticks(range(len(links)))
            axis.set_xticklabels(links, rotation=30, ha="right", fontsize=6)
            mmr = data["mmr"]
            axis.set_title(f"{tier}: MMR {mmr:.3f}" if mmr is not None else tier, fontsize=9)
            axis.set_ylabel("bytes")
        figure.suptitle(f"{record['name']}: fabric link load ({label})")
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, "dsf_fabric_load.png"), dpi=110)
    finally:
        plt.close(figure)
    return ["dsf_timeline.png", "dsf_fabric_load.png"]
