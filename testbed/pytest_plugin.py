"""pytest plugin for tests on emulated fabrics (installed with the package as the ``testbed`` plugin).

Fixtures:

* ``fabric``: a running :class:`~testbed.fabrics.Fabric` described by the test's
  ``fabric`` marker, stopped after the test::

      @pytest.mark.fabric("fattree", k=4, program="ecmp")
      def test_reachability(fabric):
          assert_all_pairs_reachable(fabric)

* ``fabric_factory``: a function ``start(topology, **options) -> Fabric`` (started; a ``with``
  block on it just takes it and stops it at its end) for tests that
  need several fabrics one after another or decide the options at run time; every
  fabric it started is stopped after the test.
* ``no_leftovers``: fails the test if it leaves namespaces, interfaces, processes or
  state files behind (both fabric fixtures check this by themselves).

Markers (skips print their reason with ``pytest -ra``):

* ``mininet``: builds an emulated network; skipped unless running as root with Mininet
  installed.  Tests using the fabric fixtures get it automatically.
* ``bmv2``: needs BMv2 (``simple_switch_grpc`` and ``p4c``); skipped where they are absent.
* ``cluster``: builds a fabric over several servers (a simulated second server on this
  machine: :func:`simulated_server`); skipped, with the reason, without sshd, ssh or sudo.
* ``fabric(topology, **options)``: the ``fabric`` fixture's :class:`~testbed.fabrics.Fabric` options.

``BOTH_TARGETS`` parametrizes a test over the embedded target and BMv2
(``@pytest.mark.parametrize("target", BOTH_TARGETS)``); the BMv2 case skips where BMv2 is absent.
A test that makes links lossy calls :func:`skip_unless_lossy_links` first: BMv2's ports cannot
drop frames, so on a kernel without netem its BMv2 case skips with that reason.
"""
import importlib.util
import os

import pytest

from testbed.emulation.cleanup import leftovers, mark_owner
from testbed.targets import bmv2_available

FABRIC_FIXTURES = ("fabric", "fabric_factory")
BMV2_MISSING = "BMv2 simple_switch_grpc and p4c are not installed (use the Vagrant VM)"

BOTH_TARGETS = [pytest.param("embedded", id="embedded"),
                pytest.param("bmv2", id="bmv2", marks=pytest.mark.bmv2)]


def skip_unless_lossy_links(target):
    """Skip the running test, with the reason, when ``target`` cannot make links lossy on this machine."""
    from testbed.targets import embedded_only_needs

    if target == "bmv2":
        needs = embedded_only_needs(lossy_links=True)
        if needs:
            pytest.skip(f"BMv2 ports cannot drop frames: {needs[0]} (the Vagrant VM has netem)")


def mininet_missing():
    """Why emulated networks cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root: Mininet creates network namespaces and veth links"
    if importlib.util.find_spec("mininet") is None:
        return "Mininet is not installed (apt-get install mininet; see scripts/install.sh)"
    return None


def pytest_configure(config):
    """Register the markers."""
    config.addinivalue_line("markers", "mininet: builds an emulated network (needs root and Mininet)")
    config.addinivalue_line("markers", "bmv2: needs BMv2 simple_switch_grpc and p4c on PATH")
    config.addinivalue_line("markers", "fabric(topology, **options): options of the `fabric` fixture "
                                       "(testbed.fabrics.Fabric)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line("markers", "cluster: a fabric over several servers (needs sshd, ssh and sudo; "
                                       "a simulated second server stands in for the other)")


def pytest_collection_modifyitems(config, items):
    """Tests using a fabric fixture build an emulated network: mark them ``mininet``."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in FABRIC_FIXTURES):
            item.add_marker(pytest.mark.mininet)


def cluster_missing():
    """Why fabrics over several servers cannot be tried here, or None when they can."""
    import shutil

    missing = [what for what, path in (("sshd (openssh-server)", "/usr/sbin/sshd"),
                                       ("ssh (openssh-client)", shutil.which("ssh")),
                                       ("ssh-keygen", shutil.which("ssh-keygen")),
                                       ("sudo", shutil.which("sudo")))
               if not path or not os.path.exists(path)]
    if missing:
        return "fabrics over several servers need " + ", ".join(missing) + " (scripts/install.sh installs them)"
    return None


