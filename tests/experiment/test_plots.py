"""Plots that cannot mislead (issue 10): edge bins, missing values, colours per mode, byte units, labels."""
import itertools
import math

import matplotlib.image
import matplotlib.pyplot as plt
import pytest

from testbed.experiment import plots


def _drawn(figure):
    """Render ``figure`` (Agg) and return its renderer."""
    figure.canvas.draw()
    return figure.canvas.get_renderer()


@pytest.fixture
def closing():
    """Figures built in a test, closed after it."""
    figures = []
    yield figures.append
    for figure in figures:
        plt.close(figure)


# ---------------------------------------------------------------------------- throughput timeline

def _steady_timeline(first_s=-0.004, bins=100, mbps=10.0, last_mbps=1.0, first_mbps=2.0):
    """A 10 ms timeline: a partial first bin before zero, steady bins, a partly filled last bin."""
    t_s = [round(first_s + 0.01 * index, 6) for index in range(bins)]
    values = [first_mbps] + [mbps] * (bins - 2) + [last_mbps]
    return {"bin_s": 0.01, "t_s": t_s, "mbps": values}


def test_timeline_drops_the_partly_filled_last_bin_and_the_bin_begun_before_zero():
    timeline = _steady_timeline()
    times, mbps, width_s = plots.timeline_series(timeline, plot_bin_s=0.01)
    assert times == timeline["t_s"][1:-1] and mbps == [10.0] * 98 and width_s == pytest.approx(0.01)
    # averaged to 50 ms bins: no group mixes the partial edge bins in
    times, mbps, width_s = plots.timeline_series(timeline, plot_bin_s=0.05)
    assert min(mbps) == max(mbps) == 10.0 and width_s == pytest.approx(0.05)
    assert times[0] == pytest.approx(0.006) and len(times) == math.ceil(98 / 5)


def test_timeline_keeps_a_first_bin_that_starts_at_zero_and_an_outage_inside():
    timeline = {"bin_s": 0.01, "t_s": [0.0, 0.01, 0.02, 0.03, 0.04], "mbps": [10.0, 0.0, 10.0, 10.0, 3.0]}
    times, mbps, _ = plots.timeline_series(timeline, plot_bin_s=0.01)
    assert times == [0.0, 0.01, 0.02, 0.03] and mbps == [10.0, 0.0, 10.0, 10.0]
    assert plots.timeline_series({"bin_s": 0.01, "t_s": [0.0], "mbps": [5.0]}) == ([], [], pytest.approx(0.05))
    assert plots.timeline_series({"t_s": [], "mbps": []})[:2] == ([], [])


def test_the_drawn_throughput_curve_has_no_drop_at_its_end(closing):
    figure = plots.timeline_figure(_steady_timeline(), {})
    closing(figure)
    (curve,) = figure.axes[0].get_lines()
    assert min(curve.get_ydata()) == 10.0
    assert min(curve.get_xdata()) >= 0


# ---------------------------------------------------------------------------- failure labels

def _load_bars(axis):
    """``{scheme: bar container}`` of an uplink-load panel (legend labels begin with the scheme)."""
    return {container.get_label().split(" (")[0]: container for container in axis.containers}


def _text_boxes(axis, renderer, texts):
    return [axis_text.get_window_extent(renderer) for axis_text in axis.texts if axis_text.get_text().strip() in texts]


