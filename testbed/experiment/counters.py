"""Per-port switch counters over P4Runtime, and the per-link load they add up to.

Programs count every packet per port in an indirect ``counter`` indexed by
port (p4src/l3_ecmp.p4: ``MyIngress.ingress_port_counter`` and
``MyEgress.egress_port_counter``).  :func:`read_port_counters` reads both on
every switch; :func:`link_loads` subtracts a baseline snapshot and turns the
counts into one row per link and direction:

* ``a_to_b`` is what ``a`` sent on the link: ``a``'s egress counter at
  ``a_port`` when ``a`` is a switch, else ``b``'s ingress counter at ``b_port``
  (hosts have no counters); ``b_to_a`` likewise.
* ``tx_packets`` / ``tx_bytes`` are both directions together; ``share`` is the
  link's ``tx_bytes`` over the total of its tier (links between the same two
  switch levels), so a tier's shares add up to 1.
"""
from testbed.experiment.analysis import drop_totals
from testbed.topologies.graph import is_host, level, node_pair, port_toward, switches

INGRESS_SUFFIX = "ingress_port_counter"
EGRESS_SUFFIX = "egress_port_counter"


def counter_names(p4info):
    """Return ``(ingress counter name, egress counter name)`` of a P4Info (None when absent)."""
    ingress = egress = None
    for counter in p4info.counters:
        name = counter.preamble.name
        if name.endswith(EGRESS_SUFFIX):
            egress = name
        elif name.endswith(INGRESS_SUFFIX):
            ingress = name
    return ingress, egress


def read_port_counters(clients, p4info, skip=()):
    """Read the per-port counters of every switch.

    Args:
        clients: ``{switch: P4RuntimeClient}``.
        p4info: the pipeline's P4Info (to find the counter names).
        skip: switches not to read (crashed ones).

    Returns:
        dict: ``{switch: {"ingress": {port: [packets, bytes]}, "egress": {...}}}``;
        a switch whose read failed maps to ``{"error": text}``.
    """
    ingress_name, egress_name = counter_names(p4info)
    snapshot = {}
    for switch, client in sorted(clients.items()):
        if switch in skip:
            continue
        entry = {}
        try:
            for key, name in (("ingress", ingress_name), ("egress", egress_name)):
                cells = client.read_counter(name) if name else {}
                entry[key] = {int(port): [int(p), int(b)] for port, (p, b) in cells.items() if p or b}
        except Exception as error:  # noqa: BLE001 - a dead switch must not lose the other counters
            entry = {"error": f"{type(error).__name__}: {error}"}
        snapshot[switch] = entry
    return snapshot


def counter_total(clients, p4info, name, skip=()):
    """Packets counted in every cell of counter ``name`` over every switch, or None when the program has none.

    A switch whose counter cannot be read (crashed) counts 0.
    """
    if not any(counter.preamble.name == name for counter in p4info.counters):
        return None
    total = 0
    for switch, client in sorted(clients.items()):
        if switch in skip:
            continue
        try:
            total += sum(packets for packets, _ in client.read_counter(name).values())
        except Exception:  # noqa: BLE001 - a dead switch must not lose the other counters
            continue
    return total


def link_losses(graph, before, after):
    """Data frames lost on switch-to-switch links: what one end sent minus what the other received.

    Per direction of each link between two switches: the sender's egress counter
    delta at its port minus the receiver's ingress counter delta at its port
    (both count data frames only).  Frames sent into a link that is down, or
    dropped by the link's shaping queue, are the difference.

    Args:
        graph: the topology multigraph.
        before, after: :func:`read_port_counters` snapshots.

    Returns:
        int: frames lost over all switch-to-switch links (a switch whose counters could
        not be read is left out).
    """
    def packets(switch, kind, port):
        now = after.get(switch, {}).get(kind, {}).get(port, [0, 0])[0]
        return max(0, now - before.get(switch, {}).get(kind, {}).get(port, [0, 0])[0])

    readable = {name for name, entry in after.items() if "error" not in entry}
    lost = 0
    for _, _, data in graph.edges(data=True):
        a, b = data["a"], data["b"]
        if is_host(graph, a) or is_host(graph, b) or not {a, b} <= readable:
            continue
        for src, src_port, dst, dst_port in ((a, data["a_port"], b, data["b_port"]),
                                             (b, data["b_port"], a, data["a_port"])):
            lost += max(0, packets(src, "egress", src_port) - packets(dst, "ingress", dst_port))
    return lost


