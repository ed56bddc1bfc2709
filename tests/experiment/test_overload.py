"""testbed.experiment.overload and testbed.packet_sockets: what marks a run as overloaded (or its reordering)."""
import pytest

from testbed.experiment import overload
from testbed.packet_sockets import LAG_BUCKETS_MS, ReceiveLag


def _record(emulator=0, waits=0, late_us=None, skipped=None, skipped_run=None):
    controller = {"mode_params_written": {"detector_window_periods": 5}}
    if late_us is not None:
        controller["trigger_late_max_us"] = {"s1": late_us}
    if skipped is not None:  # of 1,000 trigger periods on each of two switches
        controller.update(trigger_skipped={"s1": skipped, "s2": 0},
                          trigger_generated={"s1": 1000 - skipped, "s2": 1000})
    if skipped_run is not None:
        controller["trigger_skipped_run_max"] = {"s1": 0, "s2": skipped_run}
    return {"dataplane": {"drops": {"emulator": emulator},
                          "switch_receive_lag": {"samples": 100, "at_least_ms": {"50": waits}}},
            "summary": {"latency": {"p50_ms": 1.0, "p99_ms": 400.0, "max_ms": 500.0}},
            "controller": controller}


def _assess(record, reports):
    """The generic checks and the F10 mechanism's (its triggers' lateness), as the runner joins them."""
    from testbed.mechanisms import hooks_for

    result = overload.assess(record, reports)
    [f10] = [hooks for hooks in hooks_for() if hooks.mechanism.name == "f10"]
    fields, reasons = f10.overload(record)
    result.update(fields)
    result["reasons"] += reasons
    result["overloaded"] = bool(result["reasons"])
    return result


def _stream(socket_drops=0, lag_ms=1.0):
    return {"pairs": [{"sender": {"pacing_lag_max_ms": lag_ms}, "receiver": {"socket_drops": socket_drops}}]}


def test_a_run_that_kept_up_is_not_marked_even_with_long_queueing_in_the_network():
    result = overload.assess(_record(), [_stream()])
    assert result["overloaded"] is False and result["reasons"] == []
    assert result["latency_p99_ms"] == 400.0   # reported, but queueing in shaped links is the network's


def test_each_sign_of_an_emulator_falling_behind_marks_the_run_and_says_why():
    cases = {"switch sockets dropped 3": (_record(emulator=3), [_stream()]),
             "waited 50 ms": (_record(waits=2), [_stream()]),
             "receiver sockets dropped 5": (_record(), [_stream(socket_drops=5)]),
             "behind its schedule": (_record(), [_stream(lag_ms=250.0)]),
             "trigger was 80 ms late": (_record(late_us=80_000), [_stream()]),
             "skipped 125 of 2000 periods (6.2%": (_record(skipped=125), [_stream()]),
             "s2's trigger skipped 4 periods in a row": (_record(skipped=4, skipped_run=4), [_stream()])}
    for words, (record, reports) in cases.items():
        result = _assess(record, reports)
        assert result["overloaded"] is True and any(words in reason for reason in result["reasons"]), words


def test_a_few_skipped_trigger_periods_stay_under_the_limit():
    # 10 of 2,000 periods (0.5%), at most 3 in a row: a 5-period window still holds a probe of each neighbour
    result = _assess(_record(skipped=10, skipped_run=3), [_stream()])
    assert result["overloaded"] is False and result["trigger_skipped_share"] == pytest.approx(0.005)
    assert result["trigger_skipped_run_max"] == 3


def test_the_switch_wait_limit_is_one_of_the_buckets_the_switches_count():
    assert overload.SWITCH_WAIT_MS in LAG_BUCKETS_MS


def test_receive_lag_counts_each_sample_in_every_bucket_it_reaches():
    lag = ReceiveLag()
    for milliseconds in (0.2, 5, 60, 300):
        lag.record(int(milliseconds * 1e6))
    assert lag.describe() == {"samples": 4, "at_least_ms": {"1": 3, "10": 2, "50": 2, "200": 1}}


def _timing_record(p50_ms, p99_ms, shaped=False, waits_10ms=0):
    return {"spec": {"topology": {"shape_links": shaped},
                     "traffic": [{"pattern": "stream", "rate_mbps": 3, "qps": 2, "mtu": 1024}]},
            "summary": {"latency": {"p50_ms": p50_ms, "p99_ms": p99_ms, "max_ms": p99_ms}},
            "dataplane": {"drops": {"emulator": 0},
                          "switch_receive_lag": {"samples": 10, "at_least_ms": {"10": waits_10ms}}}}


