"""Fat-tree designer (seed 003): every worked example of the primer, the bad inputs, the switch database.

Each ``test_seed_*`` test reproduces one worked example or exercise of the
primer (seed 003) and says which in its name and docstring.
"""
import json
from fractions import Fraction

import pytest

from testbed.errors import ParameterError, TestbedError
from testbed.topologies.designer import (
    Design, bundle_size, core_bundle_sizes, core_switch_count, dense_node_distribution, design_fat_tree,
    edge_ports_to_core, edge_ports_to_nodes, edge_switch_count, effective_blocking, expansion_stages,
    max_nodes, max_nodes_two_level, parse_blocking, spread_evenly, uniform_edge_ports)
from testbed.topologies.switch_db import (
    EXAMPLE_DB_PATH, SwitchModel, candidate_designs, choose_design, load_switch_db, parse_switch_db,
    with_models)


def _core_port_use(design):
    """Ports used on each core switch, from the bundle distribution."""
    return [sum(per_edge) for per_edge in design.bundle_distribution]


# --------------------------------------------------------------------------- seed 003 worked examples


def test_seed_fig2_60_nodes_four_edge_switches_two_cores_bundles_of_nine():
    """Fig. 2: 36-port switches, 60 nodes: 4 edge switches, 2 core switches, two bundles of 9 links;
    the rightmost edge switch has 6 servers and 18 ports to the core (9 per core switch); B = 36 div 4 = 9
    and no core port is wasted (Pc mod E = 0)."""
    design = design_fat_tree(60, 36, 36, 1)
    assert (design.edge_switches, design.core_switches, design.bundle) == (4, 2, 9)
    assert design.node_distribution == [18, 18, 18, 6]
    assert design.eptc == 18
    assert design.bundle_distribution == [[9, 9, 9, 9], [9, 9, 9, 9]]
    assert design.wasted_core_ports == [0, 0]
    assert design.wasted_edge_ports == [0, 0, 0, 12]  # "possibility for expansion by 12 more servers"


def test_seed_nmax_36_port_two_level_is_648():
    """Exercise: the largest two-level fat-tree of 36-port switches has Nmax = 36*36/2 = 648 nodes."""
    assert max_nodes_two_level(36, 36) == 648
    assert max_nodes(36, 2) == 648
    assert design_fat_tree(648, 36, 36).total_switches == 54  # "you would have 54 switches in total"


def test_seed_nmax_648_port_two_level_is_209952():
    """Nmax = P*P/2 = 648*648/2 = 209,952 for 648-port switches on both levels."""
    assert max_nodes_two_level(648, 648) == 209_952
    assert max_nodes(648, 2) == 209_952


def test_seed_nmax_four_levels_of_36_ports_is_209952():
    """Exercise: Nmax = 2*(P/2)^L with L=4, P=36 gives 2*18^4 = 209,952 (same as two levels of 648 ports)."""
    assert max_nodes(36, 4) == 209_952 == 2 * 18 ** 4
    assert max_nodes(36, 3) == 2 * 18 ** 3  # three levels: P*(P/2)*(P/2)
    assert max_nodes(36, 1) == 36  # one switch


def test_seed_blocking_2_on_36_ports_is_24_down_12_up():
    """Blocking factor 2 with 36-port switches: 24 ports going down and 12 going up."""
    eptn = edge_ports_to_nodes(36, 2)
    assert (eptn, edge_ports_to_core(36, eptn)) == (24, 12)


def test_seed_blocking_2_6_on_36_ports_is_26_down_10_up():
    """Exercise: a blocking factor of 2,6 corresponds to 26 downlinks and 10 uplinks (exact arithmetic)."""
    for spelling in (2.6, "2.6", "2,6", "13/5", Fraction(13, 5)):
        eptn = edge_ports_to_nodes(36, spelling)
        assert (eptn, edge_ports_to_core(36, eptn)) == (26, 10), spelling


