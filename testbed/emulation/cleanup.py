"""Find and remove what emulated networks leave behind.

A clean machine after every run is part of the product: ``leftovers()``
lists network namespaces, Mininet-style interfaces (``<node>-eth<N>``), the
processes emulation starts (Mininet node shells, switch daemons, BMv2,
os-ken managers) and the testbed's state file; tests compare it before and
after.  ``cleanup()`` (``testbed cleanup``) removes what testbed runs left
behind, and only that: other processes and interfaces on the machine, even
ones whose names look alike, are not touched.

Ownership: :func:`mark_owner` puts ``TESTBED_OWNER=<pid>`` into the
environment of the process that builds a network, so every process started
for it (node shells, switches, controllers, traffic) inherits the mark, and
the network's root-namespace interfaces are put into an interface group that
encodes the same pid (:func:`owner_interface_group`).  ``leftovers(owner=pid)``
lists only that owner's processes, which is how a test checks its own
leftovers while other work runs on the machine; ``cleanup()`` removes the
processes, interfaces and state files of owners that are gone (a run killed
with SIGKILL), and with ``include_running`` those of running owners too.
"""
import os
import re
import signal
import shutil
import subprocess
import tempfile
import time

from testbed.emulation.state import state_owner

STATE_DIR = "/run/testbed"
OWNER_ENV = "TESTBED_OWNER"
#: set (besides the owner) on processes a run started on another server (testbed/emulation/cluster):
#: their owner pid lives on the machine the run started from, so only `testbed cleanup --servers` there
#: decides about them
SERVER_ENV = "TESTBED_SERVER"
#: this machine's name among a run's servers (where ``testbed`` runs; always the first)
LOCAL_SERVER = "localhost"
#: where a run's remote processes leave their pid (``/tmp/testbed-rpid-<owner>-<node>-<n>``), for signals
REMOTE_PID_PREFIX = "testbed-rpid-"
#: the folder of a run's remote node's files on its server (``/tmp/testbed-rnode-<owner>-<node>``: a remote
#: BMv2's P4Runtime socket, packet log and pcaps)
REMOTE_DIR_PREFIX = "testbed-rnode-"
#: the interface group slot of a run's interfaces on another server (same reason)
SERVER_GROUP_SLOT = 255
# interface groups of testbed networks: OWNER_GROUP_FLAG | owner pid << 8 | slot (1..255); pids < 2^22
OWNER_GROUP_FLAG = 1 << 30
OWNER_GROUP_SLOTS = 254  # networks of one owner on its own machine; slot 255 is SERVER_GROUP_SLOT
_PID_LIMIT = 1 << 22
INTERFACE_PATTERN = re.compile(r"^[-_.A-Za-z0-9]+-eth[0-9]+$")
# Command lines of processes that belong to an emulated network.
PROCESS_PATTERNS = (
    re.compile(r"^bash .*mininet:"),
    re.compile(r"testbed\.(p4|embedded_switch)\.switchd"),
    re.compile(r"simple_switch_grpc"),
    re.compile(r"osken-manager"),
    re.compile(r"testbed\.controllers\.launcher"),
    re.compile(r"testbed\.traffic\.(sender|receiver|agent)"),
    re.compile(r"testbed\.emulation\.pktgen_injector"),
)


#: where a network puts its Unix sockets when ``$TMPDIR`` is too long for socket paths
SHORT_TEMP_ROOT = "/tmp"
#: temporary files and folders of a network: ``testbed-<purpose>-<pid>-...`` or ``testbed-<pid>-...``
TEMP_PATTERN = re.compile(r"^testbed-(?:[a-z0-9]+-)?(\d+)-")


def temp_paths():
    """``[(path, creator pid)]`` of the temporary files and folders emulated networks make.

    >>> bool(TEMP_PATTERN.match("testbed-p4rt-4242-7f3a")), TEMP_PATTERN.match("testbed-4242-s1.ctl").group(1)
    (True, '4242')
    """
    found = []
    for folder in sorted({tempfile.gettempdir(), SHORT_TEMP_ROOT}):
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            match = TEMP_PATTERN.match(name)
            if match:
                found.append((os.path.join(folder, name), int(match.group(1))))
    return found


