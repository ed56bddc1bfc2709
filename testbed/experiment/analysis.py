"""Turn traffic reports, counters and the failure log of a run into results.json's sections.

Pure functions on the JSON reports of :func:`testbed.traffic.streams.run_streams`
and :func:`testbed.traffic.collectives.run_collective`; all times in the output
are seconds since the run's time zero ``t0_ns``.
"""
import networkx

from testbed.topologies.graph import hosts_by_ip
from testbed.traffic import metrics

DEFAULT_BIN_S = 0.01
GAP_START_WINDOW_NS = 500_000_000
"""A delivery gap counts for a failure when it starts at most this long after it (and before the next one)."""
EPISODE_GAP_BINS = 3
"""Lossy transmit bins at most this many bins apart belong to one loss episode."""
UNRECOVERED_NS = 1_000_000_000
"""A flow that delivered nothing during at least its last second of sending, after a failure, did not recover."""


def _seconds(ns, t0_ns):
    return None if ns is None or t0_ns is None else (ns - t0_ns) / 1e9


def traffic_row(index, entry, report, error, t0_ns):
    """One ``traffic`` row of results.json for a traffic entry.

    Args:
        index: position in the spec.
        entry: the :class:`testbed.experiment.spec.TrafficSpec`.
        report: the run_streams / run_collective report (None if it failed).
        error: error text or None.
        t0_ns: the run's time zero.
    """
    row = {"index": index, "pattern": entry.pattern, "hosts": list(entry.hosts),
           "planned_start_s": entry.start_s, "started_at_s": None, "error": error,
           "sent_packets": None, "received_packets": None, "lost_packets": None, "out_of_sequence": None,
           "late": None, "duplicates": None, "goodput_mbps": None, "completion_time_s": None}
    if report is None:
        return row
    row["started_at_s"] = _seconds(report.get("start_ns"), t0_ns)
    for key in ("sent_packets", "received_packets", "lost_packets", "out_of_sequence", "late", "duplicates"):
        if report.get(key) is not None:
            row[key] = int(report[key])
    if report.get("completion_time_s") is not None:
        row["completion_time_s"] = float(report["completion_time_s"])
        seconds = row["completion_time_s"]
        row["goodput_mbps"] = report.get("received_bytes", 0) * 8 / seconds / 1e6 if seconds > 0 else 0.0
    elif report.get("goodput_mbps") is not None:
        row["goodput_mbps"] = float(report["goodput_mbps"])
    return row


def stream_receivers(reports):
    """``[(sender report, receiver report)]`` of every stream pair in the reports."""
    pairs = []
    for report in reports:
        if report is None:
            continue
        for pair in report.get("pairs", []):
            pairs.append((pair.get("sender"), pair.get("receiver")))
    return pairs


def all_gaps(reports):
    """Every delivery gap ``(start_ns, end_ns)`` any receiver saw, sorted."""
    gaps = []
    for report in reports:
        if report is not None:
            gaps += [tuple(gap) for gap in report.get("gaps", [])]
    return sorted(gaps)


def throughput_timeline(reports, t0_ns, bin_s=DEFAULT_BIN_S):
    """Aggregate received throughput over every stream receiver, in Mbit/s per bin.

    Returns:
        dict: ``{"bin_s", "t_s": [...], "mbps": [...]}`` (empty lists when no timeline).
    """
    by_index = {}
    bin_ns = None
    for _, receiver in stream_receivers(reports):
        timeline = (receiver or {}).get("timeline") or {}
        bin_ns = timeline.get("bin_ns") or bin_ns
        for index, _packets, data in timeline.get("bins", []):
            by_index[int(index)] = by_index.get(int(index), 0) + data
    if not by_index or bin_ns is None or t0_ns is None:
        return {"bin_s": bin_s, "t_s": [], "mbps": []}
    seconds = bin_ns / 1e9
    first, last = min(by_index), max(by_index)
    t_s, mbps = [], []
    for index in range(first, last + 1):
        t_s.append(round(index * bin_ns / 1e9 - t0_ns / 1e9, 6))
        mbps.append(by_index.get(index, 0) * 8 / seconds / 1e6)
    return {"bin_s": seconds, "t_s": t_s, "mbps": mbps}


