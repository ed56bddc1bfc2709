"""k-ary FatTree with L+1 switch levels, wired as in the F10 paper (seed 002, section 4).

Notation (F10 Table 1): ``k`` ports per switch, ``p = k/2`` up- and downlinks,
``L + 1`` switch levels numbered 0 (edge) to ``L`` (core), ``N = 2p^(L+1)``
hosts, ``b = ceil(log2 p)`` bits per level in a location.

Structure: each level ``i < L`` holds ``2p^L`` switches in ``2p^(L-i)`` groups
of ``p^i``; a group is the set of roots of a subtree of ``p^(i+1)`` hosts.  The
top level holds ``p^L`` switches in one group.  Root ``j`` of a level-``i``
subtree connects to ``p`` parents in the enclosing level-``i+1`` group:

* type A: parents ``jp .. (j+1)p - 1`` (consecutive);
* type B: parents ``j, j + p^i, j + 2p^i, ...`` (stride ``p^i``).

A standard FatTree has only type-A subtrees (:class:`FatTree`); an AB FatTree
(:class:`testbed.topologies.ab_fattree.ABFatTree`) alternates A and B among
the children of every group.  Both share this module's wiring and addressing,
so experiments can swap one for the other: same names, same host addresses,
same ports for hosts.

Names (at most 8 characters): edge switches ``e<pod>_<i>`` (``e<g>`` when
L = 1), aggregation levels ``a<g>_<j>`` (level 1), ``b<g>_<j>`` (level 2),
``d<g>_<j>`` (level 3), cores ``c<j>``, hosts ``h1 .. hN`` (edge order).  The
``level`` attribute counts tiers from the hosts (edge = 1); ``f10_level`` is
the paper's level (edge = 0).

Ports: on a level-``i`` switch the downlinks are ports ``1..p`` (``1..2p`` on a
core), ordered by child subtree; uplink ``m`` (to the ``m``-th parent of the
wiring rule) is port ``p + 1 + m``.  Host ``h`` of an edge switch is on port
``h + 1``; hosts use port 0.

Addressing (F10 location addresses): a level-``i`` subtree has a location of
``Lb + 1`` bits: ``b + 1`` bits for its position among the ``2p`` subtrees
below the cores, then ``b`` bits per lower level down to ``i + 1``, then ``ib``
zero bits.  A host's location appends ``b`` bits of host index to its edge
switch's location, ``(L + 1)b + 1`` bits in all, at most 22.  The host address
is ``10.0.0.0 | location << 1 | 1`` (the trailing 1 keeps every address clear
of network and broadcast forms), so every subtree owns the prefix given by
:meth:`FatTree.subtree_prefix` and switches can route by longest prefix.
A ``k`` whose locations need more than 22 bits raises :class:`ParameterError`.
"""
import ipaddress

from testbed.errors import ParameterError
from testbed.topologies.base import (DEFAULT_FABRIC_LINK_MBPS, DEFAULT_HOST_LINK_MBPS, HOST_NETWORK, MAX_NODES,
                                     MAX_SWITCH_PORT, FabricTopo, check_int, check_positive_number)

MAX_LOCATION_BITS = 22
MAX_LEVELS = 4
# Name letters of the aggregation levels 1..MAX_LEVELS-1 (avoiding 'c', 'e', 'h').
_LEVEL_LETTERS = {1: "a", 2: "b", 3: "d"}


def location_bits_per_level(p):
    """Return ``b = ceil(log2 p)``, the bits per level of a location (0 when p = 1)."""
    return (p - 1).bit_length()