def test_seed_biggest_blocking_on_36_ports_is_35():
    """Exercise: the biggest blocking factor with 36-port switches is 35 (35 downlinks, one uplink)."""
    eptn = edge_ports_to_nodes(36, 35)
    assert (eptn, edge_ports_to_core(36, eptn)) == (35, 1)
    assert effective_blocking(35, 1) == 35


def test_seed_blocking_4_on_36_ports_truncates_to_28_down_8_up():
    """Trunc example: Bl=4, Pe=36 gives Eptn=28, Eptc=8, resulting blocking 3,5; 29/7=4,14 would exceed 4."""
    eptn = edge_ports_to_nodes(36, 4)
    assert (eptn, edge_ports_to_core(36, eptn)) == (28, 8)
    assert effective_blocking(28, 8) == Fraction(7, 2)
    assert effective_blocking(29, 7) > 4


def test_seed_blocking_sustains_2bl_over_bl_plus_1_times_more_nodes():
    """With blocking Bl a network sustains 2*Bl/(Bl+1) times more nodes (Bl=2: 4/3; 648 -> 864)."""
    assert max_nodes_two_level(36, 36, 2) == 864
    assert Fraction(max_nodes_two_level(36, 36, 2), max_nodes_two_level(36, 36, 1)) == Fraction(2 * 2, 2 + 1)


def test_seed_exercise_edge_switches_for_70_72_74_nodes():
    """Exercise: 36-port edge switches, non-blocking: 70 nodes need E=4, 72 nodes E=4, 74 nodes E=5;
    alternatively 74 nodes spread over 4 switches use 18, 18, 19, 19 ports, blocking 19/17 = 1,12."""
    assert [edge_switch_count(n, edge_ports_to_nodes(36, 1)) for n in (70, 72, 74)] == [4, 4, 5]
    assert sorted(spread_evenly(74, 4)) == [18, 18, 19, 19]
    assert round(float(effective_blocking(19, 36 - 19)), 2) == 1.12


def test_seed_exercise_70_servers_six_switches_636_watts():
    """Exercise: Fig. 2 with 70 servers has 6 switches of 106 W: 636 W, about 9.08 W per server."""
    db = load_switch_db()
    design = with_models(design_fat_tree(70, 36, 36, 1), db.get("fixed-36"), db.get("fixed-36"))
    assert design.total_switches == 6
    assert design.watts == 636
    assert round(design.watts / 70, 2) == 9.09  # the primer truncates 9.0857 to "9,08"
    assert int(design.watts / 70 * 100) == 908


def test_seed_example_128_nodes_36_ports_dense_gives_E8_C5():
    """Example: N=128, Pe=Pc=36, Bl=1: Eptn=Eptc=18, E=ceil(7,1)=8, B=36 div 8=4, C=ceil(4,5)=5."""
    design = design_fat_tree(128, 36, 36, 1)
    assert (design.eptn, design.eptc) == (18, 18)
    assert (design.edge_switches, design.bundle, design.core_switches) == (8, 4, 5)
    assert design.distribution == "dense"
    assert design.node_distribution == [18] * 7 + [2]  # spare ports all on the last edge switch


def test_seed_example_128_nodes_36_ports_uniform_gives_E8_C4():
    """Example redone with uniform distribution: Eptn=ceil(128/8)=16, Eptc=ceil(16/1)=16, B=4, C=4 (one
    core switch spared)."""
    assert uniform_edge_ports(128, 8, 1) == (16, 16)
    design = design_fat_tree(128, 36, 36, 1, distribution="uniform")
    assert (design.eptn, design.eptc) == (16, 16)
    assert (design.edge_switches, design.bundle, design.core_switches) == (8, 4, 4)
    assert design.node_distribution == [16] * 8
    assert design.bundle_distribution == [[4] * 8] * 4


def test_seed_tool_rule_uniform_only_when_it_saves_core_switches():
    """The tool picks uniform distribution only if asked or if it decreases the number of core switches."""
    assert design_fat_tree(128, 36, 36, 1, distribution="auto").distribution == "uniform"
    assert design_fat_tree(128, 36, 36, 1, distribution="auto").core_switches == 4
    kept = design_fat_tree(60, 36, 36, 1, distribution="auto")  # uniform: 15 per switch, still C=2
    assert (kept.distribution, kept.core_switches, kept.node_distribution) == ("dense", 2, [18, 18, 18, 6])


