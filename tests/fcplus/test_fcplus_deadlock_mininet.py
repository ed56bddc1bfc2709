"""Issue 20 at CI size: a PFC deadlock under plain KSP on a small FC+ expander, none under DF-KSP.

experiments/fcplus_deadlock.yaml run through :func:`compare_modes` (real Mininet, embedded P4
switches with PFC, RoCE streams that honour PAUSE frames), traffic shortened.  Why the deadlock is
not luck: with K = 2 the second KSP paths of tor0->tor2, tor1->tor0 and tor2->tor1 form the cycle
tor0->tor1->tor2->tor0 on one class (checked below on the routing itself), and the streams keep
those links' queues above XOFF.  Assertions are on the detector's cycle and on delivery, not timings.

Every data packet is accounted for (results.json ``pfc.accounting``): a packet sent and not
received either reached its host after the host's receiver stopped (the fabric drains after
the streams' linger), is still held in a switch (behind the deadlock), was dropped by a switch,
or is unexplained, which only the emulator's own socket drops may cause.
"""
import copy
import json
import os

import pytest
import yaml

from testbed.experiment.compare import compare_modes
from testbed.experiment.spec import parse_spec
from testbed.topologies.fcplus.deadlock import cycles_by_priority
from testbed.topologies.fcplus.routing import routing_paths
from testbed.topologies.fcplus.topology import fcplus_graph

from repo_paths import REPO
SPEC = os.path.join(REPO, "experiments", "fcplus_deadlock.yaml")
TRIANGLE = {"tor0", "tor1", "tor2"}

pytestmark = pytest.mark.mininet


#: tor7 carries none of the streams: its own PFC settings show that a switch can have them
TOR7_PFC = {"pfc_lossless": 2, "pfc_buffer_packets": 100, "pfc_xoff_packets": 20, "pfc_xon_packets": 10,
            "pfc_headroom_packets": 50}


def small_spec(traffic_s=4.0):
    with open(SPEC) as handle:
        data = copy.deepcopy(yaml.safe_load(handle))
    data["controller"]["pfc_switches"] = {"tor7": TOR7_PFC}
    for entry in data["traffic"]:
        entry["duration_s"] = traffic_s
    data["duration_s"] = traffic_s + 3.0
    return parse_spec(data)


def test_the_routing_has_the_cycle_the_experiment_relies_on():
    graph = fcplus_graph(8, 8, 6, v=4, seed=1)
    pairs = [(a, b) for a in graph.nodes for b in graph.nodes if a != b]
    paths = [p for found in routing_paths(graph, pairs, "ksp", k=2).values() for p in found]
    [cycle] = cycles_by_priority(graph, paths, priorities=False)[1]
    assert {hop[0][0] for hop in cycle} == TRIANGLE
    dfksp = [p for found in routing_paths(graph, pairs, "fcplus2l", k=2).values() for p in found]
    assert all(not cycles for cycles in cycles_by_priority(graph, dfksp).values())


def test_ksp_deadlocks_and_dfksp_delivers(no_leftovers, tmp_path):
    rows = compare_modes(small_spec(), ["fcplus_ksp", "fcplus_2l"], out_dir=str(tmp_path), progress=lambda *_: None)
    results = {}
    for row in rows:
        assert row["status"] == "ok", (row["mode"], row.get("error"))
        with open(tmp_path / row["mode"] / "results.json") as handle:
            results[row["mode"]] = json.load(handle)
    ksp, dfksp = results["fcplus_ksp"], results["fcplus_2l"]
    # every switch has mode_params' PFC settings but tor7, which has its own
    for run in (ksp, dfksp):
        settings = run["pfc"]["settings"]
        assert settings["tor7"]["lossless"] == [1, 2] and settings["tor7"]["xoff_packets"] == 20, settings["tor7"]
        assert settings["tor0"]["lossless"] == [1, 2, 3] and settings["tor0"]["xoff_packets"] == 8, settings["tor0"]
    # KSP: the detector finds the triangle's queues on class 1, and it lasts to the end of the run
    cycles = ksp["pfc"]["deadlocks"]
    assert cycles, ksp["pfc"]["totals"]
    assert any({member[0] for member in row["members"]} == TRIANGLE and
               all(member[2] == 1 for member in row["members"]) for row in cycles), cycles
    assert max(row["last_seen_s"] for row in cycles) >= ksp["spec"]["traffic"][0]["duration_s"]
    # ... and the streams behind it stop delivering: far less than the same traffic under DF-KSP
    received = {mode: sum(t["received_packets"] or 0 for t in r["traffic"]) for mode, r in results.items()}
    assert received["fcplus_ksp"] * 3 < received["fcplus_2l"], received
    # ... where the packets KSP did not deliver are held: in the switches, behind the cycle
    ksp_count = ksp["pfc"]["accounting"]
    assert ksp_count["held_in_switches"] > 0 and not ksp_count["drained"], ksp_count
    assert ksp_count["dropped_in_switches"] == 0 and ksp_count["unexplained"] <= ksp_count["emulator_drops"], ksp_count
    # DF-KSP (2 lossless classes): no cycle, every stream delivers, nothing dropped inside the fabric
    assert dfksp["pfc"]["deadlocks"] == []
    totals = dfksp["pfc"]["totals"]
    assert totals["dropped_headroom"] == 0 and totals["queue_dropped"] == 0, totals
    assert all((t["received_packets"] or 0) > 0 for t in dfksp["traffic"]), dfksp["traffic"]
    # every packet sent reached its host: the fabric drained and dropped nothing, so a packet lost is
    # one the ToR delivered after the host's receiver had stopped (none unexplained unless the
    # emulator's sockets dropped frames)
    count = dfksp["pfc"]["accounting"]
    assert count["drained"] and count["held_in_switches"] == 0 and count["dropped_in_switches"] == 0, count
    assert count["unexplained"] <= count["emulator_drops"], count
