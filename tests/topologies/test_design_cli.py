"""``testbed design``: text report, --json keys and values, database choice, errors, --emit-topology."""
import json

import pytest

from testbed.cli import build_parser, main

STABLE_KEYS = ("nodes", "edge_switches", "core_switches", "bundle", "edge_ports_to_nodes", "edge_ports_to_core",
               "blocking", "total_switches", "bundle_distribution", "wasted_ports")
COST_KEYS = ("cost", "rack_units", "watts", "edge_model", "core_model")


def _run_text(capsys, *argv):
    """Run a successful ``testbed design ...`` (exit status 0) and return its stdout."""
    status = main(["design", *argv])
    out = capsys.readouterr().out
    assert status == 0
    return out


def _run_json(capsys, *argv):
    """Run ``testbed design ... --json`` and return the decoded output."""
    return json.loads(_run_text(capsys, *argv, "--json"))


def _run_error(capsys, *argv):
    """Run a failing ``testbed design`` and return stderr (exit status 2, nothing on stdout)."""
    status = main(["design", *argv])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    return captured.err


def test_design_is_a_registered_subcommand():
    """``testbed design --help`` exists and lists the options of the issue."""
    parser = build_parser()
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(["design", "--help"])
    assert caught.value.code == 0


def test_help_lists_the_options(capsys):
    """The help text names every option of the issue."""
    with pytest.raises(SystemExit):
        main(["design", "--help"])
    text = capsys.readouterr().out
    for option in ("--nodes", "--edge-ports", "--core-ports", "--blocking", "--uniform", "--expand-to", "--db",
                   "--json", "--emit-topology"):
        assert option in text


def test_text_report_seed_example_128_nodes(capsys):
    """Text output shows the formulas' values, bundles, wasted ports and totals (seed example N=128)."""
    text = _run_text(capsys, "--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--blocking", "1")
    assert "Eptn = trunc(Pe*Bl/(1+Bl)) = trunc(36*1/(1+1)) = 18" in text
    assert "E = ceil(N/Eptn) = ceil(128/18) = 8" in text
    assert "B = Pc div E = 36 div 8 = 4" in text
    assert "C = ceil(Eptc/B) = ceil(18/4) = 5" in text
    assert "total E + C = 13" in text
    assert "4 + 4 + 4 + 3 + 3" in text
    assert "nodes per edge switch: 7 x 18, 1 x 2" in text
    assert "edge: 16" in text and "core: 36" in text


def test_json_seed_example_128_nodes_dense_and_uniform(capsys):
    """--json: E=8, C=5; with --uniform C=4 (seed example and its redo)."""
    data = _run_json(capsys, "--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--blocking", "1")
    for key in STABLE_KEYS:
        assert key in data
    for key in COST_KEYS:
        assert key not in data
    assert (data["edge_switches"], data["core_switches"], data["bundle"], data["total_switches"]) == (8, 5, 4, 13)
    assert (data["edge_ports_to_nodes"], data["edge_ports_to_core"], data["blocking"]) == (18, 18, 1)
    assert data["bundle_distribution"] == [[4] * 8] * 3 + [[3] * 8] * 2
    assert data["wasted_ports"]["edge"] == 16 and data["wasted_ports"]["core"] == 36
    uniform = _run_json(capsys, "--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--uniform")
    assert (uniform["edge_switches"], uniform["core_switches"], uniform["edge_ports_to_nodes"]) == (8, 4, 16)
    assert uniform["distribution"] == "uniform"
    auto = _run_json(capsys, "--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--distribution", "auto")
    assert auto["core_switches"] == 4


def test_json_seed_examples_320_and_288_nodes(capsys):
    """N=320, Pe=32, Pc=36: E=20, B=1, C=16; N=288: E=18, B=2, C=8."""
    data = _run_json(capsys, "--nodes", "320", "--edge-ports", "32", "--core-ports", "36")
    assert (data["edge_switches"], data["bundle"], data["core_switches"], data["total_switches"]) == (20, 1, 16, 36)
    assert data["wasted_ports"]["core_per_switch"] == [16] * 16
    data = _run_json(capsys, "--nodes", "288", "--edge-ports", "32", "--core-ports", "36")
    assert (data["edge_switches"], data["bundle"], data["core_switches"], data["total_switches"]) == (18, 2, 8, 26)


