"""What an FC+ run adds to its results: PFC counters per port and class, and the deadlocks the detector found.

During the run a thread reads every switch's pause state (the embedded
switch's ``pfc_status`` control request) every ``POLL_S`` and feeds the
:class:`~testbed.mechanisms.fcplus.detector.DeadlockDetector`
(``mode_params.deadlock_hold_ms``).  After it, results.json gets a ``pfc``
section: the detector's cycles (members ``[switch, port, class]`` and
times from the run's start), each port's counters (PAUSE frames sent and
received, resumes, paused time) and totals; ``testbed compare`` gets
``deadlocks`` and ``pause frames`` columns; the timeline marks each detection.

Beside the emulated figures, ``fcplus_lp`` holds the throughput LP
(:func:`~testbed.topologies.fcplus.throughput.routing_throughput`) of the run's
topology and routing for all-to-all, uniform random and near-worst-case traffic
(fractions of a server's line rate, every link as fast as a server's), and
``testbed compare`` prints them beside the completion times of the all-to-all
and permutation collectives (``fcplus_comparison.png`` draws both).
"""
import os
import threading
import time

from testbed.embedded_switch.port_control import request
from testbed.experiment.plots import metric_bars, plt, rows_with_runs
from testbed.experiment.results import NUMBER, OPT_INT, OrNull
from testbed.mechanisms.fcplus.detector import DeadlockDetector
from testbed.mechanisms.hooks import Column, RunHooks
from testbed.modes import PARAMETERS
from testbed.topologies.fcplus.throughput import TRAFFIC_PATTERNS, routing_throughput
from testbed.traffic.pause import DATA_PRIORITY

POLL_S = 0.1
#: the classes RoCE data travels in: the hosts' own and the two a down-up turn may move it to (N_lp <= 3)
DATA_CLASSES = range(DATA_PRIORITY, DATA_PRIORITY + 3)
#: after the traffic, how long the recorder waits for the switches' queues to empty, and how long
#: without a departure counts as stuck (a deadlock never drains)
DRAIN_TIMEOUT_S = 10.0
DRAIN_STUCK_S = 1.5
COUNTERS = ("pause_sent", "pause_received", "resume_sent", "resume_received", "paused_ns")
#: per port and class, kept in results.json beside the counters (not summed: departures and what waits)
QUEUE_COUNTS = ("dequeued", "queued")

PFC_SCHEMA = {
    "hold_ms": int, "polls": int, "poll_errors": [str],
    "deadlocks": [{"members": [list], "since_s": NUMBER, "detected_s": NUMBER, "last_seen_s": NUMBER}],
    "ports": dict,      # {switch: {port: {counter: [8 values per class]}}}
    # {counter: int} over every port and class; dropped_headroom (lossless drops), queue_dropped (every
    # traffic-manager drop, lossy classes too), pipeline_drops (packets the program dropped)
    "totals": dict,
    "settings": dict,   # {switch: the PFC settings the switch reports, or None with PFC off}
    # where every RoCE data packet the hosts sent went (see PauseRecorder.accounting)
    "accounting": OrNull({"sent": int, "received": int, "duplicates": int, "lost": int,
                          "delivered_to_hosts": int, "reached_host_not_received": int,
                          "held_in_switches": int, "dropped_in_switches": int, "unexplained": int,
                          "emulator_drops": int, "host_interface_drops": OPT_INT, "psn_gaps": OPT_INT,
                          "drain_s": NUMBER, "drained": bool}),
}
LP_SCHEMA = {"routing": str, "k": int, "n_lp": int, "seed": int, "theta": dict, "seconds": NUMBER}
#: the collectives whose completion times a comparison shows (traffic patterns of the spec)
COMPLETION_PATTERNS = ("alltoall", "permutation")


