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
"""
#: the limits beyond which a run is marked overloaded
SWITCH_WAIT_MS = 50              # one of testbed.packet_sockets.LAG_BUCKETS_MS (switches count per bucket)
SENDER_LAG_MS = 100.0


def assess(record, reports):
    """The ``overload`` section of results.json.

    Args:
        record: the run's results so far (``dataplane`` drops and receive lag and ``summary.latency``
            are read).
        reports: the traffic entries' reports (stream pairs carry the senders' and
            receivers' own figures; others are skipped).

    Returns:
        dict: ``{"overloaded": bool, "reasons": [str], "switch_socket_drops": int,
        "switch_waits_over_limit": int, "receiver_socket_drops": int, "sender_lag_max_ms": float | None,
        "latency_p99_ms": float | None}``.

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
    result = {"switch_socket_drops": switch_drops, "switch_waits_over_limit": waits,
              "receiver_socket_drops": receiver_drops,
              "sender_lag_max_ms": max(lags) if lags else None, "latency_p99_ms": latency}
    reasons = []
    if switch_drops:
        reasons.append(f"switch sockets dropped {switch_drops} frames (a switch process fell behind)")
    if receiver_drops:
        reasons.append(f"receiver sockets dropped {receiver_drops} frames")
    if result["sender_lag_max_ms"] is not None and result["sender_lag_max_ms"] > SENDER_LAG_MS:
        reasons.append(f"a sender fell {result['sender_lag_max_ms']:.0f} ms behind its schedule "
                       f"(limit {SENDER_LAG_MS:g} ms)")
    if waits:
        reasons.append(f"{waits} frame batches waited {SWITCH_WAIT_MS} ms or more in switch sockets "
                       f"(a switch process was starved of CPU)")
    result.update(overloaded=bool(reasons), reasons=reasons)
    return result
