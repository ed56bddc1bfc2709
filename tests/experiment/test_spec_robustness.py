"""Experiment specs refuse hostile or broken input cleanly (issue 10): files, YAML, values, sizes.

Every case must end in a :class:`SpecError` naming the field (or ``spec`` for
the file as a whole) with a short message, quickly, and never in another
exception.
"""
import copy
import math
import time

import pytest
import yaml

from testbed.errors import MAX_VALUE_TEXT, SpecError, short_repr
from testbed.experiment.spec import load_spec, parse_spec
from testbed.experiment.spec_yaml import MAX_DEPTH, MAX_EXPANDED_NODES, MAX_SPEC_BYTES

BASE = {
    "name": "unit",
    "seed": 5,
    "topology": {"kind": "clos", "params": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
    "traffic": [{"pattern": "stream", "hosts": ["h1", "h3"], "rate_mbps": 5, "duration_s": 2}],
    "duration_s": 3,
}
BASE_YAML = yaml.safe_dump(BASE, sort_keys=False)
MAX_MESSAGE = 400  # characters: an error message never carries a whole value


def spec_file(tmp_path, content):
    """Write ``content`` (str: UTF-8; bytes as given) to a spec file; return its path."""
    path = tmp_path / "spec.yaml"
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return str(path)


def load_error(path):
    """The SpecError load_spec raises for ``path`` (after checking the message is short)."""
    with pytest.raises(SpecError) as caught:
        load_spec(path, check_machine=False)
    message = str(caught.value)
    assert len(message) <= MAX_MESSAGE and "\n" not in message, message
    return message


def parse_error(data):
    with pytest.raises(SpecError) as caught:
        parse_spec(data, check_machine=False)
    message = str(caught.value)
    assert len(message) <= MAX_MESSAGE, message[:MAX_MESSAGE * 2]
    return message


def with_changes(**paths):
    """BASE with ``a__b__0__c=value`` replacements."""
    data = copy.deepcopy(BASE)
    for path, value in paths.items():
        keys = path.split("__")
        target = data
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return data


def test_the_base_spec_loads(tmp_path):
    assert load_spec(spec_file(tmp_path, BASE_YAML), check_machine=False).name == "unit"


# ----------------------------------------------------------------------------- YAML aliases
def alias_bomb(levels, width=9, field="metrics"):
    """A 'billion laughs' document: ``width ** levels`` strings behind one alias in ``field``."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + f"\n{field}: *l{levels}\n"


def test_an_alias_bomb_is_refused_without_being_expanded(tmp_path):
    path = spec_file(tmp_path, alias_bomb(levels=12))   # 9**12 = 282 billion strings once expanded
    started = time.monotonic()
    message = load_error(path)
    assert time.monotonic() - started < 5
    assert message.startswith("spec: ") and f"more than {MAX_EXPANDED_NODES} values" in message
    assert "aliases" in message


def test_an_alias_bomb_inside_a_known_field_is_refused(tmp_path):
    text = BASE_YAML + alias_bomb(levels=8, field="bomb").replace("bomb: ", "out_dir: ")
    assert "more than" in load_error(spec_file(tmp_path, text))


SPEC_HEAD = "name: unit\nseed: 5\ntopology: {kind: clos, params: {leaves: 2, spines: 2, hosts_per_leaf: 2}}\n"


def test_small_aliases_are_allowed(tmp_path):
    text = SPEC_HEAD + ("traffic:\n"
                        "- {pattern: stream, hosts: &pair [h1, h3], rate_mbps: 1, duration_s: 1}\n"
                        "- {pattern: stream, hosts: *pair, rate_mbps: 2, duration_s: 1}\n")
    spec = load_spec(spec_file(tmp_path, text), check_machine=False)
    assert [entry.hosts for entry in spec.traffic] == [["h1", "h3"], ["h1", "h3"]]


def test_merge_keys_work_and_may_be_overridden(tmp_path):
    text = SPEC_HEAD + ("traffic:\n"
                        "- &first {pattern: stream, hosts: [h1, h3], rate_mbps: 1, duration_s: 1}\n"
                        "- {<<: *first, hosts: [h2, h4], rate_mbps: 3}\n")
    spec = load_spec(spec_file(tmp_path, text), check_machine=False)
    assert (spec.traffic[1].rate_mbps, spec.traffic[1].hosts, spec.traffic[1].duration_s) == (3, ["h2", "h4"], 1)


def test_a_recursive_alias_is_refused(tmp_path):
    message = load_error(spec_file(tmp_path, BASE_YAML + "metrics: &loop [link_load, *loop]\n"))
    assert message.startswith("metrics") and "recursive" in message


# ----------------------------------------------------------------------------- file and text
def test_a_non_utf8_file_is_refused_with_its_line(tmp_path):
    data = BASE_YAML.replace("name: unit", "name: unit\xe9").encode("latin-1")
    assert load_error(spec_file(tmp_path, data)) == "spec: is not UTF-8 text: byte 0xe9 on line 1; save it as UTF-8"


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16"), ("utf-16-be", None), ("utf-32", "UTF-32")])
def test_utf16_and_utf32_files_are_refused(tmp_path, encoding, name):
    message = load_error(spec_file(tmp_path, BASE_YAML.encode(encoding)))
    assert message.startswith("spec: ")
    if name:
        assert f"is {name} text; save it as UTF-8" in message
    else:   # no byte order mark: the NUL bytes make it invalid text
        assert "not" in message


def test_a_utf8_byte_order_mark_is_fine(tmp_path):
    assert load_spec(spec_file(tmp_path, "\ufeff" + BASE_YAML), check_machine=False).name == "unit"


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = spec_file(tmp_path, BASE_YAML + "#" * MAX_SPEC_BYTES + "\n")
    assert f"a spec file has at most {MAX_SPEC_BYTES} bytes" in load_error(path)


@pytest.mark.parametrize("text", ["[" * 100000 + "]" * 100000, "\n" + "- " * 5000 + "x",
                                  "{a: " * 20000 + "1" + "}" * 20000])
def test_very_deep_nesting_is_refused_with_its_line(tmp_path, text):
    message = load_error(spec_file(tmp_path, BASE_YAML + "metrics: " + text + "\n"))
    line = BASE_YAML.count("\n") + 1 + text.startswith("\n")
    assert message == f"spec: is nested more than {MAX_DEPTH} levels deep (line {line})"


def test_nesting_deepened_by_aliases_is_refused(tmp_path):
    lines = ["a0: &a0 [x]"] + [f"a{i}: &a{i} {'[' * 20}*a{i - 1}{']' * 20}" for i in range(1, 30)]
    message = load_error(spec_file(tmp_path, "\n".join(lines) + "\n"))
    assert "levels deep once aliases are expanded" in message


def test_invalid_yaml_is_one_line_with_its_position(tmp_path):
    message = load_error(spec_file(tmp_path, BASE_YAML + "metrics: [link_load\n"))
    assert message.startswith("spec: is not valid YAML: line ")


def test_a_nul_byte_in_the_file_is_refused(tmp_path):
    message = load_error(spec_file(tmp_path, BASE_YAML.replace("unit", "un\x00it")))
    assert message.startswith("spec: is not valid YAML") and "#x0000" in message


def test_an_integer_too_long_for_python_is_refused(tmp_path):
    message = load_error(spec_file(tmp_path, BASE_YAML.replace("seed: 5", "seed: " + "9" * 5000)))
    assert message.startswith("spec: has a value that cannot be read")


# ----------------------------------------------------------------------------- keys
def test_a_duplicate_top_level_key_is_refused_naming_it(tmp_path):
    line = BASE_YAML.count("\n") + 1
    assert load_error(spec_file(tmp_path, BASE_YAML + "seed: 6\n")) == f"seed: is given twice (lines 2 and {line})"


def test_a_duplicate_nested_key_is_refused_with_its_path(tmp_path):
    text = BASE_YAML.replace("rate_mbps: 5", "rate_mbps: 5\n  rate_mbps: 50")
    assert load_error(spec_file(tmp_path, text)).startswith("traffic[0].rate_mbps: is given twice (lines ")


def test_a_huge_unknown_key_is_shortened(tmp_path):
    message = parse_error(dict(BASE, **{"k" * 100000: 1}))
    assert "unknown field" in message


# ----------------------------------------------------------------------------- values
@pytest.mark.parametrize("path, value", [
    ("traffic__0__rate_mbps", math.inf), ("traffic__0__rate_mbps", math.nan), ("traffic__0__start_s", math.nan),
    ("duration_s", math.inf), ("traffic__0__duration_s", math.nan)])
def test_infinities_and_nan_are_refused_as_numbers(path, value):
    field = path.replace("__0__", "[0].")
    assert parse_error(with_changes(**{path: value})).startswith(f"{field}: must be a finite number")


def test_yaml_infinity_is_refused(tmp_path):
    text = BASE_YAML.replace("duration_s: 3", "duration_s: .inf")
    assert load_error(spec_file(tmp_path, text)) == "duration_s: must be a finite number in (0, 86400] (got inf)"


def test_failure_times_and_delays_refuse_nan():
    data = with_changes(failures=[{"at_s": math.nan, "action": "link_down", "link": ["leaf0", "spine0"]}])
    assert parse_error(data).startswith("failures[0].at_s: must be a finite number")
    data = with_changes(controller={"kind": "static", "detection_delay_ms": math.inf})
    assert parse_error(data).startswith("controller.detection_delay_ms: must be a finite number")


@pytest.mark.parametrize("field", ["name", "out_dir"])
@pytest.mark.parametrize("bad", ["un\x00it", "two\nlines", "tab\there", "del\x7f"])
def test_control_characters_are_refused_in_names(field, bad):
    assert parse_error(with_changes(**{field: bad})).startswith(f"{field}: must not contain control characters")


def test_a_nul_byte_in_a_host_name_is_refused():
    message = parse_error(with_changes(traffic__0__hosts=["h1", "h3\x00"]))
    assert message.startswith("traffic[0].hosts[1]: not a host of the topology")


@pytest.mark.parametrize("field, value", [("mode_params", 0), ("mode_params", "x"), ("mode_params", [1]),
                                          ("topology__params", 0), ("topology__params", False),
                                          ("traffic", 0), ("traffic", False), ("failures", 0), ("failures", "")])
def test_falsy_non_mappings_and_non_lists_are_refused(field, value):
    message = parse_error(with_changes(**{field: value}))
    assert message.startswith(field.replace("__", ".") + ": must be a ")


def test_a_huge_seed_is_refused():
    assert parse_error(with_changes(seed=10 ** 5000)) == \
        "seed: must be an integer in [0, 18446744073709551615] (got <an integer of about 5001 digits>)"


@pytest.mark.parametrize("changes, message", [
    ({"duration_s": 1e308}, "duration_s: must be a number in (0, 86400] (got 1e+308)"),
    ({"traffic__0__rate_mbps": 1e308}, "traffic[0].rate_mbps: must be a number in (0, 10000] (got 1e+308)"),
    ({"traffic__0__rate_mbps": 2 ** 64},
     "traffic[0].rate_mbps: must be a number in (0, 10000] (got 18446744073709551616)"),
    ({"traffic__0__start_s": 1e12}, "traffic[0].start_s: must be a number in [0, 86400] (got 1000000000000.0)"),
    ({"traffic__0__duration_s": 1e12}, "traffic[0].duration_s: must be a number in (0, 86400] (got 1000000000000.0)"),
    ({"traffic__0__size_bytes": 2 ** 40}, "traffic[0].size_bytes: must be an integer in [1, 1073741824] (got "),
    ({"controller": {"kind": "static", "detection_delay_ms": 1.8e19}},
     "controller.detection_delay_ms: must be a number in [0, 60000] (got 1.8e+19)"),
    ({"failures": [{"at_s": 1e300, "action": "link_down", "link": ["leaf0", "spine0"]}]},
     "failures[0].at_s: must be a number in [0, 86400] (got 1e+300)"),
    ({"controller": {"kind": "static", "rescheduler_epoch_ms": 1e308}},
     "controller.rescheduler_epoch_ms: must be a number of milliseconds in (0, 3600000] (got 1e+308)"),
    ({"name": "x" * 300}, "name: must be at most 100 bytes (UTF-8) long: it names the results folder (got 'xxx"),
    ({"name": "é" * 51}, "name: must be at most 100 bytes (UTF-8) long"),
    ({"out_dir": "results/" + "y" * 256}, "out_dir: must be a path of at most 1024 bytes whose parts are at most 255"),
])
def test_absurd_values_are_refused_with_the_allowed_range(changes, message):
    """Every numeric field has a range a run on one machine can honour, named in the error (issue: 1e308 s,
    1.8e19 Mbit/s and a 300-character name were accepted)."""
    assert parse_error(with_changes(**changes)).startswith(message)


@pytest.mark.parametrize("kind", ["links", "switches"])
@pytest.mark.parametrize("field, value, message", [
    ("repair_s", {"median": 1.0, "sigma": 1_000_000}, "repair_s.sigma: must be a number in [0, 4] (got 1000000)"),
    ("repair_s", {"median": 1e300, "sigma": 1}, "repair_s.median: must be a number in [0.001, 86400] (got 1e+300)"),
    ("between_failures_s", {"median": 1e-300, "sigma": 1},
     "between_failures_s.median: must be a number in [0.001, 86400] (got 1e-300)"),
    ("between_failures_s", {"median": 0.001, "sigma": 0},
     "between_failures_s: a median that draws at most 10000 failures between start_s and end_s"),
])
def test_failure_trace_distributions_draw_finite_meaningful_values(kind, field, value, message):
    """A log-normal's parameters are bounded so that every draw is finite and the trace has a size a run can
    carry out (sigma 1e6 once crashed load_spec with OverflowError in random.lognormvariate)."""
    process = {"between_failures_s": {"median": 2.0, "sigma": 0.5}, "repair_s": {"median": 1.0, "sigma": 0.5}}
    process[field] = value
    data = with_changes(topology={"kind": "fattree", "params": {"k": 4}}, traffic=[], duration_s=40,
                        failure_trace={"start_s": 1, "end_s": 30, kind: process})
    data.pop("mode", None)
    data.pop("program", None)
    assert parse_error(data).startswith(f"failure_trace.{kind}.{message}")


# ----------------------------------------------------------------------------- message sizes
def test_a_huge_value_is_shortened_in_the_message():
    message = parse_error(with_changes(traffic__0__hosts=["h1", "x" * 1_000_000]))
    assert message.startswith("traffic[0].hosts[1]: not a host of the topology; hosts: h1, h2, h3, h4 (got 'xxx")
    assert "x...x" in message and message.endswith("xxx')")


def test_a_huge_list_is_shortened_in_the_message():
    message = parse_error(with_changes(metrics=list(range(1_000_000))))
    assert message.startswith("metrics[0]: unknown 0; allowed: ")
    message = parse_error(with_changes(traffic__0__hosts=list(range(1_000_000))))
    assert "(got 0)" in message


def test_a_deeply_nested_value_is_shortened_in_the_message():
    deep = []
    for _ in range(100000):
        deep = [deep]
    assert "[[[[[...]]]]]" in parse_error(with_changes(name=deep))


def test_long_host_lists_are_cut_in_messages():
    data = with_changes(topology__params={"leaves": 100, "spines": 2, "hosts_per_leaf": 2},
                        traffic__0__hosts=["h1", "nobody"])
    message = parse_error(data)
    assert "h11, h12, ... (200 in all)" in message


def test_short_repr_is_bounded():
    assert len(short_repr("y" * 10 ** 7)) <= MAX_VALUE_TEXT
    assert short_repr([1, 2]) == "[1, 2]" and short_repr("ab") == "'ab'"


# ----------------------------------------------------------------------------- sizes
@pytest.mark.parametrize("params, field", [
    ({"leaves": 4, "spines": 2, "links_per_pair": 1_000_000}, "links_per_pair"),
    ({"leaves": 10000, "spines": 2, "hosts_per_leaf": 254}, "leaves"),
    ({"leaves": 2, "spines": 2, "uplinks_per_leaf": 10 ** 9}, "uplinks_per_leaf"),
])
def test_a_huge_topology_is_refused_before_it_is_built(params, field):
    started = time.monotonic()
    message = parse_error(with_changes(topology__params=params))
    assert time.monotonic() - started < 5
    assert message.startswith(f"topology.params.{field}: must be ")


def test_a_huge_fattree_or_dsf_is_refused_quickly():
    started = time.monotonic()
    assert parse_error(with_changes(topology={"kind": "fattree", "params": {"k": 1000}})).startswith(
        "topology.params.k: must be an even integer from 2 to 254")
    assert parse_error(with_changes(topology={"kind": "dsf", "params": {"clusters": 100000}})).startswith(
        "topology.params.clusters: must be ")
    assert parse_error(with_changes(topology={"kind": "clos3", "params": {"spine_core_links": 10 ** 6}})).startswith(
        "topology.params.spine_core_links: must be an integer from 1 to ")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("section, problem", [
    ({"queue_frames": 64}, "only with shape_links: true"),
    ({"shape_links": True, "queue_frames": 0}, "an integer in [1, 100000]"),
    ({"shape_links": True, "queue_frames": 2.5}, "an integer in [1, 100000]"),
    ({"shape_links": True, "queue_frames": "deep"}, "an integer in [1, 100000]"),
])
def test_a_bad_queue_length_is_refused_naming_the_field(section, problem):
    data = copy.deepcopy(BASE)
    data["topology"].update(section)
    message = parse_error(data)
    assert "topology.queue_frames" in message and problem in message


def test_the_queue_length_reaches_the_topology_spec():
    data = copy.deepcopy(BASE)
    data["topology"].update(shape_links=True, queue_frames=64)
    spec = parse_spec(data, check_machine=False)
    assert spec.topology.queue_frames == 64 and spec.to_dict()["topology"]["queue_frames"] == 64
    assert parse_spec(copy.deepcopy(BASE), check_machine=False).topology.queue_frames is None
