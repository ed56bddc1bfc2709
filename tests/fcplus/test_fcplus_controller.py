"""The fcplus controller's entries (pure) and the FC+ mode parameters' checks."""
import pytest

from testbed.controllers.fcplus.programming import fcplus_entries
from testbed.errors import ParameterError
from testbed.modes import check_parameters
from testbed.topologies.fcplus.routing import priority_transition_table
from testbed.topologies.fcplus.topology import fcplus_graph


@pytest.fixture(scope="module")
def graph():
    return fcplus_graph(8, 8, 6, v=4, seed=1)


def test_every_pair_gets_a_path_count_and_next_hops(graph):
    entries, paths = fcplus_entries(graph, {}, "ksp", k=2)
    for (source, target), found in paths.items():
        for index, path in enumerate(found):
            for u, w, key in path:
                port = graph[u][w][key]["port"][u]
                assert any(row[2:] == (index, port) for row in entries[u]["path_next"])
    assert all(tables["priority_transition"] == [] for tables in entries.values())   # KSP: one class


def test_dfksp_on_two_classes_moves_packets_at_down_up_turns(graph):
    entries, paths = fcplus_entries(graph, {}, "fcplus2l", k=2)
    every = [p for found in paths.values() for p in found]
    expected = priority_transition_table(graph, every, match_priority=True)
    got = {(tor, *row[:3]): row[3] for tor, tables in entries.items() for row in tables["priority_transition"]}
    assert got == expected and expected


@pytest.mark.parametrize("k, n_lp, field", [(0, 2, "k"), (2, 4, "n_lp"), (2, 0, "n_lp")])
def test_bad_k_and_n_lp_are_refused(graph, k, n_lp, field):
    with pytest.raises(ParameterError) as error:
        fcplus_entries(graph, {}, "dfksp", k=k, n_lp=n_lp)
    assert error.value.field == field


@pytest.mark.parametrize("values, field", [
    ({"pfc_xoff_packets": 100, "pfc_buffer_packets": 64}, "mode_params.pfc_xoff_packets"),
    ({"pfc_headroom_packets": 0}, "mode_params.pfc_headroom_packets"),
    ({"fcplus_n_lp": 4}, "mode_params.fcplus_n_lp"),
    ({"fcplus_k": 0}, "mode_params.fcplus_k"),
])
def test_bad_mode_params_are_refused_naming_the_field(values, field):
    with pytest.raises(ParameterError) as error:
        check_parameters(values)
    assert error.value.field == field and "allowed values" in str(error.value)


def test_pfc_off_allows_no_headroom():
    assert check_parameters({"pfc_lossless": 0, "pfc_headroom_packets": 0})["pfc_headroom_packets"] == 0


def _deadlock_spec(pfc_switches):
    import os

    import yaml

    from repo_paths import REPO
    from testbed.experiment.spec import parse_spec

    with open(os.path.join(REPO, "experiments", "fcplus_deadlock.yaml")) as handle:
        data = yaml.safe_load(handle)
    data["controller"] = {"kind": "fcplus", "pfc_switches": pfc_switches}
    return parse_spec(data)


GOOD_SWITCH = {"pfc_lossless": 1, "pfc_buffer_packets": 200, "pfc_xoff_packets": 20, "pfc_xon_packets": 10,
               "pfc_headroom_packets": 100}


def test_a_switch_may_have_its_own_pfc_settings():
    spec = _deadlock_spec({"tor3": GOOD_SWITCH, "tor5": dict(GOOD_SWITCH, pfc_lossless=0)})
    options = spec.controller.options_for("fcplus")
    assert options["pfc_switches"]["tor3"] == GOOD_SWITCH and options["pfc_switches"]["tor5"]["pfc_lossless"] == 0


@pytest.mark.parametrize("pfc_switches, field", [
    ({"tor99": GOOD_SWITCH}, "controller.pfc_switches"),
    ({"tor0": {"pfc_lossless": 1}}, "controller.pfc_switches.tor0"),
    ({"tor0": dict(GOOD_SWITCH, pfc_xoff_packets=150)}, "controller.pfc_switches.tor0.pfc_xoff_packets"),
    ({"tor0": dict(GOOD_SWITCH, pfc_headroom_packets=0)}, "controller.pfc_switches.tor0.pfc_headroom_packets"),
    ({"tor0": dict(GOOD_SWITCH, pfc_lossless=4)}, "controller.pfc_switches.tor0.pfc_lossless"),
    ({"tor0": dict(GOOD_SWITCH, pfc_xon_packets=20)}, "controller.pfc_switches.tor0.pfc_xon_packets"),
    ([], "controller.pfc_switches"),
])
def test_bad_per_switch_pfc_settings_are_refused_naming_the_field(pfc_switches, field):
    from testbed.errors import SpecError

    with pytest.raises(SpecError) as error:
        _deadlock_spec(pfc_switches)
    assert error.value.field == field, str(error.value)
