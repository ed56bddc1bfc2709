"""DSF's fabric measurements of a run (testbed/mechanisms/dsf/metrics.py) on hand-made counters and samples."""
import json
from types import SimpleNamespace

import pytest

from testbed.experiment.counters import drops_by_place, ever_failed
from testbed.experiment.results import RESULTS_SCHEMA, check_schema, merge_schema
from testbed.mechanisms.dsf import metrics as M
from testbed.mechanisms.dsf.run import DSF_SCHEMA, DSFHooks
from testbed.topologies.registry import make_topology

DROPS_BY_PLACE_SCHEMA = merge_schema(RESULTS_SCHEMA, DSFHooks.results_schema)["dataplane"]["drops_by_place"]


def graph():
    return make_topology("dsf", clusters=1, rdsw_per_cluster=2, fdsw_per_cluster=2, sdsw=0, hosts_per_rdsw=1,
                         hosts_link_mbps=10, fabric_link_mbps=4).graph()


class Counters:
    """A session serving fixed counter cells."""

    def __init__(self, cells):
        self.cells = cells

    def read_counter(self, name, index=None):
        if name not in self.cells:
            raise KeyError(name)
        return self.cells[name]


def row(a, a_port, b, b_port, forward, backward):
    return {"link": f"{a}:{a_port}-{b}:{b_port}", "a": a, "a_port": a_port, "b": b, "b_port": b_port,
            "a_to_b_bytes": forward, "b_to_a_bytes": backward}


def test_drops_are_placed_by_the_link_they_happened_on():
    g = graph()  # rdsw0 ports: 1 host, 2 fdsw0, 3 fdsw1; fdsw0 ports: 1 rdsw0, 2 rdsw1
    port_drops = {"rdsw0": {1: {"tx_errors": 3}, 2: {"tx_errors": 5}, 3: {"tx_errors": 7}},
                  "fdsw0": {2: {"tx_errors": 11}}}
    clients = {"rdsw1": Counters({"dsf_drops": {0: (2, 0), 1: (13, 0), 2: (1, 0)},
                                  "MyIngress.dsf_fabric_drops": {0: (4, 0)}}),
               "fdsw0": Counters({"MyIngress.dsf_fabric_drops": {0: (17, 0), 1: (19, 0)}})}
    places = drops_by_place(g, port_drops, failed_pairs=[("rdsw0", "fdsw1")])
    assert places["fabric"] == 5 + 11  # without the DSF places: the link queues
    M.add_dsf_drop_places(places, g, clients)
    assert (places["host_port"], places["fabric_link_queue"], places["link_down"]) == (3, 5 + 11, 7)
    assert (places["voq_tail"], places["reassembly_timeout"], places["late_cell"]) == (2, 13, 1)
    assert (places["no_reachability"], places["no_reachability_in_fabric"], places["ttl"]) == (21, 17, 19)
    assert places["fabric"] == 16 + 13 + 17 + 19
    assert places["by_link"] == {"fdsw0:2>rdsw1": 11, "rdsw0:1>h1": 3, "rdsw0:2>fdsw0": 5, "rdsw0:3>fdsw1": 7}
    assert check_schema(places, DROPS_BY_PLACE_SCHEMA) == []


def test_tier_loads_leave_out_the_control_cells_of_a_receiver():
    g = graph()
    rows = [row("rdsw0", 2, "fdsw0", 1, 1000, 0), row("rdsw0", 3, "fdsw1", 1, 1040, 0),
            row("rdsw1", 2, "fdsw0", 2, 10, 1000), row("rdsw1", 3, "fdsw1", 2, 0, 1040)]
    tiers = M.tier_loads(g, rows)
    assert sorted(tiers["rdsw>fdsw"]["loads"]) == ["rdsw0:2>fdsw0", "rdsw0:3>fdsw1"]  # rdsw1's 10 bytes: grants
    assert tiers["rdsw>fdsw"]["mmr"] == pytest.approx(1040 / 1020)
    assert tiers["fdsw>rdsw"]["mmr"] == pytest.approx(1040 / 1020)


def sample(t, counters, times=None):
    return {"t_s": t, "times": times or {}, "counters": counters}


def test_voq_depth_credits_and_host_port_busy_from_samples():
    g = graph()
    samples = []
    for second in range(4):
        samples.append(sample(float(second), {
            "rdsw0": {"dsf_voq_enqueued": {8: [100 * second, 0]}, "dsf_voq_dequeued": {8: [60 * second, 0]},
                      "MyEgress.egress_port_counter": {2: [0, 250_000 * second], 3: [0, 250_000 * second]}},
            "rdsw1": {"dsf_credit_granted": {1: [50 * second, 0]},
                      "MyEgress.egress_port_counter": {1: [0, 1_000_000 * second]}}}))
    depth = M.voq_depths(samples, ["rdsw0", "rdsw1"])
    assert depth["depth_pkts"] == {"rdsw0": [0, 40, 80, 120]} and depth["max"]["depth_pkts"] == 120
    credits = M.credit_rates(samples, ["rdsw0", "rdsw1"])
    assert credits["grants_per_s"] == {"rdsw1:1": [50.0, 50.0, 50.0]}
    busy = M.host_port_busy(g, samples, 0.0, 3.0)
    assert busy[0]["host"] == "h2" and busy[0]["busy"] == pytest.approx(0.8)  # 8 Mbit/s of 10
    uplinks = M.uplink_rates(g, samples)
    assert uplinks["bytes_per_s"] == {"rdsw0": [500_000.0] * 3}


