"""Handles on the hosts of an emulated fabric, for running traffic processes in them.

Two sources of hosts:

* Mininet host objects of a network built in this process
  (:func:`from_mininet`): processes start with ``host.popen``;
* the state file of a fabric started by ``testbed net up``
  (:func:`load_state`, default path :data:`DEFAULT_STATE_FILE`), a JSON object::

      {"hosts": {"h1": {"pid": 1234, "ip": "10.0.0.1", "mac": "00:00:00:00:00:01",
                        "intf": "h1-eth0"}, ...}}

  where ``pid`` is a process inside the host's network namespace (Mininet's
  shell of that host); processes start with ``mnexec -a PID`` (falling back
  to ``nsenter --net=/proc/PID/ns/net``).  ``ip`` may carry a prefix length
  (``10.0.0.1/8``); it is stripped.  ``intf`` defaults to ``<name>-eth0``.
  An optional ``"next_hop_mac"`` makes every frame this host sends carry
  that Ethernet destination (a routed fabric whose first-hop switch expects
  its own router MAC) instead of the destination host's MAC.
"""
import json
import os
import select
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

from testbed.emulation.state import DEFAULT_STATE_FILE, read_state
from testbed.errors import EmulationError, ParameterError


@dataclass
class HostHandle:
    """A host that traffic processes can run in.

    Attributes:
        name: host name.
        ip: IPv4 address of its fabric interface.
        mac: MAC address of its fabric interface.
        intf: name of its fabric interface.
        launcher: ``(argv, **popen_kwargs) -> subprocess.Popen`` starting a process in the host.
    """

    name: str
    ip: str
    mac: str
    intf: str
    launcher: Callable
    pid: Optional[int] = None
    next_hop_mac: Optional[str] = None

    def frame_destination(self, peer):
        """Ethernet destination of frames from this host to ``peer`` (a HostHandle)."""
        return self.next_hop_mac or peer.mac

    def popen(self, argv, **kwargs):
        """Start ``argv`` (a list) inside the host; returns the Popen object."""
        return self.launcher(list(argv), **kwargs)


def from_mininet(host):
    """Handle of a Mininet host object (its default interface is the fabric one)."""
    intf = host.defaultIntf()
    ip = host.IP() if intf is not None else None
    mac = host.MAC() if intf is not None else None
    if not ip or not mac:
        raise EmulationError(f"host {host.name} has no configured interface")

    def launcher(argv, **kwargs):
        return host.popen(argv, **kwargs)

    return HostHandle(name=host.name, ip=ip, mac=mac, intf=str(intf), launcher=launcher,
                      pid=getattr(host, "pid", None))


def _namespace_launcher(pid):
    """A launcher running commands in the network namespace of ``pid``."""
    mnexec = shutil.which("mnexec")

    def launcher(argv, **kwargs):
        if mnexec:
            prefix = [mnexec, "-a", str(pid)]
        else:
            prefix = ["nsenter", f"--net=/proc/{pid}/ns/net", "--"]
        return subprocess.Popen(prefix + list(argv), **kwargs)

    return launcher


def load_state(path=DEFAULT_STATE_FILE):
    """Read the running fabric's host table.

    Returns:
        dict[str, HostHandle]: by host name, in file order.

    Raises:
        EmulationError: if the file is missing, malformed, or a host's process is gone.
    """
    state = read_state(path)
    hosts = state.get("hosts") if isinstance(state, dict) else None
    if not isinstance(hosts, dict) or not hosts:
        raise EmulationError(f"{path} has no \"hosts\" table")
    handles = {}
    for name, entry in hosts.items():
        try:
            pid = int(entry["pid"])
            ip = str(entry["ip"]).split("/")[0]
            mac = str(entry["mac"])
            intf = str(entry.get("intf") or f"{name}-eth0")
        except (KeyError, TypeError, ValueError):
            raise EmulationError(f"{path}: host {name!r} needs pid, ip and mac")
        if not os.path.exists(f"/proc/{pid}/ns/net"):
            raise EmulationError(f"host {name} (pid {pid}) is not running; is the fabric still up?")
        handles[name] = HostHandle(name=name, ip=ip, mac=mac, intf=intf, launcher=_namespace_launcher(pid),
                                   pid=pid, next_hop_mac=entry.get("next_hop_mac"))
    return handles


