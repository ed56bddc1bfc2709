"""Emulated packets take the detours F10's path-dilation computation predicts (seed 002 section 7.5).

experiments/f10_path_dilation.yaml crashes aggregation switch a0_0 under
streams into its pod, with pushback and the rescheduler off so that rerouted
packets keep taking the cores' local detours.  For each mode the receivers'
TTLs (results.json ``summary.path_dilation``) must show exactly the extra hops
:mod:`testbed.mechanisms.f10.dilation` computes for the same failure and flows,
over every hash choice: 0 or +2 on the AB FatTree (f10), 0 or +4 on the
standard FatTree (fattree-local), and some packets must take the detour.

k = 4 always; k = 8 (80 emulated switches, 128 hosts) only with
``TESTBED_F10_K8=1``: minutes of CPU on a 2-core machine.
"""
import os

import pytest
import yaml

from testbed.experiment.runner import run_experiment
from testbed.experiment.spec import parse_spec
from testbed.mechanisms.f10.dilation import FabricWalker

from repo_paths import REPO

SPEC = os.path.join(REPO, "experiments", "f10_path_dilation.yaml")
HASH_SEEDS = 32  # hash choices walked per flow: every path the data plane's hash may pick
K8 = os.environ.get("TESTBED_F10_K8") == "1"

pytestmark = [pytest.mark.mininet]


def _spec_data(k):
    with open(SPEC) as handle:
        data = yaml.safe_load(handle)
    if k == 8:
        data["topology"]["params"]["k"] = 8
        data["controller"]["monitored_switches"] = ["a0_0", "c0", "c1", "c2", "c3",
                                                    "e0_0", "e0_1", "e0_2", "e0_3"]
        # pods 1-6 into pod 0 (hosts h1-h16), below each of pod 0's edge switches
        data["traffic"][0]["hosts"] = ["h17", "h1", "h33", "h5", "h49", "h9", "h65", "h13", "h81", "h2",
                                       "h97", "h6"]
    return data


def computed_extra_hops(spec):
    """The extra hops every hash choice of the spec's stream flows may show after its switch crashes."""
    topo = spec.build_topology()
    graph = topo.graph()
    walker = FabricWalker(graph)
    crashed = [failure.switch for failure in spec.failures if failure.action == "switch_crash"]
    possible = set()
    for entry in spec.traffic:
        for src, dst in zip(entry.hosts[0::2], entry.hosts[1::2]):
            intact = walker.walk(src, dst)["switches"]
            for seed in range(HASH_SEEDS):
                walk = walker.walk(src, dst, failed_switches=crashed, seed=seed)
                assert walk["outcome"] == "delivered", walk
                possible.add(walk["switches"] - intact)
    return possible


@pytest.mark.parametrize("k", [4, pytest.param(8, marks=[pytest.mark.slow, pytest.mark.skipif(
    not K8, reason="k=8 (80 switches) only with TESTBED_F10_K8=1")])])
@pytest.mark.parametrize("mode, detour", [("fattree-local", 4), ("f10", 2)])
def test_packets_take_the_computed_detours(no_leftovers, tmp_path, k, mode, detour):
    spec = parse_spec(_spec_data(k), source=SPEC).with_mode(mode)
    computed = computed_extra_hops(spec)
    assert computed == {0, detour}
    record = run_experiment(spec, str(tmp_path), target="embedded", progress=lambda _: None)
    assert record["status"] in ("ok", "warning"), record["error"]
    measured = {int(extra): packets for extra, packets in record["summary"]["path_dilation"]["extra_hops"].items()}
    print(f"k={k} {mode}: measured extra hops {measured}, computed {sorted(computed)}; overloaded: "
          f"{record['overload']['overloaded']} {record['overload']['reasons']}")
    assert set(measured) <= computed, measured
    assert measured.get(detour, 0) > 0, f"no packet took the +{detour} detour"
