"""F10's failure detector (p4src/include/f10_detector.p4) on an emulated k=4 AB FatTree, on both targets.

Seed 002, section 5.4: every fabric port counts the valid frames it receives
per window t; a working port goes down when fewer than c arrive in a window,
comes back after a window with at least d and the hold-down, and the
hold-down doubles on flapping.  These tests run the detector on real links
(Mininet veths, the switches' own packet generator or BMv2's injector) and
read its transitions from the f10 controller (PacketIn reports with the
switch's timestamp).

To save CPU, probes and triggers run only on the link under test
(``monitored_switches``: its two ends); the rest of the fabric forwards.

What the arithmetic below rests on (the detector's own guarantee, see
testbed/modes.py ``check_combination``): every trigger of an idle port sends
one probe, so a window of ``w`` periods holds ``w - 1`` to ``w + 1`` probes
while triggers run less than half a period late; each end decides once per
period.  The embedded ports' loss is a seeded, independent draw per frame
(``Fabric(seed=...)``); netem's (BMv2) is independent per frame too.

Timing assertions are bounds with the measured trigger lateness added, on
the switch's clock where the target tells it (embedded); BMv2 reports are
timed on arrival, so they get a report allowance.
"""
import time

import pytest

from testbed.pytest_plugin import BOTH_TARGETS, skip_unless_lossy_links
from testbed.topologies.graph import port_toward

LINK = ("c0", "a0_0")                  # an aggregation-core link, F10's case
SEED = 12                              # the run's seed: the embedded ports' loss draws
REPORT_ALLOWANCE_S = 0.05              # BMv2: detection timed when the report arrives at the controller

# (a) and (b): one detector; probes every 20 ms (the default), window w = 8 periods (t = 160 ms), c = 1, d = 3
PERIOD_S = 0.020
WINDOW_PERIODS = 8
WINDOW_S = WINDOW_PERIODS * PERIOD_S
LOSSY_PARAMS = {"probe_period_us": 20_000, "detector_window_periods": WINDOW_PERIODS, "detector_down_below": 1,
                "detector_up_at_least": 3}
TOLERATED_LOSS = 0.02
LOSSY_S = 10.0  # how long the tolerated loss lasts (the docstring bounds a false down over it)
CROSSING_LOSS = 0.999

# (c): 50 ms flapping within reach: probes every 5 ms, t = 4 periods = 20 ms, hold-down 25 ms doubling up to 200 ms
FLAP_INTERVAL_S = 0.050
FLAP_FOR_S = 3.0
FLAP_PARAMS = {"probe_period_us": 5_000, "detector_window_periods": 4, "detector_down_below": 1,
               "detector_up_at_least": 3, "holddown_us": 25_000, "holddown_max_us": 200_000,
               "backoff_reset_us": 2_000_000}


def start_f10(fabric_factory, target, mode_params, link=LINK):
    """The k=4 AB FatTree with f10.p4, probes and triggers on ``link`` only; the detectors and the data
    plane's detours alone (mode f10's pushback and rescheduler off: they would move traffic away)."""
    return fabric_factory("abfattree", k=4, program="f10", target=target, controller="f10", seed=SEED,
                          controller_options={"monitored_switches": list(link), "pushback": False,
                                              "rescheduler_epoch_ms": None},
                          mode_params=mode_params)


def port_of(fabric, switch, neighbor):
    """``switch``'s port toward ``neighbor``."""
    for _, other, data in fabric.topo.graph().edges(switch, data=True):
        if other == neighbor:
            return port_toward(data, switch)
    raise AssertionError(f"no link {switch}-{neighbor}")


def settle(mode_params):
    """Wait until both ends have watched the link for a whole window and seen it work (port_confirmed)."""
    period_s = mode_params["probe_period_us"] / 1e6
    time.sleep(3 * mode_params["detector_window_periods"] * period_s + 1.0)


def link_rows(fabric, link=LINK, status=None):
    """The controller's transitions of ``link`` (both ends), in arrival order."""
    return [row for row in list(fabric.controller.transitions)
            if row["link"] == sorted(link) and (status is None or row["status"] == status)]


def lateness_s(fabric, link=LINK):
    """The latest a trigger of either end ran (embedded: measured; BMv2's injector does not say: None)."""
    worst = None
    for name in link:
        switch = fabric.switch(name)
        if not hasattr(switch, "packet_generator_status"):
            return None
        for app in switch.packet_generator_status().values():
            worst = max(worst or 0.0, app["late_max_us"] / 1e6)
    return worst


def allowance_s(fabric, detection, period_s):
    """What a bound adds for a loaded machine: twice the triggers' lateness (a late decision, a late-counted
    frame), or one period where the lateness is unknown; plus the report's trip when timed on arrival."""
    late = lateness_s(fabric)
    extra = 2 * late if late is not None else period_s
    if detection["clock"] != "switch":
        extra += REPORT_ALLOWANCE_S
    return extra + 0.002