def test_json_seed_example_90_nodes_bundles(capsys):
    """N=90, Pe=Pc=24, Bl=4: Eptn=19, Eptc=5, E=5, B=4, C=2; default split 3+2, --bundle-split dense 4+1."""
    data = _run_json(capsys, "--nodes", "90", "--edge-ports", "24", "--core-ports", "24", "--blocking", "4")
    assert (data["edge_ports_to_nodes"], data["edge_ports_to_core"]) == (19, 5)
    assert (data["edge_switches"], data["bundle"], data["core_switches"]) == (5, 4, 2)
    assert data["core_bundle_sizes"] == [3, 2]
    assert data["bundle_distribution"] == [[3] * 5, [2] * 5]
    dense = _run_json(capsys, "--nodes", "90", "--edge-ports", "24", "--core-ports", "24", "--blocking", "4",
                      "--bundle-split", "dense")
    assert dense["core_bundle_sizes"] == [4, 1]


def test_json_seed_expandability_200_400_600(capsys):
    """200 nodes: E=12, C=6, B=3; 600 nodes: E=34, C=18, B=1; 200 expandable to 600: E=12, C=18, B=1."""
    ports = ("--edge-ports", "36", "--core-ports", "36")
    first = _run_json(capsys, "--nodes", "200", *ports)
    assert (first["edge_switches"], first["core_switches"], first["bundle"], first["capacity"]) == (12, 6, 3, 216)
    full = _run_json(capsys, "--nodes", "600", *ports)
    assert (full["edge_switches"], full["core_switches"], full["bundle"], full["capacity"]) == (34, 18, 1, 612)
    grow = _run_json(capsys, "--nodes", "200", *ports, "--expand-to", "600")
    assert (grow["edge_switches"], grow["core_switches"], grow["bundle"]) == (12, 18, 1)
    assert (grow["expand_to"], grow["max_edge_switches"], grow["max_capacity"]) == (600, 34, 612)


def test_text_report_expansion_line(capsys):
    text = _run_text(capsys, "--nodes", "200", "--edge-ports", "36", "--core-ports", "36", "--expand-to", "600")
    assert "E_max = ceil(M/Eptn) = ceil(600/18) = 34" in text
    assert "adds 22 edge switches" in text
    assert "396 kept for expansion" in text


def test_blocking_with_decimal_comma(capsys):
    """--blocking 2,6 (the primer's notation) gives 26 node ports and 10 uplinks on 36-port switches."""
    data = _run_json(capsys, "--nodes", "100", "--edge-ports", "36", "--core-ports", "36", "--blocking", "2,6")
    assert (data["edge_ports_to_nodes"], data["edge_ports_to_core"], data["blocking"]) == (26, 10, 2.6)


def test_example_database_chooses_cheapest_and_reports_cost(capsys):
    """--example-db with only --nodes: cheapest models; JSON has the cost fields (seed: 900 nodes -> nine
    112-port core switches)."""
    data = _run_json(capsys, "--nodes", "900", "--example-db")
    for key in STABLE_KEYS + COST_KEYS:
        assert key in data
    assert (data["edge_model"], data["core_model"]) == ("fixed-36", "modular-144/7lb")
    assert (data["edge_switches"], data["core_switches"], data["core_ports"]) == (50, 9, 112)
    assert data["cost"] == 50 * 9000 + 9 * (40000 + 7 * 11000)
    assert data["currency"] == "USD"


def test_db_file_with_port_filter_and_limits(tmp_path, capsys):
    """--db FILE: the cheapest pair; --core-ports restricts the core models; --max-rack-units weeds out."""
    db = tmp_path / "db.json"
    db.write_text(json.dumps({"currency": "EUR", "switches": [
        {"model": "small", "ports": 24, "cost": 10, "rack_units": 1, "watts": 100},
        {"model": "big", "ports": 64, "cost": 50, "rack_units": 2, "watts": 150}]}))
    data = _run_json(capsys, "--nodes", "100", "--db", str(db))
    assert (data["edge_model"], data["core_model"], data["cost"]) == ("small", "small", 150)
    data = _run_json(capsys, "--nodes", "100", "--db", str(db), "--core-ports", "64")
    assert (data["edge_model"], data["core_model"], data["cost"]) == ("small", "big", 190)
    data = _run_json(capsys, "--nodes", "100", "--db", str(db), "--max-rack-units", "14")
    assert (data["core_model"], data["rack_units"]) == ("big", 13)
    text = _run_text(capsys, "--nodes", "100", "--db", str(db))
    assert "edge: 9 x small, core: 6 x small" in text and "cost 150 EUR" in text