def test_seed_example_320_nodes_pe32_pc36_gives_E20_B1_C16():
    """Example: N=320, Pe=32, Pc=36, Bl=1: Eptn=Eptc=16, E=20, B=1, C=16, each core switch has
    Pc mod E = 16 unused ports, E+C = 36 switches."""
    design = design_fat_tree(320, 32, 36, 1)
    assert (design.eptn, design.eptc) == (16, 16)
    assert (design.edge_switches, design.bundle, design.core_switches) == (20, 1, 16)
    assert design.wasted_core_ports == [36 % 20] * 16 == [16] * 16
    assert design.total_switches == 36


def test_seed_example_288_nodes_pe32_pc36_gives_E18_B2_C8():
    """Spoiler: N=288, Pe=32, Pc=36: E=18, B=2, C=8, E+C = 26 switches."""
    design = design_fat_tree(288, 32, 36, 1)
    assert (design.edge_switches, design.bundle, design.core_switches) == (18, 2, 8)
    assert design.total_switches == 26
    assert design.wasted_core_ports == [0] * 8


def test_seed_example_90_nodes_24_ports_blocking_4_bundles():
    """Dealing with link bundles: N=90, Pe=Pc=24, Bl=4: Eptn=19, Eptc=5, E=5, B=24 div 5=4, C=2.
    Fig. 3 wires 4 links to the first core switch and 1 to the second; Fig. 4's more uniform split is 3+2."""
    dense = design_fat_tree(90, 24, 24, 4, bundle_split="dense")
    assert (dense.eptn, dense.eptc, dense.edge_switches, dense.bundle, dense.core_switches) == (19, 5, 5, 4, 2)
    assert dense.core_bundle_sizes == [4, 1]
    assert dense.bundle_distribution == [[4] * 5, [1] * 5]
    even = design_fat_tree(90, 24, 24, 4)  # the recommended split is the default
    assert (even.eptn, even.eptc, even.edge_switches, even.bundle, even.core_switches) == (19, 5, 5, 4, 2)
    assert even.core_bundle_sizes == [3, 2]
    assert even.bundle_distribution == [[3] * 5, [2] * 5]
    assert even.bundle_matrix == [[3, 2]] * 5
    # "for the blocking factor Bl=4 you need 25 ports, and it has 24"
    assert even.edge_switches * even.eptc == 25


def test_seed_bundle_rule_first_c_minus_1_cores_get_b_links():
    """The B formula: bundles to the first C-1 core switches have B cables, the last gets Eptc-B*(C-1)."""
    assert core_bundle_sizes(18, 4, 5, "dense") == [4, 4, 4, 4, 2]
    assert core_bundle_sizes(18, 4, 5, "even") == [4, 4, 4, 3, 3]
    assert core_bundle_sizes(5, 4, 2, "even") == [3, 2]


def test_seed_expandability_200_nodes_without_expansion_E12_C6_B3():
    """Designing for expandability: N1=200 without expansion: E1=12 edge switches (216 nodes), C1=6, B=3."""
    design = design_fat_tree(200, 36, 36, 1)
    assert (design.edge_switches, design.core_switches, design.bundle) == (12, 6, 3)
    assert design.capacity == 216


def test_seed_expandability_600_nodes_E34_C18_B1():
    """N3=600 at maximum size: E3=34 edge switches (612 nodes), C3=18, B=1 (links run singly)."""
    design = design_fat_tree(600, 36, 36, 1)
    assert (design.edge_switches, design.core_switches, design.bundle) == (34, 18, 1)
    assert design.capacity == 612


