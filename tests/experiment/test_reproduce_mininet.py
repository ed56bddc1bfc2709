"""The READMEs' figures at CI size: `testbed reproduce --ci` in the suite.

Reruns the CI-size experiments of :mod:`testbed.experiment.figures` (the
low-entropy elephants and the flowlet sweep with 3 s of traffic, the leaf-spine
failure) on real emulations and checks every figure within its stated range.
The ranges hold on a loaded machine: the MMR figures follow from the seed's
placement (exact byte counts of paced streams), goodput from shaped links,
the reaction time from a 50 ms detection delay plus a rewrite, and the only
out-of-order figure is that pinned flows (100 ms flowlets) never reorder.
"""

import pytest

from testbed.experiment import figures

from repo_paths import REPO


@pytest.mark.mininet
@pytest.mark.parametrize("name", sorted(name for name in figures.EXPERIMENTS if name.endswith("-ci")))
def test_ci_size_figures_reproduce(name, no_leftovers, tmp_path):
    experiment = figures.EXPERIMENTS[name]
    checked = figures.run_experiment_figures(experiment, str(tmp_path), progress=lambda line: None,
                                               root=REPO)
    assert len(checked) == len(figures.figures_of(name)) > 0
    report = figures.format_report(checked, f"{name}: {experiment.command()}")
    print(report)
    # a figure whose every run the overload check marked is not judged (its timings are the machine's);
    # at least half must be, and none of those may fail
    judged = [row for row in checked if row["verdict"] != "overloaded"]
    assert len(judged) * 2 >= len(checked), report
    assert all(row["verdict"] == "pass" for row in judged), report


def test_a_figure_leaves_out_overloaded_and_failed_runs():
    figure = figures.Figure("x", "ecmp", "uplink_mmr", 2.9, 3.1, "MMR 3.0")
    row = {"mode": "ecmp", "repeats": [{"uplink_mmr": 3.0, "overloaded": "no", "status": "ok"},
                                       {"uplink_mmr": 1.0, "overloaded": "YES", "status": "ok"},
                                       {"uplink_mmr": 0.0, "overloaded": "no", "status": "error"}]}
    stats = figures.measured(figure, [row], {})
    assert stats["n"] == 1 and stats["mean"] == 3.0 and stats["overloaded_runs"] == 1 and stats["failed_runs"] == 1
    assert figures.check(figure, stats) == "pass"
    row["repeats"][0]["overloaded"] = "YES"
    del row["repeats"][2]
    assert figures.check(figure, figures.measured(figure, [row], {})) == "overloaded"
    row["repeats"][0].update(overloaded="no", uplink_mmr=2.0)
    assert figures.check(figure, figures.measured(figure, [row], {})) == "FAIL"
    # an out-of-order figure also leaves out runs whose reordering the emulator could have caused
    oos = figures.Figure("x", "flowlet", "out_of_sequence", 0, 5, "OOS 0", reordering=True)
    row = {"mode": "flowlet", "repeats": [
        {"out_of_sequence": 1, "overloaded": "no", "reordering_unreliable": "no", "status": "ok"},
        {"out_of_sequence": 300, "overloaded": "no", "reordering_unreliable": "YES", "status": "ok"}]}
    stats = figures.measured(oos, [row], {})
    assert stats["mean"] == 1 and stats["overloaded_runs"] == 1 and figures.check(oos, stats) == "pass"


def test_every_figure_names_an_experiment_and_a_sane_range():
    for figure in figures.FIGURES:
        assert figure.experiment in figures.EXPERIMENTS, figure
        assert figure.low <= figure.high, figure
    for experiment in figures.EXPERIMENTS.values():
        assert figures.figures_of(experiment.name), experiment.name
        figures.spec_of(experiment, REPO)   # the spec, shortened or not, is valid
