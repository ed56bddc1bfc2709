"""F10 against a PortLand-like fabric on k=4 FatTrees (Mininet, embedded target), on one seeded trace.

experiments/f10_vs_portland.yaml runs once per mode (what ``testbed compare
--modes portland,fattree-local,f10`` does): streams cross the cores both ways
and the core-aggregation link c0-a0_0 fails at 2 s.  Expected behaviour, from
the F10 paper (seed 002) and the detector's definition
(p4src/include/f10_detector.p4):

* the detector declares a silent port down at the first trigger after the
  last frame left the window: at most one window ``t`` plus one probe period
  after the failure with c = 1 (the issue's bound: ``t + c * period + 2 ms``),
  later only by as much as the switch's trigger was late (measured by the
  switch, ``trigger_late_max_us``); the flows then move to the backup in the
  same pass, with no controller involved (fattree-local has no controller
  writes at all after start);
* a flow's first packet after that is at most one packet spacing later, and
  arrives after the run's delivery latency;
* PortLand's controller reroutes only after its keepalive timeout (65 ms)
  plus computing and writing the routes: no interrupted flow recovers sooner;
* rerouted packets take 2 extra hops on the AB FatTree (Scheme 1) and 4 on
  the standard FatTree (section 5.1), which the TTL they arrive with shows;
* in f10 mode the failure sets off pushback (section 5.2): for a failed
  core-aggregation link, the core tells the other pods' aggregation switches,
  which stop sending it traffic for the lost pod (3 messages, 3 switches on
  k=4, as testbed.topologies.f10.pushback simulates).

With the spec's 5 ms probes F10's detector bound (t + c * period + 2 ms) is
below PortLand's keepalive, so F10's flows recover first, as in the paper:
asserted whenever the switches' trigger lateness and socket waits kept the
bound below the keepalive; the ratio PortLand / F10 is printed.
"""
import os

import pytest
import yaml

from testbed.experiment.overload import SWITCH_WAIT_MS
from testbed.experiment.runner import run_experiment
from testbed.experiment.spec import parse_spec
from testbed.modes import PARAMETERS
from testbed.packet_sockets import LAG_BUCKETS_MS
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.f10.pushback import simulate_pushback
from testbed.traffic.streams import packet_spacing_ms

from repo_paths import REPO

SPEC = os.path.join(REPO, "experiments", "f10_vs_portland.yaml")
MODES = ("portland", "fattree-local", "f10")
PORTLAND_KEEPALIVE_S = 0.065
RUNS_PER_MODE = 3  # a run the emulator could not keep up with is repeated, up to this many runs