def test_seed_expandability_200_expandable_to_600_adds_11_then_11_edge_switches():
    """Built for 600 but installed for 200: 12 edge switches now, the 18-switch core of the 600-node
    design, B=1; stage N2=400 adds 11 edge switches, stage N3=600 another 11, without rewiring."""
    design = design_fat_tree(200, 36, 36, 1, expand_to=600)
    assert (design.edge_switches, design.core_switches, design.bundle) == (12, 18, 1)
    assert (design.max_edge_switches, design.max_capacity) == (34, 612)
    assert design.node_distribution == [18] * 11 + [2]
    stages = expansion_stages(design, [400, 600])
    assert [s["added_edge_switches"] for s in stages] == [11, 11]
    assert [s["edge_switches"] for s in stages] == [23, 34]
    # Every core switch keeps one port per future edge switch free.
    assert design.wasted_core_ports == [36 - 12] * 18


def test_seed_exercise_1000_and_1500_nodes_expandable_design_mixes_both():
    """Exercise: 1000 nodes, 1500 nodes, and 1000 expandable to 1500: the third design has the edge level
    of the first and the core level of the second (here with 36-port edge and 144-port core switches)."""
    first = design_fat_tree(1000, 36, 144, 1)
    second = design_fat_tree(1500, 36, 144, 1)
    third = design_fat_tree(1000, 36, 144, 1, expand_to=1500)
    assert third.edge_switches == first.edge_switches
    assert (third.core_switches, third.bundle) == (second.core_switches, second.bundle)
    assert (first.core_switches, second.core_switches, third.edge_switches) == (9, 18, 56)


def test_seed_exercise_1000_1500_with_example_database():
    """Same exercise with the example database: edge level of the 1000-node design, core of the 1500-node one."""
    db = load_switch_db()
    first = choose_design(db, 1000)
    second = choose_design(db, 1500)
    third = choose_design(db, 1000, expand_to=1500)
    assert (third.edge_model, third.edge_switches) == (first.edge_model, first.edge_switches)
    assert (third.core_model, third.core_switches) == (second.core_model, second.core_switches)


# --------------------------------------------------------------------------- the primer's tool narrative, example DB
# These depend on the example database's made-up prices (the primer's own prices are not published);
# with them the choices follow the primer's "analysis of full output".


@pytest.mark.parametrize("nodes", [37, 300, 648])
def test_example_db_up_to_648_nodes_uses_36_port_switches(nodes):
    """N=37..648: a two-level fat-tree of 36-port switches."""
    design = choose_design(load_switch_db(), nodes)
    assert (design.edge_model, design.core_model) == ("fixed-36", "fixed-36")


@pytest.mark.parametrize("nodes, core_ports, core_switches", [
    (649, 112, 6), (666, 112, 6), (700, 128, 6), (864, 144, 6), (865, 112, 9), (900, 112, 9),
    (1296, 144, 9), (1297, 80, 18), (2592, 144, 18)])
def test_example_db_modular_core_choices_follow_the_primer(nodes, core_ports, core_switches):
    """649..666: 112-port cores; 700: six 128-port cores; 900: nine 112-port cores; 1296: nine 144-port
    cores for the last time; 1297: eighteen 80-port cores; 2592: 144 edge and 18 core switches."""
    design = choose_design(load_switch_db(), nodes)
    assert design.edge_model == "fixed-36"
    assert (design.core_ports, design.core_switches) == (core_ports, core_switches)
    if nodes == 2592:
        assert design.edge_switches == 144


# --------------------------------------------------------------------------- invariants over many designs