def fabric_links(graph):
    """``{(switch, port): (neighbour, neighbour port)}`` of the switch-to-switch links of a topology graph."""
    links = {}
    for a, b, data in graph.edges(data=True):
        if graph.nodes[a].get("role") == "host" or graph.nodes[b].get("role") == "host":
            continue
        links[(data["a"], data["a_port"])] = (data["b"], data["b_port"])
        links[(data["b"], data["b_port"])] = (data["a"], data["a_port"])
    return links


def held_data(snapshot):
    """Data packets waiting in the queues of a ``{switch: {port: pfc_status stats}}`` snapshot."""
    return sum(stats["queued"][klass] for by_port in snapshot.values() for stats in by_port.values()
               for klass in DATA_CLASSES)


def delivered_data(snapshot, host_ports):
    """Data packets the switches of ``snapshot`` sent out of ``host_ports`` (``{(switch, port)}``)."""
    return sum(snapshot[switch][port]["dequeued"][klass] for switch, port in host_ports
               if port in snapshot.get(switch, {}) for klass in DATA_CLASSES)


def interface_drops(proc_net_dev):
    """Frames dropped on receive and send over the interfaces (not ``lo``) of a ``/proc/net/dev`` text.

    >>> interface_drops('''Inter-|   Receive  |  Transmit
    ...  face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier cmp
    ...     lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
    ...  h1-eth0: 5000 40 0 3 0 0 0 0 9000 70 0 1 0 0 0 0''')
    4
    """
    total = 0
    for line in proc_net_dev.splitlines():
        name, colon, rest = line.partition(":")
        fields = rest.split()
        if not colon or name.strip() == "lo" or len(fields) < 12 or not fields[0].isdigit():
            continue
        total += int(fields[3]) + int(fields[11])
    return total


def data_accounting(traffic, snapshot, host_ports):
    """Where the hosts' RoCE data packets went: the traffic rows against the switches' counters.

    ``lost`` (sent and never received; duplicates count as received) splits into
    ``reached_host_not_received`` (a ToR sent them to their host, whose receiver did not
    count them: it had stopped, the fabric draining after the traffic's linger, or the
    host dropped them: ``overload.receiver_socket_drops``, and ``host_interface_drops``, frames of
    any kind the hosts' kernels dropped on their interfaces), ``held_in_switches``
    (still queued, as behind a deadlock), ``dropped_in_switches`` (the queues' drops, lossless
    headroom overruns included) and ``unexplained`` (the rest: lost between a sender and its
    ToR or between two switches, which the switches' class counters do not see; the
    emulator's socket drops and failed sends, ``emulator_drops``, count such frames of
    any class).

    Args:
        traffic: results.json's ``traffic`` rows.
        snapshot: the switches' last ``pfc_status`` ports, ``{switch: {port: stats}}``.
        host_ports: ``{(switch, port)}`` toward hosts.

    Returns:
        dict: the counts above and ``sent``, ``received``, ``duplicates``, ``delivered_to_hosts``.

    Ten sent, seven received, one still queued, two sent to a host after its receiver stopped:

    >>> zeros = [0] * 8
    >>> snapshot = {"tor0": {1: dict(queued=zeros, dequeued=[0, 9] + zeros[2:], queue={"dropped": 0}),
    ...                      3: dict(queued=[0, 1] + zeros[2:], dequeued=zeros, queue={"dropped": 0})}}
    >>> row = {"sent_packets": 10, "received_packets": 7, "duplicates": 0}
    >>> counts = data_accounting([row], snapshot, {("tor0", 1)})
    >>> [counts[key] for key in ("lost", "reached_host_not_received", "held_in_switches", "unexplained")]
    [3, 2, 1, 0]
    """
    rows = [row for row in traffic if row.get("sent_packets") is not None]
    sent = sum(row["sent_packets"] for row in rows)
    received = sum(row["received_packets"] or 0 for row in rows)
    duplicates = sum(row.get("duplicates") or 0 for row in rows)
    delivered, held = delivered_data(snapshot, host_ports), held_data(snapshot)
    # the queue's ``dropped`` counts every drop of the port's queue, lossless (headroom) ones included
    dropped = sum(stats.get("queue", {}).get("dropped", 0) for by_port in snapshot.values()
                  for stats in by_port.values())
    return {"sent": sent, "received": received, "duplicates": duplicates, "lost": sent - received - duplicates,
            "delivered_to_hosts": delivered, "reached_host_not_received": delivered - received - duplicates,
            "held_in_switches": held, "dropped_in_switches": dropped,
            "unexplained": sent - delivered - held - dropped}