def network_namespaces():
    """Return the names listed by ``ip netns list``."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def _root_links():
    """``[(name, group, master)]`` of the root namespace's interfaces, from one ``ip -o link show``.

    ``group`` is 0 for the default group; ``master`` is the bridge an interface is enslaved to, or None.
    """
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    links = []
    for line in out.splitlines():
        fields = line.split(":", 2)
        if len(fields) < 3:
            continue
        group = re.search(r" group (\d+) ", line)
        master = re.search(r" master (\S+) ", line)
        links.append((fields[1].strip().split("@", 1)[0], int(group.group(1)) if group else 0,
                      master.group(1) if master else None))
    return links


def mininet_interfaces():
    """Return the interfaces in the root namespace named like Mininet's ``<node>-eth<N>``."""
    return sorted(name for name, _group, _master in _root_links() if INTERFACE_PATTERN.match(name))


def mark_owner():
    """Mark this process as the owner of what it starts (``TESTBED_OWNER``, inherited); return the owner.

    A process started by an owner (``testbed run`` inside a test) keeps the outer owner.
    """
    return os.environ.setdefault(OWNER_ENV, str(os.getpid()))


def owner_interface_group(owner, slot):
    """The interface group of one network's root-namespace interfaces, encoding its owner.

    Args:
        owner: the owner's pid (see :func:`mark_owner`).
        slot: 1..255, to tell apart networks of the same owner.

    Returns:
        int: a group number below 2^31 (``ip`` prints it unsigned).

    >>> owner_interface_group(12345, 1), interface_group_owner(owner_interface_group(12345, 1))
    (1076902145, 12345)
    """
    owner, slot = int(owner), int(slot)
    if not 0 < owner < _PID_LIMIT or not 0 < slot <= SERVER_GROUP_SLOT:
        raise ValueError(f"owner {owner} or slot {slot} out of range")
    return OWNER_GROUP_FLAG | owner << 8 | slot


def interface_group_owner(group):
    """The owner pid a testbed interface group encodes, or None for any other group.

    >>> interface_group_owner(0) is None, interface_group_owner(5) is None
    (True, True)
    """
    group = int(group)
    if group >> 30 != 1 or not group & 0xFF:
        return None
    return (group >> 8) & (_PID_LIMIT - 1) or None


def owner_alive(owner):
    """True while process ``owner`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{int(owner)}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return False
    return state not in ("Z", "X")


def process_owner(pid):
    """The ``TESTBED_OWNER`` mark in a process's environment, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read().split(b"\0")
    except OSError:
        return None
    prefix = OWNER_ENV.encode() + b"="
    for item in environ:
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def _processes():
    """``(pid, command line)`` of every process but this one (kernel threads and zombies have none)."""
    own = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmdline:
            yield int(entry), cmdline


def emulation_processes(owner=None):
    """Return ``[(pid, command line)]`` of processes an emulated network started.

    Args:
        owner: only processes carrying this ``TESTBED_OWNER`` mark (any process of
            that owner, pattern or not); None: every process matching the known patterns.
    """
    if owner is not None:
        return sorted((pid, cmdline) for pid, cmdline in _processes() if process_owner(pid) == str(owner))
    return sorted((pid, cmdline) for pid, cmdline in _processes()
                  if any(pattern.search(cmdline) for pattern in PROCESS_PATTERNS))