class FatTree(FabricTopo):
    """A k-ary FatTree with ``levels + 1`` switch levels, every subtree of type A.

    Args:
        k: ports per switch, an even integer >= 2.
        levels: ``L``, the number of the top level (2 gives edge/agg/core), 1..4.
        hosts_link_mbps: capacity of host links.
        fabric_link_mbps: capacity of switch-switch links.

    Raises:
        ParameterError: odd or too small ``k``, ``levels`` out of range, a ``k``
            the location addressing cannot encode, non-positive capacities, or
            a topology above 200,000 nodes.
    """

    kind = "fattree"
    PARAMETERS = (
        ("k", 4, "ports per switch (even, >= 2)"),
        ("levels", 2, "L: top switch level; L+1 switch levels (2 = edge/agg/core)"),
        ("hosts_link_mbps", DEFAULT_HOST_LINK_MBPS, "capacity of host links (Mbit/s)"),
        ("fabric_link_mbps", DEFAULT_FABRIC_LINK_MBPS, "capacity of switch-switch links (Mbit/s)"),
    )

    def __init__(self, k=4, levels=2, hosts_link_mbps=DEFAULT_HOST_LINK_MBPS,
                 fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS, **topo_opts):
        allowed_k = f"an even integer from 2 to {MAX_SWITCH_PORT}"
        check_int("k", k, minimum=2, maximum=MAX_SWITCH_PORT, allowed=allowed_k)
        if k % 2:
            raise ParameterError("k", k, allowed_k)
        check_int("levels", levels, minimum=1, maximum=MAX_LEVELS)
        self.k = k
        self.p = k // 2
        self.L = levels
        self.b = location_bits_per_level(self.p)
        self.location_bits = self.L * self.b + 1
        self.host_location_bits = (self.L + 1) * self.b + 1
        if self.host_location_bits > MAX_LOCATION_BITS:
            raise ParameterError(
                "k", k, f"an even k with (levels+1)*ceil(log2(k/2))+1 <= {MAX_LOCATION_BITS} "
                f"(k <= {2 ** ((MAX_LOCATION_BITS - 1) // (self.L + 1) ) * 2} for levels={self.L})",
                f"F10 location addresses need {self.host_location_bits} bits but 10.0.0.0/8 "
                f"leaves {MAX_LOCATION_BITS} usable")
        total_nodes = 2 * self.p ** (self.L + 1) + self.L * 2 * self.p ** self.L + self.p ** self.L
        if total_nodes > MAX_NODES:
            raise ParameterError("k", k, f"a size of at most {MAX_NODES} nodes",
                                 f"k={k}, levels={levels} gives {total_nodes} nodes")
        self.params = {"k": k, "levels": levels,
                       "hosts_link_mbps": check_positive_number("hosts_link_mbps", hosts_link_mbps),
                       "fabric_link_mbps": check_positive_number("fabric_link_mbps", fabric_link_mbps)}
        self._names = {}
        super().__init__(**topo_opts)

    # ------------------------------------------------------------ structure
    @property
    def host_count(self):
        """N = 2p^(L+1)."""
        return 2 * self.p ** (self.L + 1)

    def group_count(self, level):
        """Number of switch groups (subtrees) at F10 level ``level``."""
        return 1 if level == self.L else 2 * self.p ** (self.L - level)

    def group_size(self, level):
        """Number of switches (roots) per group at F10 level ``level``."""
        return self.p ** level

    def position(self, level, group):
        """Position of level-``level`` subtree ``group`` among the children of its parent group.

        Returns an integer in ``0..p-1``, or ``0..2p-1`` below the cores.
        """
        return group if level == self.L - 1 else group % self.p

    def subtree_type_of(self, level, group):
        """Type ('A' or 'B') of level-``level`` subtree ``group``; always 'A' in a standard FatTree."""
        return "A"

    def parent_indices(self, level, group, index):
        """Indices (within the parent group) of the ``p`` parents of root ``index``, in uplink order.

        Type A: ``jp .. (j+1)p - 1``; type B: ``j, j + p^i, j + 2p^i, ...``.
        """
        p = self.p
        if self.subtree_type_of(level, group) == "A":
            return [index * p + m for m in range(p)]
        stride = p ** level
        return [index + m * stride for m in range(p)]

    def switch_name(self, level, group, index):
        """Name of switch ``index`` of group ``group`` at F10 level ``level`` (core: group 0)."""
        if level == self.L:
            return f"c{index}"
        if level == 0:
            if self.L == 1:
                return f"e{group}"
            return f"e{group // self.p}_{group % self.p}"
        return f"{_LEVEL_LETTERS[level]}{group}_{index}"

    def location_of(self, level, group):
        """F10 location (integer of ``Lb + 1`` bits) of level-``level`` subtree ``group``; cores have 0."""
        value = 0
        for ancestor_level in range(self.L - 1, level - 1, -1):
            ancestor = group // self.p ** (ancestor_level - level)
            value = (value << self.b) | self.position(ancestor_level, ancestor)
        return value << (level * self.b)

    def _prefix_of(self, level, group):
        """CIDR text of the host addresses of level-``level`` subtree ``group``."""
        free_bits = (level + 1) * self.b + 1 if level < self.L else self.host_location_bits + 1
        location = self.location_of(level, group) if level < self.L else 0
        network = int(HOST_NETWORK.network_address) | (location << self.b << 1)
        return f"{ipaddress.IPv4Address(network)}/{32 - free_bits}"

    def type_stack_of(self, level, group):
        """Subtree types from the level below the cores down to ``level`` (the last entry is the own subtree)."""
        stack = []
        for ancestor_level in range(self.L - 1, level - 1, -1):
            ancestor = group // self.p ** (ancestor_level - level)
            stack.append(self.subtree_type_of(ancestor_level, ancestor))
        return tuple(stack)

    # --------------------------------------------------------------- build
    def build(self):
        """Add switches level by level, then hosts; then host links and the wiring of every level."""
        p, L = self.p, self.L
        for level in range(L):
            for group in range(self.group_count(level)):
                for index in range(self.group_size(level)):
                    self._add_switch(level, group, index)
        for index in range(self.p ** L):
            self._add_switch(L, 0, index)
        host_number = 0
        for edge_group in range(self.group_count(0)):
            edge = self.switch_name(0, edge_group, 0)
            edge_location = self.location_of(0, edge_group)
            for host_index in range(p):
                host_number += 1
                host_location = (edge_location << self.b) | host_index
                ip = int(HOST_NETWORK.network_address) | (host_location << 1) | 1
                attrs = {"edge": edge, "host_index": host_index, "location": host_location}
                if L >= 2:
                    attrs["pod"] = edge_group // p
                name = self.add_fabric_host(f"h{host_number}", ip, **attrs)
                self.add_fabric_link(name, 0, edge, host_index + 1, self.params["hosts_link_mbps"])
        for level in range(L):
            for group in range(self.group_count(level)):
                parent_group = group // p if level + 1 < L else 0
                down_port = self.position(level, group) + 1
                for index in range(self.group_size(level)):
                    child = self.switch_name(level, group, index)
                    for m, parent_index in enumerate(self.parent_indices(level, group, index)):
                        parent = self.switch_name(level + 1, parent_group, parent_index)
                        self.add_fabric_link(child, p + 1 + m, parent, down_port,
                                             self.params["fabric_link_mbps"])

    def _add_switch(self, level, group, index):
        """Add one switch with its F10 attributes."""
        name = self.switch_name(level, group, index)
        if level == self.L:
            attrs = {"f10_level": level, "group": 0, "index": index, "location": 0,
                     "prefix": self._prefix_of(level, 0)}
            self._names[name] = (level, 0, index)
            return self.add_fabric_switch(name, "core", level + 1, **attrs)
        attrs = {"f10_level": level, "group": group, "index": index,
                 "location": self.location_of(level, group), "prefix": self._prefix_of(level, group),
                 "subtree_type": self.subtree_type_of(level, group),
                 "type_stack": self.type_stack_of(level, group)}
        if self.L >= 2 and level <= 1:
            attrs["pod"] = group // self.p if level == 0 else group
        self._names[name] = (level, group, index)
        role = "edge" if level == 0 else "agg"
        return self.add_fabric_switch(name, role, level + 1, **attrs)

    # ------------------------------------------------------ per-node queries
    def coordinates(self, name):
        """Return ``(f10_level, group, index)`` of switch ``name``.

        Raises:
            ParameterError: if ``name`` is not a switch of this topology.
        """
        try:
            return self._names[name]
        except KeyError:
            raise ParameterError("switch", name, "a switch name of this topology") from None

    def location(self, name):
        """F10 location of a switch (``Lb + 1`` bits) or host (``(L + 1)b + 1`` bits)."""
        info = self.nodeInfo(name)
        return info["location"]

    def subtree_prefix(self, name):
        """CIDR prefix of the hosts below switch ``name`` (the whole fabric for a core)."""
        level, group, _ = self.coordinates(name)
        return self._prefix_of(level, group)

    def subtree_type(self, name):
        """Type ('A'/'B') of the subtree switch ``name`` is a root of (None for cores)."""
        level, group, _ = self.coordinates(name)
        return None if level == self.L else self.subtree_type_of(level, group)

    def type_stack(self, name):
        """F10 subtree type stack of switch ``name``: types from below the cores down to its own subtree."""
        level, group, _ = self.coordinates(name)
        return () if level == self.L else self.type_stack_of(level, group)

    def failure_group(self, name):
        """F10 failure group ``(t, j)`` that switch ``name``'s parents form.

        Every parent of root ``j`` of a type-``t`` subtree is connected to the
        ``j``-th root of all type-``t`` subtrees of the same parent group; if the
        switch fails, none of those parents can reach its subtree directly.

        Raises:
            ParameterError: for a core switch (it has no parents).
        """
        level, group, index = self.coordinates(name)
        if level == self.L:
            raise ParameterError("switch", name, "a non-core switch", "cores have no parents")
        return (self.subtree_type_of(level, group), index)

    def failure_group_members(self, name):
        """Names of the parents of switch ``name`` (its failure group), in uplink order."""
        level, group, index = self.coordinates(name)
        if level == self.L:
            raise ParameterError("switch", name, "a non-core switch", "cores have no parents")
        parent_group = group // self.p if level + 1 < self.L else 0
        return [self.switch_name(level + 1, parent_group, q) for q in self.parent_indices(level, group, index)]

    def extra_summary(self):
        """FatTree rows: p, L, host count N, location bits."""
        return [("p (= k/2)", self.p), ("L (top level)", self.L), ("N hosts (2p^(L+1))", self.host_count),
                ("location bits (host)", self.host_location_bits)]
