"""DSF's fabric measurements of a run: its drop places and the ``dsf`` section of results.json.

Everything comes from counters the switches serve over P4Runtime and from the
links' tc statistics, never from a model:

* :func:`add_dsf_drop_places`: frames lost at the VOQ tail, by reassembly
  timeout, as late cells, for want of reachability or by TTL (``dsf_drops`` and
  ``MyIngress.dsf_fabric_drops``), added to the generic places of
  :func:`testbed.experiment.counters.drops_by_place`; ``fabric`` adds up what was
  lost *inside* the fabric: link queues, reassembly timeouts, no reachability at
  fabric nodes and TTL (the VOQs are the ingress edge; host ports the egress).
* :class:`CounterSampler` reads the per-port egress counters of every switch over
  P4Runtime once per :data:`SAMPLE_INTERVAL_S` (the switches in parallel, one Read each).
* :class:`DsfHistorySampler` gets the DSF counters of the interface nodes (VOQ depth,
  credits) every :data:`DSF_SAMPLE_INTERVAL_S` (2 ms), at most :data:`MAX_DSF_SAMPLES`
  per run whatever its length: the switches' DSF traffic managers note them themselves
  on a time grid they share (:mod:`testbed.p4.v1model.dsf.history`, for nothing while
  idle) and the sampler fetches the notes over the control socket every
  :data:`DSF_READ_INTERVAL_S`; reading counters over P4Runtime that often would cost the
  switches more CPU than a small machine can spare and change what is measured.
* :func:`dsf_section` turns the samples and the end-of-run link loads into
  ``dsf``: link load and MMR per direction of each fabric tier (bytes of cells),
  VOQ depth over time, credit grants per second, host-port busy fraction,
  uplink rates per interface node and their change at each failure, plus what the
  controller recorded (Input Balanced Mode's withdrawals, node numbers), and each
  switch process's CPU share over the run (:class:`SwitchCpu`: a switch near one
  full core is the emulator's limit, not the fabric's).
"""
import concurrent.futures
import os
import threading
import time

from p4.v1 import p4runtime_pb2

from testbed.experiment.counters import active_ends
from testbed.modes import PARAMETERS
from testbed.topologies.graph import is_host, port_toward
from testbed.traffic import metrics

SAMPLE_INTERVAL_S = 1.0  # egress counters: uplink rates and host-port busy fractions
DSF_SAMPLE_INTERVAL_S = 0.002  # VOQ depth and credit grants, noted by the switches on this grid
MAX_DSF_SAMPLES = 4000  # per run: a longer run is sampled less often
DSF_READ_INTERVAL_S = 0.25  # the switches' notes are fetched this often (they hold DSF_HISTORY_CAPACITY)
DSF_HISTORY_CAPACITY = 4000  # notes a switch holds unread: 8 s at 2 ms, far more than a read interval
EGRESS_COUNTER = "MyEgress.egress_port_counter"
# departures are read before arrivals, so that depth = arrivals - departures is never below the truth
DSF_COUNTERS = ("dsf_voq_dequeued", "dsf_voq_enqueued", "dsf_credit_granted")
DSF_DROPS = "dsf_drops"
FABRIC_DROPS = "MyIngress.dsf_fabric_drops"
DSF_DROP_PLACES = ("voq_tail", "reassembly_timeout", "late_cell", "bad_parameter")
FABRIC_DROP_PLACES = ("no_reachability", "ttl", "not_a_cell")  # MyIngress.dsf_fabric_drops indexes
SPRAY_POLICY = ("round robin per destination node over the links with reachability, at every node "
                "(p4src/include/dsf_forwarding.p4)")
SETTLE_S = 0.5  # after a failure, rates are compared once this much has passed


# -- drops ----------------------------------------------------------------------------------
def _counter_total(clients, name, skip=(), only=None):
    """Per-index packet totals of counter ``name`` over every switch that has it (of ``only``, if given)."""
    totals = {}
    for switch, client in sorted(clients.items()):
        if switch in skip or (only is not None and switch not in only):
            continue
        try:
            cells = client.read_counter(name)
        except Exception:  # noqa: BLE001 - a program without it, or a dead switch
            continue
        for index, (packets, _bytes) in cells.items():
            totals[index] = totals.get(index, 0) + int(packets)
    return totals