def sent_by_bin(reports):
    """Stream packets sent per transmit-time bin, over every sender.

    Returns:
        tuple: ``(bin_ns, {absolute bin index: packets})``; ``(None, {})`` without senders.

    >>> sent_by_bin([{"pairs": [{"sender": {"bin_ns": 10, "sent_bins": {"1": 2}}},
    ...                         {"sender": {"bin_ns": 10, "sent_bins": {"1": 3, "2": 1}}}]}])
    (10, {1: 5, 2: 1})
    """
    bins, bin_ns = {}, None
    for sender, _ in stream_receivers(reports):
        if not sender:
            continue
        bin_ns = sender.get("bin_ns") or bin_ns
        for key, count in sender.get("sent_bins", {}).items():
            bins[int(key)] = bins.get(int(key), 0) + count
    return bin_ns, bins


def lost_by_tx_bin(reports):
    """Stream packets that never arrived, per transmit-time bin, over every stream pair.

    Returns:
        tuple: ``(bin_ns, {bin start ns (absolute): packets lost})`` with only the bins
        that lost packets; ``(None, {})`` when no receiver kept a timeline.
    """
    missing_by_bin = {}
    bin_ns = None
    for sender, receiver in stream_receivers(reports):
        if not sender or not receiver or not receiver.get("timeline"):
            continue
        bin_ns = receiver["timeline"]["bin_ns"]
        received = {int(k): v for k, v in receiver.get("rx_by_tx_bin", {}).items()}
        for key, count in sender.get("sent_bins", {}).items():
            begin = int(key) * bin_ns
            missing = count - received.get(int(key), 0)
            if missing > 0:
                missing_by_bin[begin] = missing_by_bin.get(begin, 0) + missing
    return bin_ns, missing_by_bin


def loss_timeline(reports, t0_ns, episodes=()):
    """Lost stream packets over time (by transmit time), each bin marked inside a failure's loss episode or not.

    Args:
        reports: the traffic entries' reports.
        t0_ns: the run's time zero.
        episodes: ``[(first_s, last_s)]`` loss episodes of failures (summary ``recovery`` rows'
            ``first_loss_at_s`` / ``last_loss_at_s``).

    Returns:
        dict: ``{"bin_s", "t_s": [...], "lost": [...], "after_failure": [bool]}``, the bins that
        lost packets in time order (``after_failure``: the bin lies in an episode: a failure's
        losses; the others are congestion's or the emulator's).

    >>> loss_timeline([], 0)
    {'bin_s': None, 't_s': [], 'lost': [], 'after_failure': []}
    """
    bin_ns, lost = lost_by_tx_bin(reports)
    timeline = {"bin_s": None if bin_ns is None else bin_ns / 1e9, "t_s": [], "lost": [], "after_failure": []}
    if bin_ns is None or t0_ns is None:
        return timeline
    for begin, missing in sorted(lost.items()):
        at_s = round((begin - t0_ns) / 1e9, 6)
        timeline["t_s"].append(at_s)
        timeline["lost"].append(missing)
        timeline["after_failure"].append(any(first - 1e-9 <= at_s < last + 1e-9 for first, last in episodes))
    return timeline


def lossy_span(reports, start_ns, end_ns, episode_gap_ns=None):
    """The loss episode a failure at ``start_ns`` causes, by transmit time.

    Compares every stream sender's packets per transmit bin with what its
    receiver got of those bins: a bin is lossy when some of its packets never
    arrived.  Unlike a receiver's delivery gap, this sees a failure that cuts
    only some of a receiver's queue pairs (others keep delivering).  The
    episode starts at the first lossy bin from the failure on and lasts while
    lossy bins follow each other with at most ``episode_gap_ns`` between them
    (default :data:`EPISODE_GAP_BINS` bins), so later, unrelated losses
    (congestion) are counted apart.

    Returns:
        dict | None: ``first_ns`` (start of the first lossy bin), ``last_ns``
        (end of the episode's last one), ``lost`` (packets in the episode) and
        ``lost_later`` (lost packets sent after the episode, before ``end_ns``);
        None when nothing was lost.
    """
    bin_ns, lost = lost_by_tx_bin(reports)
    missing_by_bin = {begin: missing for begin, missing in lost.items() if start_ns - bin_ns <= begin < end_ns}
    if not missing_by_bin:
        return None
    gap_ns = episode_gap_ns if episode_gap_ns is not None else EPISODE_GAP_BINS * bin_ns
    ordered = sorted(missing_by_bin.items())
    first = ordered[0][0]
    last = first + bin_ns
    lost = 0
    lost_later = 0
    in_episode = True
    for begin, missing in ordered:
        if in_episode and begin - last <= gap_ns:
            lost += missing
            last = max(last, begin + bin_ns)
        else:
            in_episode = False
            lost_later += missing
    return {"first_ns": first, "last_ns": last, "lost": lost, "lost_later": lost_later}


