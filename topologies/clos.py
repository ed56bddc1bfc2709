"""Clos / leaf-spine fabrics: two tiers (:class:`ClosTopo`) and three tiers with pods (:class:`Clos3Topo`).

Names: leaves ``leaf0 ..``, spines ``spine0 ..``, super-spines (3-tier)
``core0 ..``, hosts ``h1 ..`` (numbered leaf by leaf).  Switch indices are
global; ``pod`` and ``plane`` attributes give the 3-tier position.

Ports: on a leaf, hosts take ports ``1..H`` and uplinks follow from ``H + 1``
(spine by spine, parallel links consecutive); on a spine, downlinks come first
(leaf by leaf) and, in 3 tiers, uplinks to cores follow; on a core, ports go
spine by spine.  Hosts use port 0.

Addressing: host ``h`` (0-based) of global leaf ``i`` is
``10.<i div 256>.<i mod 256>.<h + 1>``, so leaf ``i`` owns ``10.<hi>.<lo>.0/24``
(at most 254 hosts per leaf and 65,536 leaves).
"""
import math

from testbed.errors import ParameterError
from testbed.topologies.base import (DEFAULT_FABRIC_LINK_MBPS, DEFAULT_HOST_LINK_MBPS, MAX_SWITCH_PORT,
                                     FabricTopo, check_int, check_multiplier, check_node_count, check_ports,
                                     check_positive_number, check_switch_ports, leaf_host_address,
                                     leaf_prefix)

MAX_HOSTS_PER_LEAF = 254
MAX_LEAVES = 10000  # leaf names leaf0..leaf9999 fit Mininet's 8 characters


def normalize_hosts_per_leaf(hosts_per_leaf, leaves, field="hosts_per_leaf"):
    """Return a list of host counts, one per leaf, from an int or a list.

    Raises:
        ParameterError: a count below 1 or above 254, or a list of the wrong length.
    """
    allowed = f"an integer 1..{MAX_HOSTS_PER_LEAF} or a list of {leaves} such integers"
    if isinstance(hosts_per_leaf, (list, tuple)):
        if len(hosts_per_leaf) != leaves:
            raise ParameterError(field, list(hosts_per_leaf), allowed,
                                 f"the list has {len(hosts_per_leaf)} entries")
        counts = list(hosts_per_leaf)
    else:
        counts = [hosts_per_leaf] * leaves
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_HOSTS_PER_LEAF:
            raise ParameterError(field, hosts_per_leaf, allowed)
    return counts


def spread_uplinks(uplinks, spines, leaf_index):
    """Spread ``uplinks`` links of one leaf over ``spines`` spines as evenly as possible.

    Every spine gets ``uplinks div spines``; the remainder goes to consecutive
    spines starting at a leaf-dependent offset, so the spines stay balanced
    across leaves.

    Returns:
        list[int]: links per spine.
    """
    base, extra = divmod(uplinks, spines)
    counts = [base] * spines
    start = (leaf_index * extra) % spines
    for offset in range(extra):
        counts[(start + offset) % spines] += 1
    return counts


