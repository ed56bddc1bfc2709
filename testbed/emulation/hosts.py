"""Mininet host class for fabric experiments: configured in one shell command, static neighbours included."""
import os
import tempfile

from mininet.node import Host

from testbed.errors import EmulationError

# Offloads make the kernel hand partially built frames (no checksum, 64 KiB
# GSO super-frames) to veth peers; a software switch reading raw frames would
# forward them as they are, so every host turns them off.
OFFLOAD_FEATURES = ("rx", "tx", "sg", "tso", "gso", "gro", "lro")


def port_setup_commands(names, up=False):
    """One shell line turning IPv6 and offloads off on each interface and, with ``up``, setting it up.

    For shells on other servers, which the system calls of :mod:`testbed.emulation.interfaces`
    cannot reach.  Only a failure to set an interface up prints (a feature the device does not
    let anyone change stays as it is), so empty output means done.

    >>> port_setup_commands(["s1-eth1"], up=True)  # doctest: +NORMALIZE_WHITESPACE
    'sysctl -qw net.ipv6.conf.s1-eth1.disable_ipv6=1 >/dev/null 2>&1;
     ethtool -K s1-eth1 rx off tx off sg off tso off gso off gro off lro off >/dev/null 2>&1;
     ip link set dev s1-eth1 up'
    """
    features = " ".join(f"{feature} off" for feature in OFFLOAD_FEATURES)
    commands = []
    for name in names:
        commands += [f"sysctl -qw net.ipv6.conf.{name}.disable_ipv6=1 >/dev/null 2>&1",
                     f"ethtool -K {name} {features} >/dev/null 2>&1"] + ([f"ip link set dev {name} up"] if up else [])
    return "; ".join(commands)


def neighbour_lines(interface, neighbours):
    """``ip`` batch lines making a permanent neighbour entry per ``(ip, mac)`` on ``interface``.

    The static equivalent of ``arp -s IP MAC`` (what Mininet's ``staticArp`` runs
    once per host pair): the kernel never asks for these addresses with ARP.

    >>> neighbour_lines("h1-eth0", [("10.0.0.2", "00:00:0a:00:00:02")])
    ['neigh replace 10.0.0.2 lladdr 00:00:0a:00:00:02 dev h1-eth0 nud permanent']
    """
    return [f"neigh replace {ip} lladdr {mac} dev {interface} nud permanent" for ip, mac in neighbours]


class FabricHost(Host):
    """A host with the topology's fixed IP and MAC, IPv6 off, NIC offloads off and static neighbours.

    IPv6 is disabled so router solicitations and DAD probes do not add noise
    to counters and captures.  Parameters come from the topology's
    ``addHost(name, ip=..., mac=..., role="host", level=0)`` and are passed
    through ``**params`` like any Mininet host.

    Everything is set by one shell command: ``sysctl`` (IPv6 off), ``ethtool``
    (offloads off) and one ``ip -batch`` file with the addresses, the
    interfaces up and the static neighbour entries, instead of Mininet's
    ``ifconfig`` round trips and one ``arp -s`` per host pair.
    """

    def config(self, mac=None, ip=None, defaultRoute=None, lo="up", neighbours=(), batch_dir=None,
               **_params):
        """Configure the host's interfaces, addresses, neighbour entries (Mininet's ``Node.config`` options and more).

        Args:
            mac: MAC address of the default interface.
            ip: ``address/prefix`` of the default interface.
            defaultRoute: ``"dev IFACE"``/``"via GW"`` or an interface for the default route, or None.
            lo: ``"up"`` (or ``"down"``) for the loopback interface.
            neighbours: ``[(ip, mac)]`` permanent neighbour entries on the default interface.
            batch_dir: where to write the ``ip -batch`` file (default: the system's temporary directory).

        Returns:
            dict: the options applied (as Mininet's ``config``).

        Raises:
            EmulationError: ``ip`` refused a line (its message names the line).
        """
        intf = self.defaultIntf()
        lines, applied = [], {}
        if intf is not None and mac:
            lines.append(f"link set dev {intf.name} address {mac}")
            intf.mac = applied["mac"] = mac
        if intf is not None and ip:
            address, _, prefix = ip.partition("/")
            prefix_len = int(prefix) if prefix else 8
            lines.append(f"addr replace {address}/{prefix_len} dev {intf.name}")
            intf.ip, intf.prefixLen = address, prefix_len
            applied["ip"] = ip
        lines += [f"link set dev {each.name} up" for each in self.intfList() if each.name != "lo"]
        lines.append(f"link set dev lo {lo}")
        if defaultRoute:
            route = defaultRoute if " " in str(defaultRoute) else f"dev {defaultRoute}"
            lines.append(f"route replace default {route}")
            applied["defaultRoute"] = defaultRoute
        if intf is not None:
            lines += neighbour_lines(intf.name, neighbours)
        self._run_batch(lines, batch_dir)
        return applied

    def _run_batch(self, lines, batch_dir):
        """IPv6 and offloads off, then the ``ip`` lines, in one round trip through the host's shell."""
        names = [each.name for each in self.intfList() if each.name != "lo"]
        sysctls = " ".join(f"net.ipv6.conf.{scope}.disable_ipv6=1" for scope in ["all", "default", "lo"] + names)
        features = " ".join(f"{feature} off" for feature in OFFLOAD_FEATURES)
        offloads = "; ".join(f"ethtool -K {name} {features} >/dev/null 2>&1" for name in names)
        path = os.path.join(batch_dir or tempfile.gettempdir(), f"testbed-{os.getpid()}-{self.name}.ip")
        with open(path, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        try:
            output = self.cmd(f"sysctl -qw {sysctls} >/dev/null 2>&1; {offloads + '; ' if offloads else ''}"
                              f"ip -batch {path}")
        finally:
            os.remove(path)
        if output.strip():
            raise EmulationError(f"host {self.name}: configuring its interfaces failed: {output.strip()}")
