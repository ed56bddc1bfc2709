"""Issue 5 acceptance at CI size: load-balancing schemes compared through the experiment runner.

Both tests run real emulations (Mininet, embedded P4 switches, RoCEv2 streams)
through :mod:`testbed.experiment.compare`, at a small size (a few seconds of
traffic per run), and check the orderings seed 004 sections 4.1-4.5 report.

* Low-entropy elephants (4.1-4.2): experiments/elephants_lowentropy.yaml,
  shortened: 4 NIC pairs between two leaves over 4 spines, 4 QPs per pair (QP
  scaling), one UDP source port per NIC pair, 4 Mbit/s shaped fabric links.
* Flowlet sweep (4.5): experiments/flowlet_sweep.yaml, shortened, at three
  flowlet intervals.
"""
import copy
import os

import pytest
import yaml

from testbed.experiment.compare import compare_modes, sweep_mode_param
from testbed.experiment.placement import predict_stream_placement
from testbed.experiment.spec import parse_spec
from testbed.traffic import metrics

from repo_paths import REPO

ELEPHANTS_SPEC = os.path.join(REPO, "experiments", "elephants_lowentropy.yaml")
FLOWLET_SPEC = os.path.join(REPO, "experiments", "flowlet_sweep.yaml")
SPINES = 4
TRAFFIC_S = 3.0
MMR_TOLERANCE = 0.05
GOODPUT_TOLERANCE = 0.05

pytestmark = pytest.mark.mininet


def small_spec(path, traffic_s=TRAFFIC_S, rate_mbps=None):
    """The spec at ``path`` with its traffic shortened to ``traffic_s`` seconds (CI size).

    Args:
        path: the YAML spec.
        traffic_s: seconds of traffic per entry.
        rate_mbps: if given, every traffic entry's rate.
    """
    with open(path) as handle:
        data = copy.deepcopy(yaml.safe_load(handle))
    for entry in data["traffic"]:
        entry["duration_s"] = traffic_s
        if rate_mbps is not None:
            entry["rate_mbps"] = rate_mbps
    data["duration_s"] = traffic_s + 1.0
    return parse_spec(data)


def by_mode(rows):
    """{mode: row}, after checking every run succeeded."""
    for row in rows:
        assert row["status"] == "ok", (row["mode"], row["error"])
    return {row["mode"]: row for row in rows}


def test_low_entropy_elephants_ecmp_worse_than_eecmp_worse_than_spray(no_leftovers, tmp_path):
    """MMR ECMP > E-ECMP with QP scaling >= spray (~1), goodput the other way.

    Why this is not luck: the spec's seed fixes the hash seed, the QP numbers
    and (``udp_sport: per_nic_pair``) one UDP source port per NIC pair, so
    where each QP goes under ECMP and E-ECMP is a function of the spec.  The
    placement is first computed with the same P4 programs on one embedded
    switch (:func:`predict_stream_placement`): for this seed ECMP puts the 4
    NIC pairs 3/1/0/0 on the spines (all 4 QPs of a pair together), E-ECMP
    spreads the 16 QPs 3/3/5/5.  The emulation must then show exactly the
    ECMP imbalance the hash predicts (paced streams: equal bytes per pair), and
    the orderings follow from it; only spray and goodput carry timing noise,
    hence the small tolerances where the paper's relation is >=.
    """
    spec = small_spec(ELEPHANTS_SPEC)
    assert spec.traffic[0].udp_sport == "per_nic_pair" and spec.traffic[0].qps >= 4
    predicted = {mode: predict_stream_placement(spec.with_mode(mode), SPINES)["per_uplink"]
                 for mode in ("ecmp", "eecmp")}
    predicted_mmr = {mode: metrics.max_mean_ratio(counts) for mode, counts in predicted.items()}
    assert predicted_mmr["ecmp"] >= 2.0, predicted   # the seed gives ECMP a real collision
    assert predicted_mmr["eecmp"] <= predicted_mmr["ecmp"] - 0.5, predicted

    lines = []
    rows = by_mode(compare_modes(spec, ["ecmp", "eecmp", "spray"], out_dir=str(tmp_path), target="embedded",
                                 progress=lines.append))
    mmr = {mode: row["uplink_mmr"] for mode, row in rows.items()}
    goodput = {mode: row["goodput_mbps"] for mode, row in rows.items()}
    # the emulated ECMP placement is the predicted one (paced flows: bytes proportional to QPs)
    ecmp_loads = rows["ecmp"]["uplink_loads"]
    assert len(ecmp_loads) == SPINES
    assert mmr["ecmp"] == pytest.approx(predicted_mmr["ecmp"], abs=0.1), (ecmp_loads, predicted)
    assert sum(1 for load in ecmp_loads.values() if load > 0) == sum(1 for n in predicted["ecmp"] if n), ecmp_loads
    assert mmr["eecmp"] == pytest.approx(predicted_mmr["eecmp"], abs=0.15), (rows["eecmp"]["uplink_loads"],
                                                                              predicted)
    # the paper's orderings
    assert mmr["ecmp"] > mmr["eecmp"] >= mmr["spray"] - MMR_TOLERANCE, mmr
    assert mmr["spray"] <= 1.1, mmr
    assert goodput["spray"] >= goodput["ecmp"], goodput
    assert goodput["eecmp"] > goodput["ecmp"], goodput
    assert goodput["spray"] >= goodput["eecmp"] * (1 - GOODPUT_TOLERANCE), goodput
    assert (tmp_path / "comparison.png").read_bytes()[:4] == b"\x89PNG"


