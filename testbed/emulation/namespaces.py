"""Work inside another process's network namespace without leaving this one.

A switch that runs in a network namespace of its own (BMv2: see
:class:`testbed.emulation.p4switch.BMv2Switch`) has its ports and its control
servers there, out of the machine's reach.  The testbed still has to reach
them: to bring a port down at a known instant, to read a port's state, to
talk to BMv2's Thrift server, which listens on every address of the namespace
it runs in.

``setns(2)`` changes the network namespace of the calling *thread* only, and a
socket stays in the namespace it was created in.  So :func:`in_namespace` runs
a function in a short-lived thread that first joins the namespace; a socket
made there (:func:`namespace_socket`, :func:`connect_in_namespace`) is then
used from any thread of this process, and the rest of the process never
changes namespace.
"""
import ctypes
import fcntl
import os
import socket
import struct
import threading

CLONE_NEWNET = 0x40000000
IFF_UP = 0x1
IFF_RUNNING = 0x40  # the kernel's "operstate up": carrier and no lower layer down
_SIOCGIFFLAGS, _SIOCSIFFLAGS = 0x8913, 0x8914
_libc = ctypes.CDLL(None, use_errno=True)


def namespace_path(pid):
    """The network namespace file of process ``pid``."""
    return f"/proc/{int(pid)}/ns/net"


def _join(pid):
    """Move the calling thread into the network namespace of process ``pid``.

    Raises:
        OSError: no such process, or no privilege.
    """
    fd = os.open(namespace_path(pid), os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns into the network namespace of process {pid}: {os.strerror(error)}")
    finally:
        os.close(fd)


def in_namespace(pid, work):
    """Run ``work()`` inside the network namespace of process ``pid`` and return its result.

    ``pid`` None runs it here, in this thread's namespace.

    Raises:
        OSError: the namespace cannot be joined; whatever ``work`` raises.
    """
    if pid is None:
        return work()
    outcome = {}

    def run():
        try:
            _join(pid)
            outcome["value"] = work()
        except BaseException as error:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name=f"netns-{pid}", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def namespace_socket(pid=None):
    """A datagram socket of the network namespace of ``pid`` (None: this one), for interface ioctls."""
    return in_namespace(pid, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))


def connect_in_namespace(pid, host, port, timeout=5.0):
    """A TCP socket connected to ``host:port`` as seen from inside the namespace of ``pid``.

    Raises:
        OSError: the connection was refused or timed out.
    """
    def connect():
        return socket.create_connection((host, int(port)), timeout=timeout)
    return in_namespace(pid, connect)


def interface_flags(sock, name):
    """The interface flags (``IFF_*``) of interface ``name`` in the namespace of ``sock``.

    Raises:
        OSError: no such interface.
    """
    request = struct.pack("16sH", name.encode()[:15], 0)
    return struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, request)[:18])[1]


def interface_is_up(sock, name):
    """True when ``name`` is administratively up and running (carrier): what ``operstate`` says ``up``.

    An interface that is gone counts as down.
    """
    try:
        flags = interface_flags(sock, name)
    except OSError:
        return False
    return bool(flags & IFF_UP and flags & IFF_RUNNING)


def set_interface_up(name, up, sock=None):
    """Set the UP flag of interface ``name`` at once (one ioctl, as ``ip link set dev NAME up|down`` does).

    Args:
        name: the interface.
        up: True for up, False for down.
        sock: a socket of the namespace the interface lives in (:func:`namespace_socket`);
            None: this process's namespace.

    Raises:
        OSError: no such interface, or no privilege.
    """
    own = sock is None
    sock = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        flags = interface_flags(sock, name)
        flags = flags | IFF_UP if up else flags & ~IFF_UP
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH", name.encode()[:15], flags))
    finally:
        if own:
            sock.close()
