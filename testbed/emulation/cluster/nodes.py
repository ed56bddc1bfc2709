"""Hosts and switches that run on any server of a run, through Mininet's cluster edition.

:class:`ClusterNodeMixin` is the cluster edition's ``RemoteMixin`` (node shells and
processes started over ssh, ``mnexec`` on the server) with its defects worked around:

* no ``sudo`` on either end: the testbed logs in as root, so commands run as they are
  (the cluster edition wraps every command in ``sudo -E`` on both ends);
* remote commands are quoted (``shlex.join``), so ``python -c <script>`` survives ssh;
* every remote process carries the run's owner mark and the server's name
  (``TESTBED_OWNER``, ``TESTBED_SERVER``), so ``testbed cleanup --servers`` removes only what
  the run left there;
* the cluster edition's cleanup callback (``ssh <server> sudo mn -c``, which would remove every
  other user's network on that server) is never registered.
"""
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading

from mininet.examples.cluster import ClusterCleanup, RemoteMixin
from mininet.node import Node

from testbed.emulation.cleanup import OWNER_ENV, REMOTE_DIR_PREFIX, REMOTE_PID_PREFIX, SERVER_ENV
from testbed.emulation.hosts import FabricHost, port_setup_commands
from testbed.emulation.p4switch import BMv2Switch, EmbeddedP4Switch, SWITCHD_MODULE
from testbed.errors import EmulationError

#: how often a remote node waiting for its shell's output checks that the shell's connection still runs
SHELL_CHECK_MS = 1000


