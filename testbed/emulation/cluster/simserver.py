"""A simulated second server on this machine: a network namespace running its own sshd.

For tests and for trying fabrics over several servers on one machine.  ``up(index)``
makes

* the network namespace ``tb-srv<index>``, joined to the root namespace by a veth pair
  (``tbsrv<index>`` in the root namespace, ``eth0`` inside) carrying
  ``198.18.<index>.1/30`` (root end) and ``198.18.<index>.2/30`` (the server's address):
  198.18.0.0/15 is the benchmarking range (RFC 2544), clear of the machine's own
  192.0.2.0/24 and of the emulated hosts' 10.0.0.0/8;
* an sshd in that namespace, listening on the server's address, root login by a key
  generated for it only (``PermitTunnel`` on for SSH-tunnel links), its files under
  ``/run/testbed-servers/tb-srv<index>/`` (``server.json`` tells the cluster code how to log in).

The simulated server shares the kernel, the process table, the filesystem and the
project install with the local one; its network stack is its own, and so is its ``/tmp``
(a tmpfs mounted in its sshd's mount namespace, gone with it): what a run leaves or reads
there is not this machine's, as on a real server.  Ownership:
sshd carries ``TESTBED_OWNER=<its own pid>``, so ``testbed cleanup`` leaves a running
simulated server alone like any running network, and ``testbed cleanup --all`` (or
``down``) removes it; the root end of its veth is in sshd's owner interface group.
A server brought up for the lifetime of one process (``holder``: a test session) is
taken down by ``testbed cleanup`` once that process is gone, however it ended.
"""
import ipaddress
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time

from testbed.emulation.cleanup import OWNER_ENV, marked_processes, owner_alive, owner_interface_group
from testbed.errors import EmulationError, ParameterError

SERVERS_DIR = "/run/testbed-servers"
NAMESPACE_PREFIX = "tb-srv"
SERVER_NETWORK = ipaddress.IPv4Network("198.18.0.0/15")
MAX_INDEX = 250
SSHD = "/usr/sbin/sshd"
READY_TIMEOUT_S = 10.0


def server_name(index):
    """The namespace (and server) name of simulated server ``index``.

    >>> server_name(1)
    'tb-srv1'
    """
    index = int(index)
    if not 0 < index <= MAX_INDEX:
        raise ParameterError("index", index, f"1..{MAX_INDEX}")
    return f"{NAMESPACE_PREFIX}{index}"


def server_addresses(index):
    """``(root end, server end)`` addresses (with /30) of simulated server ``index``.

    >>> server_addresses(1)
    ('198.18.1.1/30', '198.18.1.2/30')
    """
    server_name(index)
    base = SERVER_NETWORK.network_address + (int(index) << 8)
    return f"{base + 1}/30", f"{base + 2}/30"


def server_dir(name):
    """The folder of a simulated server's keys, configuration and ``server.json``."""
    return os.path.join(SERVERS_DIR, name)


