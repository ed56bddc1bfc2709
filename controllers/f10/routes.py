"""What each switch of an F10 fabric needs besides its primary routes: backups, detour groups, port roles.

Pure functions on the topology multigraph (``topo.graph()``: nodes with
``role`` and ``level``; links with their ports), computed once from the
intact topology: the data plane (p4src/f10.p4) picks a backup only when the
detector has declared the primary port down, so the backups are prepared
before any failure, as F10's local rerouting requires (seed 002, section 5.1).

For a switch ``s`` and a destination host ``h``:

* ``s`` forwards ``h`` upward (its primary next hops are parents): if the
  chosen parent's port is down, any other parent (an ordinary next hop, no
  mark; no extra hop);
* ``s`` forwards ``h`` down to a child switch ``v``: the candidates of
  :func:`testbed.topologies.f10.detours.detour_candidates` (the one detour
  algorithm), marked by scheme: Scheme 1 phase UP (the candidate ``x`` sends
  the packet to any parent but ``s``: +2 hops), Scheme 2 phase DOWN (the
  candidate ``y`` sends it to any of its children, which sends it up to any
  parent but ``y``: +4 hops); none when ``v`` is an edge switch (pushback's job).

Every candidate is a member of the backup group of ``(h, port of v)``; the
switch hashes the flow over them.

:func:`check_loop_free` refuses a backup table on which a rerouted packet
could come back to the switch whose port failed (a loop, or a drop at the
failed port for a marked packet): a backup next hop whose own route or own
unmarked backup for the same destination points back, or a detour whose
phases end at a switch that routes the destination through the failed link.
The controller checks every table before writing it
(:func:`testbed.controllers.f10.programming.program_fabric`).
"""
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from testbed.controllers.routing import compute_host_routes
from testbed.errors import ParameterError
from testbed.topologies.f10.detours import SCHEME_1, SCHEME_NONE, detour_candidates
from testbed.topologies.graph import host_ip, hosts_by_ip, is_host, level, neighbours_by_port, port_toward

PHASE_DOWN, PHASE_UP = 1, 2


@dataclass(frozen=True)
class Backup:
    """One candidate next hop of a backup group.

    Attributes:
        port: the switch's port toward the candidate.
        neighbor: the candidate switch.
        phase: 0 (plain next hop), :data:`PHASE_UP` (Scheme 1) or :data:`PHASE_DOWN` (Scheme 2).
        scheme: :data:`SCHEME_NONE`, :data:`SCHEME_1` or :data:`SCHEME_2`.
    """

    port: int
    neighbor: str
    phase: int = 0
    scheme: int = SCHEME_NONE


@dataclass
class SwitchPlan:
    """Everything f10.p4 needs on one switch besides the primary routes.

    Attributes:
        fabric_ports: ports toward other switches (detector, probes).
        host_ports: ports toward hosts (the detour mark is removed there).
        parent_ports: ``{port: parent}``; child_ports: ``{port: child switch}``.
        backups: ``{(host, primary port): [Backup]}``.
        detour_up: ``{ingress parent port: [ports of the other parents]}``.
        detour_down: ports of every child switch (Scheme 2's first detour hop).
    """

    fabric_ports: List[int] = field(default_factory=list)
    host_ports: List[int] = field(default_factory=list)
    parent_ports: Dict[int, str] = field(default_factory=dict)
    child_ports: Dict[int, str] = field(default_factory=dict)
    backups: Dict[Tuple[str, int], List[Backup]] = field(default_factory=dict)
    detour_up: Dict[int, List[int]] = field(default_factory=dict)
    detour_down: List[int] = field(default_factory=list)


def plan_switch(graph, switch, routes=None):
    """The :class:`SwitchPlan` of one switch.

    Args:
        graph: the topology multigraph.
        switch: the switch's name.
        routes: ``compute_host_routes(graph)`` if already computed.
    """
    routes = compute_host_routes(graph) if routes is None else routes
    by_port = neighbours_by_port(graph, switch)
    plan = SwitchPlan()
    for port, other in sorted(by_port.items()):
        if is_host(graph, other):
            plan.host_ports.append(port)
        else:
            plan.fabric_ports.append(port)
            if level(graph, other) > level(graph, switch):
                plan.parent_ports[port] = other
            else:
                plan.child_ports[port] = other
    for port in plan.parent_ports:
        others = sorted(p for p in plan.parent_ports if p != port)
        if others:
            plan.detour_up[port] = others
    plan.detour_down = sorted(plan.child_ports)
    hosts = hosts_by_ip(graph)
    for ip, ports in sorted(routes.get(switch, {}).items()):
        host = hosts[ip]
        for port in ports:
            neighbor = by_port[port]
            if port in plan.parent_ports:
                others = [Backup(p, plan.parent_ports[p]) for p in sorted(plan.parent_ports) if p != port]
                if others:
                    plan.backups[(host, port)] = others
            elif port in plan.child_ports:
                scheme, candidates = detour_candidates(graph, switch, neighbor)
                if candidates:
                    phase = PHASE_UP if scheme == SCHEME_1 else PHASE_DOWN
                    ports = {other: p for p, other in plan.child_ports.items()}
                    plan.backups[(host, port)] = [Backup(ports[c], c, phase, scheme) for c in candidates]
    return plan


def plan_fabric(graph):
    """``{switch: SwitchPlan}`` for every switch of the topology."""
    routes = compute_host_routes(graph)
    return {node: plan_switch(graph, node, routes) for node in sorted(graph.nodes) if not is_host(graph, node)}


