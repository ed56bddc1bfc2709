"""A simulated server goes with the test session it was brought up for.

A pytest session (its own process here) brings up the simulated server with the plugin's
``simulated_server`` fixture and a fabric over both servers, and is killed with SIGKILL:
no fixture teardown runs.  ``testbed cleanup`` (no ``--all``) then takes the server down,
because the process it was up for is gone, and removes what the session left here.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from testbed.emulation.cleanup import leftovers
from testbed.emulation.cluster import simserver
from testbed.pytest_plugin import SIMULATED_SERVER

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

SESSION = """
import pathlib
import time

from testbed.pytest_plugin import SIMULATED_SERVER


def test_holds_a_fabric_over_two_servers(simulated_server, fabric_factory):
    fabric_factory("clos", leaves=2, spines=2, hosts_per_leaf=1, program="ecmp", controller="static",
                   servers=[SIMULATED_SERVER])
    pathlib.Path("up").write_text("up")
    time.sleep(600)  # until killed
"""


def test_a_killed_sessions_simulated_server_is_taken_down_by_cleanup(tmp_path):
    (tmp_path / "test_session.py").write_text(SESSION)
    environment = {name: value for name, value in os.environ.items() if name != "TESTBED_OWNER"}
    session = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_session.py"],
                               cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "up").exists():
            if session.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the session's fabric did not come up: {session.stdout.read().decode()[-2000:]}")
            time.sleep(0.2)
        assert simserver.load(SIMULATED_SERVER)["holder_pid"] == session.pid
        assert len(simserver.processes(SIMULATED_SERVER)) > 1  # sshd and the fabric's processes there
    finally:
        session.send_signal(signal.SIGKILL)
        session.wait()
        session.stdout.close()
    assert simserver.orphaned() == [SIMULATED_SERVER]
    listed = subprocess.run([sys.executable, "-m", "testbed.cli", "cleanup", "--dry-run"], capture_output=True,
                            text=True, timeout=60)
    assert f"simulated server (the process it was up for is gone): {SIMULATED_SERVER}" in listed.stdout
    cleaned = subprocess.run([sys.executable, "-m", "testbed.cli", "cleanup"], capture_output=True, text=True,
                             timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"taking down simulated server {SIMULATED_SERVER}" in cleaned.stdout, cleaned.stdout
    assert simserver.load(SIMULATED_SERVER) is None and simserver.processes(SIMULATED_SERVER) == []
    assert SIMULATED_SERVER not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left = leftovers(owner=session.pid)
    assert not left["processes"] and not left["interfaces"] and not left["temp_paths"], left
    again = subprocess.run([sys.executable, "-m", "testbed.cli", "cleanup", "--dry-run"], capture_output=True,
                           text=True, timeout=60)
    assert "nothing left behind" in again.stdout, again.stdout