def test_failure_labels_sit_above_the_curve_and_do_not_overlap(closing, tmp_path):
    timeline = _steady_timeline(first_s=0.0, bins=400, mbps=80.0)
    labels = [f"link_down leaf{index}-spine{index}" for index in range(4)]
    # four failures 20 ms apart (overlapping labels if written on one row), and two labels 0.5 s apart,
    # which is less than the width of the first one (about 0.6 s of this 4.3 s axis)
    failures = [(1.0 + 0.02 * index, label) for index, label in enumerate(labels)]
    failures += [(2.6, "link_up leaf0-spine0"), (3.1, "link_up leaf1-spine1")]
    failures += [(3.95, "link_down leaf0-spine1")]   # near the right edge: its label ends there
    events = {"failure": failures, "detection": [(1.01, "leaf0")], "reaction": [(1.2, "reaction")]}
    styles = dict(plots.EVENT_STYLES, detection=("detector: port down", "tab:orange", "-."))
    figure = plots.timeline_figure(timeline, events, styles=styles)
    closing(figure)
    axis = figure.axes[0]
    renderer = _drawn(figure)
    boxes = _text_boxes(axis, renderer, {label for _, label in failures})
    assert len(boxes) == len(failures)
    curve_top_px = axis.transData.transform((0, 80.0))[1]
    axes_box = axis.get_window_extent(renderer)
    for box in boxes:
        assert box.y0 > curve_top_px, "a failure label covers the curve"
        assert box.y1 <= axes_box.y1 + 1 and box.x1 <= axes_box.x1 + 1, "a failure label leaves the axes"
    for first, second in itertools.combinations(boxes, 2):
        assert not first.overlaps(second), "failure labels overlap"
    legend = axis.get_legend()
    assert legend is not None and not legend.get_window_extent(renderer).overlaps(axes_box), "legend over the curve"
    figure.savefig(tmp_path / "timeline.png", dpi=110)
    assert matplotlib.image.imread(tmp_path / "timeline.png").shape[:2] == (440, 1100)


def test_event_label_layout_rows():
    layout = plots.event_label_layout([(5.0, "b" * 10), (1.0, "a" * 10), (1.1, "c" * 10), (9.0, "d")], 0.0, 10.0, 50.0)
    rows = {text[0]: y for _, y, text in layout["labels"]}
    assert rows["a"] == rows["b"] == rows["d"] > rows["c"]       # c would overlap a: next row down
    assert rows["c"] - layout["row_height"] >= 50.0               # the lowest row is above the curve
    assert layout["y_top"] > rows["a"]
    assert plots.event_label_layout([], 0.0, 10.0, 50.0)["y_top"] == pytest.approx(52.5)
    crowded = plots.event_label_layout([(1.0, "x" * 30)] * 20, 0.0, 10.0, 50.0)
    assert min(y for _, y, _ in crowded["labels"]) - crowded["row_height"] >= 50.0 - 1e-9


# ---------------------------------------------------------------------------- comparison: missing values, colours

ROWS = [{"mode": "ecmp", "status": "ok", "uplink_mmr": 1.5, "goodput_mbps": 90.0},
        {"mode": "flowlet", "status": "failed", "uplink_mmr": None, "goodput_mbps": None},
        {"mode": "drill", "status": "ok", "uplink_mmr": 1.1, "goodput_mbps": 0.0}]
LOADS = {"ecmp": {"l1-s1": 3_200_000, "l1-s2": 3_200_400}, "flowlet": {},
         "drill": {"l1-s1": 3_000_000, "l1-s2": 2_900_000}}


def test_metric_series_keeps_missing_values_missing():
    assert plots.metric_series(ROWS, "uplink_mmr") == [("ecmp", 1.5), ("flowlet", None), ("drill", 1.1)]
    assert plots.metric_series(ROWS, "goodput_mbps")[2] == ("drill", 0.0)   # a measured 0 stays 0
    odd = [{"mode": "a", "x": math.nan}, {"mode": "b", "x": True}, {"mode": "c", "x": "1.0"}, {"mode": "d"}]
    assert [value for _, value in plots.metric_series(odd, "x")] == [None] * 4


