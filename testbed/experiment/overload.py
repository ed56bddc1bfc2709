"""Did the emulator keep up?  A run's results are only the network's if it did.

Every switch, sender and receiver is a process on a machine that other work
may share.  When they cannot keep up, the emulator itself drops frames and
delays them, and a run would report those artefacts as network behaviour:
losses, gaps, slow recovery, false failure detections.  :func:`assess` looks
at what the components measured about themselves and marks the run:

* frames the kernel dropped at a switch's or a receiver's packet socket because
  the process did not read in time (``PACKET_STATISTICS``; any is too many);
* frames that waited in a switch's socket for :data:`SWITCH_WAIT_MS` or more
  before the switch read them (kernel receive timestamps; a switch that keeps
  up reads within a fraction of a millisecond);
* senders that fell behind their pacing schedule (``pacing_lag_max_ms``);
* what a mechanism knows of its own parts (its run hooks' ``overload``: F10's
  triggers leaving the packet generator late, on which its detectors decide).

The one-way delivery latency of the stream packets (p99 of the worst pair) is
reported too but is no criterion: it includes queueing in shaped links, which
is the network's.  The thresholds are deliberately loose (a busy but coping
machine passes): a run marked overloaded is one whose timings and losses must
not be read as the network's.

Below those thresholds a run can still depend on the machine's load: packets
of one queue pair reorder when two of them take paths whose delays differ by
more than the time between them, and on an emulator the delays of a path are
mostly the switch processes' scheduling.  :func:`reordering_check` compares
that delay spread with the streams' spacing (the time between two packets of a
queue pair) and marks the run's out-of-order counts as unreliable
(``reordering_unreliable``) when the emulator alone could have reordered them:

* on unshaped links, where every queue is the emulator's: the one-way latency's
  p99 above its p50 by more than the spacing;
* on any links: senders that sent :data:`LATE_SHARE` or more of their frames
  :data:`LATE_MS` or more behind schedule (catch-up bursts) when the spacing is
  shorter than that, or switch read batches that waited :data:`LATE_MS` or more
  (embedded target), likewise.

Such a run's losses, MMR and goodput stand; its out-of-order figures may be
the machine's, and repeated runs of it (``testbed compare --repeat``) spread
with the load.
"""
#: the limits beyond which a run is marked overloaded
SWITCH_WAIT_MS = 50              # one of testbed.packet_sockets.LAG_BUCKETS_MS (switches count per bucket)
SENDER_LAG_MS = 100.0
LATE_MS = 10                     # one of the senders' LATE_MS and of testbed.packet_sockets.LAG_BUCKETS_MS
LATE_SHARE = 0.005               # the share of a sender's frames that may leave LATE_MS late


def stream_spacing_ms(spec):
    """The shortest time between two packets of one queue pair over the spec's paced streams (ms), or None.

    A stream entry's pair sends ``mtu``-byte packets at ``rate_mbps`` over its ``qps`` queue
    pairs in turn, so one queue pair's packets are ``qps * mtu * 8 / rate`` apart.

    Args:
        spec: the spec as results.json records it (``ExperimentSpec.to_dict()``).

    >>> stream_spacing_ms({"traffic": [{"pattern": "stream", "rate_mbps": 3, "qps": 2, "mtu": 1024}]})
    5.461333333333333
    """
    spacings = [entry["qps"] * entry["mtu"] * 8 / (entry["rate_mbps"] * 1e3)
                for entry in (spec or {}).get("traffic", [])
                if entry.get("pattern") == "stream" and entry.get("rate_mbps") and entry.get("qps")]
    return min(spacings) if spacings else None