def add_dsf_drop_places(places, graph, clients, skip=()):
    """Add the DSF programs' drop places to :func:`testbed.experiment.counters.drops_by_place`'s ``places``.

    The interface nodes count VOQ tail drops, reassembly timeouts, late cells and
    bad parameters (``dsf_drops``, :data:`DSF_DROP_PLACES`); every node counts cells
    it had no reachability for, TTL expiries and frames that were no cell
    (``MyIngress.dsf_fabric_drops``, :data:`FABRIC_DROP_PLACES`).
    ``no_reachability_in_fabric`` counts the fabric and spine nodes only (cells an
    interface node could not send at all, such as the credit requests of a node cut off
    from a destination, are not lost in the fabric); ``fabric`` becomes link queues +
    reassembly timeouts + no reachability in the fabric + TTL.

    Args:
        places: the generic places (changed in place).
        graph: the topology multigraph.
        clients: ``{switch: P4Runtime session}``.
        skip: switches not to read (crashed).
    """
    dsf = _counter_total(clients, DSF_DROPS, skip)
    fabric = _counter_total(clients, FABRIC_DROPS, skip)
    places.update({name: dsf.get(index, 0) for index, name in enumerate(DSF_DROP_PLACES)})
    places.update({name: fabric.get(index, 0) for index, name in enumerate(FABRIC_DROP_PLACES)})
    fabric_nodes = {n for n in graph.nodes if graph.nodes[n].get("role") in ("fdsw", "sdsw")}
    inside = _counter_total(clients, FABRIC_DROPS, skip, only=fabric_nodes)
    places["no_reachability_in_fabric"] = inside.get(0, 0)
    places["fabric"] = (places["fabric_link_queue"] + places["reassembly_timeout"]
                        + places["no_reachability_in_fabric"] + places["ttl"])
    return places


