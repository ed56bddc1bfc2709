"""F10's workload model (seed 002 section 7.2) in the sender's Pacer: log-normal packet gaps and
log-normal on and off periods, drawn from the seed, on a simulated clock (no sleeping)."""
import math
import statistics

import pytest

from testbed.errors import ParameterError
from testbed.traffic import sender
from testbed.traffic.sender import Pacer, SenderConfig, run_sender

FRAME_BYTES = 1000
RATE_MBPS = 80.0  # 1000-byte frames every 100 us
SPACING_NS = FRAME_BYTES * 8000 / RATE_MBPS


class Clock:
    """perf_counter_ns for the Pacer; its sleeps move the clock instead of waiting."""

    def __init__(self):
        self.now = 1_000_000_000

    def __call__(self):
        return self.now

    def sleep_until(self, target_ns):
        self.now = max(self.now, int(target_ns))


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(sender.time, "perf_counter_ns", clock)
    monkeypatch.setattr(Pacer, "_sleep_until", staticmethod(clock.sleep_until))
    return clock


def _send_times(clock, pacer, frames):
    times = []
    for _ in range(frames):
        pacer.wait(FRAME_BYTES)
        times.append(clock.now)
    return times


def test_lognormal_gaps_keep_the_rate_and_have_the_asked_spread(clock):
    pacer = Pacer(RATE_MBPS, pacing="lognormal", gap_sigma=1.0, seed=7)
    times = _send_times(clock, pacer, 20_000)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert statistics.fmean(gaps) == pytest.approx(SPACING_NS, rel=0.05)  # the rate holds on average
    logs = [math.log(gap) for gap in gaps if gap > 0]
    assert statistics.pstdev(logs) == pytest.approx(1.0, rel=0.05)
    # the tail: with mean 1 (mu = -0.5, sigma 1) a tenth of the gaps exceed exp(-0.5 + 1.2816) = 2.19 spacings
    assert 0.09 < sum(gap > 2.185 * SPACING_NS for gap in gaps) / len(gaps) < 0.11


def test_the_same_seed_draws_the_same_gaps_and_another_seed_others(clock):
    first = _send_times(clock, Pacer(RATE_MBPS, pacing="lognormal", seed=3), 500)
    again = _send_times(clock, Pacer(RATE_MBPS, pacing="lognormal", seed=3), 500)
    other = _send_times(clock, Pacer(RATE_MBPS, pacing="lognormal", seed=4), 500)

    def gaps(times):
        return [b - a for a, b in zip(times, times[1:])]
    assert gaps(first) == gaps(again) != gaps(other)


def test_drawn_on_and_off_periods_have_the_asked_medians(clock):
    pacer = Pacer(RATE_MBPS, on_ms=50.0, off_ms=100.0, on_sigma=1.0, off_sigma=1.0, seed=11)
    times = _send_times(clock, pacer, 300_000)  # 30 s of on time at 10,000 frames/s
    offs, ons, start = [], [], times[0]
    for a, b in zip(times, times[1:]):
        if b - a > 10 * SPACING_NS:  # evenly paced inside an on period: a longer gap is an off period
            offs.append(b - a)
            ons.append(a - start)
            start = b
    assert len(offs) > 300
    assert statistics.median(offs) == pytest.approx(100e6, rel=0.15)
    assert statistics.median(ons) == pytest.approx(50e6, rel=0.15)
    assert statistics.pstdev(math.log(off) for off in offs) == pytest.approx(1.0, rel=0.15)


def test_fixed_on_and_off_periods_stay_in_phase_with_the_start(clock):
    pacer = Pacer(RATE_MBPS, on_ms=10.0, off_ms=15.0)
    times = _send_times(clock, pacer, 5_000)
    assert all((t - pacer.origin) % 25_000_000 < 10_000_000 for t in times)


@pytest.mark.parametrize("field, value", [("gap_sigma", -0.1), ("on_sigma", 4.5), ("off_sigma", float("nan"))])
def test_the_sender_refuses_a_spread_outside_its_range_naming_the_option(field, value):
    config = SenderConfig(intf="lo", dst_ip="127.0.0.1", dst_mac="00:00:00:00:00:00", **{field: value})
    with pytest.raises(ParameterError, match="--" + field.replace("_", "-")):
        run_sender(config)


def test_a_frame_due_after_the_deadline_ends_the_run_without_waiting(clock):
    """An off period running past the run's end: the pacer says no at once instead of sleeping through it."""
    import time

    pacer = Pacer(RATE_MBPS, on_ms=1.0, off_ms=1000.0)  # 1 ms on, then a second off
    deadline_ns = time.time_ns() + 100_000_000  # the run ends in 100 ms (wall clock)
    start = clock.now
    sent = 0
    while pacer.wait(FRAME_BYTES, deadline_ns):
        sent += 1
        assert sent <= 10
    assert sent == 10  # the on period's 1 ms at 100 us spacing
    assert clock.now - start < 1_000_000  # it never slept into the off period
    assert pacer.frames == 10
