"""The Clos an FC+ fabric is compared with: a leaf-spine of the same switches, ports and hosts (seed 001, V-A).

The paper compares FC+ with "Clos topologies that maximize throughput, using a
comparable number of switches" (FC's method).  At the sizes this machine
emulates two tiers suffice: :func:`equal_switch_clos` takes the FC+ fabric's
``N`` switches of ``p`` ports and its ``N * hosts_per_tor`` hosts and, over every
split into ``L`` leaves and ``S = N - L`` spines, spreads the hosts evenly over
the leaves, gives each leaf its remaining ports as uplinks (fewer when the
spines' ``S * p`` ports cannot take them all, cut from the leaves with the most
uplinks per host), and keeps the split whose worst leaf has the most uplinks
per host (ties: fewer spines).  That ratio bounds the Clos's throughput under
any traffic leaving the leaves.

The result is a ToR graph in the format of :mod:`.topology` (so the routings,
the deadlock check and the throughput LP take it): leaves ``leaf0 ..`` on
virtual layer 1, spines ``spine0 ..`` on layer 2, one virtual switch each, and
every node's ``servers`` (hosts below it; 0 on spines).  Up-down paths on it
(``fcplus1l``) are the leaf-spine-leaf paths ECMP would use.
"""
import networkx as nx

from testbed.errors import ParameterError
from testbed.topologies.base import DEFAULT_FABRIC_LINK_MBPS, DEFAULT_HOST_LINK_MBPS, check_int, leaf_host_address, \
    leaf_prefix
from testbed.topologies.fcplus.topology import FCPlusTopo, fcplus_graph


def _leaf_uplinks(hosts, spines, ports):
    """Uplinks per leaf for ``hosts`` per leaf under ``spines`` spines of ``ports`` ports (cut to fit)."""
    uplinks = [ports - count for count in hosts]
    while sum(uplinks) > spines * ports:
        # cut where a link per host matters least: the leaf with the most uplinks per host
        worst = max(range(len(uplinks)), key=lambda i: (uplinks[i] / hosts[i], -i))
        uplinks[worst] -= 1
    return uplinks


def equal_switch_clos(switches, ports, hosts):
    """The leaf-spine of ``switches`` switches of ``ports`` ports for ``hosts`` hosts (module docstring).

    Args:
        switches: switches in all (>= 2).
        ports: ports per switch (>= 2).
        hosts: hosts in all (>= 1).

    Returns:
        networkx.MultiGraph: the ToR graph (kind ``"clos"``, graph attributes ``leaves``,
        ``spines``, ``uplinks_per_host`` (the worst leaf's) besides the usual ones).

    Raises:
        ParameterError: naming ``N`` when no split gives every leaf a host port and an uplink.

    Sixteen hosts on eight 6-port switches: 6 leaves of 3 or 2 hosts with 2
    uplinks each (2/3 of an uplink per host on the fuller leaves), 2 spines.

    >>> clos = equal_switch_clos(8, 6, 16)
    >>> clos.graph["leaves"], clos.graph["spines"], round(clos.graph["uplinks_per_host"], 3)
    (6, 2, 0.667)
    >>> [clos.nodes[f"leaf{i}"]["servers"] for i in range(6)], clos.degree("spine0")
    ([3, 3, 3, 3, 2, 2], 6)
    """
    check_int("N", switches, minimum=2)
    check_int("p", ports, minimum=2)
    check_int("hosts", hosts, minimum=1)
    best = None
    for spines in range(1, switches):
        leaves = switches - spines
        base, extra = divmod(hosts, leaves)
        counts = [base + 1 if i < extra else base for i in range(leaves)]
        if min(counts) < 1 or max(counts) > ports - 1:
            continue
        uplinks = _leaf_uplinks(counts, spines, ports)
        if min(uplinks) < 1:
            continue
        ratio = min(up / count for up, count in zip(uplinks, counts))
        if best is None or ratio > best[0]:
            best = (ratio, spines, counts, uplinks)
    if best is None:
        raise ParameterError("N", switches, f"enough switches of {ports} ports for a leaf-spine of {hosts} hosts",
                             "no split into leaves and spines gives every leaf a host and an uplink")
    ratio, spines, counts, uplinks = best
    return _clos_graph(counts, uplinks, spines, ports, ratio)


