"""Experiment specs: validation names the field, defaults, seeds; results schema; plots; compare table."""
import copy
import json
import os

import pytest
import yaml

from testbed.errors import ParameterError
from testbed import modes
from testbed.experiment import analysis, compare, plots, results
from testbed.experiment.counters import link_loads, uplink_loads
from testbed.experiment.spec import ExperimentSpec, SpecError, derive_seed, load_spec, parse_spec

from repo_paths import REPO

EXPERIMENTS = os.path.join(REPO, "experiments")

BASE = {
    "name": "unit",
    "seed": 5,
    "topology": {"kind": "clos", "params": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
    "traffic": [{"pattern": "stream", "hosts": ["h1", "h3"], "rate_mbps": 5, "duration_s": 2}],
    "failures": [{"at_s": 1.0, "action": "link_down", "link": ["leaf0", "spine0"]}],
    "duration_s": 3,
}


def spec_with(**changes):
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        target = data
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        if value is KeyError:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
    return data


def error_of(data):
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    return str(caught.value)


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize("changes, expected", [
    ({"traffic__0__rate_mbps": -5}, "traffic[0].rate_mbps: must be a number in (0, 10000] (got -5)"),
    ({"topology__kind": "fatree"},
     "topology.kind: unknown 'fatree'; allowed: clos, clos3, fattree, abfattree, dsf"),
    ({"seed": KeyError}, "seed: is required"),
    ({"name": KeyError}, "name: is required"),
    ({"seed": "seven"}, "seed: must be an integer in [0, 18446744073709551615] (got 'seven')"),
    ({"traffic__0__qps": 0}, "traffic[0].qps: must be an integer in [1, 255] (got 0)"),
    ({"traffic__0__size_bytes": 0}, "traffic[0].size_bytes: must be an integer in [1, 1073741824] (got 0)"),
    ({"traffic__0__pattern": "broadcast"}, "traffic[0].pattern: unknown 'broadcast'"),
    ({"traffic__0__hosts": ["h1", "h9"]}, "traffic[0].hosts[1]: not a host of the topology"),
    ({"traffic__0__hosts": ["h1", "h3", "h2"]}, "traffic[0].hosts: a stream needs an even number"),
    ({"traffic__0__qp_scaling": "hash"}, "traffic[0].qp_scaling: unknown 'hash'; allowed: roundrobin, split"),
    ({"traffic__0__colour": 1}, "traffic[0].colour: unknown field; allowed: pattern, hosts"),
    ({"traffic__0__duration_s": 5}, "traffic[0].duration_s: start_s + duration_s must be <= duration_s (3.0)"),
    ({"failures__0__link": ["leaf0", "leaf1"]}, "failures[0].link: no such link in the topology"),
    ({"failures__0__link": ["leaf0"]}, "failures[0].link: must be a list of two node names"),
    ({"failures__0__action": "explode"}, "failures[0].action: unknown 'explode'; allowed: link_down, link_up"),
    ({"failures__0__at_s": 7}, "failures[0].at_s: must be < duration_s (3.0) (got 7.0)"),
    ({"failures__0": {"at_s": 1, "action": "switch_crash", "switch": "spine9"}},
     "failures[0].switch: not a switch of the topology"),
    ({"failures__0": {"at_s": 1, "action": "lossy_link", "link": ["leaf0", "spine0"]}},
     "failures[0].loss: is required for lossy_link"),
    ({"failures__0": {"at_s": 1, "action": "lossy_link", "link": ["leaf0", "spine0"], "loss": 1.5}},
     "failures[0].loss: must be a number in (0, 1] (got 1.5)"),
    ({"controller": {"kind": "ryu"}}, "controller.kind: unknown 'ryu'; allowed: static, none, osken"),
    ({"controller": {"kind": "static", "detection_delay_ms": -1}},
     "controller.detection_delay_ms: must be a number in [0, 60000] (got -1)"),
    ({"target": "tofino"}, "target: unknown 'tofino'; allowed: auto, embedded, bmv2"),
    ({"mode": "wcmp"}, "mode: unknown 'wcmp'; allowed: ecmp, eecmp, spray, flowlet, pinning"),
    ({"mode_params": {"flowlet_interval_us": 0}},
     "mode_params.flowlet_interval_us: must be an integer in [1, 10000000] us (got 0)"),
    ({"mode_params": {"flowlet_interval_us": 0.5}},
     "mode_params.flowlet_interval_us: must be an integer in [1, 10000000] us (got 0.5)"),
    ({"mode_params": {"flowlet_interval_us": True}}, "mode_params.flowlet_interval_us: must be an integer"),
    ({"mode_params": {"flowlet_load_aware": 2}}, "mode_params.flowlet_load_aware: must be an integer in [0, 1]"),
    ({"mode_params": {"hash_seed": 2 ** 32}}, "mode_params.hash_seed: must be an integer in [0, 4294967295]"),
    ({"mode_params": {"hash_seed": "7"}}, "mode_params.hash_seed: must be an integer"),
    ({"mode_params": 0}, "mode_params: must be a mapping"),
    ({"mode_params": {"probe_period_us": 0}}, "mode_params.probe_period_us: must be an integer in [100, 1000000] us"),
    ({"mode_params": {"detector_down_below": 5}},
     "mode_params.detector_down_below: must be an integer in [1, 4] (a window of 5 probe periods"),
    ({"mode_params": {"detector_window_periods": 8, "backoff_reset_us": 300_000}},
     "mode_params.backoff_reset_us: must be an integer in [360000, 600000000] us (at least holddown_us + t"),
    ({"metrics": ["mmr", "latency99"]}, "metrics[1]: unknown 'latency99'"),
    ({"topology__params": {"leaves": 0}}, "topology.params.leaves:"),
    ({"topology__params": {"planes": 2}}, "topology.params.planes:"),
    ({"duration_s": 0}, "duration_s: must be a number in (0, 86400] (got 0)"),
    ({"topology__shape_links": "yes"}, "topology.shape_links: must be true or false (got 'yes')"),
    ({"topology__link_delay_us": -1}, "topology.link_delay_us: must be a number in [0, 1e+06] (got -1)"),
    ({"topology__link_delays": [{"link": ["h1", "leaf0"], "delay_us": 5}]},
     "topology.link_delays[0].link: no link between two switches of the topology"),
    ({"topology__link_delays": [{"link": ["leaf0", "spine0"]}]}, "topology.link_delays[0].delay_us: is required"),
    ({"topology__link_delays": [{"link": ["leaf0", "spine0"], "delay_us": 1}, {"link": ["spine0", "leaf0"],
                                                                             "delay_us": 2}]},
     "topology.link_delays[1].link: is given twice"),
    ({"traffic__0__pacing": "bursty"},
     "traffic[0].pacing: unknown 'bursty'; allowed: even, poisson, lognormal"),
    ({"traffic__0__gap_sigma": 1.0}, "traffic[0].gap_sigma: only with pacing: lognormal"),
    ({"traffic__0__pacing": "lognormal", "traffic__0__gap_sigma": 5},
     "traffic[0].gap_sigma: must be a number in [0, 4"),
    ({"traffic__0__on_s": {"median": 0.05, "sigma": 1.0}}, "traffic[0].off_s: is required with on_s and off_s"),
    ({"traffic__0__on_s": {"median": 0.05, "sigma": 1.0}, "traffic__0__off_s": {"median": 0.1, "sigma": 9}},
     "traffic[0].off_s.sigma: must be a number in [0, 4"),
    ({"traffic__0__on_s": {"median": 0.0001, "sigma": 1.0}, "traffic__0__off_s": {"median": 0.1, "sigma": 1}},
     "traffic[0].on_s.median: must be a number in [0.001, 86400"),
    ({"program": "p4src/none_such.p4"}, "program: no such P4 program"),
])
def test_validation_errors_name_the_field(changes, expected):
    message = error_of(spec_with(**changes))
    assert message.startswith(expected), message


def test_spec_error_is_a_parameter_error_with_the_path():
    with pytest.raises(ParameterError) as caught:
        parse_spec(spec_with(traffic__0__rate_mbps=0))
    assert caught.value.field == "traffic[0].rate_mbps"
    assert caught.value.value == 0


def test_missing_mode_program_names_the_mode(monkeypatch):
    monkeypatch.setitem(modes.MODES, "ghost", modes.Mode("ghost", "ghost_lb.p4", "not written yet"))
    message = error_of(spec_with(mode="ghost"))
    assert message.startswith("mode: mode 'ghost' needs p4src/ghost_lb.p4, which does not exist yet")
    with pytest.raises(ParameterError, match="ghost_lb.p4"):
        parse_spec(spec_with()).with_mode("ghost")


def test_every_mode_has_its_program_now():
    assert all(os.path.isfile(modes.program_for_mode(name)) for name in modes.MODES)
    spec = parse_spec(spec_with(mode="flowlet", mode_params={"flowlet_interval_us": 256}))
    assert spec.program.endswith("p4src/flowlet.p4") and spec.mode_params["flowlet_interval_us"] == 256


def test_program_and_mode_together_are_refused():
    assert error_of(spec_with(program="p4src/l3_ecmp.p4", mode="ecmp")).startswith("program: give either")


def test_entries_get_distinct_fixed_job_numbers_and_may_share_hosts():
    data = spec_with()
    data["traffic"].append({"pattern": "stream", "hosts": ["h2", "h3"], "start_s": 1.0, "duration_s": 1})
    spec = parse_spec(data)
    assert [entry.job for entry in spec.traffic] == [1, 2]
    assert parse_spec(data).to_dict()["traffic"][1]["job"] == 2


def test_link_delays_are_given_per_link_and_add_a_known_round_trip():
    spec = parse_spec(spec_with(topology__link_delay_us=100,
                                topology__link_delays=[{"link": ["spine1", "leaf0"], "delay_us": 400}]))
    topo = spec.build_topology()
    delays = spec.topology.delays_us(topo)
    assert delays == {("leaf0", "spine0"): 100.0, ("leaf0", "spine1"): 400.0, ("leaf1", "spine0"): 100.0,
                      ("leaf1", "spine1"): 100.0}
    # the slowest leaf-to-leaf path (spine1: 400 + 100 us) both ways
    assert analysis.round_trip_us(topo.graph(), delays) == 1000.0
    assert analysis.round_trip_us(topo.graph(), {}) == 0.0


def test_lossy_link_without_netem_makes_auto_embedded_and_refuses_bmv2(monkeypatch):
    from testbed import targets
    from testbed.emulation import netem
    from testbed.experiment import spec as spec_module

    monkeypatch.setitem(netem._NETEM, "ok", False)
    monkeypatch.setattr(targets, "bmv2_available", lambda: False)
    data = spec_with(failures__0={"at_s": 1, "action": "lossy_link", "link": ["leaf0", "spine0"], "loss": 0.01})
    for target in ("auto", "embedded"):  # the embedded switch's ports drop frames instead
        data["target"] = target
        assert spec_module.resolve_spec_target(parse_spec(data)) == ("embedded", "")
    assert spec_module.lossy_link_mechanism("embedded") == "embedded-port"
    assert spec_module.lossy_link_mechanism("bmv2") is None
    monkeypatch.setattr(targets, "bmv2_available", lambda: True)  # BMv2 installed: auto would pick it
    data["target"] = "auto"
    target, note = spec_module.resolve_spec_target(parse_spec(data))
    assert target == "embedded" and "netem" in note and note.startswith("target auto: the embedded target")
    data["target"] = "bmv2"
    message = error_of(data)
    assert message.startswith("target: cannot be bmv2 for this spec: lossy links need the netem qdisc")
    parse_spec(data, check_machine=False)  # the spec itself is well formed
    monkeypatch.setitem(netem._NETEM, "ok", True)
    assert spec_module.resolve_spec_target(parse_spec(data)) == ("bmv2", "")
    assert spec_module.lossy_link_mechanism("bmv2") == "netem"


def test_an_embedded_only_program_makes_auto_embedded_and_refuses_bmv2(monkeypatch):
    from testbed import targets
    from testbed.experiment import spec as spec_module

    monkeypatch.setattr(targets, "bmv2_available", lambda: True)
    data = spec_with(program="p4src/dsf_rdsw.p4", mode=None)
    data.pop("mode", None)
    target, note = spec_module.resolve_spec_target(parse_spec(data, check_machine=False))
    assert target == "embedded" and "dsf_rdsw.p4 calls externs BMv2 does not have" in note
    data["target"] = "bmv2"
    assert error_of(data).startswith("target: cannot be bmv2 for this spec: dsf_rdsw.p4 calls externs")


# ---------------------------------------------------------------------------- defaults and seeds
def test_defaults_and_seed_recorded():
    data = {"name": "mini", "seed": 3, "topology": {"kind": "clos"},
            "traffic": [{"pattern": "stream", "hosts": ["h1", "h3"], "duration_s": 2}]}
    spec = parse_spec(data)
    assert spec.seed == 3 and spec.to_dict()["seed"] == 3
    assert spec.mode == "ecmp" and spec.program.endswith("p4src/ecmp.p4")
    assert spec.target == "auto"
    assert spec.controller.kind == "static" and spec.controller.detection_delay_ms == 50.0
    entry = spec.traffic[0]
    assert (entry.size_bytes, entry.qps, entry.qp_scaling, entry.rate_mbps, entry.start_s, entry.mtu) == \
        (64 * 1024, 1, "roundrobin", 10.0, 0.0, 1024)
    assert spec.duration_s == 3.0  # last traffic end + 1 s
    assert spec.metrics == ["link_load", "mmr", "goodput", "loss", "out_of_order", "recovery", "timeline",
                            "controller"]
    assert spec.out_dir == os.path.join("results", "mini")
    assert spec.mode_params["hash_seed"] == derive_seed(3, "hash_seed") & 0xFFFF
    json.dumps(spec.to_dict())  # JSON-able


def test_derived_random_choices_are_deterministic():
    data = spec_with(traffic__0__hosts={"random": 4}, traffic__0__pattern="permutation")
    first, second = parse_spec(copy.deepcopy(data)), parse_spec(copy.deepcopy(data))
    assert first.traffic[0].hosts == second.traffic[0].hosts
    assert first.traffic[0].seed == second.traffic[0].seed
    assert first.mode_params == second.mode_params
    assert sorted(first.traffic[0].hosts) == ["h1", "h2", "h3", "h4"]
    other_seeds = {tuple(parse_spec(spec_with(seed=seed, traffic__0__hosts={"random": 4},
                                              traffic__0__pattern="permutation")).traffic[0].hosts)
                   for seed in range(12)}
    assert len(other_seeds) > 1  # the seed really drives the choice
    assert derive_seed(5, "traffic", 0) == derive_seed(5, "traffic", 0) != derive_seed(6, "traffic", 0)


def test_with_mode_keeps_everything_else():
    spec = parse_spec(spec_with())
    same = spec.with_mode("ecmp")
    assert same.traffic == spec.traffic and same.failures == spec.failures and same.seed == spec.seed
    assert spec.with_mode("spray").program.endswith("p4src/spray.p4")


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(EXPERIMENTS) if n.endswith(".yaml")))
def test_shipped_specs_validate(name):
    spec = load_spec(os.path.join(EXPERIMENTS, name))
    assert isinstance(spec, ExperimentSpec) and spec.traffic