def load(name):
    """``server.json`` of a running simulated server ``name`` (address, user, identity, known_hosts), or None."""
    try:
        with open(os.path.join(server_dir(name), "server.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def running():
    """Names of the simulated servers that have a ``server.json``."""
    if not os.path.isdir(SERVERS_DIR):
        return []
    return sorted(name for name in os.listdir(SERVERS_DIR) if load(name) is not None)


def _run(argv, what):
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise EmulationError(f"{what}: {' '.join(argv)}: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def _addresses_in_use():
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False).stdout
    return [ipaddress.IPv4Interface(field) for line in out.splitlines() for field in line.split()[3:4]]


def _sshd_config(folder, address):
    return "\n".join([
        f"ListenAddress {address}", "Port 22",
        f"HostKey {folder}/host_key", f"PidFile {folder}/sshd.pid",
        f"AuthorizedKeysFile {folder}/authorized_keys",
        "PermitRootLogin prohibit-password", "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", "UseDNS no",
        "PermitTunnel yes",  # SSH-tunnel links (ssh -w)
        "MaxStartups 200", "MaxSessions 200",  # one connection per remote node shell and process
        "ClientAliveInterval 2", "ClientAliveCountMax 3",  # sessions of a client gone quiet end (their ttys hang up)
        "PrintMotd no", "Subsystem sftp internal-sftp", "",
    ])


def up(index=1, hide=(), holder=None):
    """Start simulated server ``index``; return its ``server.json`` entry.

    Args:
        index: 1..250.
        hide: files the server lacks: ``/dev/null`` is mounted over each in its mount namespace
            (an empty file that nothing can run), to try a server without, say, BMv2.
        holder: the pid of the process the server is up for (recorded): once it is gone,
            ``testbed cleanup`` takes the server down (:func:`orphaned`).  None: up until ``down``.

    Raises:
        ParameterError: a bad index, or a file to hide that does not exist here.
        EmulationError: sshd is not installed, the namespace exists already, an address collides,
            or sshd did not come up (what was made is removed).
    """
    name = server_name(index)
    for path in hide:
        if not os.path.isabs(path) or not os.path.isfile(path):
            raise ParameterError("hide", path, "absolute paths of files on this machine")
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        raise EmulationError("simulated server: sshd/ssh-keygen missing (apt-get install openssh-server, "
                             "as scripts/install.sh does)")
    root_end, server_end = server_addresses(index)
    if load(name) is not None or name in _namespaces():
        raise EmulationError(f"simulated server {name} exists already (`testbed server sim down {index}`)")
    taken = [used for used in _addresses_in_use()
             if used.network.overlaps(ipaddress.IPv4Interface(root_end).network)]
    if taken:
        raise EmulationError(f"simulated server {name}: {root_end} collides with {taken[0]} on this machine")
    folder = server_dir(name)
    veth = f"tbsrv{index}"
    try:
        os.makedirs(folder, mode=0o700)
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{folder}/host_key"], "host key")
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"testbed-{name}", "-f", f"{folder}/id_ed25519"],
             "client key")
        shutil.copy(f"{folder}/id_ed25519.pub", f"{folder}/authorized_keys")
        address = server_end.split("/")[0]
        with open(f"{folder}/host_key.pub") as handle:
            host_key = " ".join(handle.read().split()[:2])
        with open(f"{folder}/known_hosts", "w") as handle:
            handle.write(f"{address} {host_key}\n")
        with open(f"{folder}/sshd_config", "w") as handle:
            handle.write(_sshd_config(folder, address))
        _run(["ip", "netns", "add", name], "namespace")
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name], "veth")
        _run(["ip", "addr", "add", root_end, "dev", veth], "address")
        _run(["ip", "link", "set", veth, "up"], "link up")
        for line in (["addr", "add", server_end, "dev", "eth0"], ["link", "set", "eth0", "up"],
                     ["link", "set", "lo", "up"]):
            _run(["ip", "-n", name] + line, "server address")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation folder
        # the owner mark is sshd's own pid: a running simulated server is a running owner to cleanup
        log = open(f"{folder}/sshd.log", "ab")
        try:
            process = subprocess.Popen(
                ["sh", "-c", f"export {OWNER_ENV}=$$; exec ip netns exec {name} sh -c "
                             + shlex.quote(f"mount -t tmpfs -o mode=1777 testbed-{name}-tmp /tmp && "
                                           + "".join(f"mount --bind /dev/null {shlex.quote(path)} && "
                                                     for path in hide)
                                           + f"exec {SSHD} -D -e -f {folder}/sshd_config")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        _run(["ip", "link", "set", veth, "group", str(owner_interface_group(process.pid, 1))], "interface group")
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _accepts(address):
            if process.poll() is not None or time.monotonic() > deadline:
                with open(f"{folder}/sshd.log") as handle:
                    raise EmulationError(f"simulated server {name}: sshd did not start: {handle.read()[-800:]}")
            time.sleep(0.05)
        entry = {"name": name, "address": address, "user": "root", "sshd_pid": process.pid, "hidden": list(hide),
                 "identity": f"{folder}/id_ed25519", "known_hosts": f"{folder}/known_hosts",
                 "root_end": root_end, "interface": veth, "namespace": name, "holder_pid": holder}
        with open(f"{folder}/server.json", "w") as handle:
            json.dump(entry, handle, indent=1)
        return entry
    except BaseException:
        down(index)
        raise


def _accepts(address):
    try:
        with socket.create_connection((address, 22), timeout=0.2):
            return True
    except OSError:
        return False


def _namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def processes(name):
    """Pids of the processes running on simulated server ``name``: those in its namespace (its sshd and
    what runs under it) and those runs started there in namespaces of their own (marked with the server)."""
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False).stdout
    return sorted({int(pid) for pid in out.split()} | {pid for pid, _cmdline, _owner in marked_processes(name)})


def _sshd_pid(folder):
    try:
        with open(os.path.join(folder, "server.json")) as handle:
            return int(json.load(handle)["sshd_pid"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        with open(os.path.join(folder, "sshd.pid")) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def down(index=1):
    """Stop simulated server ``index`` as a machine is switched off: sshd and every process in its
    namespace (whatever runs left there), the namespace, the veth, its folder.

    Returns:
        bool: whether anything was there.
    """
    name = server_name(index)
    folder = server_dir(name)
    found = os.path.isdir(folder) or name in _namespaces()
    pid = _sshd_pid(folder)
    if pid is not None and owner_alive(pid):
        try:
            os.killpg(pid, signal.SIGTERM)  # sshd leads its session; its per-connection children follow
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5
        while owner_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if owner_alive(pid):
            os.killpg(pid, signal.SIGKILL)
    for _attempt in range(3):  # processes started there while the first ones were killed go next
        left = processes(name)
        for each in left:
            try:
                os.kill(each, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not left:
            break
        time.sleep(0.1)
    subprocess.run(["ip", "link", "del", f"tbsrv{index}"], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    shutil.rmtree(folder, ignore_errors=True)
    return found


def orphaned():
    """Names of the simulated servers whose holder (see :func:`up`) is gone."""
    gone = []
    for name in running():
        holder = (load(name) or {}).get("holder_pid")
        if holder is not None and not owner_alive(holder):
            gone.append(name)
    return gone


def index_of(name):
    """The index of simulated server ``name``.

    >>> index_of("tb-srv9")
    9
    """
    suffix = name[len(NAMESPACE_PREFIX):] if name.startswith(NAMESPACE_PREFIX) else ""
    if not suffix.isdigit():
        raise ParameterError("server", name, f"{NAMESPACE_PREFIX}1..{NAMESPACE_PREFIX}{MAX_INDEX}")
    server_name(int(suffix))
    return int(suffix)


def remove_stale():
    """Remove the folders of simulated servers whose sshd is gone (after ``testbed cleanup``); return their names."""
    removed = []
    if not os.path.isdir(SERVERS_DIR):
        return removed
    for name in sorted(os.listdir(SERVERS_DIR)):
        pid = _sshd_pid(server_dir(name))
        if pid is None or not owner_alive(pid):
            try:
                down(index_of(name))
            except ParameterError:
                shutil.rmtree(server_dir(name), ignore_errors=True)
            removed.append(name)
    return removed
