"""What an experiment run writes, and the schema of results.json.

A run writes into its output folder:

* ``results.json``: the whole record, of the shape :data:`RESULTS_SCHEMA` gives with a
  comment per field (checked by :func:`check_schema`), plus the sections of the
  mechanisms the run is (``mechanisms``: their names; each declares its own
  sections in its run hooks' ``results_schema``, :mod:`testbed.mechanisms.hooks`);
* ``link_load.csv``: one row per link (:data:`LINK_CSV_COLUMNS`);
* ``link_load.png`` and ``throughput.png`` (see :mod:`testbed.experiment.plots`) and the
  mechanisms' own plots;
* ``traffic/``: the raw sender and receiver reports of each traffic entry (JSON).

``schema_version`` 2.  Times ``*_s`` are seconds since the run's time zero ``t0``
(the instant traffic and the failure schedule start); wall-clock values are ISO
8601 UTC.  Counters: ``out_of_sequence`` is the receivers' NIC-style OOS count
(an arrival whose PSN skips ahead: loss or reordering, seed 004 6.3.1);
``late`` counts packets that arrived after a later one of their QP (pure
reordering); ``*_rate`` divide by received packets.  ``uplink_loads`` are the
bytes the source leaves sent up each uplink (egress counters, before any
shaping drop), ``uplink_mmr`` their Max-Mean Ratio.

A schema maps a key to a type, a tuple of allowed types, a nested dict (an
object with those keys) or a one-element list (a list of that shape).
"""
import csv
import json
import os

NUMBER = (int, float)
OPT_NUMBER = (int, float, type(None))
OPT_INT = (int, type(None))
OPT_STR = (str, type(None))
SCHEMA_VERSION = 2
STATUSES = ("ok", "warning", "error", "interrupted")

LINK_CSV_COLUMNS = ("link", "a", "a_port", "b", "b_port", "tx_packets", "tx_bytes", "share", "tier",
                    "a_to_b_packets", "a_to_b_bytes", "b_to_a_packets", "b_to_a_bytes")

LINK_SCHEMA = {"link": str, "a": str, "a_port": int, "b": str, "b_port": int, "tier": str,
               "a_to_b_packets": OPT_INT, "a_to_b_bytes": OPT_INT, "b_to_a_packets": OPT_INT,
               "b_to_a_bytes": OPT_INT, "tx_packets": OPT_INT, "tx_bytes": OPT_INT, "share": NUMBER}

