"""Mininet host class for fabric experiments."""
from mininet.node import Host

# Offloads make the kernel hand partially built frames (no checksum, 64 KiB
# GSO super-frames) to veth peers; a software switch reading raw frames would
# forward them as they are, so every host turns them off.
OFFLOAD_FEATURES = ("rx", "tx", "sg", "tso", "gso", "gro", "lro")


class FabricHost(Host):
    """A host with the topology's fixed IP and MAC, IPv6 off and NIC offloads off.

    IPv6 is disabled so router solicitations and DAD probes do not add noise
    to counters and captures.  Parameters come from the topology's
    ``addHost(name, ip=..., mac=..., role="host", level=0)`` and are passed
    through ``**params`` like any Mininet host.
    """

    def config(self, **params):
        """Configure addresses (Mininet's defaults), then silence IPv6 and offloads.

        Returns:
            dict: what :meth:`mininet.node.Host.config` returned.
        """
        result = super().config(**params)
        for scope in ("all", "default", "lo"):
            self.cmd(f"sysctl -qw net.ipv6.conf.{scope}.disable_ipv6=1")
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
            features = " ".join(f"{feature} off" for feature in OFFLOAD_FEATURES)
            self.cmd(f"ethtool -K {intf.name} {features} >/dev/null 2>&1")
        return result
