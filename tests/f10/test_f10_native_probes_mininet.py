"""F10's detector at a 1 ms probe period on the embedded target's native backend (k=4 AB FatTree, Mininet).

The switches' packet generator runs in the native loop (native_io/pktgen.c): the triggers that make
the detector probe and decide need no Python.  As in test_f10_detector_mininet.py, probes and
triggers run on the link under test only (its two ends) and the detector's arithmetic is the same:
with w = 8 periods, c = 1, an aggregation-core link that fails is declared down by both ends within
one window and a period, plus the triggers' measured lateness.
"""
import time

from test_f10_detector_mininet import LINK, SEED, allowance_s, lateness_s, link_rows, settle, wait_for_detection

PERIOD_S = 0.001
PARAMS = {"probe_period_us": 1_000, "detector_window_periods": 8, "detector_down_below": 1,
          "detector_up_at_least": 3, "holddown_us": 10_000, "holddown_max_us": 80_000, "backoff_reset_us": 200_000}
WINDOW_S = PARAMS["detector_window_periods"] * PERIOD_S


def test_native_detector_reports_a_failed_link_down_at_a_1ms_period(fabric_factory, tmp_path):
    """The link fails: both ends report it down, the first within t + 2 periods (+ lateness allowance)."""
    fabric = fabric_factory("abfattree", k=4, program="f10", target="embedded", backend="native",
                            controller="f10", seed=SEED, log_dir=str(tmp_path / "logs"),
                            controller_options={"monitored_switches": list(LINK), "pushback": False,
                                                "rescheduler_epoch_ms": None},
                            mode_params=PARAMS)
    settle(PARAMS)
    for name in LINK:
        with open(tmp_path / "logs" / f"{name}.log") as handle:
            assert "native packet loop on ports" in handle.read(), f"{name} does not forward natively"
    deadline = time.monotonic() + 5.0  # a false down on a loaded machine: wait for the link to be up again
    while any(rows and rows[-1]["status"] != "up" for rows in
              ([row for row in link_rows(fabric) if row["switch"] == name] for name in LINK)):
        assert time.monotonic() < deadline, link_rows(fabric)
        time.sleep(0.05)
    false_before = len(link_rows(fabric))
    generated = {name: fabric.switch(name).packet_generator_status() for name in LINK}
    failure = fabric.link_down(*LINK)
    detection = wait_for_detection(fabric, failure, 3.0)
    assert detection is not None, f"no down report: {link_rows(fabric)}"
    bound = WINDOW_S + 2 * PERIOD_S + allowance_s(fabric, detection, PERIOD_S)
    assert 0 < detection["detection_s"] <= bound, (detection, bound)
    time.sleep(0.2)
    after = link_rows(fabric)[false_before:]  # arrival order: the reports since the failure
    assert {row["switch"] for row in after if row["status"] == "down"} == set(LINK), after
    for name in LINK:  # the triggers kept running at the short period
        for app, state in fabric.switch(name).packet_generator_status().items():
            assert state["period_us"] == 1000.0
            assert state["generated"] > generated[name][app]["generated"]
    print(f"\nnative, 1 ms probes: down {detection['detection_s'] * 1e3:.2f} ms after the failure "
          f"({detection['clock']} clock; bound {bound * 1e3:.1f} ms); trigger lateness max "
          f"{lateness_s(fabric) * 1e3:.2f} ms; "
          f"{false_before} transitions before the failure")