def test_load_spec_reports_bad_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="spec: is not valid YAML"):
        load_spec(str(path))
    path.write_text(yaml.safe_dump(spec_with(traffic__0__rate_mbps=-5)))
    with pytest.raises(SpecError, match=r"traffic\[0\]\.rate_mbps: must be a number in \(0, 10000\] \(got -5\)"):
        load_spec(str(path))


# ---------------------------------------------------------------------------- counters -> link loads
def _graph():
    return parse_spec(spec_with()).build_topology().graph()


def test_link_loads_from_counter_snapshots():
    graph = _graph()
    # leaf0 ports: 1,2 hosts; uplinks to spine0/spine1 are ports 3 and 4 (see the topology).
    up = {(d["a"], d["b"]): d for _, _, d in graph.edges(data=True)}
    p0, p1 = up[("leaf0", "spine0")]["a_port"], up[("leaf0", "spine1")]["a_port"]
    before = {"leaf0": {"ingress": {}, "egress": {p0: [10, 1000]}}}
    after = {"leaf0": {"ingress": {1: [300, 300000]}, "egress": {p0: [210, 201000], p1: [100, 100000]}},
             "leaf1": {"ingress": {}, "egress": {}}, "spine0": {"ingress": {}, "egress": {}},
             "spine1": {"ingress": {}, "egress": {}}}
    rows = link_loads(graph, before, after)
    by_ends = {(row["a"], row["b"]): row for row in rows}
    assert by_ends[("leaf0", "spine0")]["a_to_b_packets"] == 200
    assert by_ends[("leaf0", "spine0")]["a_to_b_bytes"] == 200000
    assert by_ends[("leaf0", "spine1")]["tx_bytes"] == 100000
    assert by_ends[("h1", "leaf0")]["a_to_b_packets"] == 300  # host side from the leaf's ingress counter
    tier = [row for row in rows if row["tier"] == "1-2"]
    assert abs(sum(row["share"] for row in tier) - 1.0) < 1e-9
    loads = uplink_loads(graph, rows)
    assert sorted(loads.values()) == [100000, 200000]  # leaf1 sent nothing up: not counted
    assert results.check_schema(rows, [results.LINK_SCHEMA], "links") == []


