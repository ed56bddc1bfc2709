"""A run is never silently wrong: flows a failure stopped for good, though the fabric could route around it."""
from testbed.experiment import analysis
from testbed.experiment.runner import _warnings
from testbed.topologies.registry import make_topology

T0 = 10_000_000_000
S = 1_000_000_000
GRAPH = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=1).graph()  # h1 on leaf0, h2 on leaf1
FAILURE = [{"index": 0, "action": "link_down", "element": "leaf0-spine0", "applied_at_s": 2.0, "error": None}]


def report(last_rx_s, sender_end_s=5.0, dqpns=(70000, 70001)):
    """A stream report h1 -> h2 whose QPs last delivered at ``last_rx_s`` (one value per QP)."""
    sender = {"src_ip": "10.0.0.1", "dst_ip": "10.0.1.1", "end_ns": T0 + int(sender_end_s * S),
              "per_qp": {f"10.0.1.1/{q}": {"dqpn": q, "packets": 100} for q in dqpns}}
    receiver = {"per_qp": [{"src": "10.0.0.1", "dqpn": q, "last_rx_ns": None if last is None else T0 + int(last * S)}
                           for q, last in zip(dqpns, last_rx_s)]}
    return {"pairs": [{"src": "h1", "dst": "h2", "sender": sender, "receiver": receiver}]}


def test_hosts_are_where_the_test_assumes():
    ips = {node: GRAPH.nodes[node].get("ip", "").split("/")[0] for node in GRAPH.nodes}
    assert ips["h1"] == "10.0.0.1" and ips["h2"] == "10.0.1.1"


def test_a_flow_cut_at_the_failure_that_never_delivers_again_is_reported():
    rows = analysis.unrecovered_flows([report([2.001, 4.99])], FAILURE, GRAPH, [("leaf0", "spine0")], (), T0)
    assert rows == [{"failure_index": 0, "src": "h1", "dst": "h2", "dqpn": 70000,
                     "last_delivery_s": 2.001, "sender_end_s": 5.0}]
    record = {"failures": FAILURE, "summary": {"unrecovered_flows": rows}}
    assert _warnings(record) == ["after failure 0, 1 flow(s) never delivered again although the topology still "
                                 "connects their hosts (h1->h2): the control plane left them without a working path"]


def test_recovered_flows_are_not_reported():
    assert analysis.unrecovered_flows([report([4.5, 4.99])], FAILURE, GRAPH, [("leaf0", "spine0")], (), T0) == []


def test_flows_the_failure_cut_off_for_good_are_not_blamed_on_routing():
    # both uplinks of leaf0 down: no routing reaches h2 any more
    down = [("leaf0", "spine0"), ("leaf0", "spine1")]
    assert analysis.unrecovered_flows([report([2.0, 2.0])], FAILURE, GRAPH, down, (), T0) == []
    assert analysis.unrecovered_flows([report([2.0, 2.0])], FAILURE, GRAPH, [], ("leaf1",), T0) == []


def test_a_flow_that_stopped_before_any_failure_or_never_delivered_is_not_this_checks():
    assert analysis.unrecovered_flows([report([1.0, None])], FAILURE, GRAPH, [("leaf0", "spine0")], (), T0) == []
    assert analysis.unrecovered_flows([report([2.0, 2.0])], [], GRAPH, [], (), T0) == []


def test_a_failure_that_was_not_applied_is_a_warning():
    failed = [dict(FAILURE[0], error="switch leaf0: BMv2's Thrift server does not answer")]
    assert _warnings({"failures": failed, "summary": {}}) == [
        "failure 0 (link_down leaf0-spine0) was not applied: switch leaf0: BMv2's Thrift server does not answer"]


def test_a_flow_silent_in_an_off_period_at_the_end_is_not_reported():
    """On/off traffic: the QPs sent their last frames at 3.0 s and they arrived; the sender ran on until 5 s."""
    quiet = report([3.001, 3.001], sender_end_s=5.0)
    for qp in quiet["pairs"][0]["sender"]["per_qp"].values():
        qp["last_tx_ns"] = T0 + 3 * S
    assert analysis.unrecovered_flows([quiet], FAILURE, GRAPH, [("leaf0", "spine0")], (), T0) == []
    cut = report([2.001, 4.001])
    for qp in cut["pairs"][0]["sender"]["per_qp"].values():
        qp["last_tx_ns"] = T0 + 4 * S  # sent until 4 s, but the first QP delivered nothing after 2.001 s
    assert [row["dqpn"] for row in analysis.unrecovered_flows([cut], FAILURE, GRAPH, [("leaf0", "spine0")], (),
                                                              T0)] == [70000]
