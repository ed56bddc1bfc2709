"""DSF's plots of a run (VOQ depth, credits and uplink rates over time; load on every fabric link) and of a
comparison (fabric-link MMR in bytes of cells, VOQ depth, drops by place)."""
import os

from testbed.experiment.plots import metric_bars, plt, rows_with_runs

#: the tier whose MMR a comparison shows: interface nodes up to the fabric (where spraying or hashing chooses)
UPLINK_TIER = "rdsw>fdsw"


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


def fabric_mmr(results, tier=UPLINK_TIER):
    """The MMR of ``tier``'s directed fabric links in bytes (of cells, with the DSF programs), or None.

    >>> fabric_mmr({"dsf": {"tiers": {"rdsw>fdsw": {"loads": {}, "mmr": 1.25}}}})
    1.25
    """
    return (((results.get("dsf") or {}).get("tiers") or {}).get(tier) or {}).get("mmr")


def _mean(values):
    return sum(values) / len(values) if values else 0.0


def plot_dsf_comparison(rows, runs_by_label, out_dir, title):
    """``dsf_comparison.png``: what a DSF comparison is about.

    * fabric-link MMR of the interface nodes' uplinks in bytes (of cells under DSF), mean with
      95% intervals when repeated;
    * VOQ depth over time (all VOQs of all interface nodes; first run of each mode), the
      deepest VOQ in the legend;
    * frames lost by place (mean over runs): the places of ``dataplane.drops_by_place``
      that lost any.

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
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    try:
        metric_bars(axes[0], rows, "fabric_mmr", colours, f"{UPLINK_TIER} link MMR (bytes of cells)")
        axes[0].axhline(1.0, color="grey", linestyle=":", linewidth=1)
        drawn = False
        for label in labels:
            depth = (runs_by_label[label][0].get("dsf") or {}).get("voq_depth") or {}
            if depth.get("t_s") and depth.get("depth_pkts"):
                total = [sum(values) for values in zip(*depth["depth_pkts"].values())]
                deepest = depth.get("max", {}).get("depth_pkts")
                axes[1].plot(depth["t_s"], total, color=colours[label], label=f"{label} (deepest VOQ {deepest})")
                drawn = True
        if drawn:
            axes[1].legend(fontsize=7)
            axes[1].set_ylim(bottom=0)
        else:
            axes[1].text(0.5, 0.5, "no VOQs (IP routing)", ha="center", va="center", transform=axes[1].transAxes)
        axes[1].set_xlabel("time since start (s)")
        axes[1].set_ylabel("packets queued in VOQs")
        axes[1].set_title("VOQ depth (first run of each mode)", fontsize=9)
        _drops_by_place(axes[2], labels, runs_by_label)
        figure.suptitle(f"{title}: fabric balance, VOQs, drops")
        figure.tight_layout()
        figure.savefig(os.path.join(out_dir, "dsf_comparison.png"), dpi=100)
    finally:
        plt.close(figure)
    return ["dsf_comparison.png"]


def _drops_by_place(axis, labels, runs_by_label):
    """Stacked bars of frames lost per place (mean over runs); ``fabric`` and ``by_link`` are sums, left out."""
    means = {}
    for label in labels:
        for results in runs_by_label[label]:
            places = (results.get("dataplane") or {}).get("drops_by_place") or {}
            for place, value in places.items():
                if place not in ("fabric", "by_link") and isinstance(value, int):
                    means.setdefault(place, {}).setdefault(label, []).append(value)
    places = [place for place, values in sorted(means.items()) if any(sum(v) for v in values.values())]
    if not places:
        axis.text(0.5, 0.5, "no frame lost", ha="center", va="center", transform=axis.transAxes)
    bottoms = [0.0] * len(labels)
    palette = plt.get_cmap("tab10").colors
    for index, place in enumerate(places):
        heights = [_mean(means[place].get(label, [])) for label in labels]
        axis.bar(range(len(labels)), heights, bottom=bottoms, color=palette[index % len(palette)], label=place)
        bottoms = [bottom + height for bottom, height in zip(bottoms, heights)]
    axis.set_xticks(range(len(labels)))
    axis.set_xticklabels(labels, rotation=30, ha="right")
    axis.set_ylabel("frames lost (mean over runs)")
    if places:
        axis.legend(fontsize=7)
    axis.set_title("drops by place", fontsize=9)
