"""``testbed cleanup`` removes what testbed runs that are gone left behind, and nothing else on the machine.

Needs root (veth pairs in the root namespace), hence the ``mininet`` marker.
"""
import os
import random
import subprocess
import sys
import time

import pytest

from testbed.emulation.cleanup import OWNER_ENV, cleanup, cleanup_plan, mininet_interfaces, owner_interface_group
from testbed.topologies.registry import make_topology
from testbed.pytest_plugin import BOTH_TARGETS

pytestmark = pytest.mark.mininet


def veth_pair(name, group=None):
    """Create ``<name>-eth1``/``<name>-eth2`` (Mininet-style names) in ``group`` (None: the default group)."""
    where = f" group {group}" if group is not None else ""
    subprocess.run(f"ip link add {name}-eth1{where} type veth peer name {name}-eth2{where}", shell=True,
                   check=True)


def exists(interface):
    return subprocess.run(["ip", "link", "show", interface], capture_output=True).returncode == 0


def sleeper(owner=None, argv0="sleep"):
    env = {key: value for key, value in os.environ.items() if key != OWNER_ENV}
    if owner is not None:
        env[OWNER_ENV] = str(owner)
    return subprocess.Popen(["bash", "-c", f"exec -a {argv0} sleep 300"], env=env)


@pytest.fixture
def scene():
    """A gone owner's leftovers, a running owner's network, and look-alikes that are not the testbed's."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names an owner that is gone
    live_owner = sleeper()
    processes = {
        "orphan": sleeper(gone.pid, argv0="testbed.embedded_switch.switchd"),
        "live": sleeper(live_owner.pid, argv0="testbed.embedded_switch.switchd"),
        "stranger": sleeper(argv0="simple_switch_grpc"),  # named like a switch, no testbed mark
    }
    veth_pair("tbgone", owner_interface_group(gone.pid, 1))
    veth_pair("tblive", owner_interface_group(live_owner.pid, 1))
    veth_pair("tbother")  # named like Mininet's, default group
    try:
        yield gone.pid, live_owner.pid, processes
    finally:
        for process in list(processes.values()) + [live_owner]:
            process.kill()
            process.wait()
        for name in ("tbgone", "tblive", "tbother"):
            subprocess.run(["ip", "link", "del", f"{name}-eth1"], capture_output=True)


def test_cleanup_removes_a_gone_owners_leftovers_and_leaves_everything_else(scene):
    gone, live_owner, processes = scene
    plan = cleanup_plan()
    assert [pid for pid, _ in plan["processes"] if pid in {p.pid for p in processes.values()}] == \
        [processes["orphan"].pid]
    assert live_owner in plan["running_owners"]
    lines = []
    cleanup(log=lines.append)
    assert processes["orphan"].wait(timeout=30) is not None
    assert processes["live"].poll() is None and processes["stranger"].poll() is None
    assert not exists("tbgone-eth1") and not exists("tbgone-eth2")
    assert exists("tblive-eth1") and exists("tbother-eth1")
    assert any(str(live_owner) in line and "left alone" in line for line in lines), lines


def test_cleanup_all_also_removes_running_owners_networks_but_never_unmarked_ones(scene):
    _gone, _live_owner, processes = scene
    cleanup(log=lambda _line: None, include_running=True)
    assert processes["live"].wait(timeout=30) is not None
    assert processes["stranger"].poll() is None
    assert not exists("tblive-eth1") and exists("tbother-eth1")


#: the processes of one switch, by target: the embedded target's switch processes (and their fork
#: server), BMv2's simple_switch_grpc
FATTREE_K4_SWITCHES = set(make_topology("fattree", k=4).switches())
SWITCH_PROCESS = {"embedded": ("switchd", "forkserver"), "bmv2": ("simple_switch_grpc",)}


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_cleanup_removes_everything_a_run_killed_with_sigkill_left(tmp_path, no_leftovers, target):
    # no teardown runs on SIGKILL: its switches, node shells and veth pairs stay until `testbed cleanup`
    env = {key: value for key, value in os.environ.items() if key != OWNER_ENV}  # the run owns itself
    run = subprocess.Popen([sys.executable, "-m", "testbed.cli", "net", "up", "fattree", "k=4", "--program", "ecmp",
                            "--target", target, "--no-cli", "--state-file", str(tmp_path / "net.json")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        output = []
        for line in run.stdout:
            output.append(line)
            if line.startswith("holding"):
                break
        else:
            pytest.fail("the fabric never came up:\n" + "".join(output[-30:]))
        run.kill()
        run.wait()
        run.stdout.close()
        left = cleanup_plan()
        switches = [cmd for _pid, cmd in left["processes"] if any(word in cmd for word in SWITCH_PROCESS[target])]
        assert len(switches) >= 20
        if target == "embedded":  # BMv2's ports live in the switches' own namespaces, which go with them
            assert sum(len(names) for names in left["interface_groups"].values()) >= 64
        assert left["temp_paths"]
        cleanup(log=lambda _line: None)
        assert not any(cleanup_plan()[kind] for kind in ("processes", "interface_groups", "temp_paths"))
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


KILL_RUNS = int(os.environ.get("TESTBED_KILL_RUNS", "3"))  # TESTBED_KILL_RUNS=20 for the long check
KILL_SEED = 20261126


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_runs_killed_at_random_moments_leave_nothing_after_one_cleanup(no_leftovers, target):
    # SIGKILL at a seeded random moment of bring-up or of a running fabric: whatever the run had
    # started by then, one `testbed cleanup` removes it all
    rng = random.Random(f"{KILL_SEED}-{target}")
    env = {key: value for key, value in os.environ.items() if key != OWNER_ENV}
    for attempt in range(KILL_RUNS):
        delay = rng.uniform(0.0, 4.0)
        run = subprocess.Popen([sys.executable, "-m", "testbed.cli", "net", "up", "fattree", "k=4", "--program",
                                "ecmp", "--target", target, "--no-cli", "-q"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            time.sleep(delay)
        finally:
            run.kill()
            run.wait()
        cleanup(log=lambda _line: None)
        plan = cleanup_plan()
        left = {kind: plan[kind] for kind in ("processes", "interface_groups", "netns", "state_files", "temp_paths")}
        assert not any(left.values()), f"run {attempt} killed after {delay:.2f} s left {left}"
        assert not [name for name in mininet_interfaces() if name.split("-eth")[0] in FATTREE_K4_SWITCHES], \
            f"run {attempt} killed after {delay:.2f} s left interfaces"
