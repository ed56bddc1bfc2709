"""Switch classes for emulated fabrics.

``BridgeSwitch`` is the placeholder used before (or instead of) P4 switches:
a Linux bridge with spanning tree, so a fabric with loops can be built safely.
The P4 switch classes (embedded target, BMv2) live in
:mod:`testbed.emulation.p4switch`.
"""
from mininet.nodelib import LinuxBridge


class BridgeSwitch(LinuxBridge):
    """A Linux bridge with spanning tree on (fabrics have loops).

    Node options from the topology (role, level, dpid) are accepted and kept
    in ``params`` like any Mininet node option.
    """

    def __init__(self, name, stp=True, **params):
        super().__init__(name, stp=stp, **params)

    @classmethod
    def setup(cls):
        """Let bridged frames bypass iptables, or the bridges would not forward."""
        for table in ("arp", "ip", "ip6"):
            path = f"/proc/sys/net/bridge/bridge-nf-call-{table}tables"
            try:
                with open(path, "w") as handle:
                    handle.write("0")
            except OSError:
                pass  # br_netfilter not loaded: nothing filters bridged frames
        super().setup()