def _clos_graph(counts, uplinks, spines, ports, ratio):
    """The ToR graph: uplinks dealt to the spines in turn (so the spines stay within ``ports``)."""
    leaves = len(counts)
    graph = nx.MultiGraph(kind="clos", N=leaves + spines, p=ports, s=None, h=max(counts), v=1, k=2, n_gl=None,
                          degrees=None, seed=None, parallel_links=0, leaves=leaves, spines=spines,
                          uplinks_per_host=ratio)
    names = [f"leaf{i}" for i in range(leaves)] + [f"spine{j}" for j in range(spines)]
    next_port = {name: 1 for name in names}
    for i in range(leaves):
        next_port[names[i]] = counts[i] + 1
        graph.add_node(names[i], index=i, layers=[1], ports=[[]], servers=counts[i])
    for j in range(spines):
        graph.add_node(names[leaves + j], index=leaves + j, layers=[2], ports=[[]], servers=0)
    turn = 0
    for i, count in enumerate(uplinks):
        for _ in range(count):
            leaf, spine = names[i], names[leaves + turn % spines]
            turn += 1
            if graph.has_edge(leaf, spine):
                graph.graph["parallel_links"] += 1
            ports_of = {leaf: next_port[leaf], spine: next_port[spine]}
            next_port[leaf] += 1
            next_port[spine] += 1
            graph.nodes[leaf]["ports"][0].append(ports_of[leaf])
            graph.nodes[spine]["ports"][0].append(ports_of[spine])
            graph.add_edge(leaf, spine, key=turn - 1, lower=leaf, port=ports_of, layer={leaf: 1, spine: 2},
                           vswitch={leaf: 1, spine: 1})
    return graph


class FCPlusClosTopo(FCPlusTopo):
    """The leaf-spine Clos of an FC+ fabric's switches, ports and hosts (:func:`equal_switch_clos`).

    Takes the FC+ parameters (so a mode can run an FC+ experiment's spec on it) and
    checks them as :class:`FCPlusTopo` does; the Clos has ``N`` switches of ``p``
    ports and ``N * hosts_per_tor`` hosts (``s`` and ``v`` shape only the FC+ fabric).

    Switches are ``leaf0 ..`` (role ``leaf``, level 1, ``index``, ``prefix``) and
    ``spine0 ..`` (role ``spine``, level 2), hosts ``h1 ..`` leaf by leaf at
    :func:`leaf_host_address`; a leaf's hosts take ports ``1 ..``, its uplinks follow.
    :meth:`tor_graph` gives the graph the routings and the throughput LP take.

    Raises:
        ParameterError: FC+ parameters :class:`FCPlusTopo` refuses, or too few switches (``N``).
    """

    kind = "fcplus_clos"
    PARAMETERS = FCPlusTopo.PARAMETERS

    def __init__(self, N=8, p=8, s=6, v=None, seed=1, hosts_per_tor=None,
                 hosts_link_mbps=DEFAULT_HOST_LINK_MBPS, fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS, **topo_opts):
        check_int("seed", seed, allowed="an integer")
        fcplus = fcplus_graph(N, p, s, v=v, seed=seed)   # the fabric this Clos stands beside
        per_tor = p - s if hosts_per_tor is None else hosts_per_tor
        check_int("hosts_per_tor", per_tor, minimum=1, maximum=p - s)
        self._tors = equal_switch_clos(N, p, N * per_tor)
        self._init_common(N, p, s, seed, hosts_per_tor, hosts_link_mbps, fabric_link_mbps, topo_opts,
                          {"v": fcplus.graph["v"]})

    def build(self):
        """Add the spines, the leaves with their hosts and host links, then the leaf-spine links."""
        graph = self._tors
        names = sorted(graph.nodes, key=lambda name: graph.nodes[name]["index"])
        for name in names:
            data = graph.nodes[name]
            if data["servers"]:
                self.add_fabric_switch(name, "leaf", 1, index=data["index"], prefix=leaf_prefix(data["index"]))
            else:
                self.add_fabric_switch(name, "spine", 2, index=data["index"])
        number = 0
        for name in names:
            data = graph.nodes[name]
            for host_index in range(data["servers"]):
                number += 1
                host = self.add_fabric_host(f"h{number}", leaf_host_address(data["index"], host_index), tor=name,
                                            host_index=host_index)
                self.add_fabric_link(host, 0, name, host_index + 1, self.params["hosts_link_mbps"])
        for u, w, key, data in sorted(graph.edges(keys=True, data=True), key=lambda edge: edge[2]):
            self.add_fabric_link(u, data["port"][u], w, data["port"][w], self.params["fabric_link_mbps"])

    def extra_summary(self):
        """Clos rows: leaves, spines, hosts per leaf, uplinks per host of the worst leaf."""
        graph = self._tors
        leaves = [graph.nodes[f"leaf{i}"] for i in range(graph.graph["leaves"])]
        return [("leaves", graph.graph["leaves"]), ("spines", graph.graph["spines"]),
                ("hosts per leaf", ",".join(str(leaf["servers"]) for leaf in leaves)),
                ("uplinks per leaf", ",".join(str(len(leaf["ports"][0])) for leaf in leaves)),
                ("uplinks per host (worst leaf)", f"{graph.graph['uplinks_per_host']:.3f}")]