@pytest.mark.parametrize("distribution", ["dense", "uniform", "auto"])
@pytest.mark.parametrize("split", ["even", "dense"])
def test_every_design_respects_ports_blocking_and_node_count(distribution, split):
    """For a grid of requests: nodes all placed, no switch over its ports, blocking never above Bl,
    bundles sum to Eptc and never exceed B, wasted ports add up."""
    checked = 0
    for pe, pc in ((8, 8), (24, 24), (32, 36), (36, 36), (36, 144), (48, 16)):
        for bl in (1, 2, Fraction(13, 5), 4):
            top = max_nodes_two_level(pe, pc, bl)
            for nodes in sorted({1, 2, pe - 1, pe, pe + 1, top // 3, top // 2 + 1, top - 1, top}):
                if nodes < 1:
                    continue
                d = design_fat_tree(nodes, pe, pc, bl, distribution, split)
                assert sum(d.node_distribution) == nodes
                assert len(d.node_distribution) == d.edge_switches
                assert max(d.node_distribution) <= d.eptn
                assert all(h + d.eptc <= pe for h in d.node_distribution)
                assert Fraction(d.eptn, d.eptc) <= bl
                assert sum(d.core_bundle_sizes) == d.eptc
                assert max(d.core_bundle_sizes) <= d.bundle
                assert d.core_switches == core_switch_count(d.eptc, d.bundle)
                assert all(used <= pc for used in _core_port_use(d))
                assert d.total_wasted_core_ports == d.core_switches * pc - d.edge_switches * d.eptc
                assert d.total_wasted_edge_ports == d.edge_switches * pe - nodes - d.edge_switches * d.eptc
                assert all(w >= 0 for w in d.wasted_edge_ports + d.wasted_core_ports)
                checked += 1
    assert checked > 200


def test_uniform_never_needs_more_core_switches_than_dense():
    """The uniform Eptc never exceeds the dense one, so C(uniform) <= C(dense)."""
    for nodes in range(1, 649):
        assert (design_fat_tree(nodes, 36, 36, 1, "uniform").core_switches
                <= design_fat_tree(nodes, 36, 36, 1).core_switches)


def test_to_dict_has_the_stable_keys_and_is_json():
    """The JSON structure of ``testbed design --json``."""
    data = design_fat_tree(90, 24, 24, 4).to_dict()
    for key in ("nodes", "edge_switches", "core_switches", "bundle", "edge_ports_to_nodes",
                "edge_ports_to_core", "blocking", "total_switches", "bundle_distribution", "wasted_ports"):
        assert key in data
    assert (data["edge_ports_to_nodes"], data["edge_ports_to_core"], data["total_switches"]) == (19, 5, 7)
    assert data["wasted_ports"]["core"] == 24 * 2 - 25
    assert "cost" not in data
    assert json.loads(json.dumps(data)) == data
    assert design_fat_tree(100, 36, 36, "2.6").to_dict()["blocking"] == 2.6


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("kwargs, field", [
    (dict(nodes=0), "nodes"), (dict(nodes=-5), "nodes"), (dict(nodes=1.5), "nodes"), (dict(nodes=True), "nodes"),
    (dict(edge_ports=1), "edge_ports"), (dict(edge_ports="36"), "edge_ports"), (dict(core_ports=1), "core_ports"),
    (dict(blocking=0.5), "blocking"), (dict(blocking=0), "blocking"), (dict(blocking="abc"), "blocking"),
    (dict(blocking=float("nan")), "blocking"), (dict(blocking=float("inf")), "blocking"),
    (dict(blocking=True), "blocking"), (dict(blocking=None), "blocking"),
    (dict(distribution="random"), "distribution"), (dict(bundle_split="thick"), "bundle_split"),
    (dict(expand_to=50), "expand_to"), (dict(expand_to=100.0), "expand_to"),
    (dict(distribution="uniform", expand_to=200), "distribution"),
])
def test_bad_parameters_name_the_field(kwargs, field):
    """Every bad input raises ParameterError naming the parameter and its allowed values."""
    request = dict(nodes=100, edge_ports=36, core_ports=36, blocking=1)
    request.update(kwargs)
    with pytest.raises(ParameterError) as caught:
        design_fat_tree(**request)
    assert caught.value.field == field
    assert "allowed values are" in str(caught.value)


def test_too_many_nodes_for_the_switches_b_would_be_0():
    """N=649 with 36-port switches needs E=37 > Pc=36 edge switches: B = 36 div 37 = 0, not buildable."""
    with pytest.raises(ParameterError) as caught:
        design_fat_tree(649, 36, 36, 1)
    assert caught.value.field == "nodes"
    assert "1..648" in caught.value.allowed
    assert "B = Pc div E = 0" in str(caught.value)
    with pytest.raises(ParameterError) as caught:
        bundle_size(36, 37)
    assert caught.value.field == "edge_switches"


def test_expansion_target_beyond_the_core_level_is_rejected():
    """expand_to needing more edge switches than a core switch has ports names expand_to."""
    with pytest.raises(ParameterError) as caught:
        design_fat_tree(200, 36, 36, 1, expand_to=700)
    assert caught.value.field == "expand_to"
    design = design_fat_tree(200, 36, 36, 1, expand_to=600)
    with pytest.raises(ParameterError):
        expansion_stages(design, [400, 700])
    with pytest.raises(ParameterError):
        expansion_stages(design, [400, 300])


def test_formula_helpers_reject_bad_values():
    """The small formula functions validate their arguments too."""
    with pytest.raises(ParameterError):
        max_nodes(35, 2)
    with pytest.raises(ParameterError):
        max_nodes(36, 0)
    with pytest.raises(ParameterError):
        edge_ports_to_core(36, 36)
    with pytest.raises(ParameterError):
        core_switch_count(18, 0)
    with pytest.raises(ParameterError):
        dense_node_distribution(100, 2, 18)
    with pytest.raises(ParameterError):
        core_bundle_sizes(18, 4, 4)  # C must be ceil(18/4) = 5
    assert parse_blocking("3,5") == Fraction(7, 2)


# --------------------------------------------------------------------------- switch database


def _db(*switches, **extra):
    """A database document with the given switch entries."""
    return dict({"description": "test", "currency": "EUR", "switches": list(switches)}, **extra)


def _switch(model, ports, cost, rack_units=1, watts=100, **extra):
    """One switch entry of a database document."""
    return dict({"model": model, "ports": ports, "cost": cost, "rack_units": rack_units, "watts": watts}, **extra)


def test_example_database_is_labelled_and_valid():
    """The shipped database loads, says it is example data, and carries the primer's 36-port figures."""
    db = load_switch_db()
    assert db.source == EXAMPLE_DB_PATH
    assert "EXAMPLE DATA" in db.description
    fixed = db.get("fixed-36")
    assert (fixed.ports, fixed.rack_units, fixed.watts) == (36, 1, 106)
    modular = [s for s in db.switches if s.model.startswith("modular-144/")]
    assert sorted(s.ports for s in modular) == [16 * k for k in range(1, 10)]
    assert len({s.rack_units for s in modular}) == 1  # same rack space whatever the line boards
    full = db.get("modular-144/9lb")
    assert 3 <= (full.cost / full.ports) / (fixed.cost / fixed.ports) <= 4  # "3 to 4 times higher"


@pytest.mark.parametrize("document, field", [
    ([], "(document)"),
    ({"switches": []}, "switches"),
    ({"switches": "x"}, "switches"),
    (_db(_switch("a", 1, 10)), "switches[0].ports"),
    (_db(_switch("a", 36, 10), _switch("b", 36.5, 10)), "switches[1].ports"),
    (_db(_switch("a", 36, -1)), "switches[0].cost"),
    (_db(_switch("a", 36, "cheap")), "switches[0].cost"),
    (_db(_switch("a", 36, 1, rack_units=None)), "switches[0].rack_units"),
    (_db(_switch("a", 36, 1, watts=float("nan"))), "switches[0].watts"),
    (_db(_switch("", 36, 1)), "switches[0].model"),
    (_db(_switch("a", 36, 1), _switch("a", 48, 1)), "switches[1].model"),
    (_db(_switch("a", 36, 1, roles=["spine"])), "switches[0].roles"),
    (_db(_switch("a", 36, 1, roles=[])), "switches[0].roles"),
    (_db(_switch("a", 36, 1, price=3)), "switches[0].price"),
    (_db(_switch("a", 36, 1), currency=5), "currency"),
])
def test_bad_database_fields_are_named(document, field):
    """Validation names the bad field (switches[i].name) and its allowed values."""
    with pytest.raises(ParameterError) as caught:
        parse_switch_db(document, source="test.json")
    assert caught.value.field == field
    assert "test.json" in str(caught.value)


def test_unreadable_or_invalid_json_database(tmp_path):
    """A missing file or broken JSON is a TestbedError with the path (and line/column)."""
    with pytest.raises(TestbedError, match="cannot read switch database"):
        load_switch_db(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"switches": [\n  {"model": "a",, }\n]}\n')
    with pytest.raises(TestbedError, match=r"not valid JSON: line 2 column"):
        load_switch_db(broken)


def test_choose_cheapest_combination_by_hand():
    """Small database where the cheapest pair is not the cheapest switch everywhere.

    N=100, Bl=1.  small (24 ports, 10): Eptn=12, E=9; big (64 ports, 50): Eptn=32, E=4.
    small/small: E=9, B=24 div 9=2, C=ceil(12/2)=6 -> 15 switches, 150.
    small/big:   E=9, B=64 div 9=7, C=ceil(12/7)=2 -> 9*10 + 2*50 = 190.
    big/small:   E=4, B=6, C=ceil(32/6)=6 -> 4*50 + 6*10 = 260.
    big/big:     E=4, B=16, C=2 -> 300.
    """
    db = parse_switch_db(_db(_switch("small", 24, 10), _switch("big", 64, 50)))
    ranked = candidate_designs(db, 100)
    assert [(d.edge_model, d.core_model, d.cost) for d in ranked] == [
        ("small", "small", 150), ("small", "big", 190), ("big", "small", 260), ("big", "big", 300)]
    best = choose_design(db, 100)
    assert (best.edge_switches, best.core_switches, best.cost, best.rack_units, best.watts) == (9, 6, 150, 15, 1500)
    # N=300: small/small needs E=25 > 24 (B=0) and drops out; small/big: E=25, B=2, C=6 -> 250+300=550;
    # big/small: E=10, B=2, C=16 -> 500+160=660; big/big: E=10, B=6, C=6 -> 800.
    best = choose_design(db, 300)
    assert (best.edge_model, best.core_model, best.cost) == ("small", "big", 550)


def test_choose_respects_roles_port_filters_and_limits():
    """roles restrict levels; --edge-ports filters; rack-unit and power limits weed out cheaper designs."""
    db = parse_switch_db(_db(_switch("small", 24, 10, rack_units=1, watts=100),
                             _switch("big", 64, 50, rack_units=2, watts=150, roles=["core"])))
    assert {(d.edge_model, d.core_model) for d in candidate_designs(db, 100)} == {("small", "small"),
                                                                                   ("small", "big")}
    assert choose_design(db, 100, core_ports=64).core_model == "big"
    # small/small: 15 RU, 1500 W; small/big: 9 + 4 = 13 RU, 900 + 300 = 1200 W.
    assert choose_design(db, 100, max_rack_units=14).core_model == "big"
    assert choose_design(db, 100, max_watts=1200).core_model == "big"
    with pytest.raises(ParameterError) as caught:
        choose_design(db, 100, max_rack_units=5)
    assert caught.value.field == "max_rack_units"
    with pytest.raises(ParameterError) as caught:
        choose_design(db, 100, edge_ports=64)
    assert caught.value.field == "edge_ports"


def test_choose_reports_the_largest_size_the_database_allows():
    """With only 36-port switches, 649 nodes cannot be built: names nodes and the limit 648."""
    db = parse_switch_db(_db(_switch("fixed-36", 36, 9000)), source="only36.json")
    with pytest.raises(ParameterError) as caught:
        choose_design(db, 649)
    assert caught.value.field == "nodes"
    assert "1..648" in caught.value.allowed
    with pytest.raises(ParameterError) as caught:
        choose_design(db, 200, expand_to=700)
    assert caught.value.field == "expand_to"
    with pytest.raises(ParameterError) as caught:
        choose_design(db, 0)
    assert caught.value.field == "nodes"


def test_with_models_totals_and_port_mismatch():
    """Totals are E*edge + C*core figures; a model with other ports is refused."""
    design = design_fat_tree(128, 36, 36, 1)
    edge = SwitchModel("e36", 36, 100, 1, 10)
    core = SwitchModel("c36", 36, 1000, 2, 20)
    priced = with_models(design, edge, core)
    assert (priced.cost, priced.rack_units, priced.watts) == (8 * 100 + 5 * 1000, 8 + 10, 80 + 100)
    assert priced.to_dict()["edge_model"] == "e36" and priced.to_dict()["cost"] == 5800
    with pytest.raises(ParameterError):
        with_models(design, SwitchModel("e48", 48, 1, 1, 1), core)


def test_design_is_a_dataclass_with_totals():
    """Design exposes total_switches and the leaf-major bundle matrix."""
    design = design_fat_tree(128, 36, 36, 1, bundle_split="dense")
    assert isinstance(design, Design)
    assert design.total_switches == 13
    assert design.bundle_matrix == [[4, 4, 4, 4, 2]] * 8


# --------------------------------------------------------------------------- the design as an emulation topology


def _links_between(graph, a, b):
    """Parallel links between two nodes of a multigraph."""
    return graph.number_of_edges(a, b)


def test_to_topology_90_nodes_clos_with_3_plus_2_bundles():
    """N=90, Pe=Pc=24, Bl=4 becomes a Clos: 5 leaves, 2 spines, bundles of 3 and 2 parallel links."""
    from testbed.topologies.clos import ClosTopo

    design = design_fat_tree(90, 24, 24, 4)
    topo = design.to_topology(hosts_link_mbps=10, fabric_link_mbps=40)
    assert isinstance(topo, ClosTopo)
    graph = topo.graph()
    roles = [data["role"] for _, data in graph.nodes(data=True)]
    assert (roles.count("leaf"), roles.count("spine"), roles.count("host")) == (5, 2, 90)
    for i in range(5):
        assert _links_between(graph, f"leaf{i}", "spine0") == 3
        assert _links_between(graph, f"leaf{i}", "spine1") == 2
        assert graph.degree(f"leaf{i}") <= 24
    assert [graph.degree(f"spine{j}") for j in range(2)] == [15, 10]
    hosts_per_leaf = [sum(1 for n in graph.neighbors(f"leaf{i}") if graph.nodes[n]["role"] == "host")
                      for i in range(5)]
    assert hosts_per_leaf == [19, 19, 19, 19, 14]
    for a, b, data in graph.edges(data=True):
        host_link = "host" in (graph.nodes[a]["role"], graph.nodes[b]["role"])
        assert data["capacity_mbps"] == (10.0 if host_link else 40.0)
    assert topo.to_dict()["kind"] == "clos"


def test_to_topology_128_nodes_dense_split_and_uniform():
    """N=128 on 36-port switches: dense nodes 7x18 + 2 with 4+4+4+4+2 bundles; uniform 8x16 over 4 cores."""
    dense = design_fat_tree(128, 36, 36, 1, bundle_split="dense").to_topology()
    graph = dense.graph()
    assert [_links_between(graph, "leaf7", f"spine{j}") for j in range(5)] == [4, 4, 4, 4, 2]
    assert [graph.degree(f"spine{j}") for j in range(5)] == [32, 32, 32, 32, 16]
    assert dense.to_dict()["params"]["hosts_per_leaf"] == [18] * 7 + [2]
    uniform = design_fat_tree(128, 36, 36, 1, distribution="uniform").to_topology()
    graph = uniform.graph()
    assert sum(1 for _, d in graph.nodes(data=True) if d["role"] == "spine") == 4
    assert all(graph.degree(f"leaf{i}") == 32 for i in range(8))


def test_example_db_cost_about_doubles_from_648_to_649_nodes():
    """Primer: from N=649 modular core switches are needed, "a two-fold immediate increase in network cost"
    (the exact factor depends on the example database's made-up prices)."""
    db = load_switch_db()
    before, after = choose_design(db, 648), choose_design(db, 649)
    assert (before.core_model, after.core_model) == ("fixed-36", "modular-144/7lb")
    assert 1.8 <= after.cost / before.cost <= 2.5