# -- sampling -------------------------------------------------------------------------------
class CounterSampler:
    """Reads counters of every switch once per interval in a thread, until stopped.

    Args:
        clients: ``{switch: P4Runtime session}``.
        names: ``{switch: [counter names]}`` to read on each (switches without names are not read).
        t0_ns: the run's time zero (sample times are seconds since it).
        interval_s: time between samples (the reads of one sample may take longer).

    Attributes:
        samples: ``[{"t_s": float, "times": {switch: float}, "counters": {switch: {name: {index:
            [packets, bytes]}}}}]`` (only non-zero cells; ``times``: when each switch was read).
        errors: reads that failed (text), at most one per switch and counter.
    """

    def __init__(self, clients, names, t0_ns, interval_s=SAMPLE_INTERVAL_S):
        self.clients = {switch: client for switch, client in clients.items() if names.get(switch)}
        self.names = {switch: list(names.get(switch, ())) for switch in self.clients}
        self.t0_ns = t0_ns
        self.interval_s = interval_s
        self.samples = []
        self.errors = []
        self._stop = threading.Event()
        self._thread = None
        self._pool = None

    def _read_switch(self, switch):
        """``(counters, time read)`` of one switch: one Read of every cell of its counters."""
        client, values = self.clients[switch], {}
        began = time.time_ns()
        try:
            names = {client.index.id_of("counters", name): name for name in self.names[switch]}
            entities = []
            for counter_id in names:
                entity = p4runtime_pb2.Entity()
                entity.counter_entry.counter_id = counter_id
                entities.append(entity)
            for entity in client.read(entities):
                entry = entity.counter_entry
                if entry.data.packet_count or entry.data.byte_count:
                    values.setdefault(names[entry.counter_id], {})[int(entry.index.index)] = [
                        int(entry.data.packet_count), int(entry.data.byte_count)]
            for name in self.names[switch]:
                values.setdefault(name, {})
        except Exception as error:  # noqa: BLE001 - a crashed switch: keep sampling the others
            message = f"{switch} {', '.join(self.names[switch])}: {type(error).__name__}"
            if message not in self.errors:
                self.errors.append(message)
        return values, ((began + time.time_ns()) // 2 - self.t0_ns) / 1e9

    def sample(self):
        """Read every switch's counters once, the switches in parallel (each switch process answers its
        own reads), and keep the sample with the time each switch was read."""
        at = (time.time_ns() - self.t0_ns) / 1e9
        switches = list(self.clients)
        if self._pool is not None and len(switches) > 1:
            results = list(self._pool.map(self._read_switch, switches))
        else:
            results = [self._read_switch(switch) for switch in switches]
        counters = {switch: values for switch, (values, _) in zip(switches, results)}
        times = {switch: read_at for switch, (_, read_at) in zip(switches, results)}
        self.samples.append({"t_s": at, "times": times, "counters": counters})

    def _run(self):
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self):
        """Start sampling (the first sample is taken at once)."""
        self._pool = concurrent.futures.ThreadPoolExecutor(max(1, len(self.clients)),
                                                           thread_name_prefix="counter-reader")
        self._thread = threading.Thread(target=self._run, name="counter-sampler", daemon=True)
        self._thread.start()

    def stop(self):
        """Stop, then take a last sample; safe to call twice."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._thread = None
            self.sample()
            self._pool.shutdown(wait=True)
            self._pool = None


def sampler_for(graph, clients, t0_ns, interval_s=SAMPLE_INTERVAL_S):
    """A :class:`CounterSampler` of the egress counters of every switch."""
    return CounterSampler(clients, {switch: [EGRESS_COUNTER] for switch in clients}, t0_ns, interval_s)


class DsfHistorySampler:
    """DSF counters of switches on a time grid they all share, noted by the switches and fetched in a thread.

    Args:
        switches: ``{name: switch}`` with ``record_dsf_history`` and ``read_dsf_history``
            (:class:`~testbed.emulation.p4switch.EmbeddedP4Switch`).
        names: the counters to note (those a switch's program lacks are left out there).
        t0_ns: the run's time zero (``time.time_ns()``; sample times are seconds since it).
        interval_s: the grid's spacing.

    Attributes:
        samples: after :meth:`stop`, one per grid time at which any switch's counters changed, in
            :class:`CounterSampler`'s form (every switch's counters as they were at that time).
        errors: failed starts and reads (text), and notes a switch dropped for want of reading.
    """

    def __init__(self, switches, names, t0_ns, interval_s):
        self.switches = dict(switches)
        self.names = list(names)
        self.t0_ns = t0_ns
        self.interval_s = interval_s
        self.samples = []
        self.errors = []
        self._notes = {name: [] for name in self.switches}
        self._overflows = {}
        self._offset_ns = 0
        self._stop = threading.Event()
        self._thread = None

    def _record(self, message):
        if message not in self.errors:
            self.errors.append(message)

    def start(self):
        """Start the switches' notes from now on and fetch them every :data:`DSF_READ_INTERVAL_S`."""
        start_ns = time.monotonic_ns()
        self._offset_ns = time.time_ns() - start_ns  # CLOCK_MONOTONIC -> the run's wall clock
        for name, switch in sorted(self.switches.items()):
            try:
                switch.record_dsf_history(self.names, start_ns, self.interval_s * 1e6, DSF_HISTORY_CAPACITY)
            except Exception as error:  # noqa: BLE001 - a switch that cannot note is reported, not fatal
                self._record(f"{name} dsf history: {error}")
        self._thread = threading.Thread(target=self._run, name="dsf-history", daemon=True)
        self._thread.start()

    def _read(self):
        for name, switch in sorted(self.switches.items()):
            try:
                notes, overflows = switch.read_dsf_history()
            except Exception as error:  # noqa: BLE001 - a crashed switch: keep reading the others
                self._record(f"{name} dsf history: {type(error).__name__}")
                continue
            self._notes[name].extend(notes)
            self._overflows[name] = overflows

    def _run(self):
        while not self._stop.wait(DSF_READ_INTERVAL_S):
            self._read()

    def stop(self):
        """Stop, fetch the last notes and build :attr:`samples`; safe to call twice."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self._thread = None
        self._read()
        for name, dropped in sorted(self._overflows.items()):
            if dropped:
                self._record(f"{name} dsf history: {dropped} notes dropped (not read in time)")
        self.samples = self._merged()

    def _merged(self):
        """One sample per noted time, each switch's cells carried forward from its latest note."""
        by_time = {}
        for name, notes in self._notes.items():
            for at_ns, counters in notes:
                by_time.setdefault(at_ns, []).append((name, counters))
        state = {name: {counter: {} for counter in self.names} for name in self.switches}
        samples = []
        for at_ns in sorted(by_time):
            for name, counters in by_time[at_ns]:
                for counter, cells in counters.items():
                    state[name].setdefault(counter, {}).update(cells)
            t_s = (at_ns + self._offset_ns - self.t0_ns) / 1e9
            samples.append({"t_s": t_s, "times": {name: t_s for name in state},
                            "counters": {name: {counter: dict(cells) for counter, cells in counters.items()}
                                         for name, counters in state.items()}})
        return samples


