"""Which weighted ECMP group each destination of one switch uses: the plan of one rescheduling epoch.

:class:`~testbed.controllers.fabric_programmer.FabricProgrammer` gives every
destination (a /32 entry of the routing table) whose next hops are the same one
shared action-selector group, each member of weight 1.  F10's weights are per
destination (seed 002, section 6.1): when the link from core ``c0`` into pod 0
fails, an aggregation switch of another pod must stop sending pod 0's traffic
to ``c0`` while it keeps using ``c0`` for the other pods.  So destinations that
share a group may come to need different weights.  :func:`plan_groups` gives
every group the weights most of its destinations need, and moves each other
destination to a group that carries its weights.

Writes come in three steps, each one P4Runtime Write batch after the other
(P4Runtime does not order the updates of one batch): groups no entry uses yet
(INSERT or MODIFY), then the entries that move (MODIFY of the table entry),
then the groups that keep their entries and change weights (MODIFY).  A
destination therefore sees either its old weights or its new ones.

P4Runtime has no weight 0 (spec, "Action Profile Group Programming": the
server must refuse it): a next hop that gets no traffic is left out of the
group.  A group never becomes empty (see :func:`member_weights`).
"""
import math
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from typing import Dict, List, Tuple


@dataclass
class GroupTable:
    """The ECMP groups of one switch's routing table, as read from the switch and kept up to date.

    Attributes:
        routes: ``{destination: group id}`` of the table entries that name a group.
        groups: ``{group id: {member id: weight}}`` of every group of the selector.
        next_hops: ``{destination: {port: member id}}``: the equal-cost next hops
            of the destination's group when it was read (the members it may use).
        member_ports: ``{member id: egress port}``.
        next_id: the next unused group id.
    """

    routes: Dict[str, int] = field(default_factory=dict)
    groups: Dict[int, Dict[int, int]] = field(default_factory=dict)
    next_hops: Dict[str, Dict[int, int]] = field(default_factory=dict)
    member_ports: Dict[int, int] = field(default_factory=dict)
    next_id: int = 1


@dataclass
class GroupPlan:
    """The writes that give every destination its weights, in write order.

    Attributes:
        fresh: ``[(group id, {member: weight}, inserted)]``: groups no entry uses yet
            (INSERT when ``inserted``, else MODIFY), written first.
        moves: ``[(destination, group id)]``: table entries that change group, written next.
        reweighted: ``[(group id, {member: weight})]``: groups that keep entries and change
            weights, written last.
        table: the :class:`GroupTable` once these writes are done.
    """

    fresh: List[Tuple[int, Dict[int, int], bool]] = field(default_factory=list)
    moves: List[Tuple[str, int]] = field(default_factory=list)
    reweighted: List[Tuple[int, Dict[int, int]]] = field(default_factory=list)
    table: GroupTable = None

    def updates(self):
        """Number of P4Runtime updates of the plan."""
        return len(self.fresh) + len(self.moves) + len(self.reweighted)


