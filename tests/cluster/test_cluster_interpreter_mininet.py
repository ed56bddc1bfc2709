"""A server whose project lives elsewhere: its ``servers`` entry names the interpreter there.

The simulated server shares this machine's files, so "elsewhere" is a second checkout: a copy of
this one's sources in a temporary folder, installed (editable) into a virtual environment of its
own that takes the other packages from the project's environment.  A fabric over both servers runs
its remote switches and traffic with that interpreter, from that copy; a path that is no
interpreter there is refused before anything starts, naming the server.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest

from testbed.emulation.cleanup import leftovers
from testbed.errors import EmulationError, ParameterError
from testbed.fabrics import Fabric
from testbed.pytest_plugin import SIMULATED_SERVER
from testbed.emulation.cluster.servers import resolve

from repo_paths import REPO

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

#: what a checkout holds that an install does not need
NOT_COPIED = shutil.ignore_patterns(".git", "results", "out", "build", "dist", "__pycache__", "*.egg-info",
                                    ".pytest_cache", ".benchmarks")


@pytest.fixture(scope="module")
def second_checkout():
    """``(interpreter, checkout)``: a copy of the project in its own folder and virtual environment
    (under /var/tmp: the simulated server has a /tmp of its own)."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="testbed-second-checkout-", dir="/var/tmp"))
    try:
        checkout, venv = base / "testbed", base / "venv"
        shutil.copytree(REPO, checkout, ignore=NOT_COPIED)
        # the base interpreter, not this venv's: a venv made from a venv would not see the packages below
        subprocess.run([sys._base_executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        # the project's dependencies from this environment (its own editable finder is not read from there)
        with open(os.path.join(site, "project-dependencies.pth"), "w") as handle:
            handle.write(sysconfig.get_paths()["purelib"] + "\n")
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                        "-e", str(checkout)], check=True, capture_output=True, timeout=300)
        yield python, str(checkout)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _fabric(server, tmp_path):
    return Fabric("clos", leaves=2, spines=1, hosts_per_leaf=1, program="ecmp", controller="static",
                  target="embedded", servers=[server], placement={"leaf1": SIMULATED_SERVER, "h2": SIMULATED_SERVER},
                  log_dir=str(tmp_path / "logs"))


def test_a_server_runs_the_interpreter_its_entry_names(simulated_server, second_checkout, tmp_path):
    python, checkout = second_checkout
    where = subprocess.run([python, "-c", "import testbed.fabrics as m; print(m.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where == os.path.join(checkout, "testbed", "fabrics.py")  # the copy, not this checkout
    fabric = _fabric({"host": SIMULATED_SERVER, "python": python}, tmp_path)
    with fabric:
        assert fabric.unreachable_pairs() == []
        # the remote switch's process (the simulated server shares this machine's process table; the
        # local ssh that started it names the same command, and is left out)
        lines = subprocess.run(["pgrep", "-f", "-a", "embedded_switch.switchd --name leaf1 "],
                               capture_output=True, text=True).stdout.splitlines()
        started = [line.split()[1] for line in lines if line.split()[1] != "ssh"]
        assert started == [python], lines
        report = fabric.stream([("h1", "h2")], duration=1.0, qps=1, rate_mbps=1.0, mtu=512)
        assert report["sent_packets"] > 0 and report["lost_packets"] == 0, report
        described = {entry["name"]: entry for entry in fabric.network.cluster_summary()["servers"]}
        assert described[SIMULATED_SERVER]["python"] == python and "python" not in described["localhost"]
    assert leftovers(owner=os.getpid())["processes"] == []


def test_an_interpreter_that_is_not_there_is_refused_naming_the_server(simulated_server, tmp_path):
    missing = str(tmp_path / "no-such-venv" / "bin" / "python")
    with pytest.raises(EmulationError, match=rf"server {SIMULATED_SERVER} .*lacks: the Python interpreter "
                                             rf"{missing}; the testbed project as here"):
        _fabric({"host": SIMULATED_SERVER, "python": missing}, tmp_path).start()
    assert leftovers(owner=os.getpid())["processes"] == []
    with pytest.raises(ParameterError, match="an absolute path of the Python interpreter"):
        resolve({"host": SIMULATED_SERVER, "python": "venv/bin/python"})
