"""A loop-free Linux-bridge fabric for traffic tests that do not need P4 switches.

``two_bridges(prefix, hosts)`` builds ``<prefix>h1..<prefix>hN`` split over two
Linux bridges ``<prefix>s1`` and ``<prefix>s2`` joined by one link, yields the
Mininet network, and on exit checks that no interface or host shell is left.
"""
import contextlib
import os
import subprocess


def interfaces_of(names):
    """Lines of ``ip -o link`` naming an interface that belongs to one of ``names``."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [line for line in links.splitlines() if any(f" {name}-" in line or f" {name}:" in line for name in names)]


@contextlib.contextmanager
def two_bridges(prefix, hosts):
    """Yield a started Mininet network of ``hosts`` hosts on two bridges; stop and check it after."""
    import mininet.net as mininet_net
    from mininet.log import setLogLevel
    from mininet.nodelib import LinuxBridge
    from mininet.topo import Topo

    class TwoBridges(Topo):
        def build(self):
            left = self.addSwitch(f"{prefix}s1")
            right = self.addSwitch(f"{prefix}s2")
            for index in range(1, hosts + 1):
                host = self.addHost(f"{prefix}h{index}")
                self.addLink(host, left if index <= hosts // 2 else right)
            self.addLink(left, right)

    setLogLevel("error")
    net = mininet_net.Mininet(TwoBridges(), switch=LinuxBridge, controller=None, autoSetMacs=True)
    pids = []
    try:
        net.start()
        pids = [h.pid for h in net.hosts]
        yield net
    finally:
        net.stop()
        names = [f"{prefix}h{i}" for i in range(1, hosts + 1)] + [f"{prefix}s1", f"{prefix}s2"]
        assert not interfaces_of(names), "Mininet left interfaces behind"
        assert not [pid for pid in pids if os.path.exists(f"/proc/{pid}")], "host shells still running"