def reordering_check(record, reports):
    """Could the emulator alone have reordered this run's packets?  (See the module docstring.)

    Args:
        record: the run's results so far (``spec``, ``summary.latency``, ``dataplane.switch_receive_lag``,
            ``topology.rtt_us``: the latency spread the links' delays explain is not the emulator's).
        reports: the traffic entries' reports.

    Returns:
        dict: ``{"stream_spacing_ms", "latency_spread_ms", "paced_frames", "late_frames",
        "reordering_unreliable": bool, "reordering_reasons": [str]}``.

    >>> rec = {"spec": {"topology": {"shape_links": False},
    ...        "traffic": [{"pattern": "stream", "rate_mbps": 3, "qps": 2, "mtu": 1024}]},
    ...        "summary": {"latency": {"p50_ms": 1.5, "p99_ms": 28.0}}}
    >>> reordering_check(rec, [])["reordering_unreliable"]
    True
    """
    spec = record.get("spec") or {}
    spacing = stream_spacing_ms(spec)
    latency = (record.get("summary") or {}).get("latency") or {}
    spread = None
    # links given a delay (topology.link_delays) spread the latency by design, by at most the longest
    # one-way delay they add: the emulator's part is the rest
    designed_ms = ((record.get("topology") or {}).get("rtt_us") or 0.0) / 2000.0
    if latency.get("p99_ms") is not None and latency.get("p50_ms") is not None:
        spread = max(0.0, latency["p99_ms"] - latency["p50_ms"] - designed_ms)
    senders = [pair["sender"] for report in reports if report for pair in report.get("pairs", [])
               if pair.get("sender")]
    paced = sum(sender.get("paced_frames") or 0 for sender in senders)
    late = sum((sender.get("late_frames") or {}).get(str(LATE_MS), 0) for sender in senders)
    waits = int(((record.get("dataplane") or {}).get("switch_receive_lag") or {}).get("at_least_ms", {})
                .get(str(LATE_MS), 0))
    reasons = []
    if spacing is not None:
        unshaped = not (spec.get("topology") or {}).get("shape_links")
        if unshaped and spread is not None and spread > spacing:
            delays = f", beyond the {designed_ms:.1f} ms the links' delays add" if designed_ms else ""
            reasons.append(f"one-way latency p99 exceeds p50 by {spread:.1f} ms on unshaped links (the emulator's "
                           f"queues{delays}), more than the {spacing:.1f} ms between a queue pair's packets")
        if spacing < LATE_MS and paced and late >= LATE_SHARE * paced:
            reasons.append(f"senders sent {late} of {paced} frames {LATE_MS} ms or more behind schedule "
                           f"(bursts), more than the {spacing:.1f} ms between a queue pair's packets")
        if spacing < LATE_MS and waits:
            reasons.append(f"{waits} switch read batches waited {LATE_MS} ms or more, more than the "
                           f"{spacing:.1f} ms between a queue pair's packets")
    if reasons:
        reasons = [reason + ": out-of-order counts may be the emulator's" for reason in reasons]
    return {"stream_spacing_ms": spacing, "latency_spread_ms": spread, "paced_frames": paced,
            "late_frames": late, "reordering_unreliable": bool(reasons), "reordering_reasons": reasons}


def by_server(record, pairs):
    """The emulator's figures of each server of a fabric over several (``record["cluster"]``), or None on one.

    A switch counts on the server it runs on, a sender on its source host's, a receiver on its
    destination host's (``record["cluster"]["placement"]``).

    Args:
        record: the run's results so far (``cluster.placement`` and ``dataplane.emulator_by_switch``).
        pairs: the stream pairs of the traffic reports (``src``, ``dst``, ``sender``, ``receiver``).

    Returns:
        dict: ``{server: {"switch_socket_drops", "switch_waits_over_limit", "receiver_socket_drops",
        "sender_lag_max_ms"}}``, every server of the placement in it.

    >>> rec = {"cluster": {"placement": {"s1": "a", "s2": "b", "h1": "a", "h2": "b"}},
    ...        "dataplane": {"emulator_by_switch": {"s2": {"socket_drops": 7, "waits_over_limit": 1}}}}
    >>> pair = {"src": "h1", "dst": "h2", "sender": {"pacing_lag_max_ms": 12.0}, "receiver": {"socket_drops": 2}}
    >>> by_server(rec, [pair])["b"]
    {'switch_socket_drops': 7, 'switch_waits_over_limit': 1, 'receiver_socket_drops': 2, 'sender_lag_max_ms': None}
    """
    placement = (record.get("cluster") or {}).get("placement")
    if not placement:
        return None
    servers = {server: {"switch_socket_drops": 0, "switch_waits_over_limit": 0, "receiver_socket_drops": 0,
                        "sender_lag_max_ms": None} for server in sorted(set(placement.values()))}
    for switch, figures in ((record.get("dataplane") or {}).get("emulator_by_switch") or {}).items():
        if switch in placement:
            servers[placement[switch]]["switch_socket_drops"] += figures.get("socket_drops", 0)
            servers[placement[switch]]["switch_waits_over_limit"] += figures.get("waits_over_limit", 0)
    for pair in pairs:
        if pair.get("dst") in placement:
            servers[placement[pair["dst"]]]["receiver_socket_drops"] += pair["receiver"].get("socket_drops") or 0
        lag = pair["sender"].get("pacing_lag_max_ms")
        if pair.get("src") in placement and lag is not None:
            entry = servers[placement[pair["src"]]]
            entry["sender_lag_max_ms"] = max(lag, entry["sender_lag_max_ms"] or 0.0)
    return servers


