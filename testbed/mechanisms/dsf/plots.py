"""DSF's plots of a run: VOQ depth, credits and uplink rates over time; load on every fabric link."""
import os

from testbed.experiment.plots import plt


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
