"""Program a fabric of P4 switches over P4Runtime: pipeline, host routes, ECMP groups.

The routing state every load-balancing program shares: an LPM table on the
IPv4 destination whose entries either name one next hop (``set_nhop``) or an
action-selector group of next hops (one member per egress port).  Routes are
the equal-cost shortest paths of :mod:`testbed.controllers.routing`; after a
failure :meth:`FabricProgrammer.reroute` recomputes them without the failed
links and writes only the difference.
"""
import time
from dataclasses import dataclass

from testbed.controllers.routing import compute_host_routes, is_host, port_toward
from testbed.p4runtime.client import P4RuntimeClient, P4RuntimeClientError


@dataclass(frozen=True)
class RoutingTables:
    """Names of the routing objects in a program (defaults: p4src/l3_ecmp.p4)."""

    table: str = "MyIngress.ipv4_lpm"
    action: str = "MyIngress.set_nhop"
    selector: str = "MyIngress.ecmp_selector"
    port_param: str = "port"
    dmac_param: str = "dmac"
    smac_param: str = "smac"


def switch_mac(device_id):
    """The MAC a switch uses as source address: locally administered, from its device id."""
    return "02:fb:%02x:%02x:%02x:%02x" % tuple((device_id >> shift) & 0xFF for shift in (24, 16, 8, 0))