class PauseRecorder:
    """Polls the switches' pause state during the run and runs the deadlock detector on it.

    Args:
        spec: the run's spec.
        fabric: the running fabric (embedded switches with control sockets).
    """

    def __init__(self, spec, fabric):
        hold_ms = (spec.mode_params or {}).get("deadlock_hold_ms", PARAMETERS["deadlock_hold_ms"].default)
        self.hold_ms = int(hold_ms)
        # (socket, how a request gets there): a switch on another server is asked there, through its
        # server's control relay
        self.controls = {switch.name: (switch.control_path, getattr(switch, "control_via", None))
                         for switch in fabric.switches if getattr(switch, "control_path", None)}
        graph = fabric.topo.graph()
        self.detector = DeadlockDetector(fabric_links(graph), self.hold_ms * 1_000_000)
        # (switch, port) of every switch port toward a host: where data leaves the fabric
        self.host_ports = {(data["b"], data["b_port"]) if graph.nodes[data["a"]].get("role") == "host"
                           else (data["a"], data["a_port"])
                           for a, b, data in graph.edges(data=True)
                           if "host" in (graph.nodes[a].get("role"), graph.nodes[b].get("role"))}
        self.drain_s = None
        self.drained = None
        self.settings = {}   # switch -> the PFC settings it reports (None: PFC off)
        self.hosts = list(fabric.hosts)
        self.host_drops = None
        self.last = {}
        self.polls = 0
        self.errors = []
        self._stop = threading.Event()
        self._thread = None
        self._offset_ns = time.time_ns() - time.monotonic_ns()   # monotonic -> wall clock
        self._t0_ns = None

    def start(self, t0_ns):
        """Start polling; ``t0_ns`` is the run's time zero (wall clock)."""
        self._t0_ns = t0_ns
        self._thread = threading.Thread(target=self._run, name="pfc-deadlock-detector", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(POLL_S):
            self.poll()

    def poll(self):
        """Read every switch once and give the snapshot to the detector."""
        snapshot, now = {}, None
        for name, (path, via) in sorted(self.controls.items()):
            try:
                answer = request(path, {"command": "pfc_status"}, timeout=2.0, via=via)
            except Exception as error:  # noqa: BLE001 - a crashed switch; recorded
                if len(self.errors) < 20:
                    self.errors.append(f"{name}: {error}")
                continue
            if "ports" not in answer:
                continue
            snapshot[name] = {int(port): stats for port, stats in answer["ports"].items()}
            self.settings[name] = answer.get("pfc")
            now = answer["now_ns"] if now is None else max(now, answer["now_ns"])
        if now is not None:
            self.detector.observe(snapshot, now)
            self.last = snapshot
            self.polls += 1

    def stop(self):
        """Stop polling once the switches hold no data (or it stopped draining); safe to call twice.

        The traffic is over when this is called, but packets held by PFC may still be
        in the switches: they are waited for (at most :data:`DRAIN_TIMEOUT_S`, and
        :data:`DRAIN_STUCK_S` without a departure, as in a deadlock), so that the
        last read counts every data packet as delivered, held or dropped.
        """
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=10)
        self._thread = None
        started = time.monotonic()
        self.poll()
        last_change, last_state = started, None
        while self.held_data() and time.monotonic() - started < DRAIN_TIMEOUT_S:
            state = (self.held_data(), self.delivered_data())
            if state != last_state:
                last_change, last_state = time.monotonic(), state
            elif time.monotonic() - last_change > DRAIN_STUCK_S:
                break
            time.sleep(POLL_S)
            self.poll()
        self.drain_s = time.monotonic() - started
        self.drained = self.held_data() == 0
        self.host_drops = self._host_interface_drops()

    def _host_interface_drops(self):
        """Frames the hosts' kernels dropped on their interfaces (any kind), or None if unreadable."""
        try:
            return sum(interface_drops(host.cmd("cat /proc/net/dev")) for host in self.hosts)
        except Exception:  # noqa: BLE001 - a host gone with a failed run: nothing to read
            return None

    def held_data(self):
        """Data packets waiting in the switches' queues at the last read."""
        return held_data(self.last)

    def delivered_data(self):
        """Data packets the switches sent out of their host ports up to the last read."""
        return delivered_data(self.last, self.host_ports)

    def accounting(self, traffic, emulator_drops=0, psn_gaps=None):
        """:func:`data_accounting` of the last read, with how long the drain took.

        Args:
            traffic: results.json's ``traffic`` rows.
            emulator_drops: frames (any class) the switches' sockets dropped or could not send.
            psn_gaps: packets the stream receivers found missing between two they received (lost in
                mid-stream, not at the end), None without streams.
        """
        return dict(data_accounting(traffic, self.last, self.host_ports), emulator_drops=int(emulator_drops),
                    host_interface_drops=self.host_drops,
                    psn_gaps=psn_gaps, drain_s=self.drain_s if self.drain_s is not None else 0.0,
                    drained=bool(self.drained))

    def section(self):
        """The ``pfc`` section."""
        t0_monotonic = (self._t0_ns or 0) - self._offset_ns
        ports, totals = {}, dict.fromkeys(COUNTERS + ("dropped_headroom", "queue_dropped", "pipeline_drops"), 0)
        for switch, by_port in sorted(self.last.items()):
            ports[switch] = {}
            for port, stats in sorted(by_port.items()):
                ports[switch][str(port)] = {name: list(stats[name]) for name in COUNTERS + QUEUE_COUNTS}
                for name in COUNTERS:
                    totals[name] += sum(stats[name])
                ports[switch][str(port)]["dropped_headroom"] = stats["dropped_headroom"]
                totals["dropped_headroom"] += stats["dropped_headroom"]
                totals["queue_dropped"] += stats.get("queue", {}).get("dropped", 0)
                totals["pipeline_drops"] += stats.get("pipeline_drops", 0)
        return {"hold_ms": self.hold_ms, "polls": self.polls, "poll_errors": list(self.errors),
                "deadlocks": self.detector.report(t0_monotonic), "ports": ports, "totals": totals,
                "settings": dict(sorted(self.settings.items())), "accounting": None}


