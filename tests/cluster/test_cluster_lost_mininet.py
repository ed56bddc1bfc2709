"""A server lost while a fabric runs on it: the run ends with an error naming the server, this side
keeps nothing of the run, and ``testbed cleanup --servers`` removes what the run left on the server.

Two ways to lose the simulated server: its network is cut (the server keeps running what the run
left there, as a real server behind a broken link does) or it is switched off (``testbed server
sim down``: everything there ends with it); and an experiment whose server is cut off while its
traffic flows.  And the ``Fabric`` API over a server cut off under it.
"""
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from testbed.emulation.cleanup import OWNER_ENV, leftovers
from testbed.emulation.cluster import simserver
from testbed.emulation.cluster.servers import WATCH_TIMEOUT_S
from testbed.errors import EmulationError
from testbed.pytest_plugin import SIMULATED_SERVER, SIMULATED_SERVER_INDEX

from repo_paths import REPO

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

#: the run must end within this long after the server is lost (its watch gives up after 6 s;
#: teardown on a loaded machine takes the rest)
ENDS_WITHIN_S = 90


def _start_run(state):
    environment = {name: value for name, value in os.environ.items() if name != "TESTBED_OWNER"}
    run = subprocess.Popen([sys.executable, "-m", "testbed.cli", "net", "up", "fattree", "k=4", "--program", "ecmp",
                            "--servers", SIMULATED_SERVER, "--no-cli", "--hold", "600", "--quiet",
                            "--state-file", str(state)],
                           env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not state.exists():
        assert run.poll() is None, run.stderr.read()
        assert time.monotonic() < deadline, "the fabric did not come up"
        time.sleep(0.2)
    return run, json.loads(state.read_text())["switches"]


def _ends_naming_the_server(run, address):
    try:
        _, errors = run.communicate(timeout=ENDS_WITHIN_S)
    except subprocess.TimeoutExpired:
        run.kill()
        run.communicate()
        pytest.fail(f"the run did not end within {ENDS_WITHIN_S} s of losing its server")
    assert run.returncode != 0
    assert f"server {SIMULATED_SERVER} ({address}) became unreachable" in errors, errors
    assert f"testbed cleanup --servers {SIMULATED_SERVER}" in errors, errors


def _nothing_of_the_run_here(run, switches):
    """Nothing of the run on this machine (the simulated server shares its process table: what runs
    in the server's namespace is the server's)."""
    on_server = set(simserver.processes(SIMULATED_SERVER))
    assert [process for process in leftovers(owner=run.pid)["processes"] if process[0] not in on_server] == []
    assert not [name for name in leftovers()["interfaces"] if name.split("-eth")[0] in switches]


def _marks_on_server(server):
    listing = server.run(f"{sys.executable} -m testbed.cli cleanup --server-marks {server.name}")
    assert listing.returncode == 0, listing.stderr
    return {int(owner): counts for owner, counts in json.loads(listing.stdout or "{}").items()}


def _cut_off(run, address):
    """Cut the simulated server's network until the run ended naming it, then join it again."""
    veth = f"tbsrv{SIMULATED_SERVER_INDEX}"
    try:
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)
        _ends_naming_the_server(run, address)
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
        if run.poll() is None:
            run.kill()
            run.wait()