def select_hosts(available, names, option="--hosts"):
    """Pick hosts by name, in the order given.

    Args:
        available: dict name -> HostHandle.
        names: list of host names.
        option: option name for error messages.

    Returns:
        list[HostHandle]

    Raises:
        ParameterError: an unknown or repeated name, or an empty list.
    """
    if not names:
        raise ParameterError(option, names, "a comma-separated list of host names")
    chosen = []
    for name in names:
        if name not in available:
            raise ParameterError(option, name, "hosts of the running fabric: " + ", ".join(sorted(available)),
                                 reason=f"host {name!r} is not in the fabric")
        if any(handle.name == name for handle in chosen):
            raise ParameterError(option, name, "each host at most once")
        chosen.append(available[name])
    return chosen


def read_line(process, deadline, what):
    """One line of a traffic process's stdout, read before ``deadline`` (monotonic seconds).

    Read a byte at a time straight from the pipe, so nothing after the line is taken into a
    buffer that a later ``communicate()`` (which reads the pipe itself) would not see.  The
    processes announce themselves this way (``ready``, ``READY``) and hand their reports back on
    the same pipe, which is how a process on another server talks to the run too.

    Raises:
        EmulationError: naming ``what``: no line before the deadline, or the process ended first
            (its stderr's tail quoted).
    """
    line = b""
    fd = process.stdout.fileno()
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise EmulationError(f"{what} did not answer in time")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 1)
        if not chunk:
            error = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise EmulationError(f"{what} exited early: {error.strip()[-2000:]}")
        line += chunk
    return line.decode().strip()


def finish(process, timeout, what):
    """Wait until a traffic process ends and return the JSON report it printed (the rest of its stdout).

    Raises:
        EmulationError: naming ``what``: it did not end in time, it failed (its stderr's tail
            quoted), or what it printed is not a report.
    """
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"{what} did not finish in time") from None
    if process.returncode != 0:
        raise EmulationError(f"{what} failed (status {process.returncode}): "
                             f"{(err or b'').decode(errors='replace').strip()[-2000:]}")
    try:
        return json.loads(out)
    except ValueError:
        raise EmulationError(f"{what} printed no report: {out[-300:]!r}") from None


def stop_processes(processes, timeout=5.0):
    """Kill what is still running of ``processes`` (Popen objects), reap them and close their pipes.

    Best effort: used in ``finally`` blocks after a run, so it never raises.
    """
    for process in processes:
        if process.poll() is None:
            process.kill()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class ProcessRegistry:
    """Remembers every traffic process started in the hosts, to kill them on abort."""

    def __init__(self):
        self._processes = []
        self._lock = threading.Lock()
        self._closed = False

    def wrap(self, handle):
        """Return a copy of a HostHandle whose launcher registers each process it starts."""
        launch = handle.launcher

        def launcher(argv, **kwargs):
            with self._lock:
                if self._closed:
                    raise EmulationError("the run is stopping: no new traffic process")
                process = launch(argv, **kwargs)
                self._processes.append(process)
            return process

        return replace(handle, launcher=launcher)

    def kill_all(self):
        """Refuse new processes from now on; SIGKILL every registered one still running and reap it."""
        with self._lock:
            self._closed = True
            processes = list(self._processes)
        for process in processes:
            if process.poll() is None:
                try:
                    process.kill()
                except OSError:
                    pass
        for process in processes:
            try:
                process.wait(timeout=5)
            except Exception:  # noqa: BLE001 - best effort during teardown
                pass

    def running(self):
        """Number of registered processes still running."""
        with self._lock:
            return sum(1 for process in self._processes if process.poll() is None)