def dsf_sampler_for(graph, switches, t0_ns, duration_s):
    """A :class:`DsfHistorySampler` of the DSF counters (VOQs, credits) of the RDSWs, every
    :data:`DSF_SAMPLE_INTERVAL_S` or so that a run of ``duration_s`` gives at most :data:`MAX_DSF_SAMPLES`.

    Args:
        graph: the topology (its ``role`` attributes name the RDSWs).
        switches: ``{name: switch}`` of the running fabric.
        t0_ns: the run's time zero.
        duration_s: the run's length.
    """
    rdsws = {name: switch for name, switch in switches.items() if graph.nodes[name].get("role") == "rdsw"}
    interval = max(DSF_SAMPLE_INTERVAL_S, duration_s / MAX_DSF_SAMPLES)
    return DsfHistorySampler(rdsws, DSF_COUNTERS, t0_ns, interval)


def process_cpu_seconds(pid):
    """CPU time (user + system, all threads) a process used so far, from /proc; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class SwitchCpu:
    """CPU share of each switch process over a run: is the emulator the bottleneck?

    Args:
        switches: Mininet switches with a ``process`` (embedded or BMv2 switches).
    """

    def __init__(self, switches):
        self.pids = {s.name: s.process.pid for s in switches if getattr(s, "process", None) is not None}
        self._start = {}
        self._wall = None

    def start(self):
        """Note each process's CPU time now."""
        self._wall = time.monotonic()
        self._start = {name: process_cpu_seconds(pid) for name, pid in self.pids.items()}

    def shares(self):
        """``{switch: fraction of one core used since start}`` (processes that died are left out)."""
        if self._wall is None:
            return {}
        wall = time.monotonic() - self._wall
        result = {}
        for name, pid in self.pids.items():
            now, then = process_cpu_seconds(pid), self._start.get(name)
            if now is not None and then is not None and wall > 0:
                result[name] = (now - then) / wall
        return result


# -- analysis -------------------------------------------------------------------------------
def _cell(sample, switch, name, index):
    return sample["counters"].get(switch, {}).get(name, {}).get(index, [0, 0])


def _series(samples, switch, name, index, part=1):
    return [_cell(sample, switch, name, index)[part] for sample in samples]


def _rates(times, values):
    """Per-interval rates (per second) of a cumulative series: ``(mid times, rates)``."""
    mids, rates = [], []
    for i in range(1, len(times)):
        dt = times[i] - times[i - 1]
        if dt > 0:
            mids.append((times[i] + times[i - 1]) / 2)
            rates.append((values[i] - values[i - 1]) / dt)
    return mids, rates


def port_toward_row(row, node):
    """The port of ``node`` on a :func:`~testbed.experiment.counters.link_loads` row."""
    return row["a_port"] if row["a"] == node else row["b_port"]


