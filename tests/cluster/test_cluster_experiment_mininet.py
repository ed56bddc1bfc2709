"""An experiment over two servers shows what it shows on one: the low-entropy elephants (ECMP against
E-ECMP) over this machine and a simulated server, through the experiment runner, shortened to CI size.

Where each QP goes is a function of the spec (its hash seed, QP numbers and UDP ports), computed with
the same P4 programs on one embedded switch (:func:`predict_stream_placement`); the run over two
servers must show exactly that placement, hence ECMP's MMR above E-ECMP's and goodput the other way,
with 6 of the 8 shaped leaf-spine links crossing servers.  results.json records the servers, the
placement and one cross link's measured round trip and rate.
"""
import json
import os

import pytest
import yaml

from testbed.experiment.compare import compare_modes
from testbed.experiment.placement import predict_stream_placement
from testbed.experiment.spec import on_servers, parse_spec
from testbed.pytest_plugin import SIMULATED_SERVER
from testbed.traffic import metrics

from repo_paths import REPO

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

TRAFFIC_S = 3.0
SPINES = 4


def test_elephants_over_two_servers_keep_the_one_server_ordering(simulated_server, no_leftovers, tmp_path):
    with open(os.path.join(REPO, "experiments", "elephants_lowentropy.yaml")) as handle:
        data = yaml.safe_load(handle)
    for entry in data["traffic"]:
        entry["duration_s"] = TRAFFIC_S
    data["duration_s"] = TRAFFIC_S + 1.0
    spec = on_servers(parse_spec(data), [SIMULATED_SERVER])
    predicted = {mode: metrics.max_mean_ratio(predict_stream_placement(spec.with_mode(mode), SPINES)["per_uplink"])
                 for mode in ("ecmp", "eecmp")}
    assert predicted["ecmp"] >= predicted["eecmp"] + 0.5, predicted

    rows = {row["mode"]: row for row in compare_modes(spec, ["ecmp", "eecmp"], out_dir=str(tmp_path),
                                                      progress=lambda _line: None)}
    assert all(row["status"] == "ok" for row in rows.values()), {mode: row["error"] for mode, row in rows.items()}
    mmr = {mode: row["uplink_mmr"] for mode, row in rows.items()}
    goodput = {mode: row["goodput_mbps"] for mode, row in rows.items()}
    assert mmr["ecmp"] == pytest.approx(predicted["ecmp"], abs=0.1), (mmr, predicted)
    assert mmr["eecmp"] == pytest.approx(predicted["eecmp"], abs=0.15), (mmr, predicted)
    assert goodput["eecmp"] > goodput["ecmp"], goodput  # ECMP's collision overruns a shaped uplink

    results = json.loads((tmp_path / "ecmp" / "results.json").read_text())
    assert results["target"] == "embedded"
    cluster = results["cluster"]
    assert [server["name"] for server in cluster["servers"]] == ["localhost", SIMULATED_SERVER]
    assert cluster["link"] == "vxlan" and len(cluster["crossing_links"]) == 6
    measured = cluster["cross_link_measured"]
    assert measured["between"] == ["localhost", SIMULATED_SERVER]
    assert 0 < measured["rtt_ms_avg"] < 50 and measured["rate_mbps"] > 100, measured  # far above the 4 Mbit/s links
    # the overload check per server: each server's figures and load averages (the simulated one answers
    # its own /proc/loadavg over ssh)
    servers = ["localhost", SIMULATED_SERVER]
    assert sorted(results["overload"]["by_server"]) == servers
    assert sum(entry["switch_socket_drops"] for entry in results["overload"]["by_server"].values()) \
        == results["overload"]["switch_socket_drops"]
    for moment in ("start", "end"):
        loads = results["overload"]["load_average"][moment]
        assert sorted(loads) == servers and all(len(load) == 3 for load in loads.values()), loads
    # every switch port's queue, on both servers, read for the congestion timeline: ECMP's collision drops
    timeline = results["dataplane"]["congestion_timeline"]
    assert timeline["ports_not_read"] == [] and timeline["error"] is None
    assert sum(timeline["drops"]) > 0