def process_marks(pid):
    """``(TESTBED_OWNER, TESTBED_SERVER)`` marks of a process (None where absent)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read().split(b"\0")
    except OSError:
        return None, None
    marks = {}
    for item in environ:
        key, _, value = item.partition(b"=")
        if key in (OWNER_ENV.encode(), SERVER_ENV.encode()):
            marks[key.decode()] = value.decode(errors="replace")
    return marks.get(OWNER_ENV), marks.get(SERVER_ENV)


def marked_processes(server=None):
    """``[(pid, command line, owner pid)]`` of every process carrying a valid ``TESTBED_OWNER`` mark.

    Args:
        server: None: the processes of runs started on this machine; a server name: the
            processes runs started from another machine left on this one as that server.
    """
    found = []
    for pid, cmdline in _processes():
        mark, on_server = process_marks(pid)
        if mark is not None and mark.isdigit() and on_server == server:
            found.append((pid, cmdline, int(mark)))
    return sorted(found)


def leftovers(owner=None):
    """Return everything an emulated network may leave behind, by kind.

    Args:
        owner: list only the processes of this ``TESTBED_OWNER`` (see :func:`mark_owner`), and
            only the temporary files it or a process that is gone made.

    Returns:
        dict: ``{"netns": [...], "interfaces": [...], "processes": [(pid, cmd)],
        "state_files": [...], "temp_paths": [...]}``.
    """
    state_files = []
    if os.path.isdir(STATE_DIR):
        state_files = sorted(os.path.join(STATE_DIR, name) for name in os.listdir(STATE_DIR))
    return {
        "netns": network_namespaces(),
        "interfaces": mininet_interfaces(),
        "processes": emulation_processes(owner),
        "state_files": state_files,
        # another run's files while it runs are not a leftover
        "temp_paths": [path for path, creator in temp_paths()
                       if owner is None or creator == int(owner) or not owner_alive(creator)],
    }


def _terminate(pids, grace_seconds=2.0):
    """SIGTERM the pids, wait up to ``grace_seconds``, then SIGKILL survivors."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_seconds
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if os.path.exists(f"/proc/{pid}")]
        time.sleep(0.05)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cleanup_plan(include_running=False):
    """What :func:`cleanup` would remove: the testbed's own leftovers, by owner.

    Args:
        include_running: also the networks whose owner still runs.

    Returns:
        dict: ``{"processes": [(pid, command line)], "interface_groups": {group: [names]},
        "netns": [...], "state_files": [...], "temp_paths": [...], "running_owners": [pids left alone],
        "servers": [simulated servers whose holder is gone (taken down first)]}``.
    """
    def removable(owner):
        return owner is not None and (include_running or not owner_alive(owner))

    running = set()
    processes = []
    for pid, cmdline, owner in marked_processes():
        if owner == os.getpid():
            continue  # never what this process started itself
        if removable(owner):
            processes.append((pid, cmdline))
        else:
            running.add(owner)
    groups = {}
    for name, group, _master in _root_links():
        owner = interface_group_owner(group)
        if owner is None or group & 0xFF == SERVER_GROUP_SLOT:
            continue  # another machine's run's interfaces: `testbed cleanup --servers` there
        if removable(owner):
            groups.setdefault(group, []).append(name)
        else:
            running.add(owner)
    state_files = []
    if os.path.isdir(STATE_DIR):
        for name in sorted(os.listdir(STATE_DIR)):
            path = os.path.join(STATE_DIR, name)
            owner = state_owner(path)
            if owner is None or removable(owner):
                state_files.append(path)
            else:
                running.add(owner)
    temporary = []
    for path, creator in temp_paths():
        if creator != os.getpid() and removable(creator):
            temporary.append(path)
        elif creator != os.getpid():
            running.add(creator)
    netns = [name for name in network_namespaces() if name.startswith("tb-")] if not running else []
    from testbed.emulation.cluster import simserver

    return {"processes": processes, "interface_groups": groups, "netns": netns, "state_files": state_files,
            "temp_paths": temporary, "running_owners": sorted(running), "servers": simserver.orphaned()}


