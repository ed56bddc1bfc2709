"""The one table of modes and run-time parameters (testbed/modes.py) agrees with the P4 programs."""
import doctest

import pytest

from testbed import modes
from testbed.errors import ParameterError
from testbed.p4.loader import load_program
from testbed.p4runtime.p4info import build_p4info


def loaded(mode):
    return load_program(modes.program_for_mode(mode))


def test_doctests():
    assert doctest.testmod(modes).failed == 0


@pytest.mark.parametrize("mode", list(modes.MODES))
def test_every_parameter_of_a_mode_is_carried_by_its_program_with_the_table_default(mode):
    info = loaded(mode).info
    for name in modes.MODES[mode].parameters:
        parameter = modes.PARAMETERS[name]
        if not parameter.in_program:
            continue  # read by the controller (DSF's Input Balanced Mode switch...)
        table = info.tables[parameter.table]
        assert not table.match_fields, f"{parameter.table} must be keyless"
        assert table.default_action.action == parameter.action
        params = [p.name for p in info.actions[parameter.action].params]
        position = params.index(parameter.action_param)
        # the program's initial value is the table's default: a switch behaves the same before the
        # controller writes and after it writes the defaults
        assert table.default_action.args[position] == parameter.default, name
        width = info.actions[parameter.action].params[position].bitwidth
        assert parameter.maximum < 1 << width, f"{name}: maximum does not fit bit<{width}>"
        assert not table.const_default_action, f"{parameter.table}: the default action must be writable"


@pytest.mark.parametrize("mode", list(modes.MODES))
def test_parameter_tables_appear_in_the_p4info(mode):
    p4info = build_p4info(loaded(mode).info)
    tables = {table.preamble.name for table in p4info.tables}
    actions = {action.preamble.name for action in p4info.actions}
    for name in modes.MODES[mode].parameters:
        if modes.PARAMETERS[name].in_program:
            assert modes.PARAMETERS[name].table in tables and modes.PARAMETERS[name].action in actions


def test_no_program_reads_run_time_parameters_from_registers():
    """BMv2's P4Runtime server cannot write registers: parameters never live there."""
    for mode in modes.MODES:
        registers = set(loaded(mode).info.registers)
        for name in modes.PARAMETERS:
            assert not any(register.endswith(name) for register in registers), (mode, name)


@pytest.mark.parametrize("value,expected", [(300, 300), (300.0, 300), (1, 1), (10_000_000, 10_000_000)])
def test_check_accepts_integers_in_range(value, expected):
    assert modes.PARAMETERS["flowlet_interval_us"].check(value) == expected


@pytest.mark.parametrize("value", [0, 0.5, -3, 10_000_001, True, None, float("nan"), float("inf"), "300", [1]])
def test_check_refuses_and_names_the_field_and_range(value):
    with pytest.raises(ParameterError) as caught:
        modes.PARAMETERS["flowlet_interval_us"].check(value, "mode_params.flowlet_interval_us")
    assert caught.value.field == "mode_params.flowlet_interval_us"
    assert caught.value.allowed == "an integer in [1, 10000000] us"


def test_check_takes_text_only_from_command_lines():
    assert modes.PARAMETERS["hash_seed"].check("0x10", text=True) == 16
    assert modes.PARAMETERS["flowlet_interval_us"].check("250", text=True) == 250
    with pytest.raises(ParameterError):
        modes.PARAMETERS["flowlet_interval_us"].check("2.5", text=True)


def test_check_parameters_names_unknown_keys():
    with pytest.raises(ParameterError) as caught:
        modes.check_parameters({"flowlet_interval": 5})
    assert caught.value.field == "mode_params.flowlet_interval"


def test_resolve_program_by_mode_name_or_path(tmp_path):
    assert modes.resolve_program("flowlet") == ("flowlet", modes.program_for_mode("flowlet"))
    mode, path = modes.resolve_program("l3_ecmp")
    assert mode is None and path.endswith("p4src/l3_ecmp.p4")
    with pytest.raises(ParameterError) as caught:
        modes.resolve_program(str(tmp_path / "missing.p4"))
    assert caught.value.field == "program"


# F10's detector: defaults w=5 periods of 20 ms (t = 100 ms), c=1, d=3, hold-down 200 ms, max 3.2 s, reset 1 s
@pytest.mark.parametrize("values, field, allowed", [
    ({"probe_period_us": 0}, "probe_period_us", "an integer in [100, 1000000] us"),
    ({"detector_window_periods": 1}, "detector_window_periods", "an integer in [2, 8] probe periods"),
    ({"detector_window_periods": 9}, "detector_window_periods", "an integer in [2, 8] probe periods"),
    ({"detector_down_below": 0}, "detector_down_below", "an integer in [1, 10000] frames"),
    # c above the frames a window is sure of on an idle link (w - 1: the ends' periods are not in phase)
    ({"detector_window_periods": 4, "detector_down_below": 4}, "detector_down_below", "an integer in [1, 3]"),
    ({"detector_up_at_least": 5}, "detector_up_at_least", "an integer in [1, 4]"),
    ({"detector_down_below": 3, "detector_up_at_least": 2}, "detector_up_at_least", "an integer in [3, 4]"),
    # hold-down below t (also when a longer period makes t longer)
    ({"holddown_us": 99_999}, "holddown_us", "an integer in [100000, 60000000] us"),
    ({"probe_period_us": 50_000}, "holddown_us", "an integer in [250000, 60000000] us"),
    ({"holddown_max_us": 150_000}, "holddown_max_us", "an integer in [200000, 60000000] us"),
    # backoff reset below hold-down + t: the hold-down could never double
    ({"backoff_reset_us": 299_999}, "backoff_reset_us", "an integer in [300000, 600000000] us"),
    ({"backoff_reset_us": 50_000}, "backoff_reset_us", "an integer in [300000, 600000000] us"),
])
def test_detector_parameters_out_of_range_are_refused_naming_the_field_and_range(values, field, allowed):
    with pytest.raises(ParameterError) as caught:
        modes.check_parameters(values)
    assert caught.value.field == f"mode_params.{field}"
    assert caught.value.allowed == allowed
    assert f"mode_params.{field}=" in str(caught.value) and allowed in str(caught.value)


@pytest.mark.parametrize("values", [
    {},
    {name: modes.PARAMETERS[name].default for name in modes.MODES["f10"].parameters},
    {"detector_window_periods": 8, "detector_down_below": 7, "detector_up_at_least": 7},
    {"probe_period_us": 5_000, "detector_window_periods": 4, "holddown_us": 20_000, "holddown_max_us": 160_000,
     "backoff_reset_us": 40_000},
])
def test_detector_parameters_that_fit_together_are_accepted(values):
    assert modes.check_parameters(values) == values