def tier_loads(graph, link_rows):
    """Directed link loads (bytes) and their MMR per tier and direction.

    Up (toward the higher level): the links of every sender that sent up that tier (the
    choices its spraying or hashing made); down: the links into every receiver that
    received from that tier; senders and receivers with less than
    :data:`~testbed.experiment.counters.SENDER_SHARE` of the busiest one's bytes (credit
    grants, acknowledgements) are left out.

    Args:
        graph: the topology multigraph.
        link_rows: :func:`testbed.experiment.counters.link_loads` rows.

    Returns:
        dict: ``{"rdsw>fdsw": {"loads": {link: bytes}, "mmr": float | None}, ...}``, switch tiers only.
    """
    groups = {}
    for row in link_rows:
        for sender, receiver, key in ((row["a"], row["b"], "a_to_b_bytes"), (row["b"], row["a"], "b_to_a_bytes")):
            if is_host(graph, sender) or is_host(graph, receiver) or row[key] is None:
                continue
            up = graph.nodes[sender]["level"] < graph.nodes[receiver]["level"]
            tier = f"{graph.nodes[sender]['role']}>{graph.nodes[receiver]['role']}"
            end = sender if up else receiver
            groups.setdefault(tier, []).append((end, f"{sender}:{port_toward_row(row, sender)}>{receiver}", row[key]))
    result = {}
    for tier, entries in sorted(groups.items()):
        totals = {}
        for end, _, load in entries:
            totals[end] = totals.get(end, 0) + load
        active = active_ends(totals)
        loads = {link: load for end, link, load in entries if end in active}
        values = list(loads.values())
        result[tier] = {"loads": loads, "mmr": metrics.max_mean_ratio(values) if values and sum(values) else None}
    return result


def voq_depths(samples, rdsws):
    """VOQ depth (packets: admitted minus departed) over time, per RDSW (all its VOQs) and the deepest VOQ."""
    times = [sample["t_s"] for sample in samples]
    per_rdsw, deepest = {}, {"rdsw": None, "voq": None, "depth_pkts": 0}
    for rdsw in rdsws:
        indexes = set()
        for sample in samples:
            indexes |= set(sample["counters"].get(rdsw, {}).get("dsf_voq_enqueued", {}))
        totals = [0] * len(samples)
        for index in sorted(indexes):
            enq = _series(samples, rdsw, "dsf_voq_enqueued", index, 0)
            deq = _series(samples, rdsw, "dsf_voq_dequeued", index, 0)
            for position, (e, d) in enumerate(zip(enq, deq)):
                totals[position] += e - d
                if e - d > deepest["depth_pkts"]:
                    deepest = {"rdsw": rdsw, "voq": index, "depth_pkts": e - d}
        if indexes:
            per_rdsw[rdsw] = totals
    return {"t_s": times, "depth_pkts": per_rdsw, "max": deepest}


def credit_rates(samples, rdsws):
    """Credit grants per second over time, per egress port that granted (``"rdsw:port"``)."""
    times = [sample["t_s"] for sample in samples]
    series, mids = {}, []
    for rdsw in rdsws:
        ports = set()
        for sample in samples:
            ports |= set(sample["counters"].get(rdsw, {}).get("dsf_credit_granted", {}))
        for port in sorted(ports):
            mids, rates = _rates(times, _series(samples, rdsw, "dsf_credit_granted", port, 0))
            series[f"{rdsw}:{port}"] = rates
    totals = {port: (samples[-1]["counters"].get(port.split(":")[0], {}).get("dsf_credit_granted", {})
                     .get(int(port.split(":")[1]), [0, 0])[0]) for port in series}
    duration = times[-1] - times[0] if len(times) > 1 else 0.0
    return {"t_s": mids, "grants_per_s": series,
            "mean_grants_per_s": {port: total / duration if duration > 0 else 0.0 for port, total in totals.items()}}


def _read_at(sample, switch):
    """When ``switch``'s counters of a sample were read (seconds since t0)."""
    return sample.get("times", {}).get(switch, sample["t_s"])


def _window_bytes(samples, switch, port, start_s, end_s):
    """Bytes out of ``switch``:``port`` between its first and last reads inside the window, and the time."""
    inside = [s for s in samples if start_s <= _read_at(s, switch) <= end_s]
    if len(inside) < 2:
        return 0, 0.0
    first, last = inside[0], inside[-1]
    sent = _cell(last, switch, EGRESS_COUNTER, port)[1] - _cell(first, switch, EGRESS_COUNTER, port)[1]
    return sent, _read_at(last, switch) - _read_at(first, switch)


