"""The servers a fabric runs on: how each is named, reached over ssh and checked before a run.

A server is given as

* ``"localhost"``: this machine (where ``testbed`` runs; always the first server);
* the name of a simulated server (``"tb-srv1"``, :mod:`testbed.emulation.cluster.simserver`);
* ``"host"`` or ``"user@host"`` (a name ssh resolves, or an address); root login by key;
* a dict ``{"host": ..., "user": "root", "identity": path, "known_hosts": path, "python": path}``.

Remote processes run this machine's interpreter path with its import path (``PYTHONPATH``) unless
the server's entry names its own interpreter (``python``: an absolute path there, e.g. the virtual
environment of the project's checkout on that server); then every command of the run that starts
this interpreter there starts that one, with the server's own environment.  Either way the
project's sources must be the same on every server (:func:`requirements` checks them).
"""
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time

from testbed.embedded_switch.port_control import ControlRelay, KeptProcess
from testbed.emulation.cleanup import LOCAL_SERVER, OWNER_ENV, SERVER_ENV
from testbed.emulation.cluster import simserver
from testbed.errors import EmulationError, ParameterError

#: ssh options of every connection: never a password prompt, never an unknown host key accepted
SSH_OPTIONS = ("-q", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ServerAliveInterval=5",
               "-o", "ServerAliveCountMax=3")
CHECK_TIMEOUT_S = 20
#: keep-alive probes of a run's watch connection to each server (see :func:`watch`)
WATCH_PROBES = 3
#: a server that has not answered its watch connection for this long is lost to the run
WATCH_TIMEOUT_S = 6


class Server:
    """One server of a run: its name, address and the ssh command that reaches its root shell."""

    def __init__(self, name, address=None, user="root", identity=None, known_hosts=None, python=None):
        self.name = name
        self.address = address
        self.user = user
        self.identity = identity
        self.known_hosts = known_hosts
        #: the interpreter processes of the run start with there (None: this machine's path)
        self.python = python
        #: why the server is lost to the run (set when its watch connection ended), else None
        self.lost = None
        self._kept = {}  # the run's kept connections: {("shell", purpose): RemoteShell, "relay": ControlRelay}
        self._kept_lock = threading.Lock()

    @property
    def local(self):
        """True for the machine ``testbed`` runs on."""
        return self.name == LOCAL_SERVER

    def ssh_argv(self, tty=False, alive_s=None):
        """``ssh ... user@address`` (with ``-tt`` for node shells), without the remote command;
        ``alive_s``: the connection ends when the server has not answered for about that long."""
        argv = ["ssh"]
        if alive_s is not None:  # ssh takes the first value of an option: these go before SSH_OPTIONS
            argv += ["-o", f"ServerAliveInterval={max(1, int(alive_s) // WATCH_PROBES)}",
                     "-o", f"ServerAliveCountMax={WATCH_PROBES}"]
        argv += SSH_OPTIONS
        if self.identity:
            argv += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
        if tty:
            argv.append("-tt")
        return argv + [f"{self.user}@{self.address}"]

    def run(self, command, timeout=CHECK_TIMEOUT_S):
        """Run a shell command on the server (locally for localhost); return CompletedProcess (text).

        On a server lost to the run (:attr:`lost`) nothing is tried: status 255 at once."""
        if self.lost:
            return subprocess.CompletedProcess([], 255, "", f"server {self.name} unreachable ({self.lost})")
        argv = ["sh", "-c", command] if self.local else self.ssh_argv() + [
            shlex.join(["env", *self.forwarded_environment(), "sh", "-c", command])]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 255, "", f"no answer within {timeout} s")

    @property
    def interpreter(self):
        """The Python interpreter the run's processes on this server start with."""
        return self.python or sys.executable

    def argv(self, argv):
        """``argv`` as it runs on this server: a command that starts this process's interpreter starts
        the server's (:attr:`interpreter`)."""
        argv = [str(arg) for arg in argv]
        return [self.interpreter] + argv[1:] if argv and argv[0] == sys.executable else argv

    def forwarded_environment(self):
        """``NAME=value`` of the variables remote commands get from this process: the Python import
        path, when the server runs this machine's interpreter path (the project at the same path there;
        a checkout run with ``PYTHONPATH`` stays itself); none when it names its own."""
        if self.python:
            return []
        return [f"{name}={os.environ[name]}" for name in FORWARDED if name in os.environ]

    def marks(self):
        """The ``NAME=value`` owner marks of what the run (this process's owner) starts on this server."""
        return [f"{OWNER_ENV}={os.environ.get(OWNER_ENV, os.getpid())}", f"{SERVER_ENV}={self.name}"]

    def _kept_connection(self, kind, start):
        with self._kept_lock:
            if kind not in self._kept:
                self._kept[kind] = start()
            return self._kept[kind]

    def shell(self, purpose="commands"):
        """The run's :class:`RemoteShell` on this (remote) server for ``purpose``, started on first use.

        Args:
            purpose: names the shell; each purpose has its own, so that its commands never wait behind
                another's (the queue drop samples behind link set-up, say).
        """
        return self._kept_connection(("shell", purpose), lambda: RemoteShell(self, self.marks()))

    def run_kept(self, command):
        """As :meth:`run` (stderr with stdout), over the kept shell on another server: no ssh login."""
        if self.local:
            result = self.run(command)
            return subprocess.CompletedProcess(command, result.returncode, result.stdout + result.stderr, "")
        return self.shell().run(command)

    def control_relay(self):
        """The run's relay to the embedded switches' control sockets on this server (started on first use:
        ``python -m testbed.embedded_switch.port_control --serve`` there, with the run's marks; it ends
        with its connection)."""
        remote = shlex.join(["env", *self.marks(), *self.forwarded_environment(), self.interpreter, "-m",
                             "testbed.embedded_switch.port_control", "--serve"])
        return self._kept_connection("relay", lambda: ControlRelay(self.ssh_argv(alive_s=WATCH_TIMEOUT_S) + [remote],
                                                                   f"on server {self.name}"))

    def close_kept(self):
        """End the kept shells and relay, if they were started (safe to call twice)."""
        with self._kept_lock:
            kept, self._kept = self._kept, {}
        for connection in kept.values():
            connection.close()

    def describe(self):
        """The JSON-able entry of results and state files."""
        described = {"name": self.name, "address": self.address, "user": self.user}
        if self.python:
            described["python"] = self.python
        return described

    def __repr__(self):
        return f"Server({self.name!r}, {self.address!r})"