class ClusterNodeMixin(RemoteMixin):
    """A Mininet node on ``server`` (a :class:`~testbed.emulation.cluster.servers.Server`), local or remote."""

    def __init__(self, name, server=None, owner=None, **params):
        self.cluster_server = server
        self.owner = str(owner or os.environ.get(OWNER_ENV, os.getpid()))
        remote = server is not None and not server.local
        RemoteMixin.__init__(self, name, server=server.name if remote else "localhost", user="root",
                             serverIP=server.address if server else "127.0.0.1", **params)
        ClusterCleanup.serveruser.pop(self.server, None)  # never `mn -c` on any server

    def waitReadable(self, timeoutms=None):
        """As Mininet's; on a remote node, raise instead of waiting forever once its shell's ssh connection
        has ended (this process holds the pty's other end, so the read would never see an end)."""
        if not self.isRemote or self.readbuf or timeoutms is not None or self.shell is None:
            return super().waitReadable(timeoutms)
        while True:
            ready = self.pollOut.poll(SHELL_CHECK_MS)
            if ready:
                return ready
            if self.shell.poll() is not None:
                server = self.cluster_server
                raise EmulationError(f"node {self.name} on server {server.name} ({server.address}): its shell's "
                                     f"ssh connection ended (status {self.shell.returncode}); is the server "
                                     "reachable?")

    def read(self, size=1024):
        """As Mininet's (which reads before waiting when a shell starts), waiting as :meth:`waitReadable`."""
        if self.isRemote and not self.readbuf and self.shell is not None:
            self.waitReadable()
        return super().read(size)

    @property
    def server_dir(self):
        """The folder of a remote node's files on its server (``/tmp/testbed-rnode-<owner>-<name>``: control
        sockets, packet logs, pcaps), None on this machine; ``testbed cleanup --servers`` removes it too."""
        return f"/tmp/{REMOTE_DIR_PREFIX}{self.owner}-{self.name}" if self.isRemote else None

    def make_server_dir(self):
        """Make the (empty) server folder, through the node's shell.

        Raises:
            EmulationError: naming node and server, with the shell's message.
        """
        output = self.cmd(f"rm -rf {self.server_dir} && mkdir -m 700 {self.server_dir}")
        if output.strip():
            raise EmulationError(f"node {self.name} on server {self.cluster_server.name}: making "
                                 f"{self.server_dir}: {output.strip()}")

    def fetch_server_dir(self, into, fetch=True):
        """Copy the server folder's regular files (sockets left out) into the local folder ``into`` (with
        ``fetch``), then remove the folder; nothing on a server lost to the run."""
        server = self.cluster_server
        if server.lost or not self.isRemote:
            return
        if fetch:
            fetched = subprocess.run(server.ssh_argv() + [f"find {self.server_dir} -maxdepth 1 -type f -printf "
                                                          f"'%f\\0' | tar -C {self.server_dir} --null -T - -cf -"],
                                     capture_output=True, timeout=120, check=False)
            if fetched.returncode == 0 and fetched.stdout:
                with tarfile.open(fileobj=io.BytesIO(fetched.stdout)) as archive:
                    for member in archive.getmembers():
                        if member.isfile():
                            target = os.path.join(into, os.path.basename(member.name))
                            with archive.extractfile(member) as source, open(target, "wb") as sink:
                                shutil.copyfileobj(source, sink)
        server.run(f"rm -rf {self.server_dir}")

    def rcmd(self, *cmd, **opts):
        """A command in the server's root namespace, its output: as the cluster edition's, but on another
        server through the run's kept shell there (:meth:`~testbed.emulation.cluster.servers.Server.shell`),
        not an ssh login per command."""
        if not self.isRemote:
            return super().rcmd(*cmd, **opts)
        return self.cluster_server.shell().run(" ".join(str(part) for part in cmd)).stdout

    def remote_command(self, argv):
        """``env TESTBED_OWNER=... TESTBED_SERVER=... argv`` as one quoted shell string for ssh (this
        process's interpreter replaced by the server's, :meth:`~testbed.emulation.cluster.servers.Server.argv`)."""
        server = self.cluster_server
        return shlex.join(["env", f"{OWNER_ENV}={self.owner}", f"{SERVER_ENV}={server.name}",
                           *server.forwarded_environment()] + server.argv(argv))

    def _popen(self, cmd, sudo=True, tt=True, **params):
        """Start ``cmd`` on the node's server: over ssh with the run's marks when remote, else here.

        A remote process without a terminal (``popen``: traffic, captures) is a :class:`RemoteProcess`:
        its signals reach the process on the server, so it ends as it would here (a receiver
        told SIGTERM writes its report and exits 0), not with its ssh connection.
        """
        if isinstance(cmd, str):
            cmd = cmd.split()
        if not self.isRemote:
            return Node._popen(self, cmd, **params)
        # out of the caller's Ctrl-C, as RemoteMixin's preexec_fn=os.setpgrp, but without Python code
        # between fork and exec (unsafe with the gRPC threads of the controller in this process)
        params.update(process_group=0)
        if tt:
            return Node._popen(self, self.cluster_server.ssh_argv(tty=True) + [self.remote_command(cmd)], **params)
        if cmd[:2] == ["mnexec", "-da"]:
            # -d forks when the process leads its group (as under sshd): the pid written below would be gone
            cmd = ["mnexec", "-a"] + cmd[2:]
        with RemoteProcess.lock:
            RemoteProcess.count += 1
            pid_file = f"/tmp/{REMOTE_PID_PREFIX}{self.owner}-{self.name}-{RemoteProcess.count}"
        remote = f"echo $$ > {pid_file}; exec {self.remote_command(cmd)}"
        process = RemoteProcess(self.cluster_server.ssh_argv() + [shlex.join(["sh", "-c", remote])], **params)
        process.server, process.pid_file = self.cluster_server, pid_file
        return process


class RemoteProcess(subprocess.Popen):
    """The local ssh end of a process on another server; signals go to that process."""

    lock = threading.Lock()
    count = 0
    server = None
    pid_file = None

    def send_signal(self, sig):
        """Signal the process on its server (its pid is in ``pid_file`` there), else the ssh client."""
        if self.poll() is not None:
            return
        result = self.server.run(f"kill -{int(sig)} $(cat {self.pid_file}) && rm -f {self.pid_file}")
        if result.returncode != 0:
            super().send_signal(sig)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)
        super().kill()


class ClusterHost(ClusterNodeMixin, FabricHost):
    """A fabric host on any server; its ``ip`` batch goes through its shell (no file shared with the server)."""

    def _run_batch(self, lines, batch_dir):
        if not self.isRemote:
            return super()._run_batch(lines, batch_dir)
        names = [each.name for each in self.intfList() if each.name != "lo"]
        script = "\\n".join(lines)  # one shell line: the node's interactive shell would prompt for more
        output = self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1; "
                          + (port_setup_commands(names) + "; " if names else "")
                          + f"printf '%b\\n' {shlex.quote(script)} | ip -batch -")
        if output.strip():
            raise EmulationError(f"host {self.name} on {self.cluster_server.name}: configuring its "
                                 f"interfaces failed: {output.strip()}")
        return None


