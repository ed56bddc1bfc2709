"""Find and remove what emulated networks leave behind.

A clean machine after every run is part of the product: ``leftovers()``
lists network namespaces, Mininet-style interfaces (``<node>-eth<N>``), the
processes emulation starts (Mininet node shells, switch daemons, BMv2,
os-ken managers) and the testbed's state file; ``cleanup()`` removes them.
``testbed cleanup`` calls it; tests compare ``leftovers()`` before and after.

Ownership: :func:`mark_owner` puts ``TESTBED_OWNER=<pid>`` into the
environment of the process that builds a network, so every process started
for it (node shells, switches, controllers, traffic) inherits the mark.
``leftovers(owner=pid)`` lists only that owner's processes, which is how a
test checks its own leftovers while other work runs on the machine.
"""
import os
import re
import signal
import subprocess
import time

STATE_DIR = "/run/testbed"
OWNER_ENV = "TESTBED_OWNER"
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


def network_namespaces():
    """Return the names listed by ``ip netns list``."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return sorted(line.split()[0] for line in out.splitlines() if line.strip())


def mininet_interfaces():
    """Return the interfaces in the root namespace named like Mininet's ``<node>-eth<N>``."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    names = []
    for line in out.splitlines():
        fields = line.split(":", 2)
        if len(fields) < 2:
            continue
        name = fields[1].strip().split("@", 1)[0]
        if INTERFACE_PATTERN.match(name):
            names.append(name)
    return sorted(names)


def mark_owner():
    """Mark this process as the owner of what it starts (``TESTBED_OWNER``, inherited); return the owner.

    A process started by an owner (``testbed run`` inside a test) keeps the outer owner.
    """
    return os.environ.setdefault(OWNER_ENV, str(os.getpid()))


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


def emulation_processes(owner=None):
    """Return ``[(pid, command line)]`` of processes an emulated network started.

    Args:
        owner: only processes carrying this ``TESTBED_OWNER`` mark (any process of
            that owner, pattern or not); None: every process matching the known patterns.
    """
    found = []
    own = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if not cmdline:
            continue  # kernel threads, zombies
        if owner is not None:
            if process_owner(entry) == str(owner):
                found.append((int(entry), cmdline))
        elif any(pattern.search(cmdline) for pattern in PROCESS_PATTERNS):
            found.append((int(entry), cmdline))
    return sorted(found)


def leftovers(owner=None):
    """Return everything an emulated network may leave behind, by kind.

    Args:
        owner: list only the processes of this ``TESTBED_OWNER`` (see :func:`mark_owner`).

    Returns:
        dict: ``{"netns": [...], "interfaces": [...], "processes": [(pid, cmd)],
        "state_files": [...]}``.
    """
    state_files = []
    if os.path.isdir(STATE_DIR):
        state_files = sorted(os.path.join(STATE_DIR, name) for name in os.listdir(STATE_DIR))
    return {
        "netns": network_namespaces(),
        "interfaces": mininet_interfaces(),
        "processes": emulation_processes(owner),
        "state_files": state_files,
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


def cleanup(log=print):
    """Remove every leftover of emulated networks from this machine.

    Kills emulation processes, deletes Mininet-style interfaces and Linux
    bridges they belonged to, and removes the state directory.  Network
    namespaces named by ``ip netns`` are only removed when they carry the
    testbed's ``tb-`` prefix (others may belong to something else).

    Args:
        log: called with one line per kind of thing removed.

    Returns:
        dict: what was found before cleaning (see :func:`leftovers`).
    """
    found = leftovers()
    if found["processes"]:
        log(f"killing {len(found['processes'])} emulation process(es)")
        _terminate([pid for pid, _ in found["processes"]])
    if found["interfaces"]:
        log(f"deleting {len(found['interfaces'])} interface(s)")
        bridges = set()
        for name in found["interfaces"]:
            master = subprocess.run(["ip", "-o", "link", "show", name], capture_output=True, text=True,
                                    check=False).stdout
            match = re.search(r" master (\S+) ", master)
            if match:
                bridges.add(match.group(1))
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
        for bridge in sorted(bridges):
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
    for namespace in found["netns"]:
        if namespace.startswith("tb-"):
            log(f"deleting network namespace {namespace}")
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
    for path in found["state_files"]:
        log(f"removing {path}")
        try:
            os.remove(path)
        except OSError:
            pass
    return found