class ClosTopo(FabricTopo):
    """Two-tier leaf-spine fabric.

    How many links join each leaf-spine pair is decided by exactly one of
    ``bundle_matrix``, ``uplinks_per_leaf``, ``oversubscription``, or (when none
    is given) ``links_per_pair``.

    Args:
        leaves: number of leaf switches (>= 1).
        spines: number of spine switches (>= 1).
        hosts_per_leaf: hosts on every leaf (int) or per leaf (list), each 1..254.
        links_per_pair: parallel links between every leaf and every spine (>= 1).
        bundle_matrix: ``bundle_matrix[i][j]`` parallel links from leaf i to spine
            j (>= 0; every leaf and every spine needs at least one link).
        uplinks_per_leaf: total uplinks per leaf, spread evenly over the spines.
        oversubscription: target ratio of host capacity to uplink capacity per
            leaf; the uplinks per leaf become ``ceil(hosts * host capacity /
            (ratio * fabric capacity))``.
        leaf_ports: ports per leaf switch (None: unlimited).
        spine_ports: ports per spine switch (None: unlimited).
        hosts_link_mbps: capacity of host links.
        fabric_link_mbps: capacity of leaf-spine links.

    Raises:
        ParameterError: bad counts, conflicting uplink options, or more links
            than ports on some switch.
    """

    kind = "clos"
    PARAMETERS = (
        ("leaves", 4, "number of leaf switches"),
        ("spines", 2, "number of spine switches"),
        ("hosts_per_leaf", 2, "hosts per leaf: an integer or a list (one per leaf)"),
        ("links_per_pair", 1, "parallel links between every leaf and every spine"),
        ("bundle_matrix", None, "per-leaf list of per-spine link counts, rows separated by ';' (1,2;2,1)"),
        ("uplinks_per_leaf", None, "total uplinks per leaf, spread evenly over the spines"),
        ("oversubscription", None, "host-to-uplink capacity ratio per leaf (derives the uplinks)"),
        ("leaf_ports", None, "ports per leaf switch (unset: unlimited)"),
        ("spine_ports", None, "ports per spine switch (unset: unlimited)"),
        ("hosts_link_mbps", DEFAULT_HOST_LINK_MBPS, "capacity of host links (Mbit/s)"),
        ("fabric_link_mbps", DEFAULT_FABRIC_LINK_MBPS, "capacity of leaf-spine links (Mbit/s)"),
    )

    def __init__(self, leaves=4, spines=2, hosts_per_leaf=2, links_per_pair=1, bundle_matrix=None,
                 uplinks_per_leaf=None, oversubscription=None, leaf_ports=None, spine_ports=None,
                 hosts_link_mbps=DEFAULT_HOST_LINK_MBPS, fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS,
                 **topo_opts):
        check_int("leaves", leaves, minimum=1, maximum=MAX_LEAVES)
        check_int("spines", spines, minimum=1, maximum=999)
        self.leaf_host_counts = normalize_hosts_per_leaf(hosts_per_leaf, leaves)
        check_node_count("leaves", leaves, leaves + spines + sum(self.leaf_host_counts))
        most_hosts = max(self.leaf_host_counts)
        check_int("links_per_pair", links_per_pair, minimum=1)
        host_mbps = check_positive_number("hosts_link_mbps", hosts_link_mbps)
        fabric_mbps = check_positive_number("fabric_link_mbps", fabric_link_mbps)
        check_ports("leaf_ports", leaf_ports)
        check_ports("spine_ports", spine_ports)
        given = [name for name, value in (("bundle_matrix", bundle_matrix), ("uplinks_per_leaf", uplinks_per_leaf),
                                          ("oversubscription", oversubscription)) if value is not None]
        if len(given) > 1:
            raise ParameterError(given[1], locals()[given[1]], f"unset when {given[0]} is given",
                                 "bundle_matrix, uplinks_per_leaf and oversubscription are alternatives")
        if bundle_matrix is not None:
            self.bundles = self._check_bundle_matrix(bundle_matrix, leaves, spines)
        elif uplinks_per_leaf is not None:
            check_multiplier("uplinks_per_leaf", uplinks_per_leaf,
                             [("a leaf", most_hosts, 1), ("the fullest spine", 0, -(-leaves // spines))])
            self.bundles = [spread_uplinks(uplinks_per_leaf, spines, i) for i in range(leaves)]
        elif oversubscription is not None:
            ratio = check_positive_number("oversubscription", oversubscription)
            uplinks = math.ceil(most_hosts * host_mbps / (ratio * fabric_mbps) - 1e-9)
            if uplinks > MAX_SWITCH_PORT - most_hosts:
                lowest = most_hosts * host_mbps / ((MAX_SWITCH_PORT - most_hosts) * fabric_mbps)
                raise ParameterError("oversubscription", oversubscription, f"a ratio >= {lowest:.4g}",
                                     f"a leaf would need {uplinks} uplinks besides its {most_hosts} hosts, "
                                     f"more than its {MAX_SWITCH_PORT} ports")
            self.bundles = [spread_uplinks(max(uplinks, 1), spines, i) for i in range(leaves)]
        else:
            check_switch_ports("leaves", leaves, "a spine", leaves)  # one link to every leaf
            check_switch_ports("spines", spines, "a leaf", most_hosts + spines)
            check_multiplier("links_per_pair", links_per_pair,
                             [("a leaf", most_hosts, spines), ("a spine", 0, leaves)])
            self.bundles = [[links_per_pair] * spines for _ in range(leaves)]
        source = given[0] if given else "links_per_pair"
        for j in range(spines):
            if sum(row[j] for row in self.bundles) == 0:
                raise ParameterError(source, locals()[source], "a value that gives every spine at least one link",
                                     f"spine{j} would have no links")
        for i, row in enumerate(self.bundles):
            needed = self.leaf_host_counts[i] + sum(row)
            check_switch_ports(source, locals()[source], f"leaf{i}", needed)
            if leaf_ports is not None and needed > leaf_ports:
                raise ParameterError("leaf_ports", leaf_ports, f"an integer >= {needed}",
                                     f"leaf{i} needs {self.leaf_host_counts[i]} host ports + {sum(row)} uplinks")
        for j in range(spines):
            needed = sum(row[j] for row in self.bundles)
            check_switch_ports(source, locals()[source], f"spine{j}", needed)
            if spine_ports is not None and needed > spine_ports:
                raise ParameterError("spine_ports", spine_ports, f"an integer >= {needed}",
                                     f"spine{j} needs {needed} downlinks")
        self.leaf_count = leaves
        self.spine_count = spines
        self.params = {"leaves": leaves, "spines": spines,
                       "hosts_per_leaf": hosts_per_leaf if isinstance(hosts_per_leaf, int) else list(hosts_per_leaf),
                       "links_per_pair": links_per_pair,
                       "bundle_matrix": [list(row) for row in bundle_matrix] if bundle_matrix is not None else None,
                       "uplinks_per_leaf": uplinks_per_leaf, "oversubscription": oversubscription,
                       "leaf_ports": leaf_ports, "spine_ports": spine_ports,
                       "hosts_link_mbps": host_mbps, "fabric_link_mbps": fabric_mbps}
        super().__init__(**topo_opts)

    @staticmethod
    def _check_bundle_matrix(matrix, leaves, spines):
        """Validate a bundle matrix: ``leaves`` rows of ``spines`` integers >= 0, each row summing to >= 1."""
        allowed = f"{leaves} rows of {spines} integers >= 0, every row with at least one link"
        if not isinstance(matrix, (list, tuple)) or len(matrix) != leaves:
            raise ParameterError("bundle_matrix", matrix, allowed)
        rows = []
        for row in matrix:
            if not isinstance(row, (list, tuple)) or len(row) != spines:
                raise ParameterError("bundle_matrix", matrix, allowed)
            for count in row:
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise ParameterError("bundle_matrix", matrix, allowed)
            if sum(row) == 0:
                raise ParameterError("bundle_matrix", matrix, allowed, "a leaf would have no uplinks")
            rows.append(list(row))
        return rows

    def build(self):
        """Add spines, leaves and hosts, then host links and the leaf-spine bundles."""
        for j in range(self.spine_count):
            self.add_fabric_switch(f"spine{j}", "spine", 2, index=j)
        for i in range(self.leaf_count):
            self.add_fabric_switch(f"leaf{i}", "leaf", 1, index=i, prefix=leaf_prefix(i))
        attach_hosts(self, [f"leaf{i}" for i in range(self.leaf_count)], self.leaf_host_counts,
                     self.params["hosts_link_mbps"])
        spine_port = [1] * self.spine_count
        for i, row in enumerate(self.bundles):
            port = self.leaf_host_counts[i] + 1
            for j, count in enumerate(row):
                for _ in range(count):
                    self.add_fabric_link(f"leaf{i}", port, f"spine{j}", spine_port[j],
                                         self.params["fabric_link_mbps"])
                    port += 1
                    spine_port[j] += 1

    def oversubscription_per_leaf(self):
        """Host capacity over uplink capacity for every leaf (list of floats)."""
        host_mbps, fabric_mbps = self.params["hosts_link_mbps"], self.params["fabric_link_mbps"]
        return [self.leaf_host_counts[i] * host_mbps / (sum(row) * fabric_mbps) for i, row in enumerate(self.bundles)]

    def extra_summary(self):
        """Clos rows: uplinks per leaf and oversubscription range."""
        ratios = self.oversubscription_per_leaf()
        uplinks = sorted({sum(row) for row in self.bundles})
        return [("uplinks per leaf", ",".join(str(u) for u in uplinks)),
                ("oversubscription (min..max)", f"{min(ratios):.2f}..{max(ratios):.2f}")]


def attach_hosts(topo, leaves, hosts_per_leaf, capacity_mbps):
    """Add hosts ``h1 ..`` below each leaf-like switch with :func:`leaf_host_address` addresses.

    Args:
        topo: the :class:`FabricTopo` being built.
        leaves: leaf names in global index order.
        hosts_per_leaf: host count per leaf (same order).
        capacity_mbps: host link capacity.

    Returns:
        list[str]: host names in order.
    """
    names = []
    for leaf_index, (leaf, count) in enumerate(zip(leaves, hosts_per_leaf)):
        for host_index in range(count):
            name = topo.add_fabric_host(f"h{len(names) + 1}", leaf_host_address(leaf_index, host_index),
                                        leaf=leaf, host_index=host_index)
            topo.add_fabric_link(name, 0, leaf, host_index + 1, capacity_mbps)
            names.append(name)
    return names


class Clos3Topo(FabricTopo):
    """Three-tier Clos: pods of leaves and spines, joined by a core (super-spine) tier.

    Inside a pod every leaf connects to every spine with ``leaf_spine_links``
    links.  With ``core_wiring="planes"`` the cores form ``spines_per_pod``
    planes of ``cores / spines_per_pod`` switches and spine ``j`` of every pod
    connects to every core of plane ``j``; with ``"mesh"`` every spine connects
    to every core.  Each spine-core pair gets ``spine_core_links`` links.

    Args:
        pods: number of pods (>= 1).
        leaves_per_pod, spines_per_pod: switches per pod (>= 1).
        cores: number of core switches (>= 1; a multiple of spines_per_pod for planes).
        hosts_per_leaf: hosts on every leaf (int) or per leaf (list over all leaves).
        leaf_spine_links, spine_core_links: parallel links per pair (>= 1).
        core_wiring: ``"planes"`` or ``"mesh"``.
        leaf_ports, spine_ports, core_ports: port counts (None: unlimited).
        hosts_link_mbps, fabric_link_mbps: link capacities.

    Raises:
        ParameterError: bad counts, a core count that does not split into
            planes, or more links than ports.
    """

    kind = "clos3"
    PARAMETERS = (
        ("pods", 2, "number of pods"),
        ("leaves_per_pod", 2, "leaf switches per pod"),
        ("spines_per_pod", 2, "spine switches per pod"),
        ("cores", 2, "core (super-spine) switches"),
        ("hosts_per_leaf", 2, "hosts per leaf: an integer or a list (one per leaf, all pods)"),
        ("leaf_spine_links", 1, "parallel links between a leaf and each spine of its pod"),
        ("spine_core_links", 1, "parallel links between a spine and each core it connects to"),
        ("core_wiring", "planes", "planes (spine j to core plane j) or mesh (every spine to every core)"),
        ("leaf_ports", None, "ports per leaf switch (unset: unlimited)"),
        ("spine_ports", None, "ports per spine switch (unset: unlimited)"),
        ("core_ports", None, "ports per core switch (unset: unlimited)"),
        ("hosts_link_mbps", DEFAULT_HOST_LINK_MBPS, "capacity of host links (Mbit/s)"),
        ("fabric_link_mbps", DEFAULT_FABRIC_LINK_MBPS, "capacity of switch-switch links (Mbit/s)"),
    )

    def __init__(self, pods=2, leaves_per_pod=2, spines_per_pod=2, cores=2, hosts_per_leaf=2,
                 leaf_spine_links=1, spine_core_links=1, core_wiring="planes", leaf_ports=None,
                 spine_ports=None, core_ports=None, hosts_link_mbps=DEFAULT_HOST_LINK_MBPS,
                 fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS, **topo_opts):
        check_int("pods", pods, minimum=1, maximum=256)
        check_int("leaves_per_pod", leaves_per_pod, minimum=1, maximum=256)
        check_int("spines_per_pod", spines_per_pod, minimum=1, maximum=256)
        check_int("cores", cores, minimum=1, maximum=999)
        check_int("leaf_spine_links", leaf_spine_links, minimum=1)
        check_int("spine_core_links", spine_core_links, minimum=1)
        if core_wiring not in ("planes", "mesh"):
            raise ParameterError("core_wiring", core_wiring, "one of: planes, mesh")
        if core_wiring == "planes" and cores % spines_per_pod:
            raise ParameterError("cores", cores, f"a multiple of spines_per_pod={spines_per_pod}",
                                 "core_wiring=planes gives each pod spine its own plane of cores")
        for field, value in (("leaf_ports", leaf_ports), ("spine_ports", spine_ports), ("core_ports", core_ports)):
            check_ports(field, value)
        self.leaf_host_counts = normalize_hosts_per_leaf(hosts_per_leaf, pods * leaves_per_pod)
        check_node_count("pods", pods, cores + pods * (leaves_per_pod + spines_per_pod) + sum(self.leaf_host_counts))
        host_mbps = check_positive_number("hosts_link_mbps", hosts_link_mbps)
        fabric_mbps = check_positive_number("fabric_link_mbps", fabric_link_mbps)
        cores_per_spine = cores // spines_per_pod if core_wiring == "planes" else cores
        spines_per_core_per_pod = spines_per_pod if core_wiring == "mesh" else 1
        most_hosts = max(self.leaf_host_counts)
        check_switch_ports("spines_per_pod", spines_per_pod, "a leaf", most_hosts + spines_per_pod)
        check_switch_ports("leaves_per_pod", leaves_per_pod, "a spine", leaves_per_pod + cores_per_spine)
        check_switch_ports("pods", pods, "a core", pods * spines_per_core_per_pod)
        check_multiplier("leaf_spine_links", leaf_spine_links,
                         [("a leaf", most_hosts, spines_per_pod), ("a spine", cores_per_spine, leaves_per_pod)])
        check_multiplier("spine_core_links", spine_core_links,
                         [("a spine", leaves_per_pod * leaf_spine_links, cores_per_spine),
                          ("a core", 0, pods * spines_per_core_per_pod)])
        for i, count in enumerate(self.leaf_host_counts):
            needed = count + spines_per_pod * leaf_spine_links
            if leaf_ports is not None and needed > leaf_ports:
                raise ParameterError("leaf_ports", leaf_ports, f"an integer >= {needed}",
                                     f"leaf{i} needs {count} host ports + {needed - count} uplinks")
        spine_needed = leaves_per_pod * leaf_spine_links + cores_per_spine * spine_core_links
        if spine_ports is not None and spine_needed > spine_ports:
            raise ParameterError("spine_ports", spine_ports, f"an integer >= {spine_needed}",
                                 "each spine needs its leaf downlinks plus its core uplinks")
        core_needed = pods * spines_per_core_per_pod * spine_core_links
        if core_ports is not None and core_needed > core_ports:
            raise ParameterError("core_ports", core_ports, f"an integer >= {core_needed}",
                                 "each core needs a link bundle to its spine in every pod")
        self.params = {"pods": pods, "leaves_per_pod": leaves_per_pod, "spines_per_pod": spines_per_pod,
                       "cores": cores,
                       "hosts_per_leaf": hosts_per_leaf if isinstance(hosts_per_leaf, int) else list(hosts_per_leaf),
                       "leaf_spine_links": leaf_spine_links, "spine_core_links": spine_core_links,
                       "core_wiring": core_wiring, "leaf_ports": leaf_ports, "spine_ports": spine_ports,
                       "core_ports": core_ports, "hosts_link_mbps": host_mbps, "fabric_link_mbps": fabric_mbps}
        super().__init__(**topo_opts)

    def cores_of_spine(self, position):
        """Core indices the spine at ``position`` (0-based within its pod) connects to."""
        cores, spines = self.params["cores"], self.params["spines_per_pod"]
        if self.params["core_wiring"] == "mesh":
            return list(range(cores))
        per_plane = cores // spines
        return list(range(position * per_plane, (position + 1) * per_plane))

    def build(self):
        """Add cores, spines, leaves and hosts, then host, leaf-spine and spine-core links."""
        prm = self.params
        pods, lpp, spp = prm["pods"], prm["leaves_per_pod"], prm["spines_per_pod"]
        planes = prm["core_wiring"] == "planes"
        per_plane = prm["cores"] // spp if planes else prm["cores"]
        for c in range(prm["cores"]):
            attrs = {"index": c}
            if planes:
                attrs["plane"] = c // per_plane
            self.add_fabric_switch(f"core{c}", "core", 3, **attrs)
        for pod in range(pods):
            for s in range(spp):
                self.add_fabric_switch(f"spine{pod * spp + s}", "spine", 2, index=pod * spp + s, pod=pod, plane=s)
        leaves = []
        for pod in range(pods):
            for position in range(lpp):
                index = pod * lpp + position
                leaves.append(self.add_fabric_switch(f"leaf{index}", "leaf", 1, index=index, pod=pod,
                                                     prefix=leaf_prefix(index)))
        attach_hosts(self, leaves, self.leaf_host_counts, prm["hosts_link_mbps"])
        spine_port = {}
        for pod in range(pods):
            for position in range(lpp):
                index = pod * lpp + position
                port = self.leaf_host_counts[index] + 1
                for s in range(spp):
                    spine = f"spine{pod * spp + s}"
                    for _ in range(prm["leaf_spine_links"]):
                        spine_port[spine] = spine_port.get(spine, 0) + 1
                        self.add_fabric_link(leaves[index], port, spine, spine_port[spine],
                                             prm["fabric_link_mbps"])
                        port += 1
        core_port = {}
        for pod in range(pods):
            for s in range(spp):
                spine = f"spine{pod * spp + s}"
                for c in self.cores_of_spine(s):
                    for _ in range(prm["spine_core_links"]):
                        spine_port[spine] += 1
                        core_port[c] = core_port.get(c, 0) + 1
                        self.add_fabric_link(spine, spine_port[spine], f"core{c}", core_port[c],
                                             prm["fabric_link_mbps"])