def _paced(late, paced=8000):
    return {"pairs": [{"sender": {"pacing_lag_max_ms": 5.0, "paced_frames": paced, "late_frames": {"1": late,
                                                                                                   "10": late}},
                       "receiver": {"socket_drops": 0}}]}


def test_reordering_is_marked_unreliable_when_the_emulator_alone_could_reorder():
    # flowlet_sweep.yaml's streams: 2 QPs at 3 Mbit/s of 1 KiB frames, a queue pair's packets 5.5 ms apart
    assert overload.stream_spacing_ms(_timing_record(1, 2)["spec"]) == pytest.approx(5.46, abs=0.01)
    calm = overload.assess(_timing_record(1.5, 6.0), [_paced(3)])
    assert calm["reordering_unreliable"] is False and calm["overloaded"] is False
    cases = {"latency p99 exceeds p50 by 26.5 ms": (_timing_record(1.5, 28.0), [_paced(3)]),
             "frames 10 ms or more behind": (_timing_record(1.5, 3.0), [_paced(80)]),
             "switch read batches waited 10 ms": (_timing_record(1.5, 3.0, waits_10ms=4), [_paced(0)])}
    for words, (record, reports) in cases.items():
        result = overload.assess(record, reports)
        assert result["reordering_unreliable"] is True, words
        assert any(words in reason and "out-of-order counts may be the emulator's" in reason
                   for reason in result["reordering_reasons"]), (words, result["reordering_reasons"])
        assert result["overloaded"] is False   # losses, MMR and goodput stand
    # on shaped links the latency spread is the network's queueing: no mark from it
    assert overload.assess(_timing_record(1.5, 300.0, shaped=True), [_paced(0)])["reordering_unreliable"] is False
    # links delayed by design (flowlet_rtt.yaml: paths 0 to 12 ms one way) spread the latency by that much
    delayed = dict(_timing_record(1.5, 12.0), topology={"rtt_us": 24000.0})
    result = overload.assess(delayed, [_paced(3)])
    assert result["reordering_unreliable"] is False and result["latency_spread_ms"] == 0.0
    delayed = dict(_timing_record(1.5, 25.0), topology={"rtt_us": 4000.0})
    [reason] = overload.assess(delayed, [_paced(3)])["reordering_reasons"]
    assert "by 21.5 ms" in reason and "beyond the 2.0 ms the links' delays add" in reason


def test_senders_count_frames_sent_late():
    import time

    from testbed.traffic.sender import LATE_MS, Pacer

    assert overload.LATE_MS in LATE_MS
    pacer = Pacer(rate_mbps=80.0)   # 1000-byte frames every 100 us
    pacer.wait(1000)
    time.sleep(0.03)                 # the sender was descheduled for 30 ms
    pacer.wait(1000)
    assert pacer.frames == 2 and pacer.late_frames[LATE_MS.index(10)] == 1


def test_over_several_servers_each_reason_names_the_servers_it_was_seen_on():
    record = _record(emulator=7, waits=1)
    record["cluster"] = {"placement": {"s1": "localhost", "s2": "tb-srv1", "h1": "localhost", "h2": "tb-srv1"}}
    record["dataplane"]["emulator_by_switch"] = {"s2": {"socket_drops": 7, "waits_over_limit": 1}}
    pair = {"src": "h1", "dst": "h2", "sender": {"pacing_lag_max_ms": 250.0}, "receiver": {"socket_drops": 5}}
    loads = {"start": {"localhost": [0.5, 0.4, 0.3], "tb-srv1": [1.0, 0.9, 0.8]}, "end": {}}
    result = overload.assess(record, [{"pairs": [pair]}], loads)
    assert result["by_server"] == {
        "localhost": {"switch_socket_drops": 0, "switch_waits_over_limit": 0, "receiver_socket_drops": 0,
                      "sender_lag_max_ms": 250.0},
        "tb-srv1": {"switch_socket_drops": 7, "switch_waits_over_limit": 1, "receiver_socket_drops": 5,
                    "sender_lag_max_ms": None}}
    assert result["load_average"] == loads
    ends = sorted(reason[reason.index(" (on "):] for reason in result["reasons"])
    assert ends == [" (on localhost: 250)", " (on tb-srv1: 1)", " (on tb-srv1: 5)", " (on tb-srv1: 7)"]
    # on one server: no per-server figures, the reasons as they were
    one = overload.assess(_record(emulator=7), [_stream()])
    assert one["by_server"] is None and one["reasons"] == [
        "switch sockets dropped 7 frames (a switch process fell behind)"]
