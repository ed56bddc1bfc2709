"""Repeated runs in `testbed compare`: seeds, intervals, the noise check, the table, csv/json, error bars;
and each mechanism's own comparison plot (F10, DSF, load balancing)."""
import json
import math
import os

import pytest

from testbed.experiment import analysis, compare, plots, repeats
from testbed.experiment.spec import SpecError, derive_seed, load_spec, parse_spec
from testbed.mechanisms import hooks_for

from repo_paths import REPO
EXPERIMENTS = os.path.join(REPO, "experiments")
T0_NS = 1_700_000_000_000_000_000


def test_t_quantiles_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for degrees in (1, 2, 4, 9, 29, 30, 31, 60, 200):
        assert repeats.t95(degrees) == pytest.approx(stats.t.ppf(0.975, degrees), rel=2e-3)


def test_describe_gives_the_student_t_interval():
    values = [10.0, 12.0, 11.0, 13.0, 9.0]
    row = repeats.describe(values)
    stdev = math.sqrt(sum((v - 11.0) ** 2 for v in values) / 4)
    assert row["mean"] == 11.0 and row["min"] == 9.0 and row["max"] == 13.0 and row["n"] == 5
    assert row["ci95"] == pytest.approx(2.776 * stdev / math.sqrt(5))
    assert repeats.describe([None, None])["mean"] is None


def test_repeat_seeds_start_with_the_spec_seed_and_are_recorded_derivations():
    seeds = repeats.repeat_seeds(13, 5)
    assert seeds[0] == 13 and seeds[1:] == [derive_seed(13, "repeat", index) for index in range(1, 5)]
    assert len(set(seeds)) == 5
    with pytest.raises(ValueError):
        repeats.repeat_seeds(13, 0)


def test_spec_repeat_key_and_with_seed_redraws_only_what_the_seed_draws():
    spec = load_spec(os.path.join(EXPERIMENTS, "flowlet_sweep.yaml"), check_machine=False)
    assert spec.repeat == 1 and "raw" not in spec.to_dict()
    other = spec.with_seed(99)
    assert other.seed == 99 and other.traffic[0].seed == derive_seed(99, "traffic", 0) != spec.traffic[0].seed
    assert other.traffic[0].hosts == spec.traffic[0].hosts
    # what the spec states stays; what the seed draws (hash_seed is not given here) follows the seed
    assert other.mode_params["flowlet_interval_us"] == spec.mode_params["flowlet_interval_us"]
    assert "hash_seed" in other.seeded_params \
        and other.mode_params["hash_seed"] == derive_seed(99, "hash_seed") & 0xFFFF
    assert spec.with_seed(spec.seed).traffic[0].seed == spec.traffic[0].seed
    with open(os.path.join(EXPERIMENTS, "flowlet_sweep.yaml")) as handle:
        import yaml
        data = yaml.safe_load(handle)
    assert parse_spec(dict(data, repeat=5), check_machine=False).repeat == 5
    for bad in (0, 101, 2.5, "3"):
        with pytest.raises(SpecError, match="repeat"):
            parse_spec(dict(data, repeat=bad), check_machine=False)


def test_the_cli_refuses_a_bad_repeat():
    from testbed.cli import main

    spec = os.path.join(EXPERIMENTS, "leafspine_failure_ci.yaml")
    assert main(["compare", spec, "--modes", "ecmp", "--repeat", "0"]) == 2
    assert main(["compare", spec, "--modes", "ecmp", "--repeat", "1000"]) == 2


def _lb_record(mmr, goodput, oos, status="ok", overloaded=False):
    return {"status": status, "error": None, "mechanisms": ["lb"],
            "overload": {"overloaded": overloaded, "reasons": ["slow"] if overloaded else []},
            "summary": {"uplink_mmr": mmr, "goodput_mbps": goodput, "out_of_sequence": oos,
                        "uplink_loads": {"leaf0-spine0": 1000 * mmr, "leaf0-spine1": 1000}},
            "dataplane": {"flowlet_path_changes": 7}}


def _labelled():
    return [("ecmp", [_lb_record(3.0, 6.6, 2000), _lb_record(3.0, 6.7, 2100), _lb_record(2.9, 6.5, 2050)]),
            ("eecmp", [_lb_record(1.25, 11.3, 0), _lb_record(1.3, 11.2, 0), _lb_record(1.2, 11.4, 0)]),
            ("spray", [_lb_record(1.0, 11.35, 0), _lb_record(1.01, 11.3, 0), _lb_record(1.0, 11.36, 0, "warning",
                                                                                        overloaded=True)])]