class FabricProgrammer:
    """Pushes the pipeline and the routes of a whole fabric, and keeps them up to date.

    Args:
        graph: the topology multigraph (``topo.graph()``).
        switches: ``{name: {"grpc": "host:port", "device_id": int}}`` (the
            ``switches`` of the running network's description).
        pipeline: a :class:`testbed.targets.PipelineConfig`.
        tables: the routing object names of the program.
        election_id: P4Runtime election id of this controller.

    Attributes:
        clients: ``{switch: P4RuntimeClient}`` once :meth:`connect` ran.
        failed_links: the links currently treated as down.
        unreachable: ``{switch: error message}`` of the switches the last
            route update could not write (a crashed switch does not stop the
            others from being updated).
    """

    def __init__(self, graph, switches, pipeline, tables=RoutingTables(), election_id=(0, 1)):
        self.graph = graph
        self.switches = switches
        self.pipeline = pipeline
        self.tables = tables
        self.election_id = election_id
        self.clients = {}
        self.failed_links = set()
        self._installed = {}  # switch -> {ip: (kind, value)} as written
        self._groups = {}  # switch -> {ports tuple: group id, "_members": {port: member id}}
        self.unreachable = {}

    # -- session ------------------------------------------------------------------------
    def connect(self):
        """Open a primary P4Runtime session to every switch."""
        for name, info in sorted(self.switches.items()):
            self.clients[name] = P4RuntimeClient(info["grpc"], device_id=info["device_id"],
                                                 election_id=self.election_id)

    def close(self):
        """Close every session."""
        for client in self.clients.values():
            client.close()
        self.clients = {}

    def forget_switch(self, switch):
        """Stop programming ``switch`` (it crashed): close its session, drop it from updates."""
        client = self.clients.pop(switch, None)
        self.switches = {name: info for name, info in self.switches.items() if name != switch}
        self._installed.pop(switch, None)
        self._groups.pop(switch, None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - the switch is gone; closing its channel may fail too
                pass

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    # -- programming --------------------------------------------------------------------
    def push_pipeline(self):
        """SetForwardingPipelineConfig on every switch."""
        config = self.pipeline
        for client in self.clients.values():
            client.set_pipeline(p4info=config.p4info, device_config=config.device_config,
                                target=config.target)

    def next_hop_params(self, switch, port):
        """Action parameters of the next hop out of ``switch`` ``port``."""
        neighbor, neighbor_mac = None, None
        for _, other, data in self.graph.edges(switch, data=True):
            if port_toward(data, switch) == port:
                neighbor = other
                break
        if neighbor is not None and is_host(self.graph, neighbor):
            neighbor_mac = self.graph.nodes[neighbor]["mac"]
        elif neighbor is not None:
            neighbor_mac = switch_mac(self.switches[neighbor]["device_id"])
        return {self.tables.dmac_param: neighbor_mac or "00:00:00:00:00:00",
                self.tables.smac_param: switch_mac(self.switches[switch]["device_id"]),
                self.tables.port_param: port}

    def _desired(self, routes):
        """``{switch: {ip: ("port", p) | ("group", ports)}}`` from computed routes."""
        desired = {}
        for switch, by_ip in routes.items():
            if switch not in self.switches:
                continue
            desired[switch] = {ip: ("port", ports[0]) if len(ports) == 1 else ("group", tuple(ports))
                               for ip, ports in by_ip.items()}
        return desired

    def _ensure_member(self, switch, client, port, groups):
        """Return the member id of ``port`` on ``switch``, creating the member once."""
        members = groups.setdefault("_members", {})
        if port not in members:
            member_id = port + 1
            client.insert_member(self.tables.selector, member_id, self.tables.action,
                                 self.next_hop_params(switch, port))
            members[port] = member_id
        return members[port]

    def _ensure_group(self, switch, client, ports, groups):
        """Return the group id for ``ports`` on ``switch``, creating members and group once."""
        if ports not in groups:
            member_ids = [self._ensure_member(switch, client, port, groups) for port in ports]
            group_id = len([key for key in groups if key != "_members"]) + 1
            client.insert_group(self.tables.selector, group_id, [(m, 1) for m in member_ids])
            groups[ports] = group_id
        return groups[ports]

    def _write_route(self, switch, ip, route, update):
        # Tables with an action selector take members or groups only (P4Runtime
        # forbids direct actions there): one next hop is its port's member.
        client = self.clients[switch]
        groups = self._groups.setdefault(switch, {})
        write = client.modify_table_entry if update else client.insert_table_entry
        match = {"hdr.ipv4.dstAddr": (ip, 32)}
        kind, value = route
        if kind == "port":
            write(self.tables.table, match, member_id=self._ensure_member(switch, client, value, groups))
        else:
            write(self.tables.table, match, group_id=self._ensure_group(switch, client, value, groups))

    def install_routes(self):
        """Compute routes on the intact topology and write them to every switch.

        Returns:
            int: number of table entries written.
        """
        self._groups = {}
        self._installed = {}
        return self._apply(self._desired(compute_host_routes(self.graph, self.failed_links)))

    def _apply(self, desired):
        """Write the difference between ``desired`` and what is installed, switch by switch."""
        written = 0
        self.unreachable = {}
        for switch, routes in sorted(desired.items()):
            try:
                written += self._apply_switch(switch, routes)
            except P4RuntimeClientError as error:
                self.unreachable[switch] = str(error)
        return written

    def _apply_switch(self, switch, routes):
        written = 0
        installed = self._installed.setdefault(switch, {})
        for ip, route in sorted(routes.items()):
            if installed.get(ip) == route:
                continue
            self._write_route(switch, ip, route, update=ip in installed)
            installed[ip] = route
            written += 1
        for ip in sorted(set(installed) - set(routes)):
            self.clients[switch].delete_table_entry(self.tables.table, {"hdr.ipv4.dstAddr": (ip, 32)})
            del installed[ip]
            written += 1
        return written

    def reroute(self, failed_links):
        """Recompute routes without ``failed_links`` and write only what changed.

        Args:
            failed_links: the set of links now down (link ids or node pairs, see
                :func:`testbed.controllers.routing.usable_links`).

        Returns:
            dict: ``{"entries_written": n, "seconds": time taken}``.
        """
        started = time.monotonic()
        self.failed_links = set(failed_links)
        written = self._apply(self._desired(compute_host_routes(self.graph, self.failed_links)))
        return {"entries_written": written, "seconds": time.monotonic() - started}

    def program(self):
        """Push the pipeline and install routes on every switch; returns entries written."""
        self.push_pipeline()
        return self.install_routes()


def programmer_for_network(fabric, pipeline, **kwargs):
    """Return a :class:`FabricProgrammer` for a running :class:`~testbed.emulation.network.FabricNetwork`.

    Args:
        fabric: the running network (P4 switches).
        pipeline: a :class:`testbed.targets.PipelineConfig`.
        **kwargs: passed to :class:`FabricProgrammer`.
    """
    description = fabric.describe()
    switches = {name: {"grpc": entry["grpc"], "device_id": entry["device_id"]}
                for name, entry in description["switches"].items() if "grpc" in entry}
    return FabricProgrammer(fabric.topo.graph(), switches, pipeline, **kwargs)
