"""A ``lossy_link`` failure on Mininet with embedded P4 switches (netem where the kernel has it, else
loss in the switches' ports): losses happen only while the link is lossy, and results.json says how
the loss was emulated.

The small CI spec (experiments/leafspine_failure_ci.yaml) runs with per-packet spraying, so
leaf0's traffic to leaf1 crosses the lossy leaf0-spine0 link whatever the hashing; the link is
lossy (30 %) from 1.5 s until a ``link_up`` at 2.5 s ends it.
"""
import json
import os

import pytest
import yaml

from testbed.experiment import analysis
from testbed.experiment import results as results_module
from testbed.experiment.runner import run_experiment
from testbed.experiment.spec import lossy_link_mechanism, parse_spec

from repo_paths import REPO

CI_SPEC = os.path.join(REPO, "experiments", "leafspine_failure_ci.yaml")
LOSSY_FROM_S, LOSSY_UNTIL_S = 1.5, 2.5

pytestmark = pytest.mark.mininet


def lossy_spec_data():
    with open(CI_SPEC) as handle:
        data = yaml.safe_load(handle)
    data["mode"] = "spray"
    data["controller"] = {"kind": "none"}
    data["failures"] = [
        {"at_s": LOSSY_FROM_S, "action": "lossy_link", "link": ["leaf0", "spine0"], "loss": 0.3},
        {"at_s": LOSSY_UNTIL_S, "action": "link_up", "link": ["leaf0", "spine0"]},
    ]
    return data


def test_lossy_link_loses_only_in_its_window(no_leftovers, tmp_path):
    lines = []
    spec = parse_spec(lossy_spec_data())
    record = run_experiment(spec, str(tmp_path), target="embedded", progress=lines.append)
    assert record["status"] == "ok", record["error"]
    with open(tmp_path / "results.json") as handle:
        written = json.load(handle)
    assert results_module.check_schema(written) == []
    lossy, healed = written["failures"]
    assert lossy["error"] is None and healed["error"] is None
    assert lossy["mechanism"] == lossy_link_mechanism("embedded") and lossy["mechanism"] in ("netem",
                                                                                             "embedded-port")
    assert healed["mechanism"] == lossy["mechanism"]  # link_up removed the loss the same way
    assert lossy["loss"] == 0.3
    assert lossy["applied_at_s"] == pytest.approx(LOSSY_FROM_S, abs=0.3)
    summary = written["summary"]
    assert summary["lost_packets"] > 0
    recovery = {row["failure_index"]: row for row in summary["recovery"]}[0]
    assert recovery["lost_in_window"] > 0 and recovery["first_loss_at_s"] >= lossy["applied_at_s"] - 0.1
    # every lost packet was sent while the link was lossy: from the lossy_link until the link_up
    # had cleared it (its apply_s), give or take one transmit bin
    with open(tmp_path / "traffic" / "entry-0" / "report.json") as handle:
        report = json.load(handle)
    t0_ns = written["t0_ns"]
    everything = analysis.lossy_span([report], t0_ns, t0_ns + int(100e9), episode_gap_ns=int(100e9))
    assert everything["lost"] == summary["lost_packets"] and everything["lost_later"] == 0
    bin_ns = analysis.stream_receivers([report])[0][1]["timeline"]["bin_ns"]
    assert everything["first_ns"] >= t0_ns + int(lossy["applied_at_s"] * 1e9) - bin_ns
    assert everything["last_ns"] <= t0_ns + int((healed["applied_at_s"] + healed["apply_s"]) * 1e9) + bin_ns
    # a 30 % loss on one of two uplinks loses well under half of what was sent in the window
    assert summary["lost_packets"] < 0.5 * summary["sent_packets"]
    assert any("lossy_link leaf0-spine0" in line for line in lines)


def test_impair_link_on_a_fabric_checks_values_and_ends(fabric_factory):
    from testbed.embedded_switch.port_control import port_status
    from testbed.emulation.netem import netem_available
    from testbed.errors import EmulationError, ParameterError

    params = {"leaves": 2, "spines": 1, "hosts_per_leaf": 1}
    fabric = fabric_factory("clos", **params, program="l3_ecmp", target="embedded")
    network = fabric.network
    for loss, delay_ms, field in ((1.5, 0, "loss"), (-0.1, 0, "loss"), (0.1, -1, "delay_ms")):
        with pytest.raises(ParameterError) as excinfo:
            fabric.set_link_loss("leaf0", "spine0", loss, delay_ms)
        assert excinfo.value.field == field
    with pytest.raises(ParameterError) as excinfo:
        fabric.set_link_loss("leaf0", "leaf1", 0.1)
    assert excinfo.value.field == "link"
    ends = network.impair_link("leaf0", "spine0", 0.25, delay_ms=2)
    assert sorted(name for name, _port in ends) == ["leaf0", "spine0"]
    leaf0 = fabric.switch("leaf0")
    control_path = fabric.describe()["switches"]["leaf0"]["control_path"]
    assert control_path == leaf0.control_path
    leaf0_port = dict(ends)["leaf0"]
    status = port_status(control_path)
    assert status[leaf0_port]["loss"] == 0.25 and status[leaf0_port]["delay_ms"] == 2.0
    assert all(entry["loss"] == 0.0 for port, entry in status.items() if port != leaf0_port)
    host_end = network.impair_link("h1", "leaf0", 0.5)  # only the switch end of a host link
    assert [name for name, _port in host_end] == ["leaf0"]
    network.impair_link("leaf0", "spine0", 0.0)
    assert port_status(control_path)[leaf0_port]["loss"] == 0.0
    if not netem_available():  # the fabric's link loss uses the switch ports where the kernel has no netem
        assert fabric.set_link_loss("leaf0", "spine0", 0.1) == "embedded-port"
        assert port_status(control_path)[leaf0_port]["loss"] == 0.1
        fabric.link_up("leaf0", "spine0")  # ends the lossy link
        assert port_status(control_path)[leaf0_port]["loss"] == 0.0
    fabric.stop()
    assert not os.path.exists(control_path)
    bridges = fabric_factory("clos", **params)  # no program: Linux bridges
    with pytest.raises(EmulationError, match="netem"):
        bridges.network.impair_link("leaf0", "spine0", 0.1)