def recovery_rows(reports, failure_log, t0_ns, end_ns):
    """Delivery gap and loss window of every disruptive failure (link_down, switch_crash, lossy_link).

    ``gap_s``: the longest delivery gap any receiver saw that ends after the
    failure and starts within :data:`GAP_START_WINDOW_NS` of it (and before
    the next failure); the outage a failure causes starts at once, whatever
    the controller's delay, so later gaps are not its doing;
    ``stopped_at_s`` / ``resumed_at_s`` bound it.  ``loss_window_s``: from the
    first to the end of the last transmit bin whose packets were lost, between
    the failure and the next one (:func:`lossy_span`); ``lost_in_window``:
    those packets.

    Args:
        reports: traffic reports.
        failure_log: ``results["failures"]`` rows (with ``applied_at_s``).
        t0_ns: time zero.
        end_ns: end of the run.

    Returns:
        list[dict]: one row per applied disruptive failure.
    """
    gaps = all_gaps(reports)
    applied = [row for row in failure_log if row.get("applied_at_s") is not None]
    rows = []
    for position, row in enumerate(applied):
        if row["action"] == "link_up":
            continue
        failure_ns = t0_ns + int(row["applied_at_s"] * 1e9)
        next_ns = end_ns
        if position + 1 < len(applied):
            next_ns = t0_ns + int(applied[position + 1]["applied_at_s"] * 1e9)
        gap_window_ns = min(max(0, next_ns - failure_ns), GAP_START_WINDOW_NS)
        found = metrics.time_to_recover(gaps, failure_ns, window_ns=gap_window_ns)
        result = {"failure_index": row["index"], "gap_s": None, "stopped_at_s": None, "resumed_at_s": None,
                  "recovery_after_failure_s": None, "loss_window_s": None, "first_loss_at_s": None,
                  "last_loss_at_s": None, "lost_in_window": None, "lost_later": None}
        if found is not None:
            result.update(gap_s=found["seconds"], stopped_at_s=_seconds(found["stopped_ns"], t0_ns),
                          resumed_at_s=_seconds(found["resumed_ns"], t0_ns),
                          recovery_after_failure_s=found["recovery_after_failure_s"])
        span = lossy_span(reports, failure_ns, next_ns)
        if span is not None:
            result.update(loss_window_s=(span["last_ns"] - span["first_ns"]) / 1e9,
                          first_loss_at_s=_seconds(span["first_ns"], t0_ns),
                          last_loss_at_s=_seconds(span["last_ns"], t0_ns), lost_in_window=span["lost"],
                          lost_later=span["lost_later"])
        elif stream_receivers(reports):
            result["lost_in_window"] = result["lost_later"] = 0
        rows.append(result)
    return rows


FLOW_CUT_SLACK_NS = 50_000_000
"""A flow cut by a failure stopped at most this long after it (packets already past the failed link)."""