class ClusterEmbeddedSwitch(ClusterNodeMixin, EmbeddedP4Switch):
    """The embedded P4 switch on any server; a remote one serves P4Runtime on its server's address.

    A remote switch process runs under ``ssh -tt``: when the switch is stopped (its ssh client
    signalled), the server hangs up its terminal and the process goes with it; its output
    comes back over ssh into the local log file.  Its control socket is in its run folder on its
    server: requests to it (port impairment, port and packet generator counters, PFC) are made
    there, through the server's control relay (:attr:`control_via`, one kept ssh connection).
    """

    def __init__(self, name, server=None, owner=None, **params):
        if server is not None and not server.local:
            params["launcher"] = None  # the local fork server cannot fork on another server
        super().__init__(name, server=server, owner=owner, **params)
        if self.isRemote:
            self.control_via = self.cluster_server.control_relay()
            self.control_path = f"{self.server_dir}/ctl"

    @property
    def grpc_address(self):
        """``address:port`` of the P4Runtime server: the server's address for a remote switch."""
        address = self.cluster_server.address if self.isRemote else "127.0.0.1"
        return f"{address}:{self.grpc_port}"

    def switchd_args(self):
        """As the local switch, listening on every address of its server when remote."""
        argv = super().switchd_args()
        if self.isRemote:
            argv[argv.index("--grpc-addr") + 1] = f"0.0.0.0:{self.grpc_port}"
            if "--pcap-dir" in argv:
                argv[argv.index("--pcap-dir") + 1] = self.server_dir
        return argv

    def _listening(self):
        from testbed.emulation.p4switch import accepts_connections

        return accepts_connections(self.grpc_address)

    def launch(self):
        """Local: as the embedded switch; remote: ``python -m switchd`` over ``ssh -tt``, output to the log."""
        if not self.isRemote:
            return super().launch()
        self.make_server_dir()
        log = open(self.log_path, "ab")
        try:
            return self._popen([sys.executable, "-m", SWITCHD_MODULE] + self.switchd_args(), tt=True,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def stop(self, deleteIntfs=True):
        """As on one server; remote: then its server folder fetched (pcaps) and removed."""
        try:
            super().stop(deleteIntfs)
        finally:
            self.fetch_server_dir(self.log_dir, fetch=self.pcap)

    def describe(self):
        """The state file entry, with the server (and its folder there)."""
        entry = super().describe()
        entry.update(server=self.cluster_server.name, server_dir=self.server_dir)
        return entry


class ClusterBMv2Switch(ClusterNodeMixin, BMv2Switch):
    """BMv2 on any server, in a network namespace of its own there (as on one server).

    A remote BMv2 runs under ``ssh -tt`` as :class:`ClusterEmbeddedSwitch` does (it goes when its
    terminal hangs up; its output comes back into the local log).  Its files are in a run folder
    on its server (``/tmp/testbed-rnode-<owner>-<name>``, removed at stop and by ``testbed cleanup
    --servers``): the P4Runtime Unix socket, and the packet log and pcaps when asked for, which
    are fetched into the log folder at stop.  The controller reaches P4Runtime through an ssh
    forward of a local Unix socket to that one (:attr:`grpc_address` is the local end), so, as
    on one server, only root on either machine reaches it.  The Thrift server (registers)
    listens only inside the switch's namespace: reads run ``python -m testbed.emulation.bmv2_runtime``
    in the switch's shell there.
    """

    #: how long a readiness check waits for P4Runtime to answer through the forward
    READY_PROBE_S = 0.3

    def __init__(self, name, server=None, owner=None, **params):
        super().__init__(name, server=server, owner=owner, **params)
        self._forward = None

    def output_dir(self):
        """Remote: the run folder on the switch's server (fetched into the log folder at stop)."""
        return self.server_dir if self.isRemote else super().output_dir()

    def serve_address(self):
        """Remote: the Unix socket in the run folder on the switch's server."""
        return f"unix:{self.server_dir}/p4rt" if self.isRemote else super().serve_address()

    def start(self, controllers):
        """Remote: the run folder, the ports (and generator port) set up in the namespace, then BMv2."""
        if not self.isRemote:
            return super().start(controllers)
        ports = list(self.port_interfaces().values())
        self.make_server_dir()
        commands = []
        if self.pktgen_port is not None:
            switch_end, injector_end = self._pktgen_interfaces()
            commands.append(f"ip link add {switch_end} type veth peer name {injector_end}")
            ports += [switch_end, injector_end]
        commands.append(port_setup_commands(ports + ["lo"], up=True))
        output = self.cmd(" && ".join(commands))
        if output.strip():
            raise EmulationError(f"switch {self.name} on server {self.cluster_server.name}: setting up its "
                                 f"ports failed: {output.strip()}")
        return super(BMv2Switch, self).start(controllers)

    def spawn_in_namespace(self, argv, log_path):
        """Remote: ``mnexec -a`` on the switch's server; BMv2 itself under ``ssh -tt`` (see the class),
        other processes (packet generator injectors) as :class:`RemoteProcess`."""
        if not self.isRemote:
            return super().spawn_in_namespace(argv, log_path)
        log = open(log_path, "ab")
        try:
            if argv[:1] == [self.binary]:
                process = self._popen(["mnexec", "-a", str(self.pid)] + argv, tt=True, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                self._forward = self._forward_p4runtime(log)
                return process
            return self.popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def _forward_p4runtime(self, log):
        """``ssh -L <local socket>:<server socket>``: its remote side reads the stdin this run holds, so the
        forward ends with the run (also a killed one)."""
        if os.path.exists(self.socket_path):
            os.remove(self.socket_path)
        argv = self.cluster_server.ssh_argv()
        argv[-1:] = ["-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                     "-o", "StreamLocalBindMask=0177", "-L", f"{self.socket_path}:{self.server_dir}/p4rt",
                     argv[-1], self.remote_command(["sh", "-c", "exec cat >/dev/null"])]
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
                                process_group=0)

    def _listening(self):
        """Remote: P4Runtime answers through the forward (the forward's socket accepts before BMv2 listens)."""
        if not self.isRemote:
            return super()._listening()
        import grpc

        if self._forward is None or self._forward.poll() is not None or not os.path.exists(self.socket_path):
            return False
        with grpc.insecure_channel(self.grpc_address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=self.READY_PROBE_S)
                return True
            except grpc.FutureTimeoutError:
                return False

    def read_register(self, name, index=None, client=None):
        """Remote: ``python -m testbed.emulation.bmv2_runtime`` in the switch's shell on its server (Thrift
        listens only in the switch's namespace there).

        Raises:
            EmulationError: the switch is not running, or BMv2 refused the read (its message).
        """
        if not self.isRemote:
            return super().read_register(name, index, client)
        self.check_alive()
        argv = [self.cluster_server.interpreter, "-m", "testbed.emulation.bmv2_runtime", name] + (
            [] if index is None else [str(int(index))]) + ["--port", str(self.thrift_port)]
        output = self.cmd(shlex.join(argv) + " 2>&1").strip()
        try:
            return json.loads(output.splitlines()[-1])
        except (IndexError, ValueError):
            raise EmulationError(f"switch {self.name} on server {self.cluster_server.name}: reading register "
                                 f"{name}: {output[-300:] or 'no answer'}") from None

    def stop(self, deleteIntfs=True):
        """As on one server; remote: then the forward, and the run folder fetched (packet log, pcaps) and removed."""
        try:
            super().stop(deleteIntfs)
        finally:
            if self.isRemote:
                forward, self._forward = self._forward, None
                if forward is not None:
                    from testbed.emulation.cluster.links import stop_tunnels

                    stop_tunnels([forward])
                self.fetch_server_dir(self.log_dir, fetch=self.packet_log or self.pcap)

    def describe(self):
        """The state file entry, with the server and (remote) the run folder there."""
        entry = super().describe()
        entry.update(server=self.cluster_server.name, server_dir=self.server_dir)
        return entry

