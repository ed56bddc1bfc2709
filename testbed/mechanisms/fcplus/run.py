"""What an FC+ run adds to its results: PFC counters per port and class, and the deadlocks the detector found.

During the run a thread reads every switch's pause state (the embedded
switch's ``pfc_status`` control request) every ``POLL_S`` and feeds the
:class:`~testbed.mechanisms.fcplus.detector.DeadlockDetector`
(``mode_params.deadlock_hold_ms``).  After it, results.json gets a ``pfc``
section: the detector's cycles (members ``[switch, port, class]`` and
times from the run's start), each port's counters (PAUSE frames sent and
received, resumes, paused time) and totals; ``testbed compare`` gets
``deadlocks`` and ``pause frames`` columns; the timeline marks each detection.
"""
import threading
import time

from testbed.embedded_switch.port_control import request
from testbed.experiment.results import NUMBER, OrNull
from testbed.mechanisms.fcplus.detector import DeadlockDetector
from testbed.mechanisms.hooks import Column, RunHooks
from testbed.modes import PARAMETERS

POLL_S = 0.1
COUNTERS = ("pause_sent", "pause_received", "resume_sent", "resume_received", "paused_ns")

PFC_SCHEMA = {
    "hold_ms": int, "polls": int, "poll_errors": [str],
    "deadlocks": [{"members": [list], "since_s": NUMBER, "detected_s": NUMBER, "last_seen_s": NUMBER}],
    "ports": dict,      # {switch: {port: {counter: [8 values per class]}}}
    # {counter: int} over every port and class; dropped_headroom (lossless drops), queue_dropped (every
    # traffic-manager drop, lossy classes too), pipeline_drops (packets the program dropped)
    "totals": dict,
}


def fabric_links(graph):
    """``{(switch, port): (neighbour, neighbour port)}`` of the switch-to-switch links of a topology graph."""
    links = {}
    for a, b, data in graph.edges(data=True):
        if graph.nodes[a].get("role") == "host" or graph.nodes[b].get("role") == "host":
            continue
        links[(data["a"], data["a_port"])] = (data["b"], data["b_port"])
        links[(data["b"], data["b_port"])] = (data["a"], data["a_port"])
    return links


class PauseRecorder:
    """Polls the switches' pause state during the run and runs the deadlock detector on it.

    Args:
        spec: the run's spec.
        fabric: the running fabric (embedded switches with control sockets).
    """

    def __init__(self, spec, fabric):
        hold_ms = (spec.mode_params or {}).get("deadlock_hold_ms", PARAMETERS["deadlock_hold_ms"].default)
        self.hold_ms = int(hold_ms)
        self.controls = {switch.name: switch.control_path for switch in fabric.switches
                         if getattr(switch, "control_path", None)}
        self.detector = DeadlockDetector(fabric_links(fabric.topo.graph()), self.hold_ms * 1_000_000)
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
        for name, path in sorted(self.controls.items()):
            try:
                answer = request(path, {"command": "pfc_status"}, timeout=2.0)
            except Exception as error:  # noqa: BLE001 - a crashed switch; recorded
                if len(self.errors) < 20:
                    self.errors.append(f"{name}: {error}")
                continue
            if "ports" not in answer:
                continue
            snapshot[name] = {int(port): stats for port, stats in answer["ports"].items()}
            now = answer["now_ns"] if now is None else max(now, answer["now_ns"])
        if now is not None:
            self.detector.observe(snapshot, now)
            self.last = snapshot
            self.polls += 1

    def stop(self):
        """Stop polling, after one last read (safe to call twice)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10)
            self._thread = None
            self.poll()

    def section(self):
        """The ``pfc`` section."""
        t0_monotonic = (self._t0_ns or 0) - self._offset_ns
        ports, totals = {}, dict.fromkeys(COUNTERS + ("dropped_headroom", "queue_dropped", "pipeline_drops"), 0)
        for switch, by_port in sorted(self.last.items()):
            ports[switch] = {}
            for port, stats in sorted(by_port.items()):
                ports[switch][str(port)] = {name: list(stats[name]) for name in COUNTERS}
                for name in COUNTERS:
                    totals[name] += sum(stats[name])
                ports[switch][str(port)]["dropped_headroom"] = stats["dropped_headroom"]
                totals["dropped_headroom"] += stats["dropped_headroom"]
                totals["queue_dropped"] += stats.get("queue", {}).get("dropped", 0)
                totals["pipeline_drops"] += stats.get("pipeline_drops", 0)
        return {"hold_ms": self.hold_ms, "polls": self.polls, "poll_errors": list(self.errors),
                "deadlocks": self.detector.report(t0_monotonic), "ports": ports, "totals": totals}


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

    results_schema = {"pfc": OrNull(PFC_SCHEMA)}
    initial_results = {"pfc": None}
    event_styles = {"deadlock": ("PFC deadlock detected", "tab:red", "--")}
    columns = (Column("deadlocks", "deadlocks", "{}", _deadlocks),
               Column("lossless_drops", "lossless drops", "{}", _lossless_drops),
               Column("pause_frames", "pause frames", "{}", _pause_frames))

    def recorder(self, spec, fabric, readers):
        """Poll the switches' pause state during the run."""
        return PauseRecorder(spec, fabric)

    def results(self, record, run, recorder=None):
        """The ``pfc`` section."""
        if recorder is not None:
            record["pfc"] = recorder.section()

    def timeline_events(self, record):
        """Each deadlock cycle, when the detector found it."""
        section = record.get("pfc") or {}
        rows = [(row["detected_s"], f"cycle of {len(row['members'])}") for row in section.get("deadlocks", [])]
        return {"deadlock": rows} if rows else {}
