"""Load balancing's comparison plot: uplink MMR, goodput and out-of-order arrivals per mode."""
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
