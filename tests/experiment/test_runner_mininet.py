"""The experiment runner on Mininet with embedded P4 switches: end to end, and clean after errors and SIGINT.

Each test runs the small CI spec (experiments/leafspine_failure_ci.yaml: 2 leaves, 2 spines,
4 hosts, a spine-link failure) and checks with ``no_leftovers`` that nothing (namespaces,
interfaces, processes, state files) is left behind.
"""
import copy
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from testbed.experiment import results as results_module
from testbed.experiment.runner import ExperimentFailed, run_experiment
from testbed.experiment.spec import SpecError, parse_spec
from testbed.pytest_plugin import BOTH_TARGETS

from repo_paths import REPO

CI_SPEC = os.path.join(REPO, "experiments", "leafspine_failure_ci.yaml")

pytestmark = pytest.mark.mininet


def ci_spec_data():
    with open(CI_SPEC) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("controller", ["static", "osken"])
def test_small_spec_end_to_end(no_leftovers, tmp_path, controller):
    lines = []
    data = ci_spec_data()
    data["controller"]["kind"] = controller
    spec = parse_spec(data)
    record = run_experiment(spec, str(tmp_path), target="embedded", progress=lines.append)
    assert record["status"] == "ok", record["error"]
    with open(tmp_path / "results.json") as handle:
        written = json.load(handle)
    assert results_module.check_schema(written) == []
    assert written["seed"] == 7 and written["target"] == "embedded"
    assert written["controller"]["kind"] == controller
    summary = written["summary"]
    assert summary["received_packets"] > 0
    # the spine link failed at 2 s and the controller rerouted after its detection delay
    failure = written["failures"][0]
    assert failure["error"] is None
    assert failure["applied_at_s"] == pytest.approx(data["failures"][0]["at_s"], abs=0.3)
    recovery = summary["recovery"][0]
    if recovery["lost_in_window"]:  # the failed link carried flows: losses stop once rerouted
        assert recovery["loss_window_s"] < 1.0
        assert recovery["first_loss_at_s"] >= failure["applied_at_s"] - 0.02
    reaction = written["controller"]["reactions"][0]
    assert reaction["error"] is None and reaction["reaction_s"] >= 0.05
    assert summary["controller_reaction_s"] == reaction["reaction_s"]
    # delivery resumed after the reaction: throughput in the last second of traffic
    timeline = written["timeline"]
    traffic_end = data["traffic"][0]["duration_s"]
    late = [mbps for t, mbps in zip(timeline["t_s"], timeline["mbps"])
            if reaction["reacted_at_s"] + 0.3 < t < traffic_end - 0.2]
    assert late and sum(late) / len(late) > 1.0, timeline
    # per-link load: the uplinks of leaf0 carried the streams
    uplinks = summary["uplink_loads"]
    assert uplinks and sum(uplinks.values()) > 0
    assert summary["uplink_mmr"] is not None and summary["uplink_mmr"] >= 1.0
    csv_lines = (tmp_path / "link_load.csv").read_text().splitlines()
    assert csv_lines[0].startswith("link,a,a_port,b,b_port,tx_packets,tx_bytes,share")
    assert len(csv_lines) == 1 + written["topology"]["links"]
    for name in ("link_load.png", "throughput.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert any("link_down leaf0-spine0" in line for line in lines)


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_a_reroute_that_does_not_take_effect_makes_the_run_a_warning_not_ok(no_leftovers, tmp_path, target):
    # the controller reacts only after the traffic ended: the flows the failure cut never deliver again,
    # although the other spine could carry them
    data = ci_spec_data()
    data["controller"]["detection_delay_ms"] = (data["traffic"][0]["duration_s"] - data["failures"][0]["at_s"]
                                                + 0.5) * 1000
    lines = []
    record = run_experiment(parse_spec(data), str(tmp_path), target=target, progress=lines.append)
    assert record["summary"]["recovery"][0]["lost_in_window"] > 0  # seed 7 hashes a flow onto the failed link
    assert record["status"] == "warning", record["warnings"]
    assert record["summary"]["unrecovered_flows"] and all(
        row["failure_index"] == 0 for row in record["summary"]["unrecovered_flows"])
    assert record["warnings"][0].startswith("after failure 0, ")
    assert any("WARNING: after failure 0" in line for line in lines)
    with open(tmp_path / "results.json") as handle:
        assert json.load(handle)["status"] == "warning"


def test_error_in_the_middle_tears_down(no_leftovers, tmp_path):
    data = ci_spec_data()
    # 4096-byte RoCE payloads do not fit the 1500-byte veth MTU: the senders fail mid-run.
    data["traffic"][0]["mtu"] = 4096
    data["traffic"][0]["duration_s"] = 1.0
    data["duration_s"] = 2.0
    data["failures"] = []
    spec = parse_spec(data)
    with pytest.raises(ExperimentFailed) as caught:
        run_experiment(spec, str(tmp_path), target="embedded", progress=lambda line: None)
    assert "traffic[0]" in str(caught.value)
    with open(tmp_path / "results.json") as handle:
        written = json.load(handle)
    assert written["status"] == "error" and "traffic[0]" in written["error"]
    assert results_module.check_schema(written) == []


def test_invalid_failure_link_is_caught_before_anything_starts(no_leftovers):
    data = copy.deepcopy(ci_spec_data())
    data["failures"][0]["link"] = ["leaf0", "leaf1"]
    with pytest.raises(SpecError, match=r"failures\[0\]\.link: no such link"):
        parse_spec(data)


def test_sigint_to_testbed_run_leaves_nothing(no_leftovers, tmp_path):
    data = ci_spec_data()
    data["traffic"][0]["duration_s"] = 20
    data["duration_s"] = 21
    data["failures"] = []
    spec_path = tmp_path / "long.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(spec_path), "--target", "embedded",
                                "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               cwd=REPO)
    seen = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "traffic running: 1/1" in line:
                break
        assert any("traffic running: 1/1" in line for line in seen), "".join(seen)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
        seen.append(rest)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, "".join(seen)
    with open(out / "results.json") as handle:
        written = json.load(handle)
    assert written["status"] == "interrupted"
    assert results_module.check_schema(written) == []


def test_same_seed_same_placement(no_leftovers, tmp_path):
    data = ci_spec_data()
    data["failures"] = []
    data["traffic"][0]["duration_s"] = 2.0
    data["duration_s"] = 3.0
    shares = []
    for run in range(2):
        record = run_experiment(parse_spec(copy.deepcopy(data)), str(tmp_path / f"run{run}"), target="embedded",
                                progress=lambda line: None)
        assert record["status"] == "ok"
        loads = record["summary"]["uplink_loads"]
        total = sum(loads.values())
        assert total > 0
        shares.append({link: load / total for link, load in loads.items()})
    assert shares[0].keys() == shares[1].keys()
    for link in shares[0]:
        assert shares[0][link] == pytest.approx(shares[1][link], abs=0.05), shares
