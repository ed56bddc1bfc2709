"""What an experiment run writes, and the documented schema of results.json.

A run writes into its output folder:

* ``results.json``: the whole record (schema below, checked by :func:`check_schema`);
* ``link_load.csv``: one row per link (:data:`LINK_CSV_COLUMNS`);
* ``link_load.png`` and ``throughput.png`` (see :mod:`testbed.experiment.plots`);
* ``traffic/``: the raw sender and receiver reports of each traffic entry (JSON).

results.json (``schema_version`` 1); times ``*_s`` are seconds since the run's
time zero ``t0`` (the instant traffic and the failure schedule start), wall
clock values are ISO 8601 UTC::

    {
      "schema_version": 1,
      "name": str, "seed": int, "mode": str | null, "program": str, "target": "embedded" | "bmv2",
      "target_note": str | null,   # why target auto did not pick an installed BMv2
      "status": "ok" | "warning" | "error" | "interrupted", "error": str | null,
      "warnings": [str],   # why a run that ended ("warning") may not show what its spec asked for
      "started_at": str, "finished_at": str, "wall_s": float, "t0_ns": int | null,
      "t0_utc": str | null,   # t0 as switch and controller log lines write time (testbed.log_format)
      "traffic_start_s": float | null,   # how long the traffic processes took to be ready (before t0)
      # did the emulator keep up (testbed.experiment.overload)?  If not, say why
      "overload": {"overloaded": bool, "reasons": [str], "switch_socket_drops": int,
                   "switch_waits_over_limit": int, "receiver_socket_drops": int,
                   "sender_lag_max_ms": float | null, "latency_p99_ms": float | null,
                   "trigger_late_max_ms": float | null},
      "spec": {...the validated spec, ExperimentSpec.to_dict()...},
      "topology": {"kind": str, "params": {...}, "hosts": int, "switches": int, "links": int},
      "controller": {"kind": str, "detection_delay_ms": float, "entries_written": int,
                     "mode_params_written": {...}, "notes": [str],
                     "reactions": [{"failure_index": int, "action": str, "failed_at_s": float,
                                    "reacted_at_s": float | null, "reaction_s": float | null,
                                    "compute_s": float | null,   # route computation within the reaction
                                    "entries_written": int | null, "error": str | null}],
                     # data-plane detectors (F10): the first transition of a failed link's port
                     # detection_s: failure to the port's transition on the switch's clock where the
                     # target tells its origin (clock "switch"), else to the report's arrival ("controller")
                     "detections": [{"failure_index": int, "action": str, "switch": str, "port": int,
                                     "detection_s": float, "reported_s": float,
                                     "clock": "switch" | "controller"}],
                     # at_s: the report's arrival; switch_at_s: the transition on the switch's clock (or null)
                     "transitions": [{"switch": str, "port": int, "status": "up" | "down", "at_s": float,
                                      "switch_at_s": float | null,
                                      "switch_time_us": int, "frames": int, "holddown_us": int,
                                      "backoff_level": int, "link": [str]}],
                     # F10 pushback set off by each link a detector reported down or up: the protocol's
                     # messages and switches (simulated), what the controller wrote, and when
                     "pushbacks": [{"link": [str], "status": "down" | "up", "at_s": float,
                                    "messages": int, "starters": [str], "switches_installed": [str],
                                    "switches_with_state": [str], "entries_written": int,
                                    "compute_s": float | null, "write_s": float | null,
                                    "error": str | null}],
                     # F10, embedded target: per switch, the latest a trigger went out after its due time
                     "trigger_late_max_us": {str: float},
                     # F10's epoch rescheduler: one row per group it wrote (or moved entries to)
                     # (testbed.controllers.f10.rescheduler_app: the rescheduler's actions())
                     "reschedules": [{"epoch": int, "at_s": float, "switch": str, "group": int, ...}]},
      "dataplane": {# how long frames waited in the embedded switches' sockets during the run (read batches)
                    "switch_receive_lag": {"samples": int, "at_least_ms": {"1": int, "10": int, "50": int,
                                                                           "200": int}},
                    "drops": {"tx_errors": int,       # frames a port could not send (link down), probes included
                              "no_detour": int,       # F10: next hop down and no working detour
                              "queue_drops": int,     # tc qdisc drops on shaped links (congestion)
                              "on_links": int,        # data frames sent on switch links and not received
                              "emulator": int,        # frames switch sockets dropped (the emulator fell behind)
                              "connectivity": int,    # on_links - queue_drops - emulator + no_detour
                              "congestion": int},     # queue_drops
                    # frames lost by place (testbed/experiment/dsf_metrics.py; DSF places 0 without DSF)
                    "drops_by_place": {"fabric_link_queue": int, "host_port": int, "link_down": int,
                                       "voq_tail": int, "reassembly_timeout": int, "late_cell": int,
                                       "bad_parameter": int, "no_reachability": int, "ttl": int,
                                       "not_a_cell": int, "no_reachability_in_fabric": int,
                                       "fabric": int,   # link queues + reassembly timeouts + no reach + ttl
                                       "by_link": {"switch:port>neighbour": int}},
                    # p4src/flowlet.p4: flowlet boundaries that moved a flow slot to another port
                    "flowlet_path_changes": int | null},
      "failures": [{"index": int, "action": str, "target": str, "loss": float | null,
                    "planned_at_s": float, "applied_at_s": float | null, "apply_s": float | null,
                    "error": str | null,
                    "mechanism": "netem" | "embedded-port" | null,   # how a lossy_link was applied (or ended)
                    "cause": str | null}],  # failure_trace entries: "link a-b" or "switch s"
      "traffic": [{"index": int, "pattern": str, "hosts": [str], "planned_start_s": float,
                   "started_at_s": float | null, "error": str | null,
                   "sent_packets": int | null, "received_packets": int | null, "lost_packets": int | null,
                   "out_of_sequence": int | null, "late": int | null, "duplicates": int | null,
                   "goodput_mbps": float | null,
                   "completion_time_s": float | null}],
      "links": [{"link", "a", "a_port", "b", "b_port", "tier", "a_to_b_packets", "a_to_b_bytes",
                 "b_to_a_packets", "b_to_a_bytes", "tx_packets", "tx_bytes", "share"}],
      "summary": {"sent_packets": int, "received_packets": int, "lost_packets": int, "loss_rate": float,
                  "out_of_sequence": int, "out_of_order_rate": float, "late": int, "reorder_rate": float,
                  "duplicates": int,
                  "goodput_mbps": float, "uplink_loads": {link: bytes}, "uplink_mmr": float | null,
                  "uplink_jain": float | null,
                  "recovery": [{"failure_index": int, "gap_s": float | null, "stopped_at_s": float | null,
                                "resumed_at_s": float | null, "recovery_after_failure_s": float | null,
                                "loss_window_s": float | null, "first_loss_at_s": float | null,
                                "last_loss_at_s": float | null, "lost_in_window": int | null,
                                "lost_later": int | null}],
                  "controller_reaction_s": float | null,
                  # per disruptive failure: each interrupted flow's failure-to-delivery time
                  "flow_recovery": [{"failure_index": int, "flows_interrupted": int, "recovery_s": [float],
                                     "max_recovery_s": float | null, "median_recovery_s": float | null}],
                  # flows a link_down/switch_crash stopped for good although the fabric could route
                  # around it (not written with controller "none", the no-recovery baseline)
                  "unrecovered_flows": [{"failure_index": int, "src": str, "dst": str, "dqpn": int,
                                         "last_delivery_s": float, "sender_end_s": float}],
                  # extra switches crossed, from the TTL stream packets arrived with
                  "path_dilation": {"extra_hops": {"0": packets, "2": packets, ...}, "packets": int},
                  # one-way delivery latency of stream packets (worst pair): the emulation's own delay
                  "latency": {"p50_ms": float, "p99_ms": float, "max_ms": float} | null},
      "timeline": {"bin_s": float, "t_s": [float], "mbps": [float]},
      "files": {"results": "results.json", "link_load_csv": str | null, "plots": [str]},
      # runs on a DSF topology (any mode; VOQs and credits empty without the DSF programs)
      "dsf": {"parameters": {dsf_* parameter: int}, "cell_bytes": int, "spray_policy": str,
              "tiers": {"rdsw>fdsw": {"loads": {link: bytes}, "mmr": float | null}, ...},
              "voq_depth": {"t_s": [float], "depth_pkts": {rdsw: [int]},
                            "max": {"rdsw": str | null, "voq": int | null, "depth_pkts": int}},
              "credits": {"t_s": [float], "grants_per_s": {"rdsw:port": [float]},
                          "mean_grants_per_s": {"rdsw:port": float}},
              "host_ports": [{"switch", "port", "host", "bytes", "mbps", "busy"}],   # busy: of capacity
              "busy_window_s": [float, float],
              "uplink_rates": {"t_s": [float], "bytes_per_s": {rdsw: [float]}},
              "rate_changes": [{"failure_index", "at_s", "rdsw": {rdsw: {"before", "after", "ratio"}},
                                "before", "after", "ratio"}],
              "control": {"input_balanced", "ibm_seed", "withdrawals": {dest: [[adv, nbr, key]]},
                          "failed_links", "nodes", "system_ports", "reactions": [...]},
              "samples": int, "sample_errors": [str],
              "switch_cpu": {switch: float},   # CPU share of one core each switch process used
              "load_average": [float]}         # the machine's, at the end
    }

Counters: ``out_of_sequence`` is the receivers' NIC-style OOS count (an
arrival whose PSN skips ahead: loss or reordering, seed 004 6.3.1);
``late`` counts packets that arrived after a later one of their QP (pure
reordering); ``*_rate`` divide by received packets.  ``uplink_loads`` are the
bytes the source leaves sent up each uplink (egress counters, before any
shaping drop), ``uplink_mmr`` their Max-Mean Ratio.

:data:`RESULTS_SCHEMA` states the same as a small JSON-schema-like dict:
a key maps to a type, a tuple of allowed types, a nested dict (an object
with those keys) or a one-element list (a list of that shape).
"""
import csv
import json
import os