def test_emit_topology_writes_clos_json(tmp_path, capsys):
    """--emit-topology writes the designed Clos in the topology JSON format."""
    out = tmp_path / "clos90.json"
    data = _run_json(capsys, "--nodes", "90", "--edge-ports", "24", "--core-ports", "24", "--blocking", "4",
                     "--emit-topology", str(out), "--fabric-link-mbps", "40")
    assert data["core_bundle_sizes"] == [3, 2]
    topo = json.loads(out.read_text())
    assert topo["kind"] == "clos"
    assert set(topo) == {"kind", "params", "nodes", "links"}
    assert sum(1 for node in topo["nodes"] if node["role"] == "host") == 90
    spine_links = [link for link in topo["links"] if link["b"].startswith("spine")]
    assert len(spine_links) == 25
    assert {link["capacity_mbps"] for link in spine_links} == {40.0}
    assert sum(1 for link in spine_links if link["a"] == "leaf0" and link["b"] == "spine0") == 3


@pytest.mark.parametrize("argv, fragment", [
    (["--nodes", "128", "--edge-ports", "36"], "--core-ports"),
    (["--nodes", "128", "--core-ports", "36"], "--edge-ports"),
    (["--nodes", "649", "--edge-ports", "36", "--core-ports", "36"], "invalid nodes=649: allowed values are 1..648"),
    (["--nodes", "0", "--edge-ports", "36", "--core-ports", "36"], "invalid nodes=0"),
    (["--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--blocking", "0.5"], "invalid blocking="),
    (["--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--blocking", "x"], "invalid blocking="),
    (["--nodes", "200", "--edge-ports", "36", "--core-ports", "36", "--expand-to", "700"], "invalid expand_to=700"),
    (["--nodes", "200", "--edge-ports", "36", "--core-ports", "36", "--expand-to", "100"], "invalid expand_to=100"),
    (["--nodes", "200", "--edge-ports", "36", "--core-ports", "36", "--expand-to", "600", "--uniform"],
     "invalid distribution="),
    (["--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--uniform", "--distribution", "dense"],
     "invalid --distribution="),
    (["--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--max-watts", "10"], "invalid --max-watts="),
    (["--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--fabric-link-mbps", "10"],
     "invalid --fabric-link-mbps="),
    (["--nodes", "128", "--example-db", "--edge-ports", "40"], "invalid edge_ports=40"),
    (["--nodes", "128", "--example-db", "--max-rack-units", "1"], "invalid max_rack_units=1"),
])
def test_bad_input_exits_2_and_names_the_parameter(capsys, argv, fragment):
    """Bad options exit with status 2 and a one-line error naming the parameter and allowed values."""
    err = _run_error(capsys, *argv)
    assert err.startswith("testbed design: error: ")
    assert fragment in err
    assert "Traceback" not in err


def test_bad_database_files(tmp_path, capsys):
    """Missing file, broken JSON and a bad field are one-line errors naming the problem."""
    err = _run_error(capsys, "--nodes", "10", "--db", str(tmp_path / "missing.json"))
    assert "cannot read switch database" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{\"switches\": [}")
    err = _run_error(capsys, "--nodes", "10", "--db", str(broken))
    assert "not valid JSON: line 1" in err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"switches": [{"model": "a", "ports": 36, "cost": 1, "rack_units": 1,
                                             "watts": "lots"}]}))
    err = _run_error(capsys, "--nodes", "10", "--db", str(bad))
    assert "invalid switches[0].watts='lots'" in err
    err = _run_error(capsys, "--nodes", "10", "--db", str(bad), "--example-db")
    assert "--db" in err


def test_emit_topology_unwritable_path(tmp_path, capsys):
    """A topology file that cannot be written is a one-line error."""
    err = _run_error(capsys, "--nodes", "60", "--edge-ports", "36", "--core-ports", "36",
                     "--emit-topology", str(tmp_path / "no" / "such" / "dir.json"))
    assert "cannot write topology file" in err


def test_emitted_topology_params_rebuild_the_same_clos(tmp_path, capsys):
    """The emitted "params" rebuild an identical ClosTopo (so specs can reuse a designed fabric)."""
    from testbed.topologies.clos import ClosTopo

    out = tmp_path / "clos128.json"
    text = _run_text(capsys, "--nodes", "128", "--edge-ports", "36", "--core-ports", "36", "--uniform",
                     "--emit-topology", str(out))
    assert "Topology written to" in text
    emitted = json.loads(out.read_text())
    rebuilt = ClosTopo(**emitted["params"]).to_dict()
    assert json.loads(json.dumps(rebuilt)) == emitted
    assert emitted["params"]["hosts_per_leaf"] == [16] * 8
    assert (emitted["params"]["leaves"], emitted["params"]["spines"]) == (8, 4)
