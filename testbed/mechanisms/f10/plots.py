"""F10's comparison plot: detection and flow recovery per mode, losses over time by cause, path dilation."""
import os

from testbed.experiment.plots import metric_bars, plt, rows_with_runs

#: drop causes of a run's ``dataplane.drops`` shown per mode: (key, legend label)
DROP_CAUSES = (("connectivity_links", "links down (no reroute yet)"), ("no_detour", "no detour (F10 data plane)"),
               ("congestion", "queues (congestion)"), ("emulator", "emulator (switch sockets)"))


def drops_by_cause(results):
    """``{cause: packets}`` of one run, :data:`DROP_CAUSES`' keys (connectivity without the no-detour drops).

    >>> drops_by_cause({"dataplane": {"drops": {"connectivity": 10, "no_detour": 4, "congestion": 1, "emulator": 0}}})
    {'connectivity_links': 6, 'no_detour': 4, 'congestion': 1, 'emulator': 0}
    """
    drops = (results.get("dataplane") or {}).get("drops") or {}
    no_detour = drops.get("no_detour") or 0
    return {"connectivity_links": max(0, (drops.get("connectivity") or 0) - no_detour), "no_detour": no_detour,
            "congestion": drops.get("congestion") or 0, "emulator": drops.get("emulator") or 0}


def _mean(values):
    return sum(values) / len(values) if values else 0.0


def plot_f10_comparison(rows, runs_by_label, out_dir, title):
    """``f10_comparison.png``: what the F10 comparison is about, one panel each.

    * detection time and flow recovery (longest and median) per mode, mean with 95%
      intervals when repeated;
    * lost packets per transmit-time bin (the first run of each mode): filled marks inside a
      failure's loss episode, hollow outside (congestion, the emulator), failures marked;
    * drops by cause per mode (mean over runs): links down before a reroute, no detour,
      queues, emulator;
    * path dilation: packets per number of extra hops (mean over runs), log scale.

    Args:
        rows: ``testbed compare``'s rows.
        runs_by_label: ``{label: [results.json of each run]}``.
        out_dir: the comparison's folder.
        title: the comparison's title.

    Returns:
        list: the file names written.
    """
    rows, labels, colours = rows_with_runs(rows, runs_by_label)
    if not rows:
        return []
    figure, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    try:
        metric_bars(axes[0, 0], rows, "detection_s", colours, "detection s (failure to port down)")
        metric_bars(axes[0, 1], rows, "flow_recovery_s", colours, "flow recovery s (longest)")
        metric_bars(axes[0, 2], rows, "median_flow_recovery_s", colours, "flow recovery s (median)")
        _losses_over_time(axes[1, 0], labels, runs_by_label, colours)
        _drops_by_cause(axes[1, 1], labels, runs_by_label)
        _path_dilation(axes[1, 2], labels, runs_by_label, colours)
        figure.suptitle(f"{title}: detection, recovery, losses, path dilation")
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, "f10_comparison.png"), dpi=100)
    finally:
        plt.close(figure)
    return ["f10_comparison.png"]


def _losses_over_time(axis, labels, runs_by_label, colours):
    drawn = False
    for label in labels:
        first = runs_by_label[label][0]
        timeline = (first.get("f10") or {}).get("loss_timeline") or {}
        if not timeline.get("t_s"):
            continue
        for after, style, suffix in ((True, dict(color=colours[label]), "after a failure"),
                                     (False, dict(facecolors="none", edgecolors=colours[label]), "other")):
            points = [(t, lost) for t, lost, inside in zip(timeline["t_s"], timeline["lost"],
                                                             timeline["after_failure"]) if inside is after]
            if points:
                axis.vlines([t for t, _ in points], 0, [lost for _, lost in points], colors=colours[label],
                            linewidth=0.8, alpha=0.6)
                axis.scatter([t for t, _ in points], [lost for _, lost in points], s=14, label=f"{label}: {suffix}",
                             **style)
                drawn = True
        for failure in first.get("failures", []):
            if failure.get("applied_at_s") is not None:
                axis.axvline(failure["applied_at_s"], color="red", linestyle="--", linewidth=0.8)
    if drawn:
        axis.legend(fontsize=7)
    else:
        axis.text(0.5, 0.5, "no packet lost", ha="center", va="center", transform=axis.transAxes)
    axis.set_xlabel("transmit time since start (s); red: failures")
    axis.set_ylabel("packets lost per bin")
    axis.set_title("losses over time (first run of each mode)", fontsize=9)