def test_a_switch_is_timed_by_when_its_counters_were_read():
    g = graph()
    samples = [sample(0.0, {"rdsw1": {"MyEgress.egress_port_counter": {1: [0, 0]}}}, {"rdsw1": 0.5}),
               sample(1.0, {"rdsw1": {"MyEgress.egress_port_counter": {1: [0, 1_000_000]}}}, {"rdsw1": 1.5}),
               sample(2.0, {"rdsw1": {"MyEgress.egress_port_counter": {1: [0, 2_000_000]}}}, {"rdsw1": 2.0})]
    busy = M.host_port_busy(g, samples, 0.0, 3.0)
    assert busy[0]["busy"] == pytest.approx(2_000_000 * 8 / 1.5 / 10e6)


def test_rate_changes_compare_the_traffic_before_and_after_each_failure():
    uplinks = {"t_s": [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5],
               "bytes_per_s": {"rdsw0": [0, 100, 100, 100, 50, 50, 50], "rdsw1": [0, 100, 100, 40, 50, 50, 0],
                               "rdsw2": [0, 2, 2, 2, 2, 2, 2]}}  # a receiver's grants
    failures = [{"index": 0, "applied_at_s": 3.2}]
    change, = M.rate_changes(uplinks, failures, window=(1.0, 6.0), settle_s=0.5)
    assert change["rdsw"]["rdsw0"]["ratio"] == pytest.approx(0.5) and "rdsw2" not in change["rdsw"]
    assert change["before"] == pytest.approx(200) and change["after"] == pytest.approx(100)
    assert change["ratio"] == pytest.approx(0.5)


def test_the_traffic_window_starts_a_second_after_the_last_sender_really_started():
    spec = SimpleNamespace(traffic=[SimpleNamespace(start_s=0.0, duration_s=6.0),
                                    SimpleNamespace(start_s=0.0, duration_s=6.0)], duration_s=7.0)
    assert M.traffic_window(spec, [{"started_at_s": 2.5}, {"started_at_s": 3.0}]) == (4.0, 8.5)


def test_failed_links_during_a_run_include_a_crashed_switch_s_links():
    g = graph()
    failures = [SimpleNamespace(link=("rdsw0", "fdsw0"), switch=None),
                SimpleNamespace(link=None, switch="fdsw1"), SimpleNamespace(link=("rdsw1", "fdsw0"), switch=None)]
    log = [{"applied_at_s": 1.0}, {"applied_at_s": 2.0}, {"applied_at_s": None}]
    assert ever_failed(failures, log, g) == {frozenset(("rdsw0", "fdsw0")), frozenset(("fdsw1", "rdsw0")),
                                               frozenset(("fdsw1", "rdsw1"))}


def test_the_dsf_section_fits_its_schema():
    g = graph()
    spec = SimpleNamespace(traffic=[SimpleNamespace(start_s=0.0, duration_s=2.0)], duration_s=3.0,
                           mode_params={"dsf_cell_bytes": 256})
    record = {"links": [row("rdsw0", 2, "fdsw0", 1, 10, 0)], "failures": [], "traffic": [{"started_at_s": 0.1}]}
    samples = [sample(0.0, {}), sample(1.0, {})]
    section = M.dsf_section(spec, g, record, samples, SimpleNamespace(dsf={"ibm_seed": 3}))
    section.update(sample_errors=[], switch_cpu={}, dsf_sample_interval_s=0.002)
    assert check_schema(section, DSF_SCHEMA) == []
    assert section["cell_bytes"] == 256 and section["control"] == {"ibm_seed": 3}


class DeviceNotes:
    """A switch's two DSF history calls (what its control socket serves) on an in-process device."""

    def __init__(self, device):
        self.device = device

    def record_dsf_history(self, names, start_ns, period_us, capacity):
        self.device.record_dsf_history(names, start_ns, int(period_us * 1000), capacity)

    def read_dsf_history(self):
        notes, overflows, _more = self.device.dsf_history(None)
        return notes, overflows