#: the simulated server of the ``simulated_server`` fixture (name for ``servers=[...]`` in markers)
SIMULATED_SERVER_INDEX = 9
SIMULATED_SERVER = f"tb-srv{SIMULATED_SERVER_INDEX}"


@pytest.fixture
def simulated_server():
    """A simulated second server (:mod:`testbed.emulation.cluster.simserver`) named
    :data:`SIMULATED_SERVER`, up for the test; afterwards nothing of the test may be left on it.
    Held by this session's process: if the session is killed, ``testbed cleanup`` takes the server down."""
    from testbed.emulation.cluster import simserver
    from testbed.emulation.cluster.servers import resolve

    entry = simserver.up(SIMULATED_SERVER_INDEX, holder=os.getpid())  # a killed session's: `testbed cleanup`
    try:
        yield resolve(entry["name"])
        server = resolve(entry["name"])
        listing = server.run(f"{server.interpreter} -m testbed.cli cleanup --server-marks {server.name}")
        assert listing.returncode == 0 and listing.stdout.strip() in ("", "{}"), \
            f"left behind on {server.name}: {listing.stdout} {listing.stderr}"
        # unmarked processes too: nothing but the server's own sshd may run in its namespace
        from testbed.testing import wait_until

        sshd = simserver.load(entry["name"])["sshd_pid"]  # a test may have restarted the server
        wait_until(lambda: simserver.processes(entry["name"]) == [sshd], timeout_s=10,
                   what=f"only sshd ({sshd}) running in {entry['name']}")
    finally:
        simserver.down(SIMULATED_SERVER_INDEX)


def pytest_runtest_setup(item):
    """Skip, with the reason, what this machine cannot run."""
    if item.get_closest_marker("mininet") is not None:
        reason = mininet_missing()
        if reason:
            pytest.skip(reason)
    if item.get_closest_marker("cluster") is not None:
        reason = cluster_missing()
        if reason:
            pytest.skip(reason)
    if item.get_closest_marker("bmv2") is not None and not bmv2_available():
        pytest.skip(BMV2_MISSING)


def snapshot():
    """What this test process's networks could leave behind now (processes: only its own)."""
    return leftovers(owner=mark_owner())


def check_nothing_left(before):
    """Assert that nothing appeared since ``before`` (a :func:`snapshot`): namespaces, interfaces,
    state files, or processes started on behalf of this test process."""
    after = snapshot()
    new = {kind: sorted(set(map(tuple, items) if kind == "processes" else items)
                        - set(map(tuple, before[kind]) if kind == "processes" else before[kind]))
           for kind, items in after.items()}
    assert not any(new.values()), f"left behind: {new}"


@pytest.fixture
def no_leftovers():
    """Fail the test if it leaves namespaces, interfaces, processes or state files behind.

    Yields the snapshot taken before the test; compares against a new one after it.
    """
    before = snapshot()
    yield before
    check_nothing_left(before)


@pytest.fixture
def fabric_factory(tmp_path):
    """``start(topology, **options)``: start a Fabric (switch logs under the test's tmp_path).

    Every fabric started is stopped after the test, and nothing may be left behind.
    """
    from testbed.fabrics import Fabric

    before = snapshot()
    started = []

    def start(topology, **options):
        options.setdefault("log_dir", str(tmp_path / f"fabric-{len(started)}-logs"))
        fabric = Fabric(topology, **options)
        started.append(fabric)
        return fabric.start()

    yield start
    errors = []
    for fabric in reversed(started):
        try:
            fabric.stop()
        except Exception as error:  # noqa: BLE001 - stop the others, then report
            errors.append(error)
    check_nothing_left(before)
    assert not errors, f"teardown failed: {errors}"


@pytest.fixture
def fabric(request, fabric_factory):
    """The running Fabric of the test's ``@pytest.mark.fabric(topology, **options)`` marker."""
    marker = request.node.get_closest_marker("fabric")
    if marker is None or not marker.args:
        raise pytest.UsageError(f"{request.node.nodeid}: the `fabric` fixture needs "
                                "@pytest.mark.fabric(topology, **options)")
    return fabric_factory(*marker.args, **marker.kwargs)
