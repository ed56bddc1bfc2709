"""``testbed topo`` CLI: kinds, show, export (json/dot/png), help and error exits."""
import json
import re
import subprocess
import sys

import pytest

from testbed.cli import main
from testbed.topologies.registry import TOPOLOGY_KINDS


def run(capsys, *argv):
    """Run the CLI in-process; return (status, stdout, stderr)."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("argv", [["topo"], ["topo", "kinds"], ["topo", "show"], ["topo", "export"]])
def test_help_everywhere(capsys, argv):
    with pytest.raises(SystemExit) as caught:
        main(argv + ["--help"])
    assert caught.value.code == 0
    assert "usage: testbed topo" in capsys.readouterr().out


def test_kinds_lists_every_kind_with_defaults(capsys):
    status, out, _ = run(capsys, "topo", "kinds")
    assert status == 0
    for kind in TOPOLOGY_KINDS:
        assert re.search(rf"^{kind}: ", out, re.M)
    assert re.search(r"^\s+k\s+default 4\b", out, re.M)
    status, out, _ = run(capsys, "topo", "kinds", "--json")
    data = json.loads(out)
    assert [entry["kind"] for entry in data] == list(TOPOLOGY_KINDS)
    fattree = next(entry for entry in data if entry["kind"] == "fattree")
    assert {"name": "levels", "default": 2} in [{k: p[k] for k in ("name", "default")} for p in fattree["parameters"]]


def test_show_prints_the_summary_table(capsys):
    status, out, _ = run(capsys, "topo", "show", "abfattree", "k=4")
    assert status == 0
    assert re.search(r"^host nodes\s+16$", out, re.M)
    assert re.search(r"^edge nodes\s+8$", out, re.M)
    assert re.search(r"^agg nodes\s+8$", out, re.M)
    assert re.search(r"^core nodes\s+4$", out, re.M)
    status, out, _ = run(capsys, "topo", "show", "clos", "leaves=3", "spines=2", "hosts_per_leaf=1,2,3",
                         "bundle_matrix=1,2;2,1;0,3", "--json")
    rows = json.loads(out)
    assert rows["leaf nodes"] == 3 and rows["host nodes"] == 6 and rows["leaf-spine links"] == 9


@pytest.mark.parametrize("argv,needle", [
    (["topo", "show", "fattree", "k=5"], "k=5"),
    (["topo", "show", "fattree", "radix=4"], "radix"),
    (["topo", "show", "torus"], "fattree"),
    (["topo", "show", "fattree", "k"], "key=value"),
    (["topo", "export", "clos", "hosts_per_leaf=0"], "hosts_per_leaf"),
    (["topo", "export", "dsf", "--format", "png"], "-o"),
])
def test_bad_parameters_exit_2_with_the_message(capsys, argv, needle):
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert "error" in err and needle in err


def test_export_json_to_stdout_and_file(capsys, tmp_path):
    status, out, _ = run(capsys, "topo", "export", "fattree", "k=4", "--format", "json")
    assert status == 0
    data = json.loads(out)
    assert data["kind"] == "fattree" and data["params"]["k"] == 4
    assert sum(1 for n in data["nodes"] if n["role"] == "host") == 16
    assert len(data["links"]) == 48
    target = tmp_path / "ft.json"
    status, out, _ = run(capsys, "topo", "export", "fattree", "k=4", "-f", "json", "-o", str(target))
    assert status == 0 and "wrote" in out
    assert json.loads(target.read_text()) == data


def test_export_dot(capsys):
    status, out, _ = run(capsys, "topo", "export", "dsf", "--format", "dot")
    assert status == 0
    assert out.startswith('graph "dsf" {') and out.rstrip().endswith("}")
    assert out.count(" -- ") == 48  # parallel links stay separate edges
    assert out.count("rank=same") == 4  # hosts, rdsw, fdsw, sdsw
    assert out.count("{") == out.count("}")


@pytest.mark.parametrize("argv", [["fattree", "k=4"], ["dsf"]])
def test_export_png(capsys, tmp_path, argv):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image

    target = tmp_path / "topo.png"
    status, out, _ = run(capsys, "topo", "export", *argv, "--format", "png", "-o", str(target))
    assert status == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(str(target))
    height, width = image.shape[:2]
    assert width > height > 300
    # not a blank canvas
    assert image[..., :3].std() > 0.05


def test_console_entry_point_runs_in_a_subprocess():
    result = subprocess.run([sys.executable, "-m", "testbed.cli", "topo", "show", "dsf", "clusters=1", "sdsw=0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^rdsw nodes\s+4$", result.stdout, re.M)