def test_repeated_rows_carry_mean_interval_extremes_and_every_run():
    rows, columns = compare._rows(_labelled(), [4, 5, 6])
    ecmp = rows[0]
    assert ecmp["runs"] == 3 and ecmp["seeds"] == [4, 5, 6] and len(ecmp["repeats"]) == 3
    assert ecmp["uplink_mmr"] == pytest.approx(2.9667, abs=1e-3)
    assert ecmp["stats"]["uplink_mmr"]["min"] == 2.9 and ecmp["stats"]["uplink_mmr"]["max"] == 3.0
    assert ecmp["stats"]["uplink_mmr"]["ci95"] > 0
    assert rows[2]["status"] == "ok x2, warning x1" and rows[2]["overload_reasons"] == ["run 3 (seed 6): slow"]
    assert ecmp["uplink_loads"]["leaf0-spine0"] == pytest.approx(2966.7, abs=0.1)


def test_repeated_rows_note_how_many_runs_may_have_been_reordered_by_the_emulator():
    labelled = _labelled()
    labelled[0][1][0]["overload"]["reordering_reasons"] = ["latency spread: out-of-order counts may be the emulator's"]
    rows, columns = compare._rows(labelled, [4, 5, 6])
    assert rows[0]["reordering_runs"] == 1 and rows[0]["reordering_reasons"][0].startswith("run 1 (seed 4): ")
    assert "NOTE ecmp: in 1 of 3 runs the emulator's delays" in compare.format_table(rows, columns)


def test_the_noise_check_flags_overlapping_rows_only():
    rows, columns = compare._rows(_labelled(), [4, 5, 6])
    flags = compare.noise_flags(rows, columns)
    # eecmp's goodput interval overlaps spray's: not separable; ecmp's MMR is far from both
    assert ("eecmp", "spray") in flags["goodput_mbps"]
    assert all("ecmp" not in pair for pair in flags.get("uplink_mmr", []))
    # OOS: eecmp and spray are both exactly 0: equal, nothing to misread
    assert ("eecmp", "spray") not in flags.get("out_of_sequence", [])
    table = compare.format_table(rows, columns)
    assert "not separable at 3 runs" in table and "eecmp ~ spray" in table
    assert "±" in table and "[2.900,3.000]" in table
    goodput_line = next(line for line in table.splitlines() if line.startswith("~ goodput"))
    assert "eecmp ~ spray" in goodput_line


def test_repeated_comparison_files_have_intervals_and_error_bars(tmp_path, monkeypatch):
    labelled = _labelled()
    rows, columns = compare._rows(labelled, [4, 5, 6])
    drawn = {}
    original = plots.metric_bars

    def spy(axis, rows, key, colours, title=None):
        drawn[key] = plots.metric_errors(rows, key)
        return original(axis, rows, key, colours, title)

    monkeypatch.setattr(plots, "metric_bars", spy)
    files = compare.write_comparison(rows, str(tmp_path), "unit", columns, dict(labelled))
    header = (tmp_path / "comparison.csv").read_text().splitlines()[0].split(",")
    for key in ("uplink_mmr", "uplink_mmr_ci95", "uplink_mmr_min", "uplink_mmr_max", "runs", "seeds"):
        assert key in header
    data = json.loads((tmp_path / "comparison.json").read_text())
    assert data["rows"][0]["stats"]["uplink_mmr"]["n"] == 3 and "goodput_mbps" in data["not_separable"]
    assert drawn["uplink_mmr"] and all(error >= 0 for error in drawn["uplink_mmr"]) and drawn["uplink_mmr"][0] > 0
    assert "lb_comparison.png" in files and (tmp_path / "lb_comparison.png").read_bytes()[:4] == b"\x89PNG"


def test_a_single_run_comparison_is_unchanged(tmp_path):
    labelled = [(label, runs[:1]) for label, runs in _labelled()]
    rows, columns = compare._rows(labelled, [4])
    assert "stats" not in rows[0] and rows[0]["uplink_mmr"] == 3.0
    assert "±" not in compare.format_table(rows, columns)