def host_port_busy(graph, samples, start_s, end_s):
    """How busy each host port that sent anything was between ``start_s`` and ``end_s`` (bytes / capacity)."""
    rows = []
    for a, b, data in graph.edges(data=True):
        host, switch = (a, b) if is_host(graph, a) else (b, a)
        if not is_host(graph, host) or is_host(graph, switch):
            continue
        port = port_toward(data, switch)
        sent, seconds = _window_bytes(samples, switch, port, start_s, end_s)
        if sent > 0 and seconds > 0:
            capacity = float(data["capacity_mbps"]) * 1e6
            rows.append({"switch": switch, "port": port, "host": host, "bytes": sent,
                         "mbps": sent * 8 / seconds / 1e6, "busy": sent * 8 / seconds / capacity})
    return sorted(rows, key=lambda row: -row["busy"])


def uplink_rates(graph, samples):
    """Bytes per second each RDSW put on its fabric links, per sampling interval: ``{"t_s", "bytes_per_s"}``."""
    times = [sample["t_s"] for sample in samples]
    mids = _rates(times, [0] * len(times))[0]
    per_rdsw = {}
    for node in graph.nodes:
        if graph.nodes[node].get("role") != "rdsw":
            continue
        ports = [port_toward(data, node) for _, other, data in graph.edges(node, data=True)
                 if not is_host(graph, other)]
        totals = [sum(_cell(sample, node, EGRESS_COUNTER, port)[1] for port in ports) for sample in samples]
        _, rates = _rates([_read_at(sample, node) for sample in samples], totals)
        if any(rates):
            per_rdsw[node] = rates
    return {"t_s": mids, "bytes_per_s": per_rdsw}


def rate_changes(uplinks, failures, window, settle_s=SETTLE_S):
    """Each sending RDSW's uplink rate after each failure over its rate before it.

    Before: the sampling intervals (by their middle) inside the traffic window and
    before the failure; after: those from ``settle_s`` after it to the next failure
    or the window's end.

    Args:
        uplinks: :func:`uplink_rates`.
        failures: the run's ``failures`` rows.
        window: ``(start_s, end_s)`` when every traffic entry was sending.
        settle_s: time left for the control plane and the queues after a failure.

    Returns:
        list: ``[{"failure_index", "at_s", "rdsw": {name: {"before", "after", "ratio"}}, "before", "after",
        "ratio"}]`` (bytes/s; ``ratio`` None when nothing was sent before); the totals over every RDSW
        that sent before the failure (at least :data:`~testbed.experiment.counters.SENDER_SHARE` of the
        busiest one: not a receiver's credit grants).
    """
    rows = []
    applied = sorted((row["applied_at_s"], row["index"]) for row in failures if row.get("applied_at_s") is not None)
    times = uplinks["t_s"]
    start_s, end_s = window
    for position, (at, index) in enumerate(applied):
        end = min(applied[position + 1][0] if position + 1 < len(applied) else end_s, end_s)
        begin = max([start_s] + [earlier for earlier, _ in applied[:position]])
        before_idx = [i for i, t in enumerate(times) if begin <= t < at]
        after_idx = [i for i, t in enumerate(times) if at + settle_s <= t < end]
        per, total_before, total_after = {}, 0.0, 0.0
        befores = {rdsw: sum(rates[i] for i in before_idx) / len(before_idx) if before_idx else 0.0
                   for rdsw, rates in uplinks["bytes_per_s"].items()}
        senders = active_ends(befores)  # not the receivers' credit grants
        for rdsw, rates in uplinks["bytes_per_s"].items():
            before = befores[rdsw]
            after = sum(rates[i] for i in after_idx) / len(after_idx) if after_idx else 0.0
            if rdsw in senders:
                per[rdsw] = {"before": before, "after": after, "ratio": after / before}
                total_before += before
                total_after += after
        rows.append({"failure_index": index, "at_s": at, "rdsw": per, "before": total_before,
                     "after": total_after, "ratio": total_after / total_before if total_before else None})
    return rows