def dataplane_counters(fabric, port_drops, before=None, after=None):
    """Frames the switches lost, by cause, for results.json's ``dataplane`` section.

    Lost connectivity: data frames the switch-to-switch links lost (one end's
    egress count minus the other end's ingress count, :func:`link_losses`) that
    the links' queues did not drop (a mechanism adds its own, such as F10's
    packets with no working detour); congestion: drops of the shaped links'
    queues (``queue_drops``, tc); the emulator's own losses (``emulator``: frames
    the kernel dropped at a switch's socket because the switch process fell
    behind) are counted apart and not as the network's.  ``tx_errors`` (every
    frame a port could not send, probes included) is reported as measured.
    Counters that cannot be read (a crashed switch) count 0.

    Args:
        fabric: the running :class:`~testbed.fabrics.Fabric`.
        port_drops: its :meth:`~testbed.emulation.network.FabricNetwork.drop_counters` after the run.
        before, after: :func:`read_port_counters` snapshots of the run (for the link losses).
    """
    drops = drop_totals(port_drops)
    on_links = link_losses(fabric.topo.graph(), before, after) if before and after else 0
    emulator = drops.pop("socket_drops")
    drops.update(on_links=on_links, emulator=emulator,
                 connectivity=max(0, on_links - drops["queue_drops"] - emulator), congestion=drops["queue_drops"])
    return {"drops": drops}


def _delta(after, before, switch, kind, port):
    now = after.get(switch, {}).get(kind, {}).get(port)
    if now is None:
        return None
    then = before.get(switch, {}).get(kind, {}).get(port, [0, 0])
    return [max(0, now[0] - then[0]), max(0, now[1] - then[1])]


def _direction(graph, after, before, sender, sender_port, receiver, receiver_port):
    """[packets, bytes] ``sender`` put on the link (None when no counter saw it)."""
    if not is_host(graph, sender):
        counted = _delta(after, before, sender, "egress", sender_port)
        if counted is not None or "error" not in after.get(sender, {"error": 1}):
            return counted or [0, 0]
    if not is_host(graph, receiver):
        counted = _delta(after, before, receiver, "ingress", receiver_port)
        if counted is not None or "error" not in after.get(receiver, {"error": 1}):
            return counted or [0, 0]
    return None


def link_loads(graph, before, after):
    """Rows of per-link load between two counter snapshots.

    Args:
        graph: the topology multigraph (``topo.graph()``).
        before: :func:`read_port_counters` snapshot at the start of traffic.
        after: snapshot at the end.

    Returns:
        list[dict]: ``link, a, a_port, b, b_port, tier, a_to_b_packets, a_to_b_bytes,
        b_to_a_packets, b_to_a_bytes, tx_packets, tx_bytes, share`` in topology
        order; counts are None when neither end could be read.
    """
    rows = []
    for a, b, key, data in graph.edges(keys=True, data=True):
        a, b = data["a"], data["b"]
        a_port, b_port = data["a_port"], data["b_port"]
        forward = _direction(graph, after, before, a, a_port, b, b_port)
        backward = _direction(graph, after, before, b, b_port, a, a_port)
        levels = (graph.nodes[a].get("level", 0), graph.nodes[b].get("level", 0))
        row = {"link": f"{a}:{a_port}-{b}:{b_port}", "a": a, "a_port": a_port, "b": b, "b_port": b_port,
               "tier": f"{min(levels)}-{max(levels)}",
               "a_to_b_packets": forward[0] if forward else None, "a_to_b_bytes": forward[1] if forward else None,
               "b_to_a_packets": backward[0] if backward else None,
               "b_to_a_bytes": backward[1] if backward else None}
        if forward is None and backward is None:
            row["tx_packets"] = row["tx_bytes"] = None
        else:
            row["tx_packets"] = (forward or [0, 0])[0] + (backward or [0, 0])[0]
            row["tx_bytes"] = (forward or [0, 0])[1] + (backward or [0, 0])[1]
        rows.append(row)
    totals = {}
    for row in rows:
        totals[row["tier"]] = totals.get(row["tier"], 0) + (row["tx_bytes"] or 0)
    for row in rows:
        total = totals[row["tier"]]
        row["share"] = (row["tx_bytes"] or 0) / total if total else 0.0
    return rows


