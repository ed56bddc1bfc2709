"""A server that lacks what a run needs is refused before anything starts, naming it and what it lacks.

The simulated server hides files (``testbed server sim up --hide``: an empty file mounted over each
in its mount namespace): once BMv2's binary, once the C compiler (the native backend), once one of the
project's own data files, which gives it other sources under the same ``testbed.__version__``.
"""
import os
import re
import shutil

import pytest

import testbed
from testbed import topologies
from testbed.emulation.cleanup import leftovers
from testbed.emulation.cluster import simserver
from testbed.emulation.cluster.servers import check_servers, resolve_all
from testbed.errors import EmulationError
from testbed.fabrics import Fabric
from testbed.p4.native.build import unavailable

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

INDEX = 8  # tb-srv8: beside the fixture's simulated server, never in its way


@pytest.fixture
def server_lacking():
    """``start(hide)``: simulated server tb-srv8 without the files ``hide``; down after the test."""
    def start(hide):
        return simserver.up(INDEX, hide=hide, holder=os.getpid())["name"]
    yield start
    simserver.down(INDEX)


def _fabric(name, target, tmp_path, **options):
    return Fabric("clos", leaves=2, spines=1, hosts_per_leaf=1, program="ecmp", controller="static", target=target,
                  servers=[name], placement={"leaf1": name}, log_dir=str(tmp_path / "logs"), **options)


@pytest.mark.bmv2
def test_a_server_without_bmv2_is_refused_for_bmv2_and_fine_for_the_embedded_target(server_lacking, tmp_path):
    name = server_lacking([shutil.which("simple_switch_grpc")])
    fabric = _fabric(name, "bmv2", tmp_path)
    with pytest.raises(EmulationError, match=rf"servers not ready: server {name} \(198\.18\.8\.2\) lacks: BMv2"):
        fabric.start()
    assert fabric.network is None and leftovers(owner=os.getpid())["processes"] == []
    check_servers(resolve_all([name]), "embedded", "vxlan")  # nothing else missing


@pytest.mark.skipif(unavailable() is not None, reason=f"the native backend cannot run here: {unavailable()}")
def test_a_server_without_a_c_compiler_is_refused_for_the_native_backend(server_lacking, tmp_path):
    name = server_lacking([os.path.realpath(shutil.which("gcc"))])
    # auto chooses native here, so switches there must be able to run it too
    for backend in ("native", "auto"):
        fabric = _fabric(name, "embedded", tmp_path, backend=backend)
        with pytest.raises(EmulationError, match=rf"server {name} \(198\.18\.8\.2\) lacks: the native backend "
                                                 r"\(a C compiler and cffi\)$"):
            fabric.start()
        assert fabric.network is None and leftovers(owner=os.getpid())["processes"] == []
    check_servers(resolve_all([name]), "embedded", "vxlan", "python")  # nothing else missing


def test_a_server_with_other_project_sources_is_refused(server_lacking, tmp_path):
    data = os.path.join(os.path.dirname(topologies.__file__), "data", "switches.json")
    name = server_lacking([data])
    version = re.escape(testbed.__version__)
    with pytest.raises(EmulationError, match=rf"server {name} .*lacks: the testbed project as here \({version}, "
                                             r"sources [0-9a-f]{12}\)$"):
        _fabric(name, "embedded", tmp_path).start()
    assert leftovers(owner=os.getpid())["processes"] == []