RESULTS_SCHEMA = {
    "schema_version": int,
    "name": str, "seed": int, "mode": OPT_STR, "program": str,
    "target": str,                      # the P4 target: embedded | bmv2
    "target_note": OPT_STR,             # why target auto did not pick an installed BMv2
    "mechanisms": [str],                # the mechanisms whose sections this record has
    "status": str,                      # one of STATUSES
    "error": OPT_STR,
    "warnings": [str],                  # why a run that ended ("warning") may not show what its spec asked for
    "started_at": str, "finished_at": str, "wall_s": NUMBER, "t0_ns": OPT_INT,
    "t0_utc": OPT_STR,                  # t0 as switch and controller log lines write time (testbed.log_format)
    "traffic_start_s": OPT_NUMBER,      # how long the traffic processes took to be ready (before t0)
    # did the emulator keep up (testbed.experiment.overload)?  If not, say why
    "overload": {"overloaded": bool, "reasons": [str], "switch_socket_drops": int, "switch_waits_over_limit": int,
                 "receiver_socket_drops": int, "sender_lag_max_ms": OPT_NUMBER, "latency_p99_ms": OPT_NUMBER,
                 # could the emulator's delays alone have reordered packets (overload.reordering_check)?
                 "stream_spacing_ms": OPT_NUMBER, "latency_spread_ms": OPT_NUMBER, "paced_frames": int,
                 "late_frames": int, "reordering_unreliable": bool, "reordering_reasons": [str],
                 # the servers' load averages as the traffic started and after it: {"start": {server: [1, 5,
                 # 15 min]}, "end": ...} (a server that did not answer: null)
                 "load_average": dict,
                 # over several servers (else null): the figures above per server (overload.by_server)
                 "by_server": (dict, type(None))},
    "spec": dict,                       # the validated spec, ExperimentSpec.to_dict()
    "topology": {"kind": str, "params": dict, "hosts": int, "switches": int, "links": int,
                 # links given an added delay (topology.link_delay_us / link_delays): "a-b" -> one-way us,
                 # how (netem or the embedded switches' ports), and the round trip they add
                 # (analysis.round_trip_us)
                 "link_delays_us": dict, "delay_mechanism": OPT_STR, "rtt_us": NUMBER},
    "controller": {"kind": str, "detection_delay_ms": NUMBER, "entries_written": int,
                   "mode_params_written": dict, "notes": [str],
                   "reactions": [{"failure_index": OPT_INT, "action": str, "failed_at_s": NUMBER,
                                  "reacted_at_s": OPT_NUMBER, "reaction_s": OPT_NUMBER,
                                  "compute_s": OPT_NUMBER,   # route computation within the reaction
                                  "entries_written": OPT_INT, "error": OPT_STR}]},
    "dataplane": {
        # how long frames waited in the embedded switches' sockets during the run (read batches)
        "switch_receive_lag": {"samples": int, "at_least_ms": dict},   # {"1": n, "10": n, "50": n, "200": n}
        "drops": {"tx_errors": int,        # frames a port could not send (link down), probes included
                  "queue_drops": int,      # tc qdisc drops on shaped links (congestion)
                  "on_links": int,         # data frames sent on switch links and not received
                  "emulator": int,         # frames switch sockets dropped (the emulator fell behind)
                  "connectivity": int,     # on_links - queue_drops - emulator (+ a mechanism's own)
                  "congestion": int},      # queue_drops
        # frames the switch ports lost, by place (testbed.experiment.counters.drops_by_place)
        "drops_by_place": {"fabric_link_queue": int, "host_port": int, "link_down": int,
                           "fabric": int,  # what was lost inside the fabric
                           "by_link": dict},    # {"switch:port>neighbour": frames}
        # the switches with emulator losses or delays: {switch: {"socket_drops", "waits_over_limit"}}
        # (testbed.experiment.counters.emulator_by_switch; the overload check's per-server figures)
        "emulator_by_switch": dict,
        # shaped links only (else null): the switch ports' queue drops per interval of the run
        # (testbed.experiment.congestion): {"interval_s", "t_s": [interval ends], "drops": [int],
        # "sent": [stream packets sent in it], "rate": [drops / sent or null]}
        "congestion_timeline": (dict, type(None))},
    "failures": [{"index": int, "action": str,
                  "element": str,          # the failed link "a-b" or switch
                  "loss": OPT_NUMBER, "planned_at_s": NUMBER, "applied_at_s": OPT_NUMBER, "apply_s": OPT_NUMBER,
                  "error": OPT_STR,
                  "mechanism": OPT_STR,    # how a lossy_link was applied (or ended): netem | embedded-port
                  "cause": OPT_STR}],      # failure_trace entries: "link a-b" or "switch s"
    "traffic": [{"index": int, "pattern": str, "hosts": [str], "planned_start_s": NUMBER,
                 "started_at_s": OPT_NUMBER, "error": OPT_STR, "sent_packets": OPT_INT,
                 "received_packets": OPT_INT, "lost_packets": OPT_INT, "out_of_sequence": OPT_INT,
                 "late": OPT_INT, "duplicates": OPT_INT, "goodput_mbps": OPT_NUMBER, "completion_time_s": OPT_NUMBER}],
    "links": [LINK_SCHEMA],
    "summary": {"sent_packets": int, "received_packets": int, "lost_packets": int, "loss_rate": NUMBER,
                "out_of_sequence": int, "out_of_order_rate": NUMBER, "late": int, "reorder_rate": NUMBER,
                "duplicates": int,
                "goodput_mbps": NUMBER, "uplink_loads": dict, "uplink_mmr": OPT_NUMBER, "uplink_jain": OPT_NUMBER,
                "recovery": [{"failure_index": int, "gap_s": OPT_NUMBER, "stopped_at_s": OPT_NUMBER,
                              "resumed_at_s": OPT_NUMBER, "recovery_after_failure_s": OPT_NUMBER,
                              "loss_window_s": OPT_NUMBER, "first_loss_at_s": OPT_NUMBER,
                              "last_loss_at_s": OPT_NUMBER, "lost_in_window": OPT_INT,
                              "lost_later": OPT_INT}],
                "controller_reaction_s": OPT_NUMBER,
                # per disruptive failure: each interrupted flow's failure-to-delivery time
                "flow_recovery": [{"failure_index": int, "flows_interrupted": int, "recovery_s": [NUMBER],
                                   "max_recovery_s": OPT_NUMBER, "median_recovery_s": OPT_NUMBER}],
                # flows a link_down/switch_crash stopped for good although the fabric could route around it
                # (empty for a controller that does not recover: the no-recovery baseline)
                "unrecovered_flows": [{"failure_index": int, "src": str, "dst": str, "dqpn": int,
                                       "last_delivery_s": NUMBER, "sender_end_s": NUMBER}],
                # extra switches crossed, from the TTL stream packets arrived with: {"0": packets, "2": ...}
                "path_dilation": {"extra_hops": dict, "packets": int},
                # one-way delivery latency of stream packets (worst pair): p50_ms, p99_ms, max_ms
                "latency": (dict, type(None))},
    "timeline": {"bin_s": NUMBER, "t_s": [NUMBER], "mbps": [NUMBER]},
    "files": {"results": str, "link_load_csv": OPT_STR, "plots": [str]},
    # a fabric over several servers (null on one): servers, placement {node: server}, cross-server link
    # kind, the links crossing servers, and one such link's round trip and TCP rate measured before the
    # traffic (ClusterFabricNetwork.measure_cross_link; null when it could not be measured)
    "cluster": (dict, type(None)),
}