def cleanup(log=print, include_running=False):
    """Remove what testbed runs left behind on this machine, and nothing else.

    Kills the processes carrying the mark of an owner that is gone, deletes the
    interface groups of such owners (and Linux bridges their interfaces were
    enslaved to), removes their state files and temporary files and, when no testbed network is
    running, the network namespaces with the testbed's ``tb-`` prefix.
    Processes and interfaces without the testbed's marks are never touched.

    Args:
        log: called with one line per kind of thing removed.
        include_running: also remove the networks whose owner still runs (like
            Mininet's ``mn -c``); their owners are not signalled.

    Returns:
        dict: what was removed (see :func:`cleanup_plan`).
    """
    plan = cleanup_plan(include_running)
    if plan["servers"]:
        from testbed.emulation.cluster import simserver

        for name in plan["servers"]:
            log(f"taking down simulated server {name} (the process it was up for is gone)")
            simserver.down(simserver.index_of(name))
        # what ran on them is gone with them; what their runs left here is now an owner's that is gone
        plan = dict(cleanup_plan(include_running), servers=plan["servers"])
    if plan["processes"]:
        log(f"killing {len(plan['processes'])} emulation process(es)")
        _terminate([pid for pid, _ in plan["processes"]])
    names = {name for group_names in plan["interface_groups"].values() for name in group_names}
    if names:
        log(f"deleting {len(names)} interface(s)")
        bridges = {master for name, _group, master in _root_links() if name in names and master}
        for group in plan["interface_groups"]:
            subprocess.run(["ip", "link", "del", "group", str(group)], capture_output=True, check=False)
        for bridge in sorted(bridges):
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
    for namespace in plan["netns"]:
        log(f"deleting network namespace {namespace}")
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
    for path in plan["state_files"]:
        log(f"removing {path}")
        try:
            os.remove(path)
        except OSError:
            pass
    if plan["temp_paths"]:
        log(f"removing {len(plan['temp_paths'])} temporary file(s) and folder(s)")
        for path in plan["temp_paths"]:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass
    from testbed.emulation.cluster.simserver import remove_stale

    for name in remove_stale():  # simulated servers whose sshd was killed above
        log(f"removed simulated server {name}")
    if plan["running_owners"]:
        log(f"left alone: the network(s) of running owner(s) {', '.join(map(str, plan['running_owners']))} "
            "(`testbed net down`, or `testbed cleanup --all`)")
    return plan


def server_marks(server):
    """Owners of what runs from another machine left on this one as ``server``.

    Returns:
        dict: ``{owner: {"processes": count, "interfaces": count}}``.
    """
    found = {}
    for _pid, _cmdline, owner in marked_processes(server):
        found.setdefault(owner, {"processes": 0, "interfaces": 0})["processes"] += 1
    for _name, group, _master in _root_links():
        owner = interface_group_owner(group)
        if owner is not None and group & 0xFF == SERVER_GROUP_SLOT:
            found.setdefault(owner, {"processes": 0, "interfaces": 0})["interfaces"] += 1
    return found


def server_cleanup(server, owners, log=print):
    """Remove the processes and interfaces runs of ``owners`` (pids on the machine they started from) left
    on this machine as ``server``; nothing else.  Returns ``{"processes": [...], "interfaces": [...]}``."""
    owners = {int(owner) for owner in owners}
    processes = [(pid, cmdline) for pid, cmdline, owner in marked_processes(server) if owner in owners]
    if processes:
        log(f"{server}: killing {len(processes)} process(es) of run(s) {', '.join(map(str, sorted(owners)))}")
        _terminate([pid for pid, _ in processes])
    names = [name for name, group, _master in _root_links()
             if group & 0xFF == SERVER_GROUP_SLOT and interface_group_owner(group) in owners]
    if names:
        log(f"{server}: deleting {len(names)} interface(s)")
        for owner in sorted(owners):
            subprocess.run(["ip", "link", "del", "group", str(owner_interface_group(owner, SERVER_GROUP_SLOT))],
                           capture_output=True, check=False)
    temporary = [path for path, creator in temp_paths()  # the runs' remote processes' pid files and folders
                 if creator in owners and os.path.basename(path).startswith((REMOTE_PID_PREFIX, REMOTE_DIR_PREFIX))]
    for path in temporary:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            continue
        try:
            os.remove(path)
        except OSError:
            pass
    return {"processes": processes, "interfaces": names, "temp_paths": temporary}