def _cleaned_once_back(run, server):
    """What the run left on the server (it never heard the run end) goes with ``testbed cleanup --servers``."""
    left = _marks_on_server(server)
    assert left.get(run.pid, {}).get("interfaces", 0) > 0, left
    cleaned = subprocess.run([sys.executable, "-m", "testbed.cli", "cleanup", "--servers", SIMULATED_SERVER],
                             capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"{SIMULATED_SERVER}: run {run.pid}" in cleaned.stdout, cleaned.stdout
    assert run.pid not in _marks_on_server(server)


def test_an_experiment_whose_server_is_cut_off_fails_naming_it(simulated_server, tmp_path):
    with open(os.path.join(REPO, "experiments", "leafspine_failure_ci.yaml")) as handle:
        data = yaml.safe_load(handle)
    data["traffic"][0]["duration_s"], data["duration_s"], data["failures"] = 60, 61, []
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    environment = {name: value for name, value in os.environ.items() if name != "TESTBED_OWNER"}
    run = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(spec), "--servers", SIMULATED_SERVER,
                            "--out", str(tmp_path / "out")], env=environment, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    for line in run.stdout:  # until the traffic flows (the whole fabric up, its cross link measured)
        if "running 1 traffic entries" in line:
            break
    else:
        run.wait()
        pytest.fail(f"the experiment never ran its traffic: {run.stderr.read()}")
    _cut_off(run, simulated_server.address)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["status"] == "error" and f"server {SIMULATED_SERVER}" in results["error"], results["error"]
    assert results["cluster"]["cross_link_measured"]["rate_mbps"] > 0
    _cleaned_once_back(run, simulated_server)


def test_a_server_cut_off_mid_run_is_named_and_cleaned_once_back(simulated_server, tmp_path):
    run, switches = _start_run(tmp_path / "net.json")
    _cut_off(run, simulated_server.address)
    _nothing_of_the_run_here(run, switches)
    _cleaned_once_back(run, simulated_server)
    remote_links = subprocess.run(["ip", "-n", SIMULATED_SERVER, "-o", "link", "show"], capture_output=True,
                                  text=True).stdout
    assert [line.split(":")[1].strip().split("@")[0] for line in remote_links.splitlines()] == ["lo", "eth0"]


def test_a_server_switched_off_mid_run_is_named_and_nothing_is_left(simulated_server, tmp_path):
    run, switches = _start_run(tmp_path / "net.json")
    try:
        assert simserver.down(SIMULATED_SERVER_INDEX)
        _ends_naming_the_server(run, simulated_server.address)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        # back, as a machine switched on again (the fixture checks it)
        simserver.up(SIMULATED_SERVER_INDEX, holder=os.getpid())
    _nothing_of_the_run_here(run, switches)
    assert simserver.processes(SIMULATED_SERVER) == [simserver.load(SIMULATED_SERVER)["sshd_pid"]]


def test_the_fabric_api_names_a_server_cut_off_under_it(simulated_server, fabric_factory):
    """A Fabric call that fails because its server is lost (here a counter read over P4Runtime) raises
    the lost server's error, and so does every call after it, at once."""
    fabric = fabric_factory("clos", leaves=2, spines=2, hosts_per_leaf=1, program="ecmp", controller="static",
                            servers=[SIMULATED_SERVER])
    placement = fabric.describe()["cluster"]["placement"]
    remote = next(switch.name for switch in fabric.switches if placement[switch.name] == SIMULATED_SERVER)
    assert fabric.read_counter(remote, "MyEgress.egress_port_counter")  # answers while its server does
    lost = f"server {SIMULATED_SERVER} \\({simulated_server.address}\\) became unreachable"
    veth = f"tbsrv{SIMULATED_SERVER_INDEX}"
    subprocess.run(["ip", "link", "set", veth, "down"], check=True)
    try:
        with pytest.raises(EmulationError, match=lost):
            fabric.read_counter(remote, "MyEgress.egress_port_counter")
        started = time.monotonic()
        with pytest.raises(EmulationError, match=lost):
            fabric.ping("h1", "h2")
        assert time.monotonic() - started < WATCH_TIMEOUT_S  # named before anything is tried
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
    with pytest.raises(EmulationError, match=f"server {SIMULATED_SERVER} .*stays until `testbed cleanup --servers"):
        fabric.stop()  # tries nothing more on the lost server: what is left there goes with the owner's cleanup
    owner = os.environ[OWNER_ENV]
    cleaned = simulated_server.run(f"{sys.executable} -m testbed.cli cleanup --server-marks {SIMULATED_SERVER} "
                                   f"--owners {owner}")
    assert cleaned.returncode == 0, cleaned.stderr