def watch(server, marks):
    """A connection to ``server`` that ends when it stops answering for :data:`WATCH_TIMEOUT_S`
    (or when its run ends: the remote side reads the stdin the run holds); ``marks`` are the remote
    command's ``NAME=value`` owner marks.  Returns the local ssh process (``poll()`` tells)."""
    remote = shlex.join(["env", *marks, "sh", "-c", "exec cat >/dev/null"])
    return subprocess.Popen(server.ssh_argv(alive_s=WATCH_TIMEOUT_S) + [remote], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0)


class RemoteShell(KeptProcess):
    """A root shell on ``server`` kept open for the run: each :meth:`run` is a round trip over its ssh
    connection rather than an ssh login (about a third of a second here).  Commands run one at a time,
    their stdin from ``/dev/null`` and their stderr with their stdout.  It carries ``marks`` (the run's
    ``NAME=value`` owner marks) and ends when :meth:`close` (or the run's end) closes its stdin."""

    END = b"@@testbed-end"
    #: the longest a command may take before the shell counts as lost
    COMMAND_TIMEOUT_S = 300

    def __init__(self, server, marks):
        super().__init__(server.ssh_argv(alive_s=WATCH_TIMEOUT_S) + [shlex.join(["env", *marks, "sh"])])
        self.server = server

    def run(self, command):
        """Run a shell command there; return a ``subprocess.CompletedProcess`` (its output in ``stdout``).

        Raises:
            EmulationError: the connection ended (naming the server).
        """
        deadline = time.monotonic() + self.COMMAND_TIMEOUT_S
        with self.lock:
            lines = []
            if self.send(f"{{ {command}\n}} </dev/null 2>&1; echo \"{self.END.decode()} $?\"\n".encode()):
                while (line := self.read_line(deadline)) is not None:
                    if line.startswith(self.END + b" "):
                        return subprocess.CompletedProcess(command, int(line.split()[1]),
                                                           b"".join(lines).decode(errors="replace"), "")
                    lines.append(line + b"\n")
            raise EmulationError(f"server {self.server.name} ({self.server.address}): its kept shell's connection "
                                 f"ended (status {self.process.poll()})")