def flow_recovery_rows(reports, failure_log, t0_ns, slack_ns=FLOW_CUT_SLACK_NS):
    """Recovery of every flow a disruptive failure interrupted (failure to its first packet again).

    A flow is one queue pair (one 5-tuple); its delivery gaps are the receivers'
    ``qp_gaps`` (gaps longer than a few of the flow's packet spacings).  A flow
    cut by the failure has a gap that spans it: it starts before the failure
    (at the flow's last packet), or at most ``slack_ns`` after it, and ends after it.

    Returns:
        list[dict]: per failure ``failure_index``, ``flows_interrupted``, ``recovery_s``
        (per interrupted flow, sorted), ``max_recovery_s`` and ``median_recovery_s``.
    """
    gaps = [gap for report in reports if report for gap in report.get("qp_gaps", [])]
    rows = []
    for row in failure_log:
        if row.get("applied_at_s") is None or row["action"] == "link_up":
            continue
        failure_ns = t0_ns + int(row["applied_at_s"] * 1e9)
        per_flow = {}
        for start, end, src, dqpn in gaps:
            if end > failure_ns and start <= failure_ns + slack_ns:
                per_flow[(src, dqpn)] = max(per_flow.get((src, dqpn), 0), end - failure_ns)
        seconds = sorted(value / 1e9 for value in per_flow.values())
        rows.append({"failure_index": row["index"], "flows_interrupted": len(seconds), "recovery_s": seconds,
                     "max_recovery_s": seconds[-1] if seconds else None,
                     "median_recovery_s": seconds[len(seconds) // 2] if seconds else None})
    return rows


def unrecovered_flows(reports, failure_log, graph, down_links=(), crashed=(), t0_ns=None,
                      quiet_ns=UNRECOVERED_NS, slack_ns=FLOW_CUT_SLACK_NS):
    """The stream flows a link or switch failure stopped for good although the fabric could route around it.

    A flow (one queue pair of a stream pair) counts when its receiver got
    nothing during at least ``quiet_ns`` before the queue pair's last frame
    was sent (its sender's end for reports without that time), the last
    ``link_down``/``switch_crash`` before its last delivery (give or take
    ``slack_ns``) is the failure it is blamed on, and its two hosts are still
    connected once every link down and every switch crashed at the end of the
    run is taken out of ``graph``.  Such a run's losses are the control
    plane's (or the emulator's) failure to reroute, not the outage the failure
    itself causes.

    Args:
        reports: traffic reports (stream pairs; collectives are not looked at).
        failure_log: ``results["failures"]`` rows.
        graph: the topology multigraph (hosts carry ``ip``).
        down_links: node pairs (any iterable of two names) down at the end of the run.
        crashed: switches dead at the end of the run.
        t0_ns: time zero (for the ``*_s`` fields).

    Returns:
        list[dict]: ``failure_index``, ``src``, ``dst`` (host names), ``dqpn``, ``last_delivery_s``
        and ``sender_end_s``, sorted.
    """
    failures = sorted((t0_ns + int(row["applied_at_s"] * 1e9), row["index"]) for row in failure_log
                      if row.get("applied_at_s") is not None and row["action"] in ("link_down", "switch_crash"))
    if not failures or t0_ns is None:
        return []
    hosts = hosts_by_ip(graph)
    remaining = networkx.Graph(graph)
    remaining.remove_edges_from(tuple(link) for link in down_links if remaining.has_edge(*tuple(link)))
    remaining.remove_nodes_from(name for name in crashed if name in remaining)
    found = []
    for sender, receiver in stream_receivers(reports):
        if not sender or not receiver or sender.get("end_ns") is None:
            continue
        last_by_qp = {int(qp["dqpn"]): qp.get("last_rx_ns") for qp in receiver.get("per_qp", [])}
        src, dst = hosts.get(sender.get("src_ip")), hosts.get(sender.get("dst_ip"))
        if src is None or dst is None or src not in remaining or dst not in remaining \
                or not networkx.has_path(remaining, src, dst):
            continue  # the failures cut this pair off: no routing could have saved it
        for qp in (sender.get("per_qp") or {}).values():
            last_ns = last_by_qp.get(int(qp["dqpn"]))
            if last_ns is None or qp.get("last_tx_ns", sender["end_ns"]) - last_ns < quiet_ns:
                continue  # it recovered (or fell silent in an off period), or it never delivered at all
            blamed = [index for at_ns, index in failures if at_ns <= last_ns + slack_ns]
            if blamed:
                found.append({"failure_index": blamed[-1], "src": src, "dst": dst, "dqpn": int(qp["dqpn"]),
                              "last_delivery_s": _seconds(last_ns, t0_ns),
                              "sender_end_s": _seconds(sender["end_ns"], t0_ns)})
    return sorted(found, key=lambda row: (row["failure_index"], row["src"], row["dst"], row["dqpn"]))


def path_dilation(reports, graph, initial_ttl=64):
    """Extra hops the packets of stream pairs took, from the TTL they arrived with.

    Every switch decrements the IPv4 TTL once, so a packet sent with
    ``initial_ttl`` crossed ``initial_ttl - ttl`` switches; the shortest path of
    its pair crosses ``shortest path length - 1`` switches.

    Args:
        reports: traffic reports (stream pairs with receivers' ``ttl_counts``).
        graph: the topology multigraph (hosts with ``ip``).

    Returns:
        dict: ``extra_hops`` ``{extra hops: packets}`` and ``packets`` counted.
    """
    hosts = hosts_by_ip(graph)
    histogram = {}
    total = 0
    for report in reports:
        for pair in (report or {}).get("pairs", []):
            dst = pair.get("dst")
            for src_ip, ttl, count in pair["receiver"].get("ttl_counts", []):
                src = hosts.get(src_ip)
                if src is None or dst not in graph:
                    continue
                switches = networkx.shortest_path_length(graph, src, dst) - 1
                extra = initial_ttl - ttl - switches
                histogram[extra] = histogram.get(extra, 0) + count
                total += count
    return {"extra_hops": {str(k): v for k, v in sorted(histogram.items())}, "packets": total}


def round_trip_us(graph, delays_us):
    """The fabric's round-trip time from its links' added delays: twice the longest one-way delay.

    A packet between two hosts takes one of their shortest paths; its added
    one-way delay is the sum of its links' delays.  The longest over every host
    pair and every shortest path, doubled, is the round trip the slowest path
    adds (the emulator's own forwarding time comes on top).

    Args:
        graph: the topology multigraph (hosts never forward).
        delays_us: ``{(a, b): one-way delay in us}`` of the delayed links (either order).

    Returns:
        float: microseconds (0.0 without delayed links).

    >>> from testbed.topologies.clos import ClosTopo
    >>> graph = ClosTopo(leaves=2, spines=2, hosts_per_leaf=1).graph()
    >>> round_trip_us(graph, {("leaf0", "spine1"): 400, ("leaf1", "spine1"): 100})
    1000.0
    """
    delay = {frozenset(pair): float(value) for pair, value in delays_us.items()}
    if not any(delay.values()):
        return 0.0
    every = [node for node, attrs in graph.nodes(data=True) if attrs.get("role") == "host"]
    longest = 0.0
    for source in every:
        distance = {source: 0}
        order = [source]
        for node in order:  # breadth first, hosts end paths
            if node != source and graph.nodes[node].get("role") == "host":
                continue
            for other in graph.neighbors(node):
                if other not in distance:
                    distance[other] = distance[node] + 1
                    order.append(other)
        worst = {source: 0.0}
        for node in order[1:]:
            worst[node] = max(worst[previous] + delay.get(frozenset((previous, node)), 0.0)
                              for previous in graph.neighbors(node)
                              if distance.get(previous) == distance[node] - 1 and previous in worst
                              and (previous == source or graph.nodes[previous].get("role") != "host"))
        longest = max([longest] + [worst[node] for node in every if node in worst])
    return 2 * longest


def latency_summary(reports):
    """One-way delivery latency of stream packets, the worst pair's figures, in ms.

    The emulation's own delay: on an idle machine a few tenths of a millisecond
    per switch; a run whose p99 reaches tens of milliseconds had switches
    waiting for CPU (timings in it carry that much noise).

    Returns:
        dict: ``{"p50_ms", "p99_ms", "max_ms"}`` (each the largest over stream pairs), or
        None without stream pairs.
    """
    rows = [pair["receiver"]["latency_ns"] for report in reports if report
            for pair in report.get("pairs", []) if pair["receiver"].get("latency_ns", {}).get("count")]
    if not rows:
        return None
    return {f"{key}_ms": max(row[key] for row in rows) / 1e6 for key in ("p50", "p99", "max")}


def drop_totals(counters):
    """Total frames lost at switch ports by cause, from :meth:`FabricNetwork.drop_counters` output."""
    totals = {"tx_errors": 0, "queue_drops": 0, "socket_drops": 0}
    for ports in (counters or {}).values():
        for values in ports.values():
            for key in totals:
                totals[key] += int(values.get(key, 0))
    return totals


def summarize(traffic_rows, uplinks, recovery, reactions):
    """The ``summary`` section from traffic rows, uplink loads, recovery rows and controller reactions."""
    def total(key):
        return sum(row[key] or 0 for row in traffic_rows)

    sent, received = total("sent_packets"), total("received_packets")
    lost, out_of_sequence = total("lost_packets"), total("out_of_sequence")
    loads = list(uplinks.values())
    has_load = bool(loads) and sum(loads) > 0
    reaction_times = [r["reaction_s"] for r in reactions if r.get("reaction_s") is not None]
    return {
        "sent_packets": sent, "received_packets": received, "lost_packets": lost,
        "loss_rate": lost / sent if sent else 0.0,
        "out_of_sequence": out_of_sequence,
        "out_of_order_rate": metrics.out_of_order_rate(out_of_sequence, received),
        "late": total("late"),
        "reorder_rate": metrics.out_of_order_rate(total("late"), received),
        "duplicates": total("duplicates"),
        "goodput_mbps": float(sum(row["goodput_mbps"] or 0.0 for row in traffic_rows)),
        "uplink_loads": dict(uplinks),
        "uplink_mmr": metrics.max_mean_ratio(loads) if has_load else None,
        "uplink_jain": metrics.jain_fairness(loads) if has_load else None,
        "recovery": recovery,
        "controller_reaction_s": max(reaction_times) if reaction_times else None,
        "flow_recovery": [],
        "unrecovered_flows": [],
        "path_dilation": {"extra_hops": {}, "packets": 0},
        "latency": None,
    }
