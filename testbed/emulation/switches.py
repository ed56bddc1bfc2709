"""Switch classes for emulated fabrics.

``BridgeSwitch`` is the placeholder used before (or instead of) P4 switches:
a Linux bridge with spanning tree, so a fabric with loops can be built safely.
The P4 switch classes (embedded target, BMv2) live in
:mod:`testbed.emulation.p4switch`.
"""
import subprocess

from mininet.nodelib import LinuxBridge


class BridgeSwitch(LinuxBridge):
    """A Linux bridge with spanning tree on (fabrics have loops).

    Node options from the topology (role, level, dpid) are accepted and kept
    in ``params`` like any Mininet node option.  ``prio`` is its spanning-tree
    bridge priority (the lowest is the root); a network gives its bridges
    ``FIRST_PRIORITY`` + their position in the topology, as Mininet does when it
    starts them one after another.
    """

    FIRST_PRIORITY = 100  # Mininet's LinuxBridge.nextPrio before any bridge exists

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

    def stop(self, deleteIntfs=True):
        """Delete the bridge device (its ports are released); with ``deleteIntfs`` the ports too.

        Runs ``ip link del`` directly, not through the node's shell, so a shell left
        busy by an interrupted command cannot stop the teardown.
        """
        subprocess.run(["ip", "link", "del", "dev", self.name], capture_output=True, check=False)
        if deleteIntfs:
            self.deleteIntfs()