FLOWLET_INTERVALS_US = (100, 5000, 100000)
FLOWLET_RATE_MBPS = 10.0
PATH_CHANGE_NOISE = 5


def test_flowlet_sweep_reorders_less_and_balances_worse_as_the_interval_grows(no_leftovers, tmp_path):
    """Reordering happens only where the switches moved a flow, and they move flows less as the interval grows.

    The shipped sweep spec at 10 Mbit/s per sender (5 Mbit/s per QP: a packet
    about every 1.7 ms, on unshaped links, so nothing is lost): a 100 us
    interval re-picks a path for nearly every packet (near-perfect balance),
    5 ms rarely and 100 ms never on a quiet machine (each QP pinned like ECMP:
    for seed 13 the 8 QPs collide on the uplinks, MMR 2.0, deterministic for
    the seed).

    Out-of-sequence counts depend on CPU timing: on a loaded machine a sender
    or switch stalled for longer than the interval makes the next packet a new
    flowlet, which may overtake the previous one.  So the test does not bound
    them by constants; it checks what holds at any speed, using the switches'
    own count of the flowlet boundaries that moved a flow slot to another port
    (``flowlet_path_changes``, p4src/flowlet.p4):

    * packets of one flowlet share a FIFO path, so each out-of-sequence
      arrival needs a path change or a loss (``OOS <= path changes + lost``),
      and a packet can arrive after a later one of its QP (``late``) only if
      its flow changed path;
    * the switches re-pick paths less as the interval grows (path changes
      ordered, a few of noise);
    * balance at 100 ms is clearly worse than at 100 us.

    Path changes at 100 ms (paced flows never pause that long by themselves)
    mean the machine stalled the emulation, and so do lost packets (the links
    are unshaped: only an emulator that cannot keep up drops); the test says
    so.  Measured on a quiet machine: out-of-sequence 28 / 0 / 0, MMR 1.01 /
    1.52 / 2.00; with other work on both cores (load 7-9): out-of-sequence
    1470 / 376 / 304, path changes 4771 / 374 / 0, lost 451 / 4886 / 3902,
    MMR 1.03 / 1.21 / 2.50.
    """
    spec = small_spec(FLOWLET_SPEC, rate_mbps=FLOWLET_RATE_MBPS)
    rows = sweep_mode_param(spec, "flowlet_interval_us", list(FLOWLET_INTERVALS_US), mode="flowlet",
                            out_dir=str(tmp_path), target="embedded", progress=lambda line: None)
    for row in rows:
        assert row["status"] == "ok", (row["mode"], row["error"])
    oos = [row["out_of_sequence"] for row in rows]
    changes = [row["flowlet_path_changes"] for row in rows]
    late = [row["late"] for row in rows]
    lost = [row["lost_packets"] for row in rows]
    mmr = [row["uplink_mmr"] for row in rows]
    print(f"flowlet intervals {FLOWLET_INTERVALS_US} us: out-of-sequence {oos}, late {late}, "
          f"path changes {changes}, lost {lost}, MMR {mmr}")
    if changes[-1]:
        print(f"the switches saw gaps above {FLOWLET_INTERVALS_US[-1]} us in paced ~1.7 ms flows "
              f"{changes[-1]} times: the machine stalled the emulation (overloaded); out-of-sequence "
              f"arrivals are bounded by these path changes instead of being expected near 0")
    if any(lost):
        print(f"the emulation lost {lost} packets on unshaped links: it could not keep up (overloaded); "
              f"each loss also counts as an out-of-sequence arrival")
    for interval, reordered, arrived_late, moved, missing in zip(FLOWLET_INTERVALS_US, oos, late, changes, lost):
        assert reordered <= moved + missing, (interval, oos, changes, lost)
        assert moved or not arrived_late, (interval, late, changes)
    for smaller, larger in zip(changes, changes[1:]):
        assert larger <= smaller + PATH_CHANGE_NOISE, changes
    assert changes[0] > 4 * max(changes[1:]), changes
    assert mmr[-1] > mmr[0] + 0.2, mmr
    assert mmr[0] <= 1.2, mmr
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