class OrNull:
    """A schema for a value that is null or matches ``schema`` (a section a run may not have reached).

    Args:
        schema: the value's schema when it is not null.
    """

    def __init__(self, schema):
        self.schema = schema


def merge_schema(base, extra):
    """``base`` with the keys of ``extra`` added (nested objects merged), as a new dict.

    >>> merge_schema({"a": {"x": int}, "b": str}, {"a": {"y": int}, "c": int})
    {'a': {'x': <class 'int'>, 'y': <class 'int'>}, 'b': <class 'str'>, 'c': <class 'int'>}
    """
    merged = dict(base)
    for key, sub in extra.items():
        if isinstance(sub, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_schema(merged[key], sub)
        else:
            merged[key] = sub
    return merged


def schema_for(mechanism_names):
    """:data:`RESULTS_SCHEMA` with the sections of the named mechanisms."""
    from testbed.mechanisms import hooks_for

    schema = RESULTS_SCHEMA
    for hooks in hooks_for():
        if hooks.mechanism.name in mechanism_names:
            schema = merge_schema(schema, hooks.results_schema)
    return schema


def check_schema(value, schema=None, path="results"):
    """Check a results object against a schema of :data:`RESULTS_SCHEMA`'s form.

    Extra keys are allowed (forward compatible); missing keys and wrong types are not.

    Args:
        value: the object.
        schema: the schema (default: :func:`schema_for` the record's ``mechanisms``).
        path: the name of ``value`` in messages.

    Returns:
        list[str]: one line per problem (empty when the object conforms).
    """
    if schema is None:
        schema = schema_for(value.get("mechanisms", []) if isinstance(value, dict) else [])
    if isinstance(schema, OrNull):
        return [] if value is None else check_schema(value, schema.schema, path)
    problems = []
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        for key, sub in schema.items():
            if key not in value:
                problems.append(f"{path}.{key}: missing")
            else:
                problems += check_schema(value[key], sub, f"{path}.{key}")
        return problems
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        for index, item in enumerate(value):
            problems += check_schema(item, schema[0], f"{path}[{index}]")
        return problems
    allowed = schema if isinstance(schema, tuple) else (schema,)
    if isinstance(value, bool) and bool not in allowed:
        return [f"{path}: expected {'/'.join(t.__name__ for t in allowed)}, got bool"]
    if not isinstance(value, allowed):
        return [f"{path}: expected {'/'.join(t.__name__ for t in allowed)}, got {type(value).__name__}"]
    return []


def empty_summary():
    """The ``summary`` of a run that measured nothing (all counts zero, ratios None)."""
    return {"sent_packets": 0, "received_packets": 0, "lost_packets": 0, "loss_rate": 0.0,
            "out_of_sequence": 0, "out_of_order_rate": 0.0, "late": 0, "reorder_rate": 0.0, "duplicates": 0,
            "goodput_mbps": 0.0,
            "uplink_loads": {}, "uplink_mmr": None, "uplink_jain": None, "recovery": [],
            "controller_reaction_s": None, "flow_recovery": [], "unrecovered_flows": [],
            "path_dilation": {"extra_hops": {}, "packets": 0}, "latency": None}


def empty_dataplane():
    """The ``dataplane`` section of a run that read no switch counters."""
    return {"switch_receive_lag": {"samples": 0, "at_least_ms": {}},
            "drops": {"tx_errors": 0, "queue_drops": 0, "on_links": 0, "emulator": 0, "connectivity": 0,
                      "congestion": 0},
            "drops_by_place": {"fabric_link_queue": 0, "host_port": 0, "link_down": 0, "fabric": 0, "by_link": {}},
            "emulator_by_switch": {}, "congestion_timeline": None}


def write_link_csv(rows, path):
    """Write the per-link load rows (:data:`LINK_CSV_COLUMNS`) to ``path``."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=LINK_CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: ("" if row.get(key) is None else row.get(key)) for key in LINK_CSV_COLUMNS})


def write_json(data, path):
    """Write JSON atomically (a temporary file renamed into place)."""
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=False, default=str)
        handle.write("\n")
    os.replace(temporary, path)
