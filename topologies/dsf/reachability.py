"""DSF Input Balanced Mode arithmetic (seed 000): capacity toward a destination RDSW.

Seen from a destination RDSW ``dest``, the failure-free fabric splits every
device's links into *downstream* links (to neighbours one hop closer to
``dest``) and *upstream* links (to neighbours one hop farther).  A device
advertises reachability to ``dest`` on its upstream links; its neighbours send
traffic for ``dest`` only over links on which reachability is advertised.

* A link carries reachability toward ``dest`` from neighbour ``n`` to device
  ``d`` when it has not failed and either ``n`` is ``dest`` or ``n`` has not
  withdrawn the advertisement on that link and still has output capacity.
* **Output capacity** of ``d``: the capacity of its downstream links carrying
  reachability.  **Input capacity**: the capacity of its working upstream links
  on which it advertises (all of them when its output is not zero).

Input Balanced Mode (:func:`input_balanced_withdrawals`) walks the devices from
the destination outwards and, wherever the input capacity exceeds the output
capacity scaled by the device's failure-free input/output ratio, stops
advertising on randomly chosen upstream links until it does not.  In the
fabric of Figure 4 the failure-free ratio is 1, so the rule is the seed's
"no device may have more input than output capacity"; a device that lost all
output stops advertising altogether (the FDSW that lost RDSW3).

Links are named ``(a, b, key)`` as in ``topo.graph()``; withdrawals are
directed: ``(advertiser, neighbour, key)``.
"""
import random
from collections import namedtuple

import networkx as nx

from testbed.errors import ParameterError
from testbed.topologies.graph import node_pair, switches

ReachCapacity = namedtuple("ReachCapacity", "input_mbps output_mbps input_links output_links")
ReachCapacity.__doc__ = """Capacity of one device toward one destination (Mbit/s and link counts)."""


def links_between(graph, a, b):
    """Return every link between ``a`` and ``b`` as ``(a, b, key)`` tuples, sorted by key."""
    if not graph.has_edge(a, b):
        return []
    return [(a, b, key) for key in sorted(graph[a][b])]


def _canonical(link):
    """Return an order-independent identity ``(frozenset({a, b}), key)`` of a link."""
    a, b, key = link
    return (node_pair(a, b), key)


def _distances(graph, dest):
    """Hop distances to ``dest`` over switches only (hosts never forward)."""
    if dest not in graph or graph.nodes[dest].get("role") != "rdsw":
        raise ParameterError("dest", dest, "an RDSW of the topology")
    return nx.single_source_shortest_path_length(graph.subgraph(switches(graph)), dest)


def _oriented_links(graph, dist):
    """Map each device to its (downstream, upstream) links as ``(device, neighbour, key, mbps)``."""
    down, up = {}, {}
    for a, b, key, data in graph.edges(keys=True, data=True):
        if a not in dist or b not in dist:
            continue
        for device, neighbour in ((a, b), (b, a)):
            entry = (device, neighbour, key, data["capacity_mbps"])
            if dist[neighbour] == dist[device] - 1:
                down.setdefault(device, []).append(entry)
            elif dist[neighbour] == dist[device] + 1:
                up.setdefault(device, []).append(entry)
    return down, up


def _walk(graph, dest, failed_links, withdrawn):
    """Every device's downstream links carrying reachability toward ``dest`` and the upstream links it advertises on.

    Returns:
        dict: device -> ``(out, in)``, lists of ``(device, neighbour, key, mbps)`` (the destination excluded).
    """
    dist = _distances(graph, dest)
    down, up = _oriented_links(graph, dist)
    failed = {_canonical(link) for link in failed_links}
    withdrawn = set(withdrawn)
    output = {dest: float("inf")}
    result = {}
    for device in sorted((n for n in dist if n != dest), key=lambda n: (dist[n], n)):
        out_links = []
        for entry in down.get(device, ()):
            _, neighbour, key, _mbps = entry
            if _canonical((device, neighbour, key)) in failed:
                continue
            if neighbour == dest or ((neighbour, device, key) not in withdrawn and output[neighbour] > 0):
                out_links.append(entry)
        output[device] = sum(entry[3] for entry in out_links)
        in_links = []
        if output[device] > 0:
            for entry in up.get(device, ()):
                _, neighbour, key, _mbps = entry
                if _canonical((device, neighbour, key)) in failed or (device, neighbour, key) in withdrawn:
                    continue
                in_links.append(entry)
        result[device] = (out_links, in_links)
    return result


