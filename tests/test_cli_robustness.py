"""``testbed topo`` / ``design`` / ``p4 check -D`` refuse absurd or broken input with one line (issue 10).

Each case runs the CLI in-process (:func:`testbed.cli.main`): exit status
not 0, exactly one line on standard error, no exception, and (for sizes)
quickly; one case runs the console script in a subprocess to see the real
process exit.
"""
import subprocess
import sys
import time

import pytest

from testbed.cli import main
from testbed.topologies.base import MAX_SWITCH_PORT

TIME_LIMIT_S = 30  # generous for a loaded machine; the refusals take well under a second, the old runs minutes


def run_cli(capsys, *argv):
    """Run ``testbed ARGV`` in-process; return (status, stdout, stderr, seconds)."""
    started = time.monotonic()
    status = main(list(argv))
    seconds = time.monotonic() - started
    captured = capsys.readouterr()
    return status, captured.out, captured.err, seconds


def refused(capsys, *argv):
    """The one line ``testbed ARGV`` prints on stderr when it refuses (checked: status, one line, time)."""
    status, out, err, seconds = run_cli(capsys, *argv)
    assert status != 0, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert seconds < TIME_LIMIT_S, seconds
    return err.strip()


def test_the_console_script_refuses_absurd_sizes_in_one_line():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "topo", "show", "clos", "links_per_pair=1000000"],
                          capture_output=True, text=True, timeout=300)
    assert time.monotonic() - started < 4 * TIME_LIMIT_S
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        "testbed topo: error: invalid links_per_pair=1000000: allowed values are an integer from 1 to 63 "
        "(a spine would use 4000000 ports; switch ports are 1..254 (9-bit v1model ports, 255 is the programs' "
        "CPU port))"]


@pytest.mark.parametrize("action", ["show", "export"])
def test_absurd_links_per_pair_is_refused_with_the_allowed_range(capsys, action):
    line = refused(capsys, "topo", action, "clos", "links_per_pair=1000000")
    assert "invalid links_per_pair=1000000: allowed values are an integer from 1 to 63" in line
    assert f"ports are 1..{MAX_SWITCH_PORT}" in line


@pytest.mark.parametrize("params, needle", [
    (["leaves=10000", "hosts_per_leaf=254"], "invalid leaves=10000: allowed values are a value that gives at most"),
    (["uplinks_per_leaf=1000000"], "invalid uplinks_per_leaf=1000000: allowed values are an integer from 1 to "),
    (["oversubscription=0.00001"], "invalid oversubscription=1e-05: allowed values are a ratio >= "),
    (["leaves=2", "spines=2", "bundle_matrix=1,2;2,100000"], "invalid bundle_matrix="),
    (["spines=400"], "invalid spines=400"),
    (["hosts_link_mbps=inf"], "invalid hosts_link_mbps=inf: allowed values are a finite number > 0"),
])
def test_absurd_clos_sizes_are_refused(capsys, params, needle):
    assert needle in refused(capsys, "topo", "show", "clos", *params)


@pytest.mark.parametrize("kind, params, needle", [
    ("fattree", ["k=100000"], "invalid k=100000: allowed values are an even integer from 2 to 254"),
    ("clos3", ["leaf_spine_links=1000000"],
     "invalid leaf_spine_links=1000000: allowed values are an integer from 1 to"),
    ("dsf", ["fdsw_sdsw_links=1000000"], "invalid fdsw_sdsw_links=1000000: allowed values are an integer from 1 to"),
    ("dsf", ["clusters=1000000"], "invalid clusters=1000000"),
])
def test_absurd_sizes_of_other_kinds_are_refused(capsys, kind, params, needle):
    assert needle in refused(capsys, "topo", "show", kind, *params)


def test_the_largest_allowed_links_per_pair_builds(capsys):
    status, out, err, _ = run_cli(capsys, "topo", "show", "clos", "links_per_pair=63", "--json")
    assert status == 0, err


@pytest.mark.parametrize("fmt", ["json", "dot", "png"])
def test_export_into_a_missing_directory_is_a_clean_error(capsys, tmp_path, fmt):
    target = tmp_path / "missing" / f"topo.{fmt}"
    line = refused(capsys, "topo", "export", "clos", "--format", fmt, "-o", str(target))
    assert line == (f"testbed topo: error: invalid --output='{target}': allowed values are a file in an existing "
                    f"directory ({tmp_path / 'missing'} does not exist)")
    assert not target.parent.exists()


def test_export_onto_a_directory_is_a_clean_error(capsys, tmp_path):
    line = refused(capsys, "topo", "export", "clos", "--format", "png", "-o", str(tmp_path))
    assert "(it is a directory)" in line
    assert not (tmp_path.parent / (tmp_path.name + ".png")).exists()


def test_export_into_an_unwritable_file_is_a_clean_error(capsys, tmp_path):
    target = tmp_path / "topo.json"
    target.mkdir()  # a directory where the file should go, inside an existing directory
    assert "it is a directory" in refused(capsys, "topo", "export", "clos", "-o", str(target))


@pytest.mark.parametrize("option", ["--max-cost", "--max-watts", "--max-rack-units"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_design_limits_must_be_finite(capsys, option, value):
    line = refused(capsys, "design", "--nodes", "128", "--example-db", f"{option}={value}")
    assert f"invalid {option}={float(value)!r}: allowed values are a finite number >= 0" in line


@pytest.mark.parametrize("option", ["--hosts-link-mbps", "--fabric-link-mbps"])
def test_design_capacities_must_be_finite(capsys, tmp_path, option):
    line = refused(capsys, "design", "--nodes", "128", "--edge-ports", "36", "--core-ports", "36",
                   "--emit-topology", str(tmp_path / "t.json"), f"{option}=nan")
    assert f"invalid {option}=nan" in line


def test_design_refuses_node_counts_too_large_to_list(capsys):
    line = refused(capsys, "design", "--nodes", "1000000000", "--edge-ports", "48", "--core-ports", "1000000000")
    assert "invalid --nodes=1000000000: allowed values are an integer from 1 to 10000000" in line


def test_design_emit_topology_into_a_missing_directory_is_a_clean_error(capsys, tmp_path):
    line = refused(capsys, "design", "--nodes", "128", "--edge-ports", "36", "--core-ports", "36",
                   "--emit-topology", str(tmp_path / "missing" / "t.json"))
    assert "cannot write topology file" in line


P4_PROGRAM = """#include <core.p4>
#include <v1model.p4>
const bit<8> X = A;
struct h_t {} struct m_t {}
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) { state start { transition accept; } }
control C(inout h_t h, inout m_t m) { apply {} }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control D(packet_out p, in h_t h) { apply {} }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""


@pytest.mark.parametrize("definition", ["A=1\n#error injected", "A=1\r2", "A=\x01", "=1", "1A=2", "A(x)=x"])
def test_malformed_definitions_are_refused(capsys, tmp_path, definition):
    program = tmp_path / "m.p4"
    program.write_text(P4_PROGRAM)
    line = refused(capsys, "p4", "check", str(program), "-D", definition)
    assert line.startswith("invalid -D=")


def test_a_one_line_definition_is_used(capsys, tmp_path):
    program = tmp_path / "m.p4"
    program.write_text(P4_PROGRAM)
    status, out, err, _ = run_cli(capsys, "p4", "check", str(program), "-D", "A=8w7")
    assert status == 0 and out.startswith("program m:"), err