#: environment variables remote commands inherit from the run (see :meth:`Server.forwarded_environment`)
FORWARDED = ("PYTHONPATH", "PYTHONSAFEPATH")


def resolve(entry):
    """A :class:`Server` from one ``servers`` entry.

    Raises:
        ParameterError: an entry of the wrong shape, or a name that is neither a running
            simulated server nor a host name this machine resolves.
    """
    if isinstance(entry, dict):
        unknown = set(entry) - {"host", "user", "identity", "known_hosts", "name", "python"}
        if unknown or "host" not in entry:
            raise ParameterError("servers", entry, "a dict with host (and user, identity, known_hosts, python)")
        python = entry.get("python")
        if python is not None and not (isinstance(python, str) and os.path.isabs(python)):
            raise ParameterError("servers", python, "an absolute path of the Python interpreter on that server",
                                 f"server {entry['host']}: python")
        server = resolve(entry["host"])
        server.python = python
        server.user = entry.get("user", server.user)
        server.identity = entry.get("identity", server.identity)
        server.known_hosts = entry.get("known_hosts", server.known_hosts)
        if entry.get("name"):
            server.name = entry["name"]
        return server
    if not isinstance(entry, str) or not entry:
        raise ParameterError("servers", entry, "host names, user@host, simulated server names or dicts")
    if entry in (LOCAL_SERVER, "127.0.0.1"):
        return Server(LOCAL_SERVER, "127.0.0.1")
    simulated = simserver.load(entry)
    if simulated is not None:
        return Server(entry, simulated["address"], simulated["user"], simulated["identity"],
                      simulated["known_hosts"])
    user, _, host = entry.rpartition("@")
    if entry.startswith(simserver.NAMESPACE_PREFIX):
        raise ParameterError("servers", entry, "running servers", "no simulated server of that name runs "
                             "(`testbed server sim up`)")
    try:
        address = socket.getaddrinfo(host, 22, socket.AF_INET)[0][4][0]
    except (socket.gaierror, UnicodeError):
        raise ParameterError("servers", entry, "host names this machine resolves, addresses or simulated "
                             f"servers ({', '.join(simserver.running()) or 'none running'})",
                             "unknown host") from None
    return Server(host, address, user or "root")


def resolve_all(entries):
    """The run's servers, localhost first; names unique.

    Raises:
        ParameterError: a bad entry (see :func:`resolve`), a server twice, or fewer than one.
    """
    servers = [resolve(entry) for entry in entries]
    if not any(server.local for server in servers):
        servers.insert(0, Server(LOCAL_SERVER, "127.0.0.1"))
    servers.sort(key=lambda server: not server.local)
    names = [server.name for server in servers]
    for name in names:
        if names.count(name) > 1:
            raise ParameterError("servers", name, "each server once")
    return servers


def parse_servers_option(text):
    """``--servers a,b`` as a list.

    >>> parse_servers_option("localhost, tb-srv1")
    ['localhost', 'tb-srv1']
    """
    return [item.strip() for item in text.split(",") if item.strip()]


