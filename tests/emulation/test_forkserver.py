"""The fork server that starts embedded switch processes: statuses, logs, and signals that always reach a child."""
import os
import signal
import subprocess
import textwrap

import pytest
from repo_paths import REPO

from testbed.emulation.forkserver import ForkServer

CHILD_MODULE = textwrap.dedent("""
    import os
    import sys
    import time


    WARMED = []


    def warm(path):
        WARMED.append(path)


    def main(argv):
        print("child", " ".join(argv), "warmed", *WARMED, os.environ.get("TB_FORKSERVER_TEST"), flush=True)
        if argv[0] == "exit":
            return int(argv[1])
        time.sleep(float(argv[1]))
        return 0
""")


@pytest.fixture
def server(tmp_path, monkeypatch):
    (tmp_path / "forkserver_child.py").write_text(CHILD_MODULE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    server = ForkServer("forkserver_child", log_path=str(tmp_path / "server.log"), warm="program.p4",
                        env={"TB_FORKSERVER_TEST": "set"}).start()
    yield server
    server.stop()


def test_a_child_runs_main_with_its_arguments_and_reports_its_exit_status(server, tmp_path):
    """... after the server warmed the module once (its ``warm(path)``) with the environment it was given."""
    log = tmp_path / "child.log"
    child = server.spawn(["exit", "3"], str(log), name="tb-child")
    assert child.wait(timeout=60) == 3
    assert child.poll() == 3
    assert log.read_text() == "child exit 3 warmed program.p4 set\n"


def test_a_child_leads_its_own_process_group_as_soon_as_spawn_returns(server, tmp_path):
    # the owner stops a switch by signalling its group right away (an interrupted bring-up):
    # the group must exist when spawn returns, or the signal misses and the stop waits forever
    for index in range(40):
        child = server.spawn(["sleep", "60"], str(tmp_path / f"child{index}.log"))
        os.killpg(child.pid, signal.SIGTERM)  # ProcessLookupError if the child had no group yet
        assert child.wait(timeout=60) == -signal.SIGTERM


def test_a_wait_that_times_out_raises_and_a_stopped_server_leaves_children_watchable(server, tmp_path):
    child = server.spawn(["sleep", "60"], str(tmp_path / "child.log"))
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    server.stop()  # nobody reports exits any more: the owner watches the process itself
    assert child.poll() is None
    os.killpg(child.pid, signal.SIGKILL)
    assert child.wait(timeout=60) == -1  # ended, status unknown without the server


SWITCHD_CHILD = textwrap.dedent("""
    import sys

    from testbed.embedded_switch.switchd import warm  # noqa: F401 - the fork server calls it


    def main(argv):
        from testbed.embedded_switch import native_io

        shared = ["grpc._server", "concurrent.futures.thread", "testbed.embedded_switch.native_io.daemon"]
        print(*[name for name in shared if name in sys.modules], "loop library", bool(native_io._loaded), flush=True)
        return 0
""")


def test_a_switch_fork_server_shares_the_native_loop_and_the_grpc_server_code(tmp_path, monkeypatch):
    """What a switch would otherwise import or load after the fork (each switch a copy) is there before it."""
    (tmp_path / "switchd_child.py").write_text(SWITCHD_CHILD)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    program = os.path.join(REPO, "p4src", "ecmp.p4")
    server = ForkServer("switchd_child", log_path=str(tmp_path / "server.log"), warm=program,
                        env={"TESTBED_BACKEND": "native"}).start()
    try:
        child = server.spawn([], str(tmp_path / "child.log"))
        assert child.wait(timeout=60) == 0
    finally:
        server.stop()
    assert (tmp_path / "child.log").read_text() == \
        "grpc._server concurrent.futures.thread testbed.embedded_switch.native_io.daemon loop library True\n"
