"""Issue 20 at CI size: FC+ against the Clos of the same switches, ports and hosts (experiments/fcplus_vs_clos.yaml).

Only the permutation collective runs (every host sends to one other).  Why the Clos is slower: its fuller
leaves have 3 hosts and 2 uplinks and every port drains at the same rate, so what leaves such a leaf crosses
2 uplinks at 2/3 of its hosts' rate, while every FC+ ToR has 4 fabric ports for its 2 hosts.  An emulator
falling behind its port rates would narrow the gap: measured 1.4-1.5x in three settings and loads
(experiments/README.md), the test asks for 1.15x.  The LP of both is recorded beside them.
"""
import copy
import json
import os

import pytest
import yaml

from testbed.experiment.compare import compare_modes
from testbed.experiment.spec import parse_spec

from repo_paths import REPO
SPEC = os.path.join(REPO, "experiments", "fcplus_vs_clos.yaml")

pytestmark = pytest.mark.mininet


def permutation_spec():
    with open(SPEC) as handle:
        data = copy.deepcopy(yaml.safe_load(handle))
    data["traffic"] = [dict(entry, start_s=0) for entry in data["traffic"] if entry["pattern"] == "permutation"]
    data["duration_s"] = 8
    return parse_spec(data)


def test_the_clos_of_the_same_switches_completes_a_permutation_later_than_fcplus(no_leftovers, tmp_path):
    rows = compare_modes(permutation_spec(), ["fcplus_1l", "clos_updown"], out_dir=str(tmp_path),
                         progress=lambda *_: None)
    results = {}
    for row in rows:
        assert row["status"] == "ok", (row["mode"], row.get("error"))
        with open(tmp_path / row["mode"] / "results.json") as handle:
            results[row["mode"]] = json.load(handle)
    times = {}
    for mode, run in results.items():
        [entry] = run["traffic"]
        assert entry["completion_time_s"] is not None and entry["received_packets"] == 1536, (mode, entry)
        assert run["pfc"]["deadlocks"] == [] and run["pfc"]["accounting"]["unexplained"] <= \
            run["pfc"]["accounting"]["emulator_drops"], run["pfc"]["accounting"]
        times[mode] = entry["completion_time_s"]
    assert times["clos_updown"] > 1.15 * times["fcplus_1l"], times
    # the throughput LP of each run's topology and routing is there to compare with
    assert results["clos_updown"]["fcplus_lp"]["theta"]["all-to-all"] < \
        results["fcplus_1l"]["fcplus_lp"]["theta"]["all-to-all"]
