"""One switch's weighted ECMP groups over its P4Runtime session: read them once, then write each epoch's weights.

The routing table (``ipv4_lpm`` of p4src/f10.p4, one /32 entry per destination
host) and its action selector (``ecmp_selector``) as
:class:`~testbed.controllers.fabric_programmer.FabricProgrammer` wrote them are
read back once (entries that name a group, the groups, the members and their
ports); from then on :class:`SwitchGroups` keeps them as it writes them, with
the plans of :mod:`testbed.controllers.f10.weighted_groups`.

BMv2: its P4Runtime server (p4lang/PI ``proto/frontend/src/action_prof_mgr.cpp``,
``ActionProfAccessManual::group_update_members``) accepts member weights above
1: a weight must be > 0 (else INVALID_ARGUMENT), the sum of a group's weights at
most its ``max_size``, or the P4Info ``max_group_size`` when that is set (else
RESOURCE_EXHAUSTED), and a member listed twice is refused ("use weights
instead"); ``create_missing_weighted_members`` realizes weight *w* as *w* copies
of the member in the BMv2 group, which picks ``copies[hash % count]``.  So
weights are written as weights, never as repeated members, and their sum is
capped at the selector's ``max_group_size`` when the P4Info sets one (p4c sets it
only from a ``@max_group_size`` annotation; f10.p4 has none).
"""
from testbed.controllers.f10.weighted_groups import GroupTable, member_weights, plan_groups


def _ip(value):
    """Dotted IPv4 text of an integer address."""
    return ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))


class SwitchGroups:
    """The routing table's groups of one switch, read from it and kept as written.

    Args:
        client: the switch's primary P4Runtime session.
        tables: the program's :class:`~testbed.controllers.fabric_programmer.RoutingTables`.
        hosts: ``{IPv4 text: host}`` (destinations are named by host).
        neighbors: ``{port: neighbour name}`` of the switch (for the records).
        max_total: largest sum of weights in a group (P4Info ``max_group_size``; 0: none).

    Raises:
        P4RuntimeClientError: a read failed.
    """

    def __init__(self, client, tables, hosts, neighbors, max_total=0):
        self.client, self.tables, self.neighbors, self.max_total = client, tables, neighbors, max_total
        ports = {member: params[tables.port_param]
                 for member, (_, params) in client.read_members(tables.selector).items() if tables.port_param in params}
        groups = {group: dict(members) for group, members in client.read_groups(tables.selector).items()}
        self.table = GroupTable(groups=groups, member_ports=ports, next_id=max(groups, default=0) + 1)
        self.matches = {}  # destination -> the match of its table entry
        for entry in client.read_table_entries(tables.table):
            value = next(iter(entry.match.values()), None)
            dest = hosts.get(_ip(value[0])) if isinstance(value, tuple) else None
            if entry.group_id in groups and dest is not None:
                self.table.routes[dest] = entry.group_id
                self.table.next_hops[dest] = {ports[m]: m for m in groups[entry.group_id]}
                self.matches[dest] = entry.match

    def reweight(self, weights, down_ports=()):
        """Give every destination the weights of ``weights`` (see :func:`member_weights`) and write them.

        Args:
            weights: ``{destination: {port: weight}}`` from the scheduler.
            down_ports: the switch's ports whose link is down.

        Returns:
            list: one row per group written or given entries: ``group``, ``write``
            (``"insert"``, ``"modify"`` or None when only entries moved to it), ``old`` and
            ``new`` weights (``{"<port>:<neighbour>": weight}``; ``old`` None for a new
            group), ``destinations`` using it, ``moved`` (destinations moved to it) and
            ``entries_written`` (P4Runtime updates).

        Raises:
            P4RuntimeClientError: a write failed (the switch must be read again).
        """
        desired = {dest: member_weights(self.table.next_hops[dest], weights.get(dest, {}), down_ports,
                                        self.max_total)
                   for dest in self.table.routes}
        plan = plan_groups(self.table, desired)
        client, tables = self.client, self.tables
        with client.batch():
            for group, members, inserted in plan.fresh:
                (client.insert_group if inserted else client.modify_group)(tables.selector, group,
                                                                           sorted(members.items()))
        with client.batch():
            for dest, group in plan.moves:
                client.modify_table_entry(tables.table, self.matches[dest], group_id=group)
        with client.batch():
            for group, members in plan.reweighted:
                client.modify_group(tables.selector, group, sorted(members.items()))
        before, self.table = self.table, plan.table
        return self._rows(before, plan)

    def _rows(self, before, plan):
        written = {group: ("insert" if inserted else "modify") for group, _, inserted in plan.fresh}
        written.update((group, "modify") for group, _ in plan.reweighted)
        moved = {}
        for dest, group in plan.moves:
            moved.setdefault(group, []).append(dest)
        return [{"group": group, "write": written.get(group),
                 "old": self._by_neighbor(before.groups.get(group)),
                 "new": self._by_neighbor(plan.table.groups[group]),
                 "destinations": sorted(d for d, g in plan.table.routes.items() if g == group),
                 "moved": moved.get(group, []),
                 "entries_written": (group in written) + len(moved.get(group, []))}
                for group in sorted(set(written) | set(moved))]

    def _by_neighbor(self, members):
        """``{"<port>:<neighbour>": weight}`` of a group's members (None for no group)."""
        if members is None:
            return None
        ports = self.table.member_ports
        return {f"{ports[m]}:{self.neighbors.get(ports[m], '?')}": w for m, w in sorted(members.items())}