#: a lower switch counts as a sender when it sent at least this share of what the busiest one sent up
#: (a DSF egress node's credit grants, or a receiver's acknowledgements, are not a load to balance)
SENDER_SHARE = 0.05


def active_ends(totals, share=SENDER_SHARE):
    """The keys of ``{end: load}`` whose load is at least ``share`` of the largest (none if all are 0)."""
    top = max(totals.values(), default=0)
    return {end for end, load in totals.items() if top > 0 and load >= share * top}


def uplink_loads(graph, rows, unit="bytes"):
    """Upward load on the first switch tier's uplinks that carried traffic up.

    The links from the lowest switch level (leaves, edges, RDSWs) to the level
    above, restricted to the lower switches that sent upward at least
    :data:`SENDER_SHARE` of what the busiest one sent: these are the equal-cost
    choices a load-balancing scheme makes at the source leaf, so their Max-Mean
    Ratio measures its balance.

    Args:
        graph: the topology multigraph.
        rows: :func:`link_loads` rows.
        unit: ``"bytes"`` or ``"packets"``.

    Returns:
        dict: ``{link name: upward load}`` (empty when nothing went up).
    """
    switch_levels = sorted({level(graph, node) for node in switches(graph)})
    if len(switch_levels) < 2:
        return {}
    low, high = switch_levels[0], switch_levels[1]
    key = f"a_to_b_{unit}"
    candidates = [row for row in rows
                  if graph.nodes[row["a"]].get("level") == low and graph.nodes[row["b"]].get("level") == high
                  and not is_host(graph, row["a"]) and row[key] is not None]
    totals = {}
    for row in candidates:
        totals[row["a"]] = totals.get(row["a"], 0) + row[key]
    sending = active_ends(totals)
    return {row["link"]: row[key] for row in candidates if row["a"] in sending}


def receive_lag_delta(before, after):
    """How long frames waited in the switches' sockets between two snapshots, summed over every port.

    Args:
        before, after: :meth:`testbed.emulation.network.FabricNetwork.receive_lag` snapshots.

    Returns:
        dict: ``{"samples": n, "at_least_ms": {"1": n1, "10": n10, ...}}`` (the histogram of
        testbed.packet_sockets.ReceiveLag); ports missing from ``before`` count from 0.

    >>> receive_lag_delta({"s1": {1: {"samples": 5, "at_least_ms": {"1": 2, "50": 0}}}},
    ...                   {"s1": {1: {"samples": 9, "at_least_ms": {"1": 3, "50": 1}}}})
    {'samples': 4, 'at_least_ms': {'1': 1, '50': 1}}
    """
    total = {"samples": 0, "at_least_ms": {}}
    for switch, ports in after.items():
        for port, now in ports.items():
            then = before.get(switch, {}).get(port, {"samples": 0, "at_least_ms": {}})
            total["samples"] += now["samples"] - then["samples"]
            for bucket, count in now["at_least_ms"].items():
                total["at_least_ms"][bucket] = (total["at_least_ms"].get(bucket, 0) + count
                                                - then["at_least_ms"].get(bucket, 0))
    return total