def traffic_window(spec, traffic_rows):
    """``(start_s, end_s)`` when every traffic entry of the run was sending, skipping the first second.

    Uses the entries' actual start times (``started_at_s``; senders start later than planned on a
    busy machine) and their planned durations; the first second is left out (the credit loop
    and the queues fill).
    """
    starts, ends = [], []
    for entry, row in zip(spec.traffic, traffic_rows):
        started = row.get("started_at_s")
        started = entry.start_s if started is None else started
        starts.append(started)
        ends.append(started + (entry.duration_s or spec.duration_s - entry.start_s))
    if not starts:
        return 0.0, spec.duration_s
    return max(starts) + 1.0, min(ends)


class FabricRecorder:
    """What a run on a DSF topology records (any mode): samples during the run, then the ``dsf`` section.

    Args:
        spec: the run's spec.
        fabric: the running :class:`~testbed.fabrics.Fabric`.
        clients: ``{switch: P4Runtime session}``.
    """

    def __init__(self, spec, fabric, clients):
        self.spec = spec
        self.graph = fabric.topo.graph()
        self.clients = clients
        self.switches = {switch.name: switch for switch in fabric.switches}
        self.sampler = None
        self.dsf_sampler = None
        self.cpu = SwitchCpu(fabric.switches)
        self.cpu_shares = {}

    def start(self, t0_ns):
        """Start sampling counters."""
        self.sampler = sampler_for(self.graph, self.clients, t0_ns)
        self.dsf_sampler = dsf_sampler_for(self.graph, self.switches, t0_ns, self.spec.duration_s)
        self.sampler.start()
        self.dsf_sampler.start()
        self.cpu.start()

    def stop(self):
        """Stop sampling and note the switches' CPU shares (safe to call twice, or without a start)."""
        if self.sampler is not None:
            if not self.cpu_shares:
                self.cpu_shares = self.cpu.shares()
            self.sampler.stop()
            self.dsf_sampler.stop()

    def section(self, record, controller):
        """The ``dsf`` section for a run's results ``record`` (links, failures, traffic; call after :meth:`stop`)."""
        samples = self.sampler.samples if self.sampler is not None else []
        dsf_samples = self.dsf_sampler.samples if self.dsf_sampler is not None else []
        section = dsf_section(self.spec, self.graph, record, samples, controller, dsf_samples)
        section["dsf_sample_interval_s"] = self.dsf_sampler.interval_s if self.dsf_sampler is not None else None
        section["sample_errors"] = (list(self.sampler.errors) + list(self.dsf_sampler.errors)
                                    if self.sampler is not None else [])
        section["switch_cpu"] = {name: round(share, 3) for name, share in sorted(self.cpu_shares.items())}
        return section


def dsf_section(spec, graph, record, samples, controller, dsf_samples=None):
    """The ``dsf`` section of results.json (see :mod:`testbed.experiment.results`).

    Args:
        spec: the run's spec.
        graph: the topology multigraph.
        record: the run's results so far (its ``links``, ``failures`` and ``traffic`` rows).
        samples: :class:`CounterSampler` samples of the egress counters.
        controller: the run's controller (its ``dsf`` record, if any).
        dsf_samples: samples of the DSF counters (default: ``samples``, when they hold both).
    """
    dsf_samples = samples if dsf_samples is None else dsf_samples
    rdsws = sorted(n for n in graph.nodes if graph.nodes[n].get("role") == "rdsw")
    parameters = {name: spec.mode_params.get(name, PARAMETERS[name].default)
                  for name in PARAMETERS if name.startswith("dsf_")}
    start_s, end_s = traffic_window(spec, record["traffic"])
    uplinks = uplink_rates(graph, samples)
    return {
        "parameters": parameters,
        "cell_bytes": parameters["dsf_cell_bytes"],
        "spray_policy": SPRAY_POLICY,
        "tiers": tier_loads(graph, record["links"]),
        "voq_depth": voq_depths(dsf_samples, rdsws),
        "credits": credit_rates(dsf_samples, rdsws),
        "host_ports": host_port_busy(graph, samples, start_s, end_s),
        "busy_window_s": [start_s, end_s],
        "uplink_rates": uplinks,
        "rate_changes": rate_changes(uplinks, record["failures"], (start_s, end_s)),
        "control": dict(getattr(controller, "dsf", None) or {}),
        "samples": len(samples),
        "dsf_samples": len(dsf_samples),
    }