# ---------------------------------------------------------------------------- results schema, plots, compare
def _fake_stream_report(t0_ns):
    bin_ns = 10_000_000
    first = t0_ns // bin_ns
    bins = [[first + i, 10, 10000] for i in range(100) if not 40 <= i < 50]  # a 100 ms outage at 0.4 s
    sender = {"src_ip": "10.0.0.1", "per_qp": {}, "sent_bins": {str(first + i): 10 for i in range(100)}}
    receiver = {"timeline": {"bin_ns": bin_ns, "first_bin": first, "bins": bins},
                "rx_by_tx_bin": {str(first + i): 10 for i in range(100) if not 40 <= i < 50},
                "gaps": [[t0_ns + 395_000_000, t0_ns + 500_000_000]]}
    return {"start_ns": t0_ns, "sent_packets": 1000, "received_packets": 900, "lost_packets": 100,
            "out_of_sequence": 3, "duplicates": 0, "goodput_mbps": 7.2,
            "gaps": [[t0_ns + 395_000_000, t0_ns + 500_000_000]], "pairs": [{"sender": sender, "receiver": receiver}]}


def _record(tmp_path):
    from testbed.experiment.runner import _base_record
    from testbed.mechanisms import hooks_for

    spec = parse_spec(spec_with())
    record = _base_record(spec, "embedded", hooks_for(spec))
    t0_ns = 1_700_000_000_000_000_000
    record["t0_ns"] = t0_ns
    report = _fake_stream_report(t0_ns)
    record["failures"] = [{"index": 0, "action": "link_down", "element": "leaf0-spine0", "loss": None,
                           "planned_at_s": 0.4, "applied_at_s": 0.4, "apply_s": 0.03, "error": None,
                           "mechanism": None, "cause": None}]
    record["controller"]["reactions"] = [{"failure_index": 0, "action": "link_down", "failed_at_s": 0.4,
                                          "reacted_at_s": 0.46, "reaction_s": 0.06, "compute_s": 0.002,
                                          "entries_written": 4,
                                          "error": None}]
    record["traffic"] = [analysis.traffic_row(0, spec.traffic[0], report, None, t0_ns)]
    recovery = analysis.recovery_rows([report], record["failures"], t0_ns, t0_ns + 2_000_000_000)
    record["summary"] = analysis.summarize(record["traffic"], {"a": 100, "b": 300}, recovery,
                                           record["controller"]["reactions"])
    record["timeline"] = analysis.throughput_timeline([report], t0_ns)
    record["status"] = "ok"
    return record