def test_comparison_draws_a_missing_mmr_as_not_available_not_as_zero(closing, tmp_path):
    figure = plots.comparison_figure(ROWS, LOADS)
    closing(figure)
    left, middle, right = figure.axes
    _drawn(figure)
    for axis, measured in ((middle, (1.5, 1.1)), (right, (90.0, 0.0))):
        heights = [patch.get_height() for patch in axis.patches]
        assert heights[0] == measured[0] and heights[2] == measured[1]
        assert math.isnan(heights[1]), "a missing value is drawn as a bar"
        missing = [text for text in axis.texts if text.get_text() == plots.MISSING_TEXT]
        assert len(missing) == 1 and missing[0].get_position()[0] == 1
    # the failed mode's uplink loads: no bars, and the legend says why
    bars = _load_bars(left)
    assert all(math.isnan(patch.get_height()) for patch in bars["flowlet"].patches)
    assert [patch.get_height() for patch in bars["drill"].patches] == [3.0, 2.9]
    assert any(plots.MISSING_TEXT in text.get_text() and "flowlet" in text.get_text()
               for text in left.get_legend().get_texts())
    legend_box = left.get_legend().get_window_extent()
    assert not any(legend_box.overlaps(patch.get_window_extent()) for patch in left.patches
                   if not math.isnan(patch.get_height())), "the legend covers a bar"
    plots.plot_comparison(ROWS, LOADS, str(tmp_path / "comparison.png"))
    assert matplotlib.image.imread(tmp_path / "comparison.png").shape[:2] == (495, 1540)


def test_a_mode_has_one_colour_in_every_panel_and_no_two_modes_share_one(closing):
    figure = plots.comparison_figure(ROWS, LOADS)
    closing(figure)
    left, middle, right = figure.axes
    by_panel = []
    for axis in (middle, right):
        by_panel.append({mode: tuple(patch.get_facecolor()) for mode, patch in zip(("ecmp", "flowlet", "drill"),
                                                                                   axis.patches)})
    by_panel.append({mode: tuple(container.patches[0].get_facecolor()) for mode, container in _load_bars(left).items()})
    assert by_panel[0] == by_panel[1] == {mode: by_panel[2][mode] for mode in by_panel[0]}
    assert len(set(by_panel[0].values())) == 3
    many = [f"mode{index}" for index in range(25)]
    for count in (3, 10, 11, 20, 25):
        colours = plots.mode_colours(many[:count])
        assert len(set(colours.values())) == count
    assert plots.mode_colours(["a", "b", "a"]) == {"a": "tab:blue", "b": "tab:orange"}


# ---------------------------------------------------------------------------- byte units

@pytest.mark.parametrize("largest, unit", [(0, "bytes"), (999, "bytes"), (1000, "kB"), (3.2e6, "MB"),
                                           (999_999_999, "MB"), (4.5e9, "GB"), (2e13, "TB")])
def test_byte_scale(largest, unit):
    divisor, got = plots.byte_scale(largest)
    assert got == unit and (largest == 0 or 1 <= largest / divisor < 1000 or unit == "TB")


def test_link_load_is_drawn_in_readable_units_without_an_offset(closing, tmp_path):
    series = plots.link_load_series({"ecmp": {"a": 3_200_000, "b": 3_200_400}, "x": {"a": 10}})
    assert series["unit"] == "MB" and series["heights"]["ecmp"] == [3.2, 3.2004]
    assert series["heights"]["x"] == [1e-5, None] and series["missing"] == []
    figure = plots.link_load_figure({"ecmp": {"a": 3_200_000, "b": 3_200_400}})
    closing(figure)
    axis = figure.axes[0]
    _drawn(figure)
    assert axis.get_ylabel() == "MB sent upward"
    assert axis.yaxis.get_offset_text().get_text() == ""
    tick_labels = [label.get_text() for label in axis.get_yticklabels()]
    assert tick_labels and not any("e" in label.lower() or "×" in label for label in tick_labels)
    plots.plot_link_load({"ecmp": {"a": 3_200_000}}, str(tmp_path / "load.png"))
    assert (tmp_path / "load.png").read_bytes()[:4] == b"\x89PNG"