def test_sweep_plot_draws_error_bars_for_repeats(tmp_path):
    rows, _ = compare._rows(_labelled(), [4, 5, 6])
    for row, value in zip(rows, (100, 1000, 5000)):
        row["param_value"] = value
    assert plots.metric_errors(rows, "uplink_mmr")[0] > 0
    plots.plot_sweep(rows, "flowlet_interval_us", str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------- the mechanisms' comparison plots
def _hooks(name):
    return next(hooks for hooks in hooks_for() if hooks.mechanism.name == name)


def test_loss_timeline_splits_failure_losses_from_the_others():
    bin_ns = 10_000_000
    first = T0_NS // bin_ns
    sender = {"sent_bins": {str(first + i): 10 for i in range(100)}}
    lost = {40: 10, 41: 10, 42: 5, 80: 1}   # a failure's episode at 0.4 s, a congestion loss at 0.8 s
    receiver = {"timeline": {"bin_ns": bin_ns, "bins": []},
                "rx_by_tx_bin": {str(first + i): 10 - lost.get(i, 0) for i in range(100)}}
    reports = [{"pairs": [{"sender": sender, "receiver": receiver}]}]
    timeline = analysis.loss_timeline(reports, T0_NS, [(0.4, 0.43)])
    assert timeline["t_s"] == pytest.approx([0.4, 0.41, 0.42, 0.8]) and timeline["lost"] == [10, 10, 5, 1]
    assert timeline["after_failure"] == [True, True, True, False]


def _f10_record(detection, recovery, no_detour):
    return {"status": "ok", "error": None, "mechanisms": ["f10"], "overload": {"overloaded": False, "reasons": []},
            "failures": [{"index": 0, "applied_at_s": 2.0}],
            "controller": {"detections": [{"detection_s": detection}], "pushbacks": []},
            "summary": {"uplink_loads": {}, "flow_recovery": [{"max_recovery_s": recovery,
                                                              "median_recovery_s": recovery / 2}],
                        "path_dilation": {"extra_hops": {"0": 5000, "2": 4 + no_detour}, "packets": 5004}},
            "dataplane": {"drops": {"connectivity": 30 + no_detour, "no_detour": no_detour, "congestion": 2,
                                    "emulator": 0}},
            "f10": {"loss_timeline": {"bin_s": 0.01, "t_s": [2.0, 2.01, 3.5], "lost": [10, 5, 1],
                                      "after_failure": [True, True, False]}}}


def test_f10_comparison_plot_shows_detection_recovery_losses_and_dilation(tmp_path):
    labelled = [("portland", [_f10_record(0.065, 0.08, 0), _f10_record(0.07, 0.09, 0)]),
                ("f10", [_f10_record(0.1, 0.12, 4), _f10_record(0.11, 0.13, 2)])]
    rows, columns = compare._rows(labelled, [1, 2])
    assert {"detection_s", "median_flow_recovery_s"} <= {column.key for column in columns}
    assert rows[1]["stats"]["detection_s"]["mean"] == pytest.approx(0.105)
    assert "f10_comparison.png" in compare.write_comparison(rows, str(tmp_path), "f10", columns, dict(labelled))
    assert (tmp_path / "f10_comparison.png").read_bytes()[:4] == b"\x89PNG"
    from testbed.mechanisms.f10.plots import drops_by_cause
    assert drops_by_cause(labelled[1][1][0]) == {"connectivity_links": 30, "no_detour": 4, "congestion": 2,
                                                 "emulator": 0}


def _dsf_record(mmr, depth, queue_drops):
    return {"status": "ok", "error": None, "mechanisms": ["dsf"], "overload": {"overloaded": False, "reasons": []},
            "summary": {"uplink_loads": {}},
            "dataplane": {"drops_by_place": {"fabric_link_queue": queue_drops, "voq_tail": 0, "fabric": queue_drops,
                                             "by_link": {}}},
            "dsf": {"tiers": {"rdsw>fdsw": {"loads": {}, "mmr": mmr}},
                    "voq_depth": {"t_s": [0.0, 0.005, 0.01], "depth_pkts": {"rdsw0": [0, depth, 1]},
                                  "max": {"depth_pkts": depth}}}}


def test_dsf_comparison_plot_shows_cell_mmr_voq_depth_and_drops_by_place(tmp_path):
    labelled = [("dsf", [_dsf_record(1.0, 300, 0)]), ("ecmp", [_dsf_record(3.0, 0, 2206)])]
    rows, columns = compare._rows(labelled, [0])
    assert rows[0]["fabric_mmr"] == 1.0 and rows[1]["fabric_mmr"] == 3.0
    assert "dsf_comparison.png" in compare.write_comparison(rows, str(tmp_path), "dsf", columns, dict(labelled))
    assert (tmp_path / "dsf_comparison.png").read_bytes()[:4] == b"\x89PNG"
