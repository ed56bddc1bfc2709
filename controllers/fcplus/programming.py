"""The table entries of p4src/fcplus.p4 for one routing of an FC+/FC fabric (pure: no network needed).

For every ordered pair of ToRs, the routing's paths (topologies/fcplus/routing.py)
are numbered 0..n-1; every ToR on one of them gets ``path_count`` (source /24,
destination /24) -> n, and ``path_next`` (source /24, destination /24, i) ->
its out-port on path i.  The program hashes a flow's QP into i the same way
at every hop, so a flow follows one path end to end.  For routings on more
than one lossless class, down-up turns move the packet to the next class (``priority_transition``, from
:func:`~testbed.topologies.fcplus.routing.priority_transition_table`, keyed on
the current class).
"""
import ipaddress

from testbed.topologies.base import leaf_prefix
from testbed.topologies.fcplus.routing import priority_transition_table, routing_paths, routing_priorities
from testbed.traffic.pause import DATA_PRIORITY as DATA_CLASS
from testbed.traffic.roce import DSCP_CONTROL, DSCP_DATA

#: the class the hosts' RoCE control packets (ACKs, CNPs) go on: lossy, served first
CONTROL_CLASS = 7


def fcplus_entries(tor_graph, hosts, routing, k, n_lp=2, data_dscp=DSCP_DATA, control_dscp=DSCP_CONTROL,
                   max_candidates=None):
    """Entries of every ToR's tables.

    Args:
        tor_graph: the ToR graph (``FCPlusTopo.tor_graph()``).
        hosts: ``{host: (tor, port, ip text, mac text)}``.
        routing: a routing of :data:`~testbed.topologies.fcplus.routing.ROUTINGS`.
        k: paths per pair (>= 1).
        n_lp: lossless classes for ``dfksp`` (1..3).
        data_dscp, control_dscp: what hosts send.
        max_candidates: candidate cap of the DF-KSP / FC+ searches.

    Returns:
        dict: ``{tor: {"classify": [(dscp, class)], "host_route": [(ip, mac, port)],
        "path_count": [(src prefix, dst prefix, n)], "path_next": [(src prefix, dst prefix, i, port)],
        "priority_transition": [(in_port, out_port, class, new class)]}}`` (prefixes as
        ``(network int, 24)``), and the paths ``{(src tor, dst tor): [path, ...]}``.

    Raises:
        ParameterError: a bad routing, ``k < 1`` or ``n_lp`` outside 1..3 (named).
    """
    tors = sorted(tor_graph.nodes, key=lambda name: tor_graph.nodes[name]["index"])
    edges = [tor for tor in tors if tor_graph.nodes[tor].get("servers", 1)]   # a Clos's spines hold no hosts
    pairs = [(s, t) for s in edges for t in edges if s != t]
    paths = routing_paths(tor_graph, pairs, routing, k=k, n_lp=n_lp, max_candidates=max_candidates)
    entries = {tor: {"classify": [(data_dscp, DATA_CLASS), (control_dscp, CONTROL_CLASS)], "host_route": [],
                     "path_count": [], "path_next": [], "priority_transition": []} for tor in tors}
    for host, (tor, port, ip, mac) in sorted(hosts.items()):
        entries[tor]["host_route"].append((ip, mac, port))
    prefix = {tor: _prefix(tor_graph, tor) for tor in tors}
    for (source, target), found in sorted(paths.items()):
        on_paths = set()
        for index, path in enumerate(found):
            for u, w, key in path:
                port = tor_graph[u][w][key]["port"][u]
                entries[u]["path_next"].append((prefix[source], prefix[target], index, port))
                on_paths.add(u)
        for tor in sorted(on_paths):
            entries[tor]["path_count"].append((prefix[source], prefix[target], len(found)))
    if routing_priorities(routing, n_lp) == 1:
        return entries, paths   # one lossless class: KSP keeps it whatever its turns (and may deadlock)
    every_path = [path for found in paths.values() for path in found]
    for (tor, in_port, out_port, current), new in sorted(
            priority_transition_table(tor_graph, every_path, match_priority=True).items()):
        entries[tor]["priority_transition"].append((in_port, out_port, current, new))
    return entries, paths


def _prefix(tor_graph, tor):
    """The ToR's hosts' /24 as ``(network int, prefix length)``."""
    network = ipaddress.IPv4Network(leaf_prefix(tor_graph.nodes[tor]["index"]))
    return int(network.network_address), network.prefixlen