def wait_for_detection(fabric, failure, within_s):
    """The controller's detection of ``failure`` (first transition of its link), waiting up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = [row for row in fabric.controller.detections if row["action"] == failure.action]
        if found:
            return found[0]
        time.sleep(0.05)
    return None


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_a_lossy_link_whose_frames_stay_above_c_is_never_declared_down(fabric_factory, target):
    """2 % loss both ways for 10 s, w = 8 periods of 20 ms, c = 1: no transition at all.

    A false down needs a window in which every frame was lost.  A window holds
    at least w - 1 = 7 probes, or 6 if the sender skipped a trigger in it
    (the generator counts skips); each is lost with probability 0.02
    independently (seeded draws, per port), so a decision is a false down
    with probability at most 0.02^6 = 6.4e-11 (0.02^7 = 1.3e-12 without a
    skip).  Each end decides once per period: 2 x 10 s / 20 ms = 1000
    decisions, so over the 10 s the probability of any false down is at most
    1000 x 6.4e-11 = 6.4e-8 < 1e-6 (1.3e-9 without skips).  Expected frames
    per window: 8 x 0.98 = 7.8, well above c = 1.
    """
    skip_unless_lossy_links(target)
    fabric = start_f10(fabric_factory, target, LOSSY_PARAMS)
    settle(LOSSY_PARAMS)
    assert link_rows(fabric) == []                 # start-up reports nothing on a working link
    mechanism = fabric.set_link_loss(*LINK, TOLERATED_LOSS)
    time.sleep(LOSSY_S)
    rows = link_rows(fabric)
    assert rows == [], f"false transitions under {TOLERATED_LOSS:.0%} loss: {rows}"
    if mechanism == "embedded-port":               # the loss did happen, on both ends
        for name, neighbor in (LINK, LINK[::-1]):
            drops = fabric.switch(name).port_status()[port_of(fabric, name, neighbor)]["drops"]
            assert drops > 0, f"{name}: no frame was lost toward {neighbor}"
    print(f"\n{target}: {TOLERATED_LOSS:.0%} loss for {LOSSY_S:.0f} s ({mechanism}), no transition; trigger lateness "
          f"max {lateness_s(fabric)} s")


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_a_link_losing_more_than_the_threshold_goes_down_within_two_windows(fabric_factory, target):
    """99.9 % loss both ways with the same detector (w = 8 periods of 20 ms, c = 1): down within 2 windows.

    The threshold: a window of w = 8 periods expects 8 (1 - loss) frames; that
    falls below c = 1 above 87.5 % loss.  At 99.9 %: a window holds at most
    w + 1 = 9 probes, so it keeps at least one frame (no down) with
    probability at most 1 - 0.999^9 = 0.0090.  Two disjoint windows end within
    2 t + 1 period of the loss's start (windows slide by one period), and each
    end draws its losses independently, so neither end declares the link down
    by then with probability at most 0.0090^4 = 6.5e-9: the link goes down
    within 2 windows with probability > 1 - 1e-6.  Asserted bound: 2 t + 2
    periods (one more for the loss reaching both ends) + the lateness
    allowance.
    """
    skip_unless_lossy_links(target)
    fabric = start_f10(fabric_factory, target, LOSSY_PARAMS)
    settle(LOSSY_PARAMS)
    assert link_rows(fabric) == []
    failure = fabric.apply_failure("lossy_link", link=LINK, loss=CROSSING_LOSS)   # the controller matches it
    detection = wait_for_detection(fabric, failure, 2 * WINDOW_S + 3.0)
    assert detection is not None, f"no down report within {2 * WINDOW_S + 3.0:.2f} s: {link_rows(fabric)}"
    bound = 2 * WINDOW_S + 2 * PERIOD_S + allowance_s(fabric, detection, PERIOD_S)
    assert 0 < detection["detection_s"] <= bound, (detection, bound)
    first = link_rows(fabric, status="down")[0]
    assert first["frames"] < LOSSY_PARAMS["detector_down_below"]
    print(f"\n{target}: down {detection['detection_s'] * 1e3:.1f} ms after {CROSSING_LOSS:.1%} loss "
          f"({detection['clock']} clock; bound {bound * 1e3:.1f} ms)")


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_a_link_flapping_every_50ms_doubles_its_hold_down_up_to_the_cap(fabric_factory, target):
    """The link goes down and up every 50 ms for 3 s (no controller told); each end's reports show the
    hold-down doubling, capped at holddown_max_us.

    Within reach: probes every 5 ms and t = 4 periods = 20 ms, so a 50 ms
    outage is detected (t + one period = 25 ms < 50 ms) and 50 ms up brings
    d = 3 frames.  Backoff: each down within backoff_reset_us (2 s) of the
    previous one adds a level; the hold-down is 25 ms << level, at most
    200 ms (level 3); down-to-down gaps here are at most a capped hold-down
    and a few flaps, far below 2 s.  Asserted on the switch's own clock and
    its reports' fields, not on timings: levels 0, 1, 2, ... one by one,
    hold-down = min(25 ms << level, 200 ms), the cap reached and held
    (level > 3), every up at least its hold-down after its down; after the
    flapping stops, the port comes back up.
    """
    fabric = start_f10(fabric_factory, target, FLAP_PARAMS)
    settle(FLAP_PARAMS)
    assert link_rows(fabric) == []
    started = time.monotonic()
    flaps = 0
    while time.monotonic() - started < FLAP_FOR_S:
        if flaps % 2 == 0:
            fabric.link_down(*LINK, notify=False)
        else:
            fabric.link_up(*LINK, notify=False)
        flaps += 1
        time.sleep(max(0.0, started + flaps * FLAP_INTERVAL_S - time.monotonic()))
    fabric.link_up(*LINK, notify=False)
    time.sleep(FLAP_PARAMS["holddown_max_us"] / 1e6 + 1.0)
    base, cap = FLAP_PARAMS["holddown_us"], FLAP_PARAMS["holddown_max_us"]
    for switch in LINK:
        rows = sorted((row for row in link_rows(fabric) if row["switch"] == switch),
                      key=lambda row: row["switch_time_us"])
        downs = [row for row in rows if row["status"] == "down"]
        assert len(downs) >= 5, f"{switch}: {len(downs)} downs in {FLAP_FOR_S} s of flapping: {rows}"
        assert [row["backoff_level"] for row in downs] == list(range(len(downs))), downs
        for row in downs:
            assert row["holddown_us"] == min(base << row["backoff_level"], cap), row
        assert downs[-1]["holddown_us"] == cap and downs[-1]["backoff_level"] > 3
        gaps_us = [b["switch_time_us"] - a["switch_time_us"] for a, b in zip(downs, downs[1:])]
        assert max(gaps_us) < FLAP_PARAMS["backoff_reset_us"]
        for down in downs:
            later_ups = [row for row in rows
                         if row["status"] == "up" and row["switch_time_us"] > down["switch_time_us"]]
            if later_ups:
                assert later_ups[0]["switch_time_us"] - down["switch_time_us"] >= down["holddown_us"]
        assert rows[-1]["status"] == "up", f"{switch}: still down after the flapping stopped: {rows[-1]}"
        print(f"\n{target} {switch}: {flaps} flaps, hold-downs (ms) "
              f"{[row['holddown_us'] // 1000 for row in downs]}, levels {[row['backoff_level'] for row in downs]}")


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_the_detector_reroutes_around_a_failed_link_without_the_controller(fabric_factory, target):
    """An aggregation-core link fails (default detector: 20 ms probes, t = 5 periods, c = 1): both ends
    declare it down within one window + c periods (+ lateness), then every pod-0 host reaches every
    other host, through backups the data plane chose (f10_detoured counts), with no controller write."""
    params = {"probe_period_us": 20_000}
    fabric = start_f10(fabric_factory, target, params)
    settle({"probe_period_us": 20_000, "detector_window_periods": 5})
    hosts = [host.name for host in fabric.hosts]
    pod0 = hosts[:4]
    pairs = [(a, b) for a in hosts for b in hosts if a != b and (a in pod0) != (b in pod0)]
    assert fabric.unreachable_pairs(pairs) == []
    written = fabric.controller.entries_written
    failure = fabric.link_down(*LINK)      # the f10 controller records it and does not reroute
    detection = wait_for_detection(fabric, failure, 3.0)
    assert detection is not None, f"no down report: {link_rows(fabric)}"
    period_s, window_s = 0.020, 5 * 0.020
    bound = window_s + 1 * period_s + allowance_s(fabric, detection, period_s)
    assert 0 < detection["detection_s"] <= bound, (detection, bound)
    time.sleep(0.5)
    assert {row["switch"] for row in link_rows(fabric, status="down")} == set(LINK)
    assert fabric.unreachable_pairs(pairs) == []
    detoured = sum(fabric.read_counter(switch, "MyIngress.f10_detoured", port_of(fabric, switch, neighbor))[0]
                   for switch, neighbor in (LINK, LINK[::-1]))
    assert detoured > 0
    assert fabric.controller.entries_written == written
    print(f"\n{target}: detected in {detection['detection_s'] * 1e3:.1f} ms (bound {bound * 1e3:.1f} ms), "
          f"{detoured} packets rerouted by the data plane")

