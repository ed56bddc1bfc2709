"""A run whose emulator cannot keep up says so (Mininet, embedded target).

testbed.experiment.overload: the small CI leaf-spine spec (experiments/leafspine_failure_ci.yaml)
without its failure, once at its own light load and once with streams far beyond what one
embedded switch process forwards (~19k frames/s on this machine kind): the switches' sockets then
drop frames in the kernel and packets queue for long, which the run must report as the emulator's
overload, on the terminal and in results.json, rather than as network loss.  Whether the light
run is overloaded depends on what else the machine runs (a run shares the cores with other work);
what holds anyway is the ordering: the light run lost fewer frames in the emulator and delivered
faster than the overloaded one.
"""
import os

import pytest
import yaml

from testbed.experiment.runner import run_experiment
from testbed.experiment.spec import parse_spec

from repo_paths import REPO

CI_SPEC = os.path.join(REPO, "experiments", "leafspine_failure_ci.yaml")

pytestmark = pytest.mark.mininet


def _run(tmp_path, rate_mbps):
    with open(CI_SPEC) as handle:
        data = yaml.safe_load(handle)
    data.update(failures=[], duration_s=3)
    data["traffic"][0].update(rate_mbps=rate_mbps, duration_s=2)
    lines = []
    record = run_experiment(parse_spec(data), str(tmp_path), target="embedded", progress=lines.append)
    assert record["status"] == "ok", record["error"]
    return record, lines


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return {"light": _run(tmp_path_factory.mktemp("light"), 4), "heavy": _run(tmp_path_factory.mktemp("heavy"), 2000)}


def test_an_overloaded_run_is_marked_and_warned_about(runs):
    record, lines = runs["heavy"]
    overload = record["overload"]
    print(overload)
    assert overload["overloaded"] is True and overload["reasons"]
    assert record["dataplane"]["drops"]["emulator"] == overload["switch_socket_drops"]
    assert any("WARNING" in line and "did not keep up" in line for line in lines)


def test_the_light_run_lost_less_in_the_emulator_and_delivered_faster(runs):
    light, lines = runs["light"]
    heavy, _ = runs["heavy"]
    print("light run:", light["overload"])
    emulator_losses = {name: record["overload"]["switch_socket_drops"] + record["overload"]["receiver_socket_drops"]
                       for name, record in (("light", light), ("heavy", heavy))}
    assert emulator_losses["light"] < emulator_losses["heavy"] or emulator_losses["heavy"] == 0
    assert light["overload"]["latency_p99_ms"] < heavy["overload"]["latency_p99_ms"]
    # the terminal says so exactly when results.json does
    assert any("did not keep up" in line for line in lines) == light["overload"]["overloaded"]
