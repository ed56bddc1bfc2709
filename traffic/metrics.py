"""Metrics of load balance, fairness, ordering, throughput and failure recovery.

Pure functions on plain numbers, lists and dicts (the receivers' and
senders' JSON reports), so experiments and tests can use them directly.
"""
import random
import zlib


def max_mean_ratio(loads):
    """Max-Mean Ratio (MMR): load of the most loaded link over the mean link load.

    Seed 004 4.1.1 uses flow counts per link; byte counts work the same way.

    Args:
        loads: per-link loads (flow counts or bytes); links with zero load count.

    Returns:
        float: >= 1.0; 1.0 is perfect balance.  0.0 if there is no load at all.

    Raises:
        ValueError: if ``loads`` is empty or has a negative value.
    """
    loads = list(loads)
    if not loads:
        raise ValueError("need at least one link")
    if min(loads) < 0:
        raise ValueError("loads must be >= 0")
    total = sum(loads)
    if total == 0:
        return 0.0
    return max(loads) / (total / len(loads))


def hash_flows_to_links(flows, link_count, hash_function=None):
    """Place flows on ECMP links by hashing their 5-tuples.

    Args:
        flows: iterable of 5-tuples ``(src_ip, dst_ip, proto, sport, dport)`` (any
            hashable values; they are hashed as their ``repr``).
        link_count: number of equal-cost links.
        hash_function: ``bytes -> int``; default CRC32.

    Returns:
        list[int]: flow count per link.
    """
    if link_count < 1:
        raise ValueError("link_count must be >= 1")
    hash_function = hash_function or zlib.crc32
    counts = [0] * link_count
    for flow in flows:
        counts[hash_function(repr(tuple(flow)).encode()) % link_count] += 1
    return counts


def ecmp_mmr_trial(flow_count, link_count, seed):
    """MMR of one random trial: ``flow_count`` random RoCE flows hashed onto ``link_count`` links.

    Flows get random source/destination addresses in 10.0.0.0/16 and random UDP
    source ports (destination port 4791), as in seed 004's simulation.

    Returns:
        float
    """
    rng = random.Random(seed)
    flows = [(f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}",
              f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}", 17, rng.randrange(49152, 65536), 4791)
             for _ in range(flow_count)]
    return max_mean_ratio(hash_flows_to_links(flows, link_count))


