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
* ``s`` forwards ``h`` down to a child switch ``v``: F10 assumes all of ``v``
  may have failed, so a detour must reach another root of ``v``'s subtree
  without ``v`` and without ``v``'s failure group (``v``'s parents):

  - Scheme 1 (AB FatTree): a child ``x != v`` whose subtree type differs
    from ``v``'s and that has a parent outside ``v``'s failure group; the
    packet is marked phase UP: ``x`` sends it to any parent but ``s``
    (+2 hops);
  - Scheme 2 (no such child, e.g. a standard FatTree): a child ``y != v``
    of ``v``'s type that has children; marked phase DOWN: ``y`` sends it to
    any of its children, which sends it up to any parent but ``y`` (+4 hops);
  - ``v`` is an edge switch (the only root of its subtree) or a host: no
    detour (pushback's job).

Every candidate is a member of the backup group of ``(h, port of v)``; the
switch hashes the flow over them.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from testbed.controllers.routing import compute_host_routes, is_host, port_toward
from testbed.errors import ParameterError

PHASE_DOWN, PHASE_UP = 1, 2
SCHEME_NONE, SCHEME_1, SCHEME_2 = 0, 1, 2


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


def _level(graph, node):
    return graph.nodes[node]["level"]


def _neighbors_by_port(graph, switch):
    """``{port: neighbour}`` of a switch."""
    found = {}
    for _, other, data in graph.edges(switch, data=True):
        found[port_toward(data, switch)] = other
    return found


def _parents(graph, node):
    return {n for n in graph.neighbors(node) if not is_host(graph, n) and _level(graph, n) > _level(graph, node)}


def _children(graph, node):
    return {n for n in graph.neighbors(node) if not is_host(graph, n) and _level(graph, n) < _level(graph, node)}


def detour_candidates(graph, switch, child):
    """The detour next hops of ``switch`` when its downward link to ``child`` (a switch) is down.

    Args:
        graph: the topology multigraph.
        switch: the parent.
        child: the child switch whose subtree is to be reached.

    Returns:
        tuple: ``(scheme, [candidate child switches])``: Scheme 1 candidates when there
        are any, else Scheme 2 candidates, else ``(SCHEME_NONE, [])`` (``child`` is an
        edge switch, the only root of its subtree).

    Raises:
        ParameterError: ``child`` is not a child switch of ``switch``.
    """
    if child not in _children(graph, switch):
        raise ParameterError("child", child, f"a child switch of {switch}")
    if not _children(graph, child):
        return SCHEME_NONE, []
    group = _parents(graph, child)
    child_type = graph.nodes[child].get("subtree_type")
    scheme1, scheme2 = [], []
    for other in sorted(_children(graph, switch) - {child}):
        other_type = graph.nodes[other].get("subtree_type")
        if other_type != child_type and _parents(graph, other) - group - {switch}:
            scheme1.append(other)
        elif other_type == child_type and _children(graph, other):
            scheme2.append(other)
    if scheme1:
        return SCHEME_1, scheme1
    if scheme2:
        return SCHEME_2, scheme2
    return SCHEME_NONE, []


def plan_switch(graph, switch, routes=None):
    """The :class:`SwitchPlan` of one switch.

    Args:
        graph: the topology multigraph.
        switch: the switch's name.
        routes: ``compute_host_routes(graph)`` if already computed.
    """
    routes = compute_host_routes(graph) if routes is None else routes
    by_port = _neighbors_by_port(graph, switch)
    plan = SwitchPlan()
    for port, other in sorted(by_port.items()):
        if is_host(graph, other):
            plan.host_ports.append(port)
        else:
            plan.fabric_ports.append(port)
            if _level(graph, other) > _level(graph, switch):
                plan.parent_ports[port] = other
            else:
                plan.child_ports[port] = other
    for port in plan.parent_ports:
        others = sorted(p for p in plan.parent_ports if p != port)
        if others:
            plan.detour_up[port] = others
    plan.detour_down = sorted(plan.child_ports)
    hosts = {graph.nodes[h]["ip"].split("/")[0]: h for h in graph.nodes if is_host(graph, h)}
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