NUMBER = (int, float)
OPT_NUMBER = (int, float, type(None))
OPT_INT = (int, type(None))
OPT_STR = (str, type(None))

LINK_CSV_COLUMNS = ("link", "a", "a_port", "b", "b_port", "tx_packets", "tx_bytes", "share", "tier",
                    "a_to_b_packets", "a_to_b_bytes", "b_to_a_packets", "b_to_a_bytes")

LINK_SCHEMA = {"link": str, "a": str, "a_port": int, "b": str, "b_port": int, "tier": str,
               "a_to_b_packets": OPT_INT, "a_to_b_bytes": OPT_INT, "b_to_a_packets": OPT_INT,
               "b_to_a_bytes": OPT_INT, "tx_packets": OPT_INT, "tx_bytes": OPT_INT, "share": NUMBER}

RESULTS_SCHEMA = {
    "schema_version": int,
    "name": str, "seed": int, "mode": OPT_STR, "program": str, "target": str,
    "status": str, "error": OPT_STR, "warnings": [str],
    "started_at": str, "finished_at": str, "wall_s": NUMBER, "t0_ns": OPT_INT, "t0_utc": OPT_STR,
    "traffic_start_s": OPT_NUMBER,
    "overload": {"overloaded": bool, "reasons": [str], "switch_socket_drops": int, "switch_waits_over_limit": int,
                 "receiver_socket_drops": int,
                 "sender_lag_max_ms": OPT_NUMBER, "latency_p99_ms": OPT_NUMBER, "trigger_late_max_ms": OPT_NUMBER},
    "spec": dict,
    "topology": {"kind": str, "params": dict, "hosts": int, "switches": int, "links": int},
    "controller": {"kind": str, "detection_delay_ms": NUMBER, "entries_written": int,
                   "mode_params_written": dict, "notes": [str],
                   "reactions": [{"failure_index": int, "action": str, "failed_at_s": NUMBER,
                                  "reacted_at_s": OPT_NUMBER, "reaction_s": OPT_NUMBER,
                                  "entries_written": OPT_INT, "error": OPT_STR}],
                   "detections": [{"failure_index": OPT_INT, "action": str, "switch": str, "port": int,
                                   "detection_s": NUMBER, "reported_s": NUMBER, "clock": str}],
                   "transitions": [dict], "pushbacks": [dict], "trigger_late_max_us": dict,
                   "reschedules": [dict]},
    "dataplane": {"switch_receive_lag": {"samples": int, "at_least_ms": dict},
                  "drops": {"tx_errors": int, "no_detour": int, "queue_drops": int, "on_links": int, "emulator": int,
                            "connectivity": int, "congestion": int}},
    "failures": [{"index": int, "action": str, "target": str, "loss": OPT_NUMBER, "planned_at_s": NUMBER,
                  "applied_at_s": OPT_NUMBER, "apply_s": OPT_NUMBER, "error": OPT_STR}],
    # failures[].mechanism (str | null) is written by every run since lossy_link got its embedded
    # fallback; it is not required here, so results written before it still conform.
    "traffic": [{"index": int, "pattern": str, "hosts": [str], "planned_start_s": NUMBER,
                 "started_at_s": OPT_NUMBER, "error": OPT_STR, "sent_packets": OPT_INT,
                 "received_packets": OPT_INT, "lost_packets": OPT_INT, "out_of_sequence": OPT_INT,
                 "late": OPT_INT, "duplicates": OPT_INT, "goodput_mbps": OPT_NUMBER, "completion_time_s": OPT_NUMBER}],
    "links": [LINK_SCHEMA],
    "summary": {"sent_packets": int, "received_packets": int, "lost_packets": int, "loss_rate": NUMBER,
                "out_of_sequence": int, "out_of_order_rate": NUMBER, "late": int, "reorder_rate": NUMBER,
                "duplicates": int,
                "goodput_mbps": NUMBER, "uplink_loads": dict, "uplink_mmr": OPT_NUMBER,
                "uplink_jain": OPT_NUMBER,
                "recovery": [{"failure_index": int, "gap_s": OPT_NUMBER, "stopped_at_s": OPT_NUMBER,
                              "resumed_at_s": OPT_NUMBER, "recovery_after_failure_s": OPT_NUMBER,
                              "loss_window_s": OPT_NUMBER, "first_loss_at_s": OPT_NUMBER,
                              "last_loss_at_s": OPT_NUMBER, "lost_in_window": OPT_INT,
                              "lost_later": OPT_INT}],
                "controller_reaction_s": OPT_NUMBER,
                "flow_recovery": [{"failure_index": int, "flows_interrupted": int, "recovery_s": [NUMBER],
                                   "max_recovery_s": OPT_NUMBER, "median_recovery_s": OPT_NUMBER}],
                "path_dilation": {"extra_hops": dict, "packets": int}, "latency": (dict, type(None))},
    "timeline": {"bin_s": NUMBER, "t_s": [NUMBER], "mbps": [NUMBER]},
    "files": {"results": str, "link_load_csv": OPT_STR, "plots": [str]},
}