def jain_fairness(values):
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``.

    Args:
        values: per-flow throughputs (or any non-negative allocations).

    Returns:
        float: in (0, 1]; 1.0 when all equal; 1.0 for all-zero input by convention.

    Raises:
        ValueError: if ``values`` is empty or has a negative value.
    """
    values = list(values)
    if not values:
        raise ValueError("need at least one value")
    if min(values) < 0:
        raise ValueError("values must be >= 0")
    square_sum = sum(v * v for v in values)
    if square_sum == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square_sum)


def out_of_order_rate(out_of_order, received):
    """Fraction of received packets that arrived out of order.

    Args:
        out_of_order: packets counted out of order (e.g. the receiver's ``late``
            or ``out_of_sequence`` total).
        received: packets received.

    Returns:
        float: 0.0 when nothing was received.
    """
    if received <= 0:
        return 0.0
    return out_of_order / received


def goodput_mbps(data_bytes, seconds):
    """Application bytes delivered per second, in Mbit/s.

    Raises:
        ValueError: if ``seconds`` <= 0.
    """
    if seconds <= 0:
        raise ValueError("seconds must be > 0")
    return data_bytes * 8 / seconds / 1e6


def loss_in_window(sent_bins, received_by_tx_bins, bin_ns, start_ns, end_ns):
    """Packets lost among those *sent* inside a time window.

    Both inputs are counts per transmit-time bin with absolute indexes
    ``tx_ns // bin_ns`` (the sender's ``sent_bins`` and the receiver's
    ``rx_by_tx_bin``; keys may be ints or strings as JSON leaves them).  Bins
    are counted when they start inside ``[start_ns, end_ns)``.

    Returns:
        dict: ``sent``, ``received``, ``lost`` and ``loss_rate`` in the window.
    """
    if bin_ns <= 0:
        raise ValueError("bin_ns must be > 0")
    sent = 0
    received = 0
    for key, count in sent_bins.items():
        if start_ns <= int(key) * bin_ns < end_ns:
            sent += count
    for key, count in received_by_tx_bins.items():
        if start_ns <= int(key) * bin_ns < end_ns:
            received += count
    lost = max(0, sent - received)
    return {"sent": sent, "received": received, "lost": lost, "loss_rate": lost / sent if sent else 0.0}


def delivery_gaps(arrival_ns, min_gap_ns):
    """Gaps between consecutive deliveries that last at least ``min_gap_ns``.

    Args:
        arrival_ns: arrival times (any order).
        min_gap_ns: shortest gap reported.

    Returns:
        list[tuple[int, int]]: ``(last delivery before, first delivery after)``.
    """
    ordered = sorted(arrival_ns)
    return [(a, b) for a, b in zip(ordered, ordered[1:]) if b - a >= min_gap_ns]


def time_to_recover(gaps, failure_ns, window_ns=None):
    """Longest delivery gap around a failure: how long delivery stopped.

    A gap is "around" the failure when it ends after ``failure_ns`` and starts
    no later than ``failure_ns + window_ns`` (default: any time after).

    Args:
        gaps: ``(start_ns, end_ns)`` pairs (a receiver report's ``gaps`` or
            :func:`delivery_gaps`).
        failure_ns: when the failure happened.
        window_ns: how long after the failure a gap may start.

    Returns:
        dict | None: ``seconds`` (gap length), ``stopped_ns`` (last delivery
        before), ``resumed_ns`` (delivery resumed) and ``recovery_after_failure_s``
        (resumed - failure); None when no gap qualifies.
    """
    best = None
    for start, end in gaps:
        if end <= failure_ns:
            continue
        if window_ns is not None and start > failure_ns + window_ns:
            continue
        if best is None or end - start > best[1] - best[0]:
            best = (start, end)
    if best is None:
        return None
    return {"seconds": (best[1] - best[0]) / 1e9, "stopped_ns": best[0], "resumed_ns": best[1],
            "recovery_after_failure_s": (best[1] - failure_ns) / 1e9}


def flow_recovery(qp_gaps, failure_ns, window_ns=100_000_000):
    """Time to recover per flow: the longest delivery gap of one queue pair around a failure.

    On an ECMP fabric a failed link interrupts only the flows (QPs, each one
    5-tuple) hashed onto it; the others keep delivering, so a receiver-wide
    gap stays short.  This looks at each flow's own gaps (a receiver report's
    ``qp_gaps``): those that end after ``failure_ns`` and start no later than
    ``failure_ns + window_ns`` (a flow cut by the failure stops delivering at
    once, so its gap starts right at the failure; gaps that start later are
    idle periods, not the failure).

    Args:
        qp_gaps: ``[start_ns, end_ns, src_ip, dqpn]`` entries, from any number of receivers.
        failure_ns: when the failure happened.
        window_ns: how long after the failure an interrupted flow's gap may start.

    Returns:
        dict | None: as :func:`time_to_recover` for the longest gap, plus ``src`` and
        ``dqpn`` of that flow, ``flows_interrupted`` (distinct flows with such a gap) and
        ``all_resumed_ns`` (when the last interrupted flow resumed); None when no flow
        was interrupted (or an interrupted flow never delivered again: see the
        receivers' ``per_qp`` ``last_rx_ns``).
    """
    qualifying = [gap for gap in qp_gaps if gap[1] > failure_ns and gap[0] <= failure_ns + window_ns]
    if not qualifying:
        return None
    longest = max(qualifying, key=lambda gap: gap[1] - gap[0])
    result = time_to_recover([(longest[0], longest[1])], failure_ns)
    result.update({"src": longest[2], "dqpn": longest[3],
                   "flows_interrupted": len({(gap[2], gap[3]) for gap in qualifying}),
                   "all_resumed_ns": max(gap[1] for gap in qualifying)})
    return result


def timeline_throughput_mbps(bins, bin_ns):
    """Convert a receiver timeline (``[[index, packets, bytes], ...]``) to Mbit/s per bin.

    Returns:
        list[tuple[float, float]]: ``(bin start in seconds since the epoch, Mbit/s)``;
        empty bins between the first and last are filled with zero.
    """
    if not bins:
        return []
    by_index = {int(entry[0]): entry[2] for entry in bins}
    first = min(by_index)
    last = max(by_index)
    seconds = bin_ns / 1e9
    return [(index * seconds, by_index.get(index, 0) * 8 / seconds / 1e6) for index in range(first, last + 1)]