pytestmark = [pytest.mark.mininet, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``{mode: results}`` of the spec under each mode (one fabric at a time).

    The detectors run on the failed link's two switches only (``monitored_switches``):
    probes on every link of the fabric cost about 0.7 core here, and on a machine
    shared with other work a starved switch is a silent neighbour (a false alarm).
    The claims below are about the failed link; experiments/f10_vs_portland.yaml
    itself probes every link.
    """
    data = _spec_data()
    # the epoch rescheduler (tests/f10/test_f10_rescheduler.py) reads every switch's counters each
    # epoch; these claims do not involve it, and a 5 s epoch keeps its load out of the 5 s run
    data["controller"] = dict(data.get("controller") or {}, monitored_switches=["c0", "a0_0"],
                              rescheduler_epoch_ms=5000)
    results = {}
    for mode in MODES:
        spec = parse_spec(data, source=SPEC).with_mode(mode)
        attempts = []
        for attempt in range(1, RUNS_PER_MODE + 1):
            record = run_experiment(spec, str(tmp_path_factory.mktemp(mode)), target="embedded",
                                    progress=lambda _: None)
            assert record["status"] == "ok", f"{mode}: {record['error']}"
            attempts.append(record)
            if not record["overload"]["overloaded"]:
                break
            # the machine, not the network, set this run's timings: run it again
            print(f"\n{mode}: run {attempt} overloaded ({'; '.join(record['overload']['reasons'])})")
        # the run the machine disturbed least: shortest socket waits, then fewest reasons
        results[mode] = min(attempts, key=lambda r: (_receive_lag_s(r) or float("inf"), len(r["overload"]["reasons"])))
    return results


def _spec_data():
    with open(SPEC) as handle:
        return yaml.safe_load(handle)


def _detector(name):
    """The spec's value of a detector parameter, else the mode's default."""
    return (_spec_data().get("mode_params") or {}).get(name, PARAMETERS[name].default)


def _detector_bound_s():
    period_s = _detector("probe_period_us") / 1e6
    return (_detector("detector_window_periods") + _detector("detector_down_below")) * period_s + 0.002


def _f10_bound_s(record):
    """The detector's bound in this run: its own, the switches' trigger lateness and socket waits."""
    lag_s = _receive_lag_s(record)
    late_s = max(record["controller"]["trigger_late_max_us"].values()) / 1e6
    return None if lag_s is None else _detector_bound_s() + late_s + lag_s


def _receive_lag_s(record):
    """How late the switches may have counted a frame: the upper edge of the longest socket wait seen.

    A frame that reached a switch before the failure but waited in its socket is counted in a
    later bucket, which delays the detection by as much.  Switches count read batches by wait in
    the buckets of :data:`testbed.packet_sockets.LAG_BUCKETS_MS`; None when a wait reached the
    last one (no upper edge).
    """
    counts = record["dataplane"]["switch_receive_lag"]["at_least_ms"]
    allowance_ms = LAG_BUCKETS_MS[0]
    for at_least, edge in zip(LAG_BUCKETS_MS, list(LAG_BUCKETS_MS[1:]) + [None]):
        if counts.get(str(at_least), 0):
            allowance_ms = edge
    return None if allowance_ms is None else allowance_ms / 1000.0


def _spacing_s(record):
    return max(packet_spacing_ms(entry["rate_mbps"], entry["qps"], entry["mtu"])
               for entry in record["spec"]["traffic"]) / 1000.0


def _failed_link_transitions(record):
    """The failed link's ends going down after the failure (one per end: the first)."""
    failed_at = record["failures"][0]["applied_at_s"]
    first = {}
    for row in record["controller"]["transitions"]:
        if sorted(row["link"]) == ["a0_0", "c0"] and row["status"] == "down" and row["at_s"] >= failed_at:
            first.setdefault(row["switch"], row)
    return list(first.values())


@pytest.mark.parametrize("mode", ["fattree-local", "f10"])
def test_the_detector_declares_the_failed_link_down_within_its_bound(runs, mode):
    record = runs[mode]
    late_s = max(record["controller"]["trigger_late_max_us"].values()) / 1e6
    lag_s = _receive_lag_s(record)
    assert lag_s is not None, (f"{mode}: switches read frames {LAG_BUCKETS_MS[-1]} ms or more late in "
                               f"{RUNS_PER_MODE} runs: {record['overload']['reasons']}")
    if lag_s > SWITCH_WAIT_MS / 1000.0:  # every run was overloaded: the bound widens, and says why
        print(f"{mode}: {RUNS_PER_MODE} runs overloaded ({'; '.join(record['overload']['reasons'])}): "
              f"the bound allows socket waits up to {1000 * lag_s:.0f} ms")
    bound_s = _f10_bound_s(record)
    failed_at = record["failures"][0]["applied_at_s"]
    ends = _failed_link_transitions(record)
    assert {row["switch"] for row in ends} == {"a0_0", "c0"}, "both ends see the link go down"
    for row in ends:
        detected_s = row["switch_at_s"] - failed_at
        print(f"{mode}: {row['switch']} port {row['port']} down {1000 * detected_s:.1f} ms after the failure "
              f"(bound {1000 * _detector_bound_s():.0f} ms + trigger lateness {1000 * late_s:.1f} ms "
              f"+ socket wait up to {1000 * lag_s:.0f} ms)")
        assert 0 < detected_s <= bound_s
    [detection] = record["controller"]["detections"]
    assert detection["clock"] == "switch" and detection["detection_s"] <= bound_s


@pytest.mark.parametrize("mode", ["fattree-local", "f10"])
def test_every_interrupted_flow_recovers_after_the_detection_without_the_controller(runs, mode):
    record = runs[mode]
    failed_at = record["failures"][0]["applied_at_s"]
    last_detection_s = max(row["switch_at_s"] for row in _failed_link_transitions(record)) - failed_at
    # a flow's next packet leaves at most one spacing after the detection and then takes as long
    # as packets took in this run: the longest, not the p99, because the controller's work at the
    # failure (pushback writes, rescheduler reads) competes for the cores right then
    allowance_s = _spacing_s(record) + record["summary"]["latency"]["max_ms"] / 1000.0
    [flows] = record["summary"]["flow_recovery"]
    assert flows["flows_interrupted"] >= 1, "the failed link carried flows"
    print(f"{mode}: {flows['flows_interrupted']} flows recovered in "
          f"{[round(1000 * s) for s in flows['recovery_s']]} ms (detection {1000 * last_detection_s:.0f} ms, "
          f"+ spacing and longest latency {1000 * allowance_s:.0f} ms)")
    assert flows["max_recovery_s"] <= last_detection_s + allowance_s
    assert record["controller"]["reactions"][0]["reaction_s"] is None   # the controller did not reroute
    if mode == "fattree-local":
        assert record["controller"]["pushbacks"] == []                  # nor wrote anything


def test_portland_recovers_only_after_its_keepalive_and_f10_first_when_its_detector_is_faster(runs):
    portland = runs["portland"]
    reaction = portland["controller"]["reactions"][0]
    assert reaction["error"] is None and reaction["reaction_s"] >= PORTLAND_KEEPALIVE_S
    [flows] = portland["summary"]["flow_recovery"]
    assert flows["flows_interrupted"] >= 1
    # a flow moved by the controller cannot be delivered before the controller moved it
    assert flows["max_recovery_s"] >= PORTLAND_KEEPALIVE_S
    for mode in ("fattree-local", "f10"):
        f10_median = runs[mode]["summary"]["flow_recovery"][0]["median_recovery_s"]
        print(f"median flow recovery portland / {mode}: {flows['median_recovery_s'] / f10_median:.2f} "
              f"({1000 * flows['median_recovery_s']:.0f} ms / {1000 * f10_median:.0f} ms; probe period "
              f"{_detector('probe_period_us') / 1000:g} ms)")
        # a detector (plus one packet spacing) that beat the keepalive in this run must make the flows
        # recover before PortLand's: the data plane reroutes at once, PortLand only after the keepalive
        bound_s = _f10_bound_s(runs[mode])
        if bound_s is not None and bound_s + _spacing_s(runs[mode]) < PORTLAND_KEEPALIVE_S:
            assert f10_median < flows["median_recovery_s"], mode
        else:
            print(f"{mode}: the machine made the detector's bound {bound_s} s: the ordering is not asserted")
    # the paper's second figure of merit: packets lost to congestion (queue drops), portland / f10
    queue_drops = {mode: runs[mode]["dataplane"]["drops"]["congestion"] for mode in ("portland", "f10")}
    connectivity = {mode: runs[mode]["dataplane"]["drops"]["connectivity"] for mode in ("portland", "f10")}
    ratio = (f"{queue_drops['portland'] / queue_drops['f10']:.2f}" if queue_drops["f10"]
             else "undefined (f10 had no queue drops: this spec's links are not shaped)")
    print(f"congestion loss portland / f10: {ratio}; queue drops {queue_drops}, connectivity losses {connectivity}")


@pytest.mark.parametrize("mode, extra, required", [("f10", "2", False), ("fattree-local", "4", True),
                                                   ("portland", None, False)])
def test_rerouted_packets_take_the_detours_extra_hops(runs, mode, extra, required):
    """Detoured packets take exactly the design's extra hops: +2 on the AB FatTree, +4 on the standard
    one.  fattree-local has no pushback, so its detour carries traffic until the run ends; in f10,
    pushback can move the other pods off the failed core before any packet needs the detour (0 is
    a correct outcome there), so only the hop count of those that did is checked."""
    hops = runs[mode]["summary"]["path_dilation"]["extra_hops"]
    expected = {"0"} | ({extra} if extra else set())
    assert set(hops) <= expected, hops
    if required:
        assert hops.get(extra, 0) > 0, f"{mode}: no packet took the detour"


def test_f10_pushes_back_the_lost_pod_to_the_other_pods(runs):
    expected = simulate_pushback(ABFatTree(k=4).graph(), ("c0", "a0_0"))
    pushbacks = [row for row in runs["f10"]["controller"]["pushbacks"] if row["status"] == "down"]
    assert len(pushbacks) == 1, "one link went down, once"
    [row] = pushbacks
    assert row["error"] is None and row["link"] == ["a0_0", "c0"]
    assert row["messages"] == expected.message_count == 3
    assert row["switches_installed"] == sorted(expected.installed)
    assert row["entries_written"] > 0
    # once installed, the other pods send pod 0's traffic to cores that still reach it:
    # few packets took the detour compared with fattree-local, which has no pushback
    f10_detoured = runs["f10"]["summary"]["path_dilation"]["extra_hops"].get("2", 0)
    local_detoured = runs["fattree-local"]["summary"]["path_dilation"]["extra_hops"].get("4", 0)
    print(f"detoured packets: f10 (pushback) {f10_detoured}, fattree-local {local_detoured}")
    assert f10_detoured < local_detoured