def reachability_capacities(graph, dest, failed_links=(), withdrawn=()):
    """Input and output capacity toward ``dest`` of every device that can reach it.

    Args:
        graph: ``topo.graph()`` of a :class:`testbed.topologies.dsf.topology.DSFTopo`.
        dest: name of the destination RDSW.
        failed_links: links ``(a, b, key)`` that are down (either order).
        withdrawn: directed ``(advertiser, neighbour, key)``: the advertiser stopped
            advertising reachability to ``dest`` to that neighbour on that link.

    Returns:
        dict: device name -> :class:`ReachCapacity` (the destination itself excluded).

    Raises:
        ParameterError: if ``dest`` is not an RDSW.
    """
    return {device: ReachCapacity(float(sum(e[3] for e in in_links)), float(sum(e[3] for e in out_links)),
                                  len(in_links), len(out_links))
            for device, (out_links, in_links) in _walk(graph, dest, failed_links, withdrawn).items()}


def reachable_links(graph, dest, failed_links=(), withdrawn=()):
    """The links each device may send traffic for ``dest`` on: its downstream links that carry reachability.

    The per-link form of :func:`reachability_capacities` (same rules): what a
    fabric node's reachability table for ``dest`` holds.

    Args:
        graph, dest, failed_links, withdrawn: as :func:`reachability_capacities`.

    Returns:
        dict: device name -> list of ``(device, neighbour, key)`` (possibly empty), the destination excluded.

    Raises:
        ParameterError: if ``dest`` is not an RDSW.
    """
    return {device: [entry[:3] for entry in out_links]
            for device, (out_links, _in) in _walk(graph, dest, failed_links, withdrawn).items()}


def capacity_toward(graph, device, dest, failed_links=(), withdrawn=()):
    """Input and output capacity of ``device`` toward destination RDSW ``dest``.

    In seed 000's first failure example (link FDSW1-RDSW3 of cluster X down),
    SDSW0 toward RDSW3 of cluster X has input 4 links (from both FDSWs of
    cluster X-1) and output 2 links (to FDSW0 of cluster X).

    Args:
        graph: the DSF topology graph.
        device: the device to evaluate.
        dest: destination RDSW name.
        failed_links: links ``(a, b, key)`` that are down.
        withdrawn: directed withdrawals ``(advertiser, neighbour, key)``.

    Returns:
        ReachCapacity: zero capacities when ``device`` cannot reach ``dest`` at all.
    """
    capacities = reachability_capacities(graph, dest, failed_links, withdrawn)
    return capacities.get(device, ReachCapacity(0.0, 0.0, 0, 0))


def input_balanced_withdrawals(graph, dest, failed_links=(), rng=None):
    """Run Input Balanced Mode toward ``dest`` and return the withdrawals it makes.

    Devices are visited from the destination outwards (so every device sees its
    downstream neighbours' final state); a device whose input exceeds its output
    times its failure-free input/output ratio withdraws reachability on randomly
    chosen advertised upstream links until it no longer does.

    Args:
        graph: the DSF topology graph.
        dest: destination RDSW name.
        failed_links: links ``(a, b, key)`` that are down.
        rng: a :class:`random.Random` (seeded for reproducible choices); a new
            unseeded one when None.

    Returns:
        set: directed withdrawals ``(advertiser, neighbour, key)``.
    """
    rng = rng or random.Random()
    baseline = reachability_capacities(graph, dest)
    dist = _distances(graph, dest)
    _, up = _oriented_links(graph, dist)
    failed = {_canonical(link) for link in failed_links}
    withdrawn = set()
    for device in sorted((n for n in dist if n != dest), key=lambda n: (dist[n], n)):
        base = baseline[device]
        if base.output_mbps <= 0 or not up.get(device):
            continue
        current = reachability_capacities(graph, dest, failed_links, withdrawn)[device]
        allowed = current.output_mbps * base.input_mbps / base.output_mbps
        excess = current.input_mbps - allowed
        if excess <= 1e-9:
            continue
        advertised = [entry for entry in up[device]
                      if _canonical(entry[:3]) not in failed and entry[:3] not in withdrawn]
        rng.shuffle(advertised)
        for device_name, neighbour, key, mbps in advertised:
            if excess <= 1e-9:
                break
            withdrawn.add((device_name, neighbour, key))
            excess -= mbps
    return withdrawn