#: what a server needs, as (what, shell test); the output of a failed test says more
def requirements(switch_kind, link_kind, python=None, backend=None):
    """``[(what, shell command that succeeds when it is there)]`` a server needs for this run
    (``python``: the interpreter there, default this machine's path; ``backend``: the embedded
    switches' pipeline backend, ``native`` asks for a C compiler and cffi there)."""
    import testbed

    digest = project_digest()
    interpreter = python or sys.executable
    python = shlex.quote(interpreter)
    checks = [
        ("root login with sudo-free root shell", "test $(id -u) -eq 0"),
        (f"the Python interpreter {interpreter}", f"test -x {python}"),
        (f"the testbed project as here ({testbed.__version__}, sources {digest[:12]})",
         f"{python} -c 'import sys; from testbed.emulation.cluster.servers import project_digest; "
         f"sys.exit(project_digest() != {json.dumps(digest)})'"),
        ("Mininet (mnexec and the Python package)",
         f"command -v mnexec >/dev/null && {python} -c 'import mininet.net'"),
        ("network namespaces (ip netns)", "ip netns list >/dev/null"),
    ]
    if link_kind == "vxlan":
        checks.append(("VXLAN in the kernel", "ip link add tbvxcheck$$ type vxlan id 4242 dstport 4789 "
                                              "local 127.0.0.1 && ip link del tbvxcheck$$"))
    else:
        checks.append(("TUN/TAP (ssh -w)", "test -c /dev/net/tun"))
    if switch_kind == "embedded":
        checks.append(("the embedded switch (testbed.embedded_switch.switchd)",
                       f"{python} -c 'import testbed.embedded_switch.switchd'"))
        if backend == "native":
            checks.append(("the native backend (a C compiler and cffi)",
                           f"{python} -c 'import sys; from testbed.p4.native.build import unavailable; "
                           "sys.exit(unavailable() is not None)'"))
    elif switch_kind == "bmv2":
        checks.append(("BMv2 (simple_switch_grpc and its Thrift runtime modules)",
                       f"command -v simple_switch_grpc >/dev/null && {python} -c "
                       "'from testbed.emulation.bmv2_runtime import runtime_modules; runtime_modules()'"))
    return checks


#: the project's packages (setup.py's PACKAGE_DIRS) and the files of theirs that make a version
PROJECT_PACKAGES = ("testbed", "testbed.topologies", "testbed.controllers", "testbed.traffic", "testbed.p4src")
PROJECT_SUFFIXES = (".py", ".p4", ".lark", ".h", ".c", ".json")


def project_digest():
    """SHA-256 over the project's source files as installed here (relative path and content of each), so
    that servers running different code are told apart even when ``testbed.__version__`` is the same."""
    import hashlib
    import importlib

    files = []
    for package in PROJECT_PACKAGES:
        folder = os.path.dirname(importlib.import_module(package).__file__)
        for root, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            files += [(f"{package}/{os.path.relpath(os.path.join(root, name), folder)}", os.path.join(root, name))
                      for name in names if name.endswith(PROJECT_SUFFIXES)]
    digest = hashlib.sha256()
    for relative, path in sorted(files):
        digest.update(relative.encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def check_servers(servers, switch_kind, link_kind, backend=None):
    """Check every remote server before anything starts (``backend``: as for :func:`requirements`).

    Raises:
        EmulationError: naming the first server and everything it lacks (or that it is unreachable).
    """
    problems = []
    for server in servers:
        if server.local:
            continue
        reach = server.run("true")
        if reach.returncode != 0:
            problems.append(f"server {server.name} ({server.user}@{server.address}): not reachable over ssh "
                            f"as {server.user} by key ({(reach.stderr or '').strip() or 'ssh failed'})")
            continue
        script = "; ".join(f"{command} >/dev/null 2>&1 || echo {shlex.quote(what)}"
                           for what, command in requirements(switch_kind, link_kind, server.python, backend))
        missing = [line for line in server.run(script).stdout.splitlines() if line.strip()]
        if missing:
            problems.append(f"server {server.name} ({server.address}) lacks: " + "; ".join(missing))
    if problems:
        raise EmulationError("servers not ready: " + " | ".join(problems))


def local_address_towards(server):
    """This machine's source address towards ``server`` (the local end of VXLAN tunnels)."""
    out = subprocess.run(["ip", "-o", "route", "get", server.address], capture_output=True, text=True,
                         check=False).stdout.split()
    if "src" not in out:
        raise EmulationError(f"server {server.name}: no route to {server.address}")
    return out[out.index("src") + 1]


__all__ = ["Server", "resolve", "resolve_all", "check_servers", "parse_servers_option", "LOCAL_SERVER",
           "local_address_towards", "watch", "WATCH_TIMEOUT_S", "RemoteShell",
           "project_digest"]