def _drops_by_cause(axis, labels, runs_by_label):
    bottoms = [0.0] * len(labels)
    for (cause, legend), colour in zip(DROP_CAUSES, ("tab:red", "tab:orange", "tab:blue", "tab:gray")):
        heights = [_mean([drops_by_cause(results)[cause] for results in runs_by_label[label]]) for label in labels]
        axis.bar(range(len(labels)), heights, bottom=bottoms, color=colour, label=legend)
        bottoms = [bottom + height for bottom, height in zip(bottoms, heights)]
    axis.set_xticks(range(len(labels)))
    axis.set_xticklabels(labels, rotation=30, ha="right")
    axis.set_ylabel("packets dropped (mean over runs)")
    axis.set_ylim(0, max(bottoms + [1.0]) * 1.45)   # room for the legend above the bars
    axis.legend(fontsize=7, loc="upper left")
    axis.set_title("drops by cause", fontsize=9)


def _path_dilation(axis, labels, runs_by_label, colours):
    hops = sorted({int(extra) for label in labels for results in runs_by_label[label]
                   for extra in ((results.get("summary") or {}).get("path_dilation") or {}).get("extra_hops", {})})
    if not hops:
        axis.text(0.5, 0.5, "no path dilation measured", ha="center", va="center", transform=axis.transAxes)
        return
    width = 0.8 / len(labels)
    for position, label in enumerate(labels):
        runs = runs_by_label[label]
        heights = [_mean([((results.get("summary") or {}).get("path_dilation") or {}).get("extra_hops", {})
                          .get(str(extra), 0) for results in runs]) for extra in hops]
        axis.bar([index + position * width - 0.4 + width / 2 for index in range(len(hops))], heights, width,
                 color=colours[label], label=label)
    axis.set_xticks(range(len(hops)))
    axis.set_xticklabels([f"+{extra}" for extra in hops])
    axis.set_yscale("log")
    axis.set_xlabel("extra switches crossed")
    axis.set_ylabel("packets (mean over runs)")
    axis.legend(fontsize=7)
    axis.set_title("path dilation", fontsize=9)


def plot_path_dilation(rows, path, title="F10 path dilation of local reroutes"):
    """Figure 10 of seed 002: the complementary CDF of the reroutes' extra hops, one panel per topology.

    ``P(extra hops > x)`` over the reroutes.  A reroute the data plane dropped after its detour (it
    met a second failure and a marked packet is never detoured twice) counts as never delivered: it
    stays in the CCDF at every hop count, so the curve's floor is the fraction of reroutes dropped.

    Args:
        rows: :func:`testbed.mechanisms.f10.dilation.dilation_table` rows.
        path: the PNG to write.
        title: the figure's title.

    Returns:
        str: ``path``.
    """
    labels = list(dict.fromkeys(row["label"] for row in rows))
    hops = range(0, 1 + max([int(extra) for row in rows for extra in row["extra_hops"]] + [4]) + 2)
    figure, axes = plt.subplots(1, len(labels), figsize=(5.5 * len(labels), 4.2), squeeze=False, sharey=True)
    try:
        for axis, label in zip(axes[0], labels):
            for row in (row for row in rows if row["label"] == label):
                total = row["reroutes"] + row["reroutes_dropped"]
                if not total:
                    continue
                counts = {int(extra): count for extra, count in row["extra_hops"].items()}
                ccdf = [(sum(c for extra, c in counts.items() if extra > x) + row["reroutes_dropped"]) / total
                        for x in hops]
                axis.step(list(hops), ccdf, where="post",
                          label=f"{row['failures']} {row['kind']} failures: mean +{row['mean_extra_hops']:.2f}, "
                                f"{100 * row['reroutes_dropped'] / total:.1f}% dropped")
            axis.set_yscale("log")
            axis.set_ylim(1e-4, 1.5)
            axis.set_xlabel("extra switches crossed by a rerouted flow")
            axis.set_title(label, fontsize=10)
            axis.legend(fontsize=7, loc="lower left")
        axes[0][0].set_ylabel("fraction of reroutes with more than x extra hops\n(dropped ones: more than any)")
        figure.suptitle(title)
        figure.tight_layout()
        figure.savefig(path, dpi=100)
    finally:
        plt.close(figure)
    return path