def _where(servers, field, above=0):
    """`` (on a: n, b: m)``: the servers whose ``field`` exceeds ``above``; empty on one server."""
    if not servers:
        return ""
    on = [f"{name}: {entry[field]:g}" for name, entry in servers.items()
          if entry[field] is not None and entry[field] > above]
    return f" (on {', '.join(on)})" if on else ""


def assess(record, reports, loads=None):
    """The ``overload`` section of results.json.

    Args:
        record: the run's results so far (``dataplane`` drops and receive lag and ``summary.latency``
            are read; over several servers ``cluster.placement`` and ``dataplane.emulator_by_switch``).
        reports: the traffic entries' reports (stream pairs carry the senders' and
            receivers' own figures; others are skipped).
        loads: the servers' load averages, ``{"start": {server: [1, 5, 15 min]}, "end": ...}``, recorded
            as they are (no criterion: a loaded machine that keeps up passes).

    Returns:
        dict: ``{"overloaded": bool, "reasons": [str], "switch_socket_drops": int,
        "switch_waits_over_limit": int, "receiver_socket_drops": int, "sender_lag_max_ms": float | None,
        "latency_p99_ms": float | None, "load_average": dict, "by_server": dict | None}`` and the fields
        of :func:`reordering_check`.  Over several servers each reason names the servers it was seen on.

    >>> assess({"dataplane": {"drops": {"emulator": 0}}, "summary": {"latency": {"p99_ms": 3.0}}}, [])["overloaded"]
    False
    """
    pairs = [pair for report in reports if report for pair in report.get("pairs", [])]
    dataplane = record.get("dataplane", {})
    switch_drops = int(dataplane.get("drops", {}).get("emulator", 0))
    waits = int(dataplane.get("switch_receive_lag", {}).get("at_least_ms", {}).get(str(SWITCH_WAIT_MS), 0))
    receiver_drops = sum(pair["receiver"].get("socket_drops") or 0 for pair in pairs)
    lags = [pair["sender"]["pacing_lag_max_ms"] for pair in pairs
            if pair["sender"].get("pacing_lag_max_ms") is not None]
    latency = (record.get("summary", {}).get("latency") or {}).get("p99_ms")
    servers = by_server(record, pairs)
    result = {"switch_socket_drops": switch_drops, "switch_waits_over_limit": waits,
              "receiver_socket_drops": receiver_drops,
              "sender_lag_max_ms": max(lags) if lags else None, "latency_p99_ms": latency,
              "load_average": dict(loads or {}), "by_server": servers}
    reasons = []
    if switch_drops:
        reasons.append(f"switch sockets dropped {switch_drops} frames (a switch process fell behind)"
                       + _where(servers, "switch_socket_drops"))
    if receiver_drops:
        reasons.append(f"receiver sockets dropped {receiver_drops} frames" + _where(servers, "receiver_socket_drops"))
    if result["sender_lag_max_ms"] is not None and result["sender_lag_max_ms"] > SENDER_LAG_MS:
        reasons.append(f"a sender fell {result['sender_lag_max_ms']:.0f} ms behind its schedule "
                       f"(limit {SENDER_LAG_MS:g} ms)" + _where(servers, "sender_lag_max_ms", SENDER_LAG_MS))
    if waits:
        reasons.append(f"{waits} frame batches waited {SWITCH_WAIT_MS} ms or more in switch sockets "
                       f"(a switch process was starved of CPU)" + _where(servers, "switch_waits_over_limit"))
    result.update(overloaded=bool(reasons), reasons=reasons)
    result.update(reordering_check(record, reports))
    return result
