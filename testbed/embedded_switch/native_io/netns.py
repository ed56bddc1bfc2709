"""A sender -> switch -> receiver line of network namespaces and veths, without Mininet.

Used by benchmarks/bench_io_methods.py and the native loop's tests: the veth layout of
benchmarks/bench_switch_veth.py with nothing else in the namespaces.
"""
import contextlib
import ctypes
import os
import subprocess
import tempfile

__all__ = ["VethLine", "in_namespace"]

_CLONE_NEWNET = 0x40000000


class VethLine:
    """Namespaces ``<prefix>snd``, ``<prefix>sw``, ``<prefix>rcv`` joined by two veth pairs.

    The sender's ``<prefix>a`` pairs with the switch's ``<prefix>b``; the switch's ``<prefix>c``
    with the receiver's ``<prefix>d``.  IPv6 is off in the three namespaces (no router
    solicitations or neighbour discovery among the frames).  Entering the context creates them
    (removing leftovers of the same prefix first); leaving deletes the namespaces, and with them
    the veths.  Needs root.

    While it exists, a temporary folder ``testbed-netns-<pid>-...`` marks this process as a running
    owner, so another process's ``testbed cleanup`` leaves the namespaces alone; after a SIGKILL,
    ``testbed cleanup`` removes the folder and the ``tb-`` namespaces.

    Args:
        prefix: name prefix, at most 9 characters (interface names have 15), starting with ``tb-``
            (the namespaces ``testbed cleanup`` removes).
    """

    def __init__(self, prefix="tb-io-"):
        if len(prefix) > 9 or not prefix.startswith("tb-"):
            raise ValueError(f"prefix {prefix!r}: at most 9 characters, starting with tb-")
        self.prefix = prefix
        self.sender, self.switch, self.receiver = (prefix + role for role in ("snd", "sw", "rcv"))
        self.sender_if, self.switch_in, self.switch_out, self.receiver_if = (prefix + x for x in "abcd")

    def __enter__(self):
        self.delete()
        self._mark = tempfile.mkdtemp(prefix=f"testbed-netns-{os.getpid()}-")
        try:
            for namespace in (self.sender, self.switch, self.receiver):
                _run("ip", "netns", "add", namespace)
                _run("ip", "-n", namespace, "link", "set", "lo", "up")
                _run("ip", "netns", "exec", namespace, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                     "net.ipv6.conf.default.disable_ipv6=1")
            for (a, ns_a), (b, ns_b) in (((self.sender_if, self.sender), (self.switch_in, self.switch)),
                                         ((self.switch_out, self.switch), (self.receiver_if, self.receiver))):
                _run("ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b)
                _run("ip", "-n", ns_a, "link", "set", a, "up")
                _run("ip", "-n", ns_b, "link", "set", b, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.delete()
        if getattr(self, "_mark", None):
            os.rmdir(self._mark)
            self._mark = None

    def delete(self):
        """Remove the namespaces (and their veths) if they exist."""
        for namespace in (self.sender, self.switch, self.receiver):
            subprocess.run(["ip", "netns", "del", namespace], stderr=subprocess.DEVNULL, check=False)

    def received(self):
        """Frames the receiver's veth has received so far."""
        out = _run("ip", "netns", "exec", self.receiver, "cat",
                   f"/sys/class/net/{self.receiver_if}/statistics/rx_packets")
        return int(out)


def _run(*command):
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


@contextlib.contextmanager
def in_namespace(name):
    """Run the body with the calling thread in network namespace ``name`` (``ip netns`` name).

    Sockets opened inside stay in that namespace after the body; the thread returns to its own
    namespace on exit, whatever happens.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET):
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        try:
            yield
        finally:
            if libc.setns(own, _CLONE_NEWNET):
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(target)