def test_sweep_leaves_a_gap_where_nothing_was_measured(tmp_path):
    rows = [{"mode": f"f@{value}", "param_value": value, "out_of_order_rate": 0.1, "uplink_mmr": mmr}
            for value, mmr in ((50, 1.2), (500, None), (5000, 1.0))]
    assert plots._line_values(rows, "uplink_mmr")[0] == 1.2 and math.isnan(plots._line_values(rows, "uplink_mmr")[1])
    plots.plot_sweep(rows, "flowlet_interval_us", str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_a_failing_figure_is_closed():
    before = len(plt.get_fignums())
    with pytest.raises(KeyError):
        plots.timeline_figure(_steady_timeline(), {"meteor": [(1.0, "?")]})
    assert len(plt.get_fignums()) == before


# ---------------------------------------------------------------------------- congestion CDF

def _run(rates, overloaded=False):
    timeline = {"interval_s": 0.1, "t_s": [0.1 * (i + 1) for i in range(len(rates))], "drops": [0] * len(rates),
                "sent": [10] * len(rates), "rate": rates}
    return {"dataplane": {"congestion_timeline": timeline}, "overload": {"overloaded": overloaded}}


def test_the_congestion_cdf_counts_only_runs_the_overload_check_passed(closing):
    runs = {"portland": [_run([0.0, 0.1, None, 0.3]), _run([0.2])],
            "f10": [_run([0.0, 0.0]), _run([0.9, 0.9], overloaded=True)],
            "ecmp": [_run([0.5], overloaded=True)]}
    figure = plots.congestion_cdf_figure(runs, title="t")
    closing(figure)
    axis = figure.axes[0]
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert labels == ["portland (4 intervals of 100 ms, 2 runs)",
                      "f10 (2 intervals of 100 ms, 1 run; 1 overloaded run left out)",
                      "ecmp (no run counted; 1 overloaded run left out)"]
    xs = [list(line.get_xdata()) for line in axis.get_lines()]
    assert xs[0] == [0.0, 0.1, 0.2, 0.3] and xs[1] == [0.0, 0.0] and xs[2] == []
    assert list(axis.get_lines()[0].get_ydata()) == [0.25, 0.5, 0.75, 1.0]


def test_no_congestion_cdf_without_shaped_links(tmp_path):
    assert plots.plot_congestion_cdf({"ecmp": [{"dataplane": {"congestion_timeline": None}}]},
                                     str(tmp_path / "c.png")) is None
    assert not (tmp_path / "c.png").exists()


def test_the_congestion_cdf_leaves_out_runs_that_did_not_read_every_queue(closing):
    partial, failed = _run([0.4]), _run([0.6])
    partial["dataplane"]["congestion_timeline"]["ports_not_read"] = ["s1-eth1"]  # a BMv2 switch's port
    failed["dataplane"]["congestion_timeline"]["error"] = "server tb-srv1 (198.18.1.2): no answer"
    figure = plots.congestion_cdf_figure({"bmv2": [partial], "f10": [_run([0.1, 0.2]), failed]}, title="t")
    closing(figure)
    axis = figure.axes[0]
    assert [text.get_text().split(" ")[0] for text in axis.get_legend().get_texts()] == ["f10"]
    assert [list(line.get_xdata()) for line in axis.get_lines()] == [[0.1, 0.2]]


def test_the_comparison_reports_no_congestion_rate_for_a_run_that_did_not_read_every_queue():
    from testbed.experiment.compare import COLUMNS

    rate, = [column.value for column in COLUMNS if column.key == "congestion_rate"]
    whole, partial = _run([0.1, 0.2]), _run([0.1, 0.2])
    whole["dataplane"]["congestion_timeline"]["drops"] = [1, 2]
    partial["dataplane"]["congestion_timeline"]["ports_not_read"] = ["s1-eth1"]
    assert rate(whole) == 3 / 20 and rate(partial) is None
