"""testbed.experiment.failure_traces: log-normal failure traces (seed 002, section 7.2)."""
import math

import pytest

from testbed.errors import ParameterError
from testbed.experiment.failure_traces import FailureProcess, LogNormal, lognormal_trace
from testbed.topologies.ab_fattree import ABFatTree

GRAPH = ABFatTree(k=4).graph()
LINKS = FailureProcess(LogNormal(0.4, 0.8), LogNormal(0.3, 0.8))
SWITCHES = FailureProcess(LogNormal(1.0, 0.8), LogNormal(0.5, 0.5))


def test_the_same_seed_gives_the_same_trace_and_another_seed_another():
    first = lognormal_trace(GRAPH, 3, 0.5, 20.0, links=LINKS, switches=SWITCHES)
    assert first == lognormal_trace(GRAPH, 3, 0.5, 20.0, links=LINKS, switches=SWITCHES)
    assert first != lognormal_trace(GRAPH, 4, 0.5, 20.0, links=LINKS, switches=SWITCHES)
    assert len(first) > 10


def test_failures_start_in_the_window_and_edge_switches_never_fail():
    events = lognormal_trace(GRAPH, 5, 1.0, 30.0, links=LINKS, switches=SWITCHES)
    downs = [event for event in events if event[1] == "link_down"]
    assert downs and all(1.0 <= at < 30.0 for at, _, _, _ in events)
    failed_switches = {cause.split()[1] for _, _, _, cause in events if cause.startswith("switch")}
    assert failed_switches and all(GRAPH.nodes[name]["role"] in ("agg", "core") for name in failed_switches)
    assert all(GRAPH.nodes[a]["role"] != "host" and GRAPH.nodes[b]["role"] != "host" for _, _, (a, b), _ in events)


def test_a_link_goes_down_only_when_up_and_up_only_when_nothing_holds_it():
    events = lognormal_trace(GRAPH, 9, 0.0, 60.0, links=LINKS, switches=SWITCHES)
    state = {}
    for _, action, link, _ in events:
        assert state.get(link, "up") != ("down" if action == "link_down" else "up"), (action, link)
        state[link] = "down" if action == "link_down" else "up"


def test_the_gaps_follow_the_median_given():
    process = FailureProcess(LogNormal(0.5, 0.3), LogNormal(0.01, 0.1))
    events = lognormal_trace(GRAPH, 1, 0.0, 400.0, links=process)
    downs = [at for at, action, _, _ in events if action == "link_down"]
    gaps = sorted(b - a for a, b in zip(downs, downs[1:]))
    assert math.isclose(gaps[len(gaps) // 2], 0.5, rel_tol=0.15)


@pytest.mark.parametrize("process, field", [
    (FailureProcess(LogNormal(0.0, 1.0), LogNormal(1.0, 1.0)), "failures.trace.links.between_failures_s.median"),
    (FailureProcess(LogNormal(1.0, float("nan")), LogNormal(1.0, 1.0)), "failures.trace.links.between_failures_s.sigma"),
    (FailureProcess(LogNormal(1.0, 1.0), LogNormal(-2.0, 1.0)), "failures.trace.links.repair_s.median"),
])
def test_bad_distributions_are_refused_naming_the_field(process, field):
    with pytest.raises(ParameterError, match=field.replace(".", r"\.")):
        lognormal_trace(GRAPH, 1, 0.0, 10.0, links=process)


def test_a_bad_window_is_refused():
    with pytest.raises(ParameterError, match="window"):
        lognormal_trace(GRAPH, 1, 5.0, 5.0, links=LINKS)