def lp_section(topo, routing, seed):
    """``fcplus_lp``: the throughput LP of the topology's ToR graph under ``routing`` for every pattern.

    Args:
        topo: the run's FC+, FC or Clos topology (with ``tor_graph()``).
        routing: the controller's ``{"routing", "k", "n_lp"}``.
        seed: the seed of the uniform random matrix (the run's).
    """
    started = time.monotonic()
    graph = topo.tor_graph()
    theta = {pattern: routing_throughput(graph, routing["routing"], pattern, k=routing["k"], n_lp=routing["n_lp"],
                                         seed=seed)["theta"] for pattern in TRAFFIC_PATTERNS}
    return {"routing": routing["routing"], "k": routing["k"], "n_lp": routing["n_lp"], "seed": seed,
            "theta": theta, "seconds": time.monotonic() - started}


def _lp(pattern):
    return lambda results: ((results.get("fcplus_lp") or {}).get("theta") or {}).get(pattern)


def _completion(pattern):
    def value(results):
        times = [row["completion_time_s"] for row in results.get("traffic", [])
                 if row.get("pattern") == pattern and row.get("completion_time_s") is not None]
        return max(times) if times else None
    return value


def _accounted(key):
    return lambda results: ((results.get("pfc") or {}).get("accounting") or {}).get(key)