def emulator_by_switch(port_drops, lag_before, lag_after, limit_ms):
    """Each switch's part of the emulator's own losses and delays, for the switches with any.

    Args:
        port_drops: :meth:`~testbed.emulation.network.FabricNetwork.drop_counters` output.
        lag_before, lag_after: :meth:`~testbed.emulation.network.FabricNetwork.receive_lag` snapshots.
        limit_ms: a read batch that waited this long or longer counts (one of the lag buckets).

    Returns:
        dict: ``{switch: {"socket_drops": frames its sockets dropped, "waits_over_limit": read batches
        that waited limit_ms or more}}``.

    >>> emulator_by_switch({"s1": {1: {"socket_drops": 3}}, "s2": {1: {"socket_drops": 0}}},
    ...                    {}, {"s2": {1: {"samples": 4, "at_least_ms": {"50": 1}}}}, 50)
    {'s1': {'socket_drops': 3, 'waits_over_limit': 0}, 's2': {'socket_drops': 0, 'waits_over_limit': 1}}
    """
    figures = {}
    for switch in sorted(set(port_drops or {}) | set(lag_after or {})):
        drops = sum(int(values.get("socket_drops", 0)) for values in (port_drops or {}).get(switch, {}).values())
        lag = receive_lag_delta({switch: (lag_before or {}).get(switch, {})}, {switch: lag_after[switch]}) \
            if switch in (lag_after or {}) else {"at_least_ms": {}}
        waits = int(lag["at_least_ms"].get(str(limit_ms), 0))
        if drops or waits:
            figures[switch] = {"socket_drops": drops, "waits_over_limit": waits}
    return figures


# -- drops by place ---------------------------------------------------------------------------
def _port_roles(graph):
    """``{(switch, port): ("fabric" | "host", link node pair)}`` for every switch port on a link."""
    roles = {}
    for a, b, data in graph.edges(data=True):
        for here, there in ((a, b), (b, a)):
            if not is_host(graph, here):
                roles[(here, port_toward(data, here))] = ("host" if is_host(graph, there) else "fabric",
                                                          node_pair(a, b))
    return roles


def ever_failed(failures, log, graph):
    """Node pairs whose links were down (or lossy) at some time during a run.

    Args:
        failures: the spec's failure entries.
        log: the run's ``failures`` rows (``applied_at_s`` set when applied).
        graph: the topology multigraph (a crashed switch takes all its links).
    """
    pairs = set()
    for failure, row in zip(failures, log):
        if row.get("applied_at_s") is None:
            continue
        if failure.link:
            pairs.add(node_pair(*failure.link))
        elif failure.switch:
            pairs |= {node_pair(failure.switch, other) for other in graph.neighbors(failure.switch)}
    return pairs


def drops_by_place(graph, port_drops, failed_pairs=()):
    """Frames the switch ports lost, by place (a mechanism may add places of its own).

    A switch port loses a frame when its link's queue is full (the tc qdisc under
    the link's htb refuses it, or the port's socket buffer holding that queue is
    full: both fail the send) or when its link is down; the embedded switch counts
    every failed send (``tx_errors``).  Ports on links that never failed lost theirs
    to a full queue; on a link that failed during the run, every loss is counted as
    ``link_down`` (congestion on it included).

    Args:
        graph: the topology multigraph.
        port_drops: :meth:`~testbed.emulation.network.FabricNetwork.drop_counters` output.
        failed_pairs: node pairs whose links were down at some time during the run.

    Returns:
        dict: ``fabric_link_queue``, ``host_port``, ``link_down``, ``fabric`` (what was lost
        inside the fabric: here its link queues) and ``by_link`` (``{"switch:port>neighbour":
        frames}`` of the ports that lost any).
    """
    roles = _port_roles(graph)
    failed = {frozenset(pair) for pair in failed_pairs}
    places = {"fabric_link_queue": 0, "host_port": 0, "link_down": 0}
    by_link = {}
    for switch, ports in sorted((port_drops or {}).items()):
        for port, values in sorted(ports.items()):
            lost = int(values.get("tx_errors", 0))
            role, pair = roles.get((switch, int(port)), (None, None))
            if not lost or role is None:
                continue
            place = "link_down" if pair in failed else ("fabric_link_queue" if role == "fabric" else "host_port")
            places[place] += lost
            other = next(iter(pair - {switch}), switch)
            by_link[f"{switch}:{port}>{other}"] = lost
    places["fabric"] = places["fabric_link_queue"]
    places["by_link"] = by_link
    return places