class _PrimaryRoutes:
    """Where the primary routes take a packet for one destination, over every equal-cost choice."""

    def __init__(self, graph, routes):
        self.graph = graph
        self.routes = routes
        self._by_port = {}
        self._reach = {}  # (switch, ip) -> frozenset of the switches the packet may visit

    def neighbor(self, switch, port):
        """The node on ``switch``'s ``port`` (None: no such port)."""
        if switch not in self._by_port:
            self._by_port[switch] = neighbours_by_port(self.graph, switch)
        return self._by_port[switch].get(port)

    def far_port(self, switch, neighbor, via_port):
        """``neighbor``'s port on the link whose ``switch`` end is ``via_port``."""
        for _, other, data in self.graph.edges(switch, data=True):
            if other == neighbor and port_toward(data, switch) == via_port:
                return port_toward(data, neighbor)
        return None

    def next_switches(self, switch, ip):
        """The switches ``switch`` may forward ``ip`` to (hosts left out: the packet has arrived)."""
        found = []
        for port in self.routes.get(switch, {}).get(ip, ()):
            other = self.neighbor(switch, port)
            if other is not None and not is_host(self.graph, other):
                found.append(other)
        return found

    def reach(self, switch, ip, host, visiting=()):
        """Every switch a packet for ``ip`` may visit from ``switch`` on (``switch`` included).

        Raises:
            ParameterError: the primary routes toward ``host`` loop.
        """
        key = (switch, ip)
        if key in self._reach:
            return self._reach[key]
        if switch in visiting:
            cycle = list(visiting[visiting.index(switch):]) + [switch]
            raise ParameterError(f"primary routes toward {host}", " -> ".join(cycle), "routes without a loop")
        found = {switch}
        for other in self.next_switches(switch, ip):
            found |= self.reach(other, ip, host, visiting + (switch,))
        self._reach[key] = frozenset(found)
        return self._reach[key]

    def path(self, start, goal, ip, host):
        """One switch path from ``start`` to ``goal`` over the primary routes (``goal`` is reachable)."""
        path = [start]
        while path[-1] != goal:
            path.append(next(other for other in self.next_switches(path[-1], ip)
                             if goal in self.reach(other, ip, host)))
        return path


def _detour_exits(plans, primary, switch, backup):
    """``[(switch, path)]``: where a packet ``switch`` sends on ``backup`` starts routing normally again.

    Follows the data plane's rules (p4src/f10.p4): an unmarked next hop routes
    normally at once; phase UP (Scheme 1): the next hop sends it to its
    ``detour_up`` ports for the port it came in on; phase DOWN (Scheme 2): the
    next hop sends it to its ``detour_down`` children, each of which sends it up
    its ``detour_up`` ports; there the mark says DONE and the packet routes
    normally.  A hop with no entry drops the packet (not a loop: left out).
    """
    first = backup.neighbor
    if not backup.phase:
        return [(first, [switch, first])]
    if backup.phase == PHASE_DOWN:
        hops = []
        for port in plans[first].detour_down:
            child = primary.neighbor(first, port)
            if child in plans:
                hops.append((child, primary.far_port(first, child, port), [switch, first, child]))
    else:
        hops = [(first, primary.far_port(switch, first, backup.port), [switch, first])]
    exits = []
    for hop, ingress, path in hops:
        for port in plans[hop].detour_up.get(ingress, ()):
            other = primary.neighbor(hop, port)
            if other in plans:
                exits.append((other, path + [other]))
    return exits


def check_loop_free(graph, plans, routes=None):
    """Refuse backups on which a rerouted packet could come back to the switch whose port failed.

    For every backup of switch ``s`` for destination ``h`` around its port ``p``:

    * the backup is not ``p`` itself;
    * an unmarked backup next hop ``n`` has no unmarked backup for ``h`` that points
      back to ``s`` (``s`` and ``n`` would pass the packet to each other);
    * where the detour ends (``n`` for an unmarked next hop, the switch where the
      mark turns DONE for Scheme 1 and 2), the primary routes toward ``h`` never
      lead back to ``s``: ``s`` would send the packet to ``p`` again (an unmarked
      packet loops, a marked one returns to the failed link and is dropped).

    Args:
        graph: the topology multigraph.
        plans: ``{switch: SwitchPlan}``.
        routes: ``compute_host_routes(graph)`` if already computed.

    Raises:
        ParameterError: naming the switch, destination and port of the backup, the next hop,
            and the path of the loop; or a loop of the primary routes themselves.
    """
    routes = compute_host_routes(graph) if routes is None else routes
    primary = _PrimaryRoutes(graph, routes)
    unmarked = {}  # (switch, host) -> the next hops of its unmarked backups for host
    for switch, plan in plans.items():
        for (host, _), backups in plan.backups.items():
            unmarked.setdefault((switch, host), set()).update(b.neighbor for b in backups if not b.phase)
    for switch, plan in sorted(plans.items()):
        for (host, port), backups in sorted(plan.backups.items()):
            ip = host_ip(graph, host)
            field_name = f"f10 backup of {switch} for {host} around port {port}"
            for backup in backups:
                if backup.port == port:
                    raise ParameterError(field_name, backup.neighbor, "a next hop through another port",
                                         f"port {port} is the failed one")
                if not backup.phase:
                    if switch in unmarked.get((backup.neighbor, host), ()):
                        raise ParameterError(field_name, backup.neighbor, "a next hop whose own backups for "
                                             f"{host} do not point back to {switch}",
                                             f"loop: {switch} -> {backup.neighbor} -> {switch}")
                for end, path in _detour_exits(plans, primary, switch, backup):
                    if switch in primary.reach(end, ip, host):
                        back = primary.path(end, switch, ip, host)
                        raise ParameterError(field_name, backup.neighbor,
                                             f"a detour whose route to {host} does not come back to {switch}",
                                             f"{' -> '.join(path + back[1:])}, then port {port} again")