def test_the_switches_notes_give_the_dsf_counters_exactly_at_every_grid_time():
    """The DSF traffic managers note their counters on a 2 ms grid for nothing while idle; carried forward,
    the notes give every counter's exact value at every grid time (simulated clock: checked against the
    counters themselves at each grid time), and the sampler merges the switches onto one time axis."""
    from test_dsf_fabric import MS, one_cluster, send_stream

    from testbed.controllers.dsf.inprocess import build_inprocess_fabric

    assert M.DSF_SAMPLE_INTERVAL_S <= 0.002
    assert M.dsf_sampler_for(graph(), {}, 0, duration_s=3600).interval_s == 3600 / M.MAX_DSF_SAMPLES
    fabric = build_inprocess_fabric(one_cluster(rdsws=3, hosts=2, host_mbps=4, fabric_mbps=3), queue_frames=64)
    rdsws = sorted(name for name in fabric.wired.devices if name.startswith("rdsw"))
    period = 2 * MS
    start = fabric.clock.now_ns + 777  # off the frames' times, so that no event falls on a grid time
    for name in rdsws:
        fabric.wired.devices[name].record_dsf_history(M.DSF_COUNTERS, start, period, 100_000)
    for position, sender in enumerate(("h3", "h4", "h5", "h6")):
        send_stream(fabric, sender, "h1", 60, 2e6, start_ns=fabric.clock.now_ns + position * 1000)
    truth = {}
    for k in range(1, 150):
        fabric.wired.run(until_ns=start + k * period)
        truth[start + k * period] = {name: {counter: {index: [cell_packets, cell_bytes] for index, (cell_packets,
                                                      cell_bytes) in enumerate(zip(state.counters[counter].packets,
                                                                                   state.counters[counter].bytes))
                                                      if cell_packets}
                                            for counter in M.DSF_COUNTERS}
                                     for name, state in fabric.states.items() if name in rdsws}
    notes = {name: DeviceNotes(fabric.wired.devices[name]).read_dsf_history()[0] for name in rdsws}
    for name in rdsws:
        assert all((at - start) % period == 0 for at, _ in notes[name])
        assert 10 < len(notes[name]) < len(truth)  # a note only where something changed
        carried, position = {counter: {} for counter in M.DSF_COUNTERS}, 0
        for at in sorted(truth):
            while position < len(notes[name]) and notes[name][position][0] <= at:
                for counter, cells in notes[name][position][1].items():
                    carried[counter].update(cells)
                position += 1
            assert carried == truth[at][name], (name, at)
    # the sampler's merge: one sample per noted time, every switch's cells as they were then
    sampler = M.DsfHistorySampler({name: DeviceNotes(fabric.wired.devices[name]) for name in rdsws},
                                  M.DSF_COUNTERS, t0_ns=0, interval_s=0.002)
    sampler._notes = notes
    merged = sampler._merged()
    times = sorted({at for name in rdsws for at, _ in notes[name]})
    assert len(merged) == len(times)
    for sample_, at in zip(merged, times):
        if at in truth:
            assert sample_["counters"] == truth[at]
    depth = M.voq_depths(merged, rdsws)
    assert depth["max"]["depth_pkts"] > 0


def test_the_history_holds_at_most_its_capacity_and_reads_fit_a_datagram():
    from testbed.p4.v1model.dsf.history import CounterHistory

    cells = SimpleNamespace(packets=[0] * 400, bytes=[0] * 400)
    history = CounterHistory({"c": cells}, start_ns=0, period_ns=10, capacity=5)
    for event in range(10):
        history.before(event * 10 + 5)
        for index in range(400):
            cells.packets[index] += 1
            cells.bytes[index] += 1000
            history.touched("c", index)
    assert len(history.notes) == 5 and history.overflows == 5  # the first note (empty) and four more
    assert [at for at, _ in history.drain(max_bytes=100)] == [0]  # the empty first note fits, the next not
    big = history.drain(max_bytes=100)  # one note of 400 cells is over 100 bytes: still returned, alone
    assert len(big) == 1 and len(big[0][1]["c"]) == 400
    assert len(history.drain(max_bytes=len(json.dumps(big[0])) * 2 + 10)) == 2 and len(history.notes) == 1
    with pytest.raises(ValueError):
        CounterHistory({"c": cells}, start_ns=0, period_ns=0, capacity=5)


def test_path_dilation_is_not_reported_for_the_cell_fabric_only():
    """The IPv4 TTL counts the DSF fabric as one hop ("-2 extra hops" for every packet): a run in a DSF mode
    says the metric does not apply; an IP mode (ecmp) on the same topology keeps its TTL-based figure."""
    from testbed.mechanisms import hooks_for
    from testbed.mechanisms.hooks import RunContext

    hooks = next(each for each in hooks_for() if isinstance(each, DSFHooks))
    for mode, kept in (("dsf", False), ("ecmp", True)):
        measured = {"extra_hops": {"-2": 10}, "packets": 10}
        record = {"summary": {"path_dilation": dict(measured)}}
        hooks.results(record, RunContext(SimpleNamespace(mode=mode)))
        dilation = record["summary"]["path_dilation"]
        assert (dilation == measured) == kept
        if not kept:
            assert dilation["extra_hops"] == {} and "one hop" in dilation["not_measured"]
            assert not check_schema(dilation, RESULTS_SCHEMA["summary"]["path_dilation"])