def member_weights(next_hops, port_weights, down_ports=(), max_total=0):
    """The members and weights of one destination's group.

    Args:
        next_hops: ``{port: member id}``: the members the destination may use.
        port_weights: ``{port: weight >= 1}`` from the scheduler (ports outside
            ``next_hops`` are ignored).
        down_ports: ports whose link is down.
        max_total: largest sum of weights (the P4Info ``max_group_size``; 0: none).

    Returns:
        dict: ``{member id: weight}``, never empty when ``next_hops`` is not:
        the scheduler's weights on the next hops, divided by their greatest common
        divisor (equal weights are all 1, as the routes were written) and scaled
        down to ``max_total``; when the scheduler gives none of the next hops a
        weight (the destination is farther than before: every next hop leads to a
        failure, and F10's local reroute carries the traffic), the next hops whose
        link is up, weight 1, else all of them.

    >>> member_weights({3: 4, 4: 5}, {3: 8, 4: 16})
    {4: 1, 5: 2}
    >>> member_weights({3: 4, 4: 5}, {4: 16})
    {5: 1}
    >>> member_weights({3: 4, 4: 5}, {7: 16}, down_ports=[3])
    {5: 1}
    >>> member_weights({3: 4, 4: 5, 5: 6}, {3: 16, 4: 16, 5: 1}, max_total=12)
    {4: 5, 5: 5, 6: 1}
    """
    chosen = {port: weight for port, weight in port_weights.items() if port in next_hops and weight > 0}
    if not chosen:
        up = [port for port in next_hops if port not in set(down_ports)]
        chosen = dict.fromkeys(up or next_hops, 1)
    divisor = reduce(math.gcd, chosen.values())
    chosen = {port: weight // divisor for port, weight in chosen.items()}
    total = sum(chosen.values())
    if max_total and total > max_total:
        chosen = {port: max(1, weight * max_total // total) for port, weight in chosen.items()}
    return {next_hops[port]: weight for port, weight in sorted(chosen.items())}


def _key(weights):
    return tuple(sorted(weights.items()))


def plan_groups(table, desired):
    """Plan the writes that give each destination the group weights it needs.

    Every group keeps the weights most of its destinations need (ties: its
    current weights, then the smallest); those destinations stay.  Each other
    destination moves to a group that already carries its weights when it
    moves: one whose weights stay as they are, else a group no entry uses (an
    unused one rewritten, else a new one), written before the moves.

    Args:
        table: the switch's :class:`GroupTable`.
        desired: ``{destination: {member id: weight}}``; a destination left out keeps
            its group and weights.

    Returns:
        GroupPlan: the writes and the resulting table (``table`` is not modified).

    Destinations ``a`` and ``b`` share group 1; ``b`` now needs only member 5:

    >>> table = GroupTable(routes={"a": 1, "b": 1}, groups={1: {4: 1, 5: 1}}, next_id=2)
    >>> plan = plan_groups(table, {"a": {4: 1, 5: 2}, "b": {5: 1}})
    >>> plan.fresh, plan.moves, plan.reweighted
    ([(2, {5: 1}, True)], [('b', 2)], [(1, {4: 1, 5: 2})])
    >>> plan.table.routes, plan.table.next_id
    ({'a': 1, 'b': 2}, 3)
    """
    key = {dest: _key(desired[dest]) if dest in desired else _key(table.groups[group])
           for dest, group in table.routes.items()}
    users = {}
    for dest, group in sorted(table.routes.items()):
        users.setdefault(group, []).append(dest)
    kept = {}  # group id -> the weights (key) it keeps for most of its destinations
    for group, dests in sorted(users.items()):
        current, counts = _key(table.groups[group]), Counter(key[dest] for dest in dests)
        kept[group] = min(counts, key=lambda k: (-counts[k], k != current, k))
    groups = {group: dict(weights) for group, weights in table.groups.items()}
    ready = {}  # weights key -> a group carrying it when the entries move
    for group, wanted in sorted(kept.items()):
        if wanted == _key(groups[group]):
            ready.setdefault(wanted, group)
    free = sorted(group for group in table.groups if group not in users)
    plan, next_id, routes = GroupPlan(), table.next_id, dict(table.routes)
    for dest in sorted(table.routes):
        wanted = key[dest]
        if wanted == kept[table.routes[dest]]:
            continue
        if wanted not in ready:
            same = [group for group in free if _key(groups[group]) == wanted]
            if same or free:
                group, inserted = (same or free)[0], False
                free.remove(group)
            else:
                group, inserted, next_id = next_id, True, next_id + 1
            if inserted or _key(groups[group]) != wanted:
                plan.fresh.append((group, dict(wanted), inserted))
            groups[group], ready[wanted] = dict(wanted), group
        routes[dest] = ready[wanted]
        plan.moves.append((dest, ready[wanted]))
    for group, wanted in sorted(kept.items()):
        if _key(groups[group]) != wanted:
            plan.reweighted.append((group, dict(wanted)))
            groups[group] = dict(wanted)
    plan.table = GroupTable(routes, groups, dict(table.next_hops), dict(table.member_ports), next_id)
    return plan