def test_results_schema_and_outputs(tmp_path):
    from testbed.experiment.runner import write_outputs

    record = _record(tmp_path)
    summary = record["summary"]
    assert summary["uplink_mmr"] == pytest.approx(1.5)
    assert summary["recovery"][0]["gap_s"] == pytest.approx(0.105)
    assert summary["recovery"][0]["lost_in_window"] == 100
    assert summary["recovery"][0]["loss_window_s"] == pytest.approx(0.1)
    assert summary["recovery"][0]["first_loss_at_s"] == pytest.approx(0.4)
    assert summary["controller_reaction_s"] == pytest.approx(0.06)
    assert record["timeline"]["t_s"][0] == pytest.approx(0.0, abs=0.011)
    assert max(record["timeline"]["mbps"]) == pytest.approx(8.0)
    write_outputs(record, str(tmp_path))
    with open(tmp_path / "results.json") as handle:
        written = json.load(handle)
    assert results.check_schema(written) == []
    assert written["files"]["plots"] == ["link_load.png", "throughput.png"]
    for name in written["files"]["plots"]:
        with open(tmp_path / name, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_schema_check_catches_problems(tmp_path):
    record = _record(tmp_path)
    del record["summary"]["uplink_mmr"]
    record["seed"] = "5"
    record["traffic"][0]["hosts"] = "h1"
    problems = results.check_schema(record)
    assert "results.summary.uplink_mmr: missing" in problems
    assert "results.seed: expected int, got str" in problems
    assert "results.traffic[0].hosts: expected a list, got str" in problems


def test_link_csv_columns(tmp_path):
    rows = link_loads(_graph(), {}, {name: {"ingress": {}, "egress": {}} for name in
                                     ("leaf0", "leaf1", "spine0", "spine1")})
    path = tmp_path / "links.csv"
    results.write_link_csv(rows, str(path))
    header = path.read_text().splitlines()[0].split(",")
    assert header[:8] == ["link", "a", "a_port", "b", "b_port", "tx_packets", "tx_bytes", "share"]
    assert len(path.read_text().splitlines()) == 1 + len(rows)


def test_comparison_table_and_plot(tmp_path):
    record = _record(tmp_path)
    rows = [compare.comparison_row("ecmp", record), compare.comparison_row("spray", dict(record, status="error"))]
    rows[1]["uplink_mmr"] = 1.01
    files = compare.write_comparison(rows, str(tmp_path), "unit: ecmp vs spray")
    text = (tmp_path / "comparison.txt").read_text()
    assert "uplink MMR" in text and "1.500" in text and "1.010" in text
    assert (tmp_path / "comparison.csv").read_text().splitlines()[0].startswith("mode,status,uplink_mmr")
    with open(tmp_path / "comparison.json") as handle:
        assert json.load(handle)["rows"][0]["mode"] == "ecmp"
    assert (tmp_path / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    assert set(files) == {"comparison.csv", "comparison.json", "comparison.txt", "comparison.png"}


def test_plots_handle_empty_data(tmp_path):
    plots.plot_link_load({"ecmp": {}}, str(tmp_path / "a.png"))
    plots.plot_timeline({"t_s": [], "mbps": []}, {}, str(tmp_path / "b.png"))
    assert (tmp_path / "a.png").exists() and (tmp_path / "b.png").exists()


def test_the_timeline_marks_every_kind_of_event_and_refuses_an_unknown_one(tmp_path):
    timeline = {"bin_s": 0.01, "t_s": [0.01 * i for i in range(300)], "mbps": [5.0] * 300}
    events = {kind: [(1.0 + 0.1 * index, kind)] for index, kind in enumerate(plots.EVENT_STYLES)}
    plots.plot_timeline(timeline, events, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(KeyError):
        plots.plot_timeline(timeline, {"meteor": [(1.0, "?")]}, str(tmp_path / "d.png"))


def test_sweep_plot(tmp_path):
    rows = [{"mode": f"flowlet@{v}", "param_value": v, "out_of_order_rate": 1.0 / v, "uplink_mmr": 1 + v / 1000}
            for v in (50, 500, 5000)]
    plots.plot_sweep(rows, "flowlet_interval_us", str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_command_refuses_bad_sweep(tmp_path):
    from testbed.cli import main

    spec = os.path.join(EXPERIMENTS, "leafspine_failure_ci.yaml")
    assert main(["compare", spec, "--modes", "ecmp", "--sweep", "flowlet_interval_us=a,b"]) == 2
    assert main(["compare", spec, "--modes", "flowlet", "--sweep", "flowlet_interval_us=0.5,100"]) == 2
    assert main(["compare", spec, "--modes", "flowlet", "--sweep", "flowlet_interval=100"]) == 2
    assert main(["compare", spec, "--modes", "ecmp,ecmp"]) == 2
    assert main(["run", spec, "--check"]) == 0


def test_rebin_averages_groups():
    assert plots.rebin([0, 1, 2, 3, 4], [2, 4, 6, 8, 10], 2) == ([0, 2, 4], [3.0, 7.0, 10.0])
    assert plots.rebin([0, 1], [5, 6], 1) == ([0, 1], [5, 6])


def test_summary_lines_follow_metrics(tmp_path):
    from testbed.commands.run import summary_lines

    record = _record(tmp_path)
    text = "\n".join(summary_lines(record))
    assert "uplink MMR 1.500" in text and "packets lost for 100 ms" in text
    assert "reacted to failure 0 after 60 ms" in text
    record["spec"]["metrics"] = ["goodput"]
    text = "\n".join(summary_lines(record))
    assert "goodput" in text and "MMR" not in text and "reacted" not in text


def test_loss_episode_stops_at_a_quiet_stretch():
    t0_ns = 1_700_000_000_000_000_000
    bin_ns = 10_000_000
    first = t0_ns // bin_ns
    lossy = set(range(40, 46)) | set(range(130, 140))  # the failure's 60 ms, then unrelated losses
    sender = {"sent_bins": {str(first + i): 10 for i in range(200)}}
    receiver = {"timeline": {"bin_ns": bin_ns, "bins": []},
                "rx_by_tx_bin": {str(first + i): (8 if i in lossy else 10) for i in range(200)}}
    report = {"pairs": [{"sender": sender, "receiver": receiver}]}
    span = analysis.lossy_span([report], t0_ns + 400_000_000, t0_ns + 2_000_000_000)
    assert (span["last_ns"] - span["first_ns"]) / 1e9 == pytest.approx(0.06)
    assert span["lost"] == 12 and span["lost_later"] == 20


def test_the_workload_model_reaches_the_stream_options():
    """F10's workload model (log-normal gaps and on/off periods) from the spec to what the senders get."""
    from testbed.experiment.failure_traces import LogNormal
    from testbed.experiment.traffic_jobs import on_off_options

    spec = parse_spec(spec_with(traffic__0__pacing="lognormal", traffic__0__gap_sigma=0.5,
                                traffic__0__on_s={"median": 0.05, "sigma": 1.0},
                                traffic__0__off_s={"median": 0.1, "sigma": 0.8}))
    [entry] = spec.traffic
    assert entry.pacing == "lognormal" and entry.gap_sigma == 0.5 and entry.on_s == LogNormal(0.05, 1.0)
    assert on_off_options(entry) == {"on_ms": 50.0, "on_sigma": 1.0, "off_ms": 100.0, "off_sigma": 0.8}
    assert on_off_options(parse_spec(spec_with()).traffic[0]) == {}