def _deadlocks(results):
    section = results.get("pfc")
    return len(section["deadlocks"]) if section else None


def _pause_frames(results):
    section = results.get("pfc")
    return section["totals"]["pause_sent"] if section else None


def _lossless_drops(results):
    section = results.get("pfc")
    return section["totals"]["dropped_headroom"] if section else None


class FCPlusHooks(RunHooks):
    """FC+'s measurements (see the module docstring)."""

    results_schema = {"pfc": OrNull(PFC_SCHEMA), "fcplus_lp": OrNull(LP_SCHEMA)}
    initial_results = {"pfc": None, "fcplus_lp": None}
    event_styles = {"deadlock": ("PFC deadlock detected", "tab:red", "--")}
    columns = (Column("deadlocks", "deadlocks", "{}", _deadlocks),
               Column("lossless_drops", "lossless drops", "{}", _lossless_drops),
               Column("pause_frames", "pause frames", "{}", _pause_frames),
               Column("lost_at_host", "lost: reached host", "{}",
                      _accounted("reached_host_not_received")),
               Column("lost_held", "lost: held in switches", "{}", _accounted("held_in_switches")),
               Column("lost_unexplained", "lost: unexplained", "{}", _accounted("unexplained"))) + tuple(
        Column(f"completion_{pattern}_s", f"{pattern} s", "{:.2f}", _completion(pattern))
        for pattern in COMPLETION_PATTERNS) + tuple(
        Column(f"lp_{pattern.replace('-', '_')}", f"LP {pattern}", "{:.3f}", _lp(pattern))
        for pattern in TRAFFIC_PATTERNS)

    def recorder(self, spec, fabric, readers):
        """Poll the switches' pause state during the run."""
        return PauseRecorder(spec, fabric)

    def results(self, record, run, recorder=None):
        """The ``pfc`` section."""
        if recorder is not None:
            record["pfc"] = recorder.section()
            drops = (record.get("dataplane") or {}).get("drops") or {}
            gaps = [report["psn_gap_losses"] for report in run.reports or []
                    if report is not None and report.get("psn_gap_losses") is not None]
            record["pfc"]["accounting"] = recorder.accounting(record.get("traffic", []),
                                                              drops.get("emulator", 0) + drops.get("tx_errors", 0),
                                                              sum(gaps) if gaps else None)
        routing = getattr(run.controller, "routing", None)
        if routing and run.fabric is not None and hasattr(run.fabric.topo, "tor_graph"):
            record["fcplus_lp"] = lp_section(run.fabric.topo, routing, run.spec.seed)

    def timeline_events(self, record):
        """Each deadlock cycle, when the detector found it."""
        section = record.get("pfc") or {}
        rows = [(row["detected_s"], f"cycle of {len(row['members'])}") for row in section.get("deadlocks", [])]
        return {"deadlock": rows} if rows else {}

    def comparison_plots(self, rows, runs_by_label, out_dir, title):
        """``fcplus_comparison.png``: goodput, the collectives' completion times and the LP throughput per row."""
        rows, labels, colours = rows_with_runs(rows, runs_by_label)
        if not rows:
            return []
        keys = [("goodput_mbps", "goodput (Mbit/s)")] + [
            (f"completion_{pattern}_s", f"{pattern}: completion (s)") for pattern in COMPLETION_PATTERNS] + [
            (f"lp_{pattern.replace('-', '_')}", f"LP throughput, {pattern}") for pattern in TRAFFIC_PATTERNS]
        figure, axes = plt.subplots(2, 3, figsize=(12, 7))
        try:
            for axis, (key, heading) in zip(axes.flat, keys):
                metric_bars(axis, rows, key, colours, heading)
            figure.suptitle(f"{title}: emulated (top) and LP (bottom)")
            figure.tight_layout()
            figure.savefig(os.path.join(out_dir, "fcplus_comparison.png"), dpi=110)
        finally:
            plt.close(figure)
        return ["fcplus_comparison.png"]