DROPS_BY_PLACE_SCHEMA = {key: int for key in (
    "fabric_link_queue", "host_port", "link_down", "voq_tail", "reassembly_timeout", "late_cell", "bad_parameter",
    "no_reachability", "ttl", "not_a_cell", "no_reachability_in_fabric", "fabric")}
DROPS_BY_PLACE_SCHEMA["by_link"] = dict

DSF_SCHEMA = {
    "parameters": dict, "cell_bytes": int, "spray_policy": str,
    "tiers": dict,
    "voq_depth": {"t_s": [NUMBER], "depth_pkts": dict, "max": {"rdsw": OPT_STR, "voq": OPT_INT, "depth_pkts": int}},
    "credits": {"t_s": [NUMBER], "grants_per_s": dict, "mean_grants_per_s": dict},
    "host_ports": [{"switch": str, "port": int, "host": str, "bytes": int, "mbps": NUMBER, "busy": NUMBER}],
    "busy_window_s": [NUMBER],
    "uplink_rates": {"t_s": [NUMBER], "bytes_per_s": dict},
    "rate_changes": [{"failure_index": int, "at_s": NUMBER, "rdsw": dict, "before": NUMBER, "after": NUMBER,
                      "ratio": OPT_NUMBER}],
    "control": dict, "samples": int, "sample_errors": [str], "switch_cpu": dict, "load_average": [NUMBER],
}
"""The ``dsf`` section, present in the results of runs on a DSF topology."""

STATUSES = ("ok", "error", "interrupted")


def check_schema(value, schema=RESULTS_SCHEMA, path="results"):
    """Check a results object against a schema of :data:`RESULTS_SCHEMA`'s form.

    Extra keys are allowed (forward compatible); missing keys and wrong types are not.

    Returns:
        list[str]: one line per problem (empty when the object conforms).
    """
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


def check_optional_sections(record):
    """Check the sections only some runs have (``dsf``, ``dataplane.drops_by_place``).

    Returns:
        list[str]: one line per problem.
    """
    problems = []
    if "dsf" in record:
        problems += check_schema(record["dsf"], DSF_SCHEMA, "results.dsf")
    drops = record.get("dataplane", {}).get("drops_by_place")
    if drops is not None:
        problems += check_schema(drops, DROPS_BY_PLACE_SCHEMA, "results.dataplane.drops_by_place")
    return problems


def empty_summary():
    """The ``summary`` of a run that measured nothing (all counts zero, ratios None)."""
    return {"sent_packets": 0, "received_packets": 0, "lost_packets": 0, "loss_rate": 0.0,
            "out_of_sequence": 0, "out_of_order_rate": 0.0, "late": 0, "reorder_rate": 0.0, "duplicates": 0,
            "goodput_mbps": 0.0,
            "uplink_loads": {}, "uplink_mmr": None, "uplink_jain": None, "recovery": [],
            "controller_reaction_s": None, "flow_recovery": [],
            "path_dilation": {"extra_hops": {}, "packets": 0}, "latency": None}


def empty_dataplane():
    """The ``dataplane`` section of a run that read no switch counters."""
    return {"switch_receive_lag": {"samples": 0, "at_least_ms": {}},
            "drops": {"tx_errors": 0, "no_detour": 0, "queue_drops": 0, "on_links": 0, "emulator": 0,
                      "connectivity": 0, "congestion": 0},
            "flowlet_path_changes": None}


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


def load_results(path):
    """Read a results.json (a folder holding one is accepted too)."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    with open(path) as handle:
        return json.load(handle)
