"""The F10 controller of a running fabric: programs p4src/f10.p4, starts the trigger, collects detector reports.

F10 reacts to failures in the data plane (the detector and the backups of
p4src/f10.p4); the controller's part (seed 002, section 5) is what a switch
cannot do alone:

* at start: the pipeline, the primary routes and the detector parameters
  (:class:`~testbed.controllers.kinds.StaticController`'s programming), the
  backups, detour groups, port roles, probe group and report session
  (:mod:`testbed.controllers.f10.programming`), and every switch's trigger:
  its packet generator (the embedded target) or injector (BMv2) sends the
  trigger frame every probe period;
* while running: every detector transition arrives as a PacketIn and is kept
  with the switch's timestamp (:attr:`F10Controller.transitions`); a failure
  the caller reports (:meth:`notify`) is matched with the first transition of
  one of its ports after it, which gives the detection time
  (:attr:`F10Controller.detections`).  The controller does not reroute: a
  failure it is told of changes nothing in the switches.  With ``pushback``
  each link a detector reports down or up sets off F10's pushback
  (:mod:`testbed.controllers.f10.pushback`), which the controller installs.

Detection time is measured on the switch's own clock where the target tells
its origin (the embedded target, on CLOCK_MONOTONIC like the failure's
``applied_monotonic_ns``): the instant the detector declared the port down,
free of the time its report took to reach the controller (also kept, as
``reported_s``).  On BMv2, whose timestamps count from an unknown start, the
report's arrival is all there is.
"""
import threading
import time

from testbed.controllers.f10.programming import program_fabric
from testbed.controllers.f10.pushback import PushbackAgent
from testbed.controllers.f10.rescheduler_options import DEFAULT_RECOVERED_HOLDDOWN_MS, rescheduler_options
from testbed.controllers.f10.routes import plan_fabric
from testbed.controllers.contract import DEFAULT_DETECTION_DELAY_MS
from testbed.controllers.kinds import StaticController
from testbed.errors import ParameterError, TestbedError
from testbed.mechanisms.f10 import PACKET_GENERATOR_PORT
from testbed.modes import PARAMETERS
from testbed.topologies.graph import node_pair, port_toward

TRIGGER_APP = 0
REPORT_DETECTOR = 1  # packet_in.reason of a detector transition
#: the trigger frame (p4src/include/f10_headers.p4): Ethernet with EtherType 0x88B6, the 4-byte
#: trigger header (app 0), padded to the 60-byte minimum frame
TRIGGER_FRAME = bytes.fromhex("ffffffffffff" "000000000000" "88b6") + bytes(46)


class F10Controller(StaticController):
    """Programs an F10 fabric and records what its detectors report.

    Args:
        detection_delay_ms: unused by F10 (the data plane detects); kept for the common interface.
        monitored_switches: run the detector and probes only on these switches and only on the
            links between two of them (None: every switch and link).  Probing every link costs
            CPU in proportion to links / probe period; a short probe period fits a few links.
        pushback: run F10's pushback on the detectors' reports
            (:class:`~testbed.controllers.f10.pushback.PushbackAgent`; its records are
            :attr:`pushbacks`).
        rescheduler_epoch_ms: run F10's epoch rescheduler with this epoch (None: off); its actions
            are :attr:`reschedules` (:mod:`testbed.controllers.f10.rescheduler_app`).
        recovered_holddown_ms: how long the rescheduler gives a recovered link no weight.
    """

    kind = "f10"

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS, monitored_switches=None, pushback=False,
                 rescheduler_epoch_ms=None, recovered_holddown_ms=DEFAULT_RECOVERED_HOLDDOWN_MS):
        super().__init__(detection_delay_ms, react=False)
        self.rescheduler_options = rescheduler_options(rescheduler_epoch_ms, recovered_holddown_ms)
        self.rescheduler = None
        self.monitored_switches = None if monitored_switches is None else set(monitored_switches)
        self.pushback = bool(pushback)
        self._pushback_agent = None
        self.transitions = []
        self.detections = []
        self.f10_entries_written = 0
        self._failures = []
        self._detected = set()  # ids of the failures already matched
        self._port_links = {}  # (switch, port) -> frozenset link
        self._stop = threading.Event()
        self._listeners = []
        self._lock = threading.Lock()
        self._clock_origins = {}  # switch -> CLOCK_MONOTONIC ns of its timestamps' zero (known ones)
        self._switches = []
        #: {switch: the latest its trigger went out after its due time, us} (embedded target, at stop):
        #: a detector decides on the trigger, so its decisions are late by as much on a busy machine
        self.trigger_late_max_us = {}
        #: {switch: trigger periods the generator skipped, and triggers it generated} (embedded target, at stop):
        #: a skipped period is one in which the detector neither probed nor decided
        self.trigger_skipped = {}
        self.trigger_generated = {}
        #: {switch: the most trigger periods it skipped in a row} (embedded target, at stop): that long
        #: its neighbours got no probe from it, so their detectors may have seen a silent window
        self.trigger_skipped_run_max = {}

    def start(self, network, pipeline, mode_params, required_params=(), **options):
        """Program everything, start the listeners and the triggers.

        Args:
            network: the running :class:`~testbed.emulation.network.FabricNetwork`.
            pipeline: the f10.p4 pipeline.
            mode_params: ``{name: int}`` (the detector parameters; defaults for the others).
            required_params: names the program must carry.
        """
        super().start(network, pipeline, mode_params, required_params, **options)
        self.notes = [note for note in self.notes if not note.startswith("controller.kind none")]
        self.notes.append("f10: the data plane detects failures and reroutes; the controller does not reroute")
        graph = self.programmer.graph
        for u, v, data in graph.edges(data=True):
            for node in (u, v):
                self._port_links[(node, port_toward(data, node))] = node_pair(u, v)
        monitored = self.monitored_switches
        unknown = sorted((monitored or set()) - set(self.programmer.clients))
        if unknown:
            raise ParameterError("monitored_switches", unknown[0], "switches of the fabric")
        plans = plan_fabric(graph)
        if monitored is not None:
            for name, plan in plans.items():
                plan.fabric_ports = [port for port in plan.fabric_ports
                                     if name in monitored and _neighbor(graph, name, port) in monitored]
        cpu_ports = {switch.name: switch.cpu_port for switch in network.switches}
        self._switches = list(network.switches)
        for switch in network.switches:
            origin = switch.clock_origin_ns()
            if origin is not None:
                self._clock_origins[switch.name] = origin
        self.f10_entries_written = program_fabric(self.programmer, cpu_ports, plans)
        self.entries_written += self.f10_entries_written
        if self.pushback:
            self._pushback_agent = PushbackAgent(graph, self.programmer)
        for name, client in sorted(self.programmer.clients.items()):
            thread = threading.Thread(target=self._listen, args=(name, client), name=f"f10-reports-{name}",
                                      daemon=True)
            thread.start()
            self._listeners.append(thread)
        period_us = mode_params.get("probe_period_us", PARAMETERS["probe_period_us"].default)
        for switch in network.switches:
            if monitored is None or switch.name in monitored:
                switch.set_packet_generator(TRIGGER_APP, PACKET_GENERATOR_PORT, period_us, TRIGGER_FRAME)
        if self.rescheduler_options is not None:
            # imported here: os-ken (about 0.5 s to import) only when the rescheduler runs
            from testbed.controllers.f10.rescheduler_app import start_rescheduler

            self.rescheduler = start_rescheduler(self.programmer, transitions=self.transitions,
                                                 **self.rescheduler_options)

    @property
    def reschedules(self):
        """The rescheduler's actions (rows for results.json; empty when it is off)."""
        return self.rescheduler.actions() if self.rescheduler is not None else []

    @property
    def reschedule_epochs(self):
        """The rescheduler's epoch summaries (rows for results.json; empty when it is off)."""
        return self.rescheduler.epochs() if self.rescheduler is not None else []

    def results(self, t0_ns):
        """The rows of F10's part of results.json's ``controller`` section (times relative to ``t0_ns``).

        ``detections``, ``transitions`` (``at_s``: the report's arrival; ``switch_at_s``: the transition on
        the switch's clock, or None), ``pushbacks``, ``reschedules``, ``reschedule_epochs`` (the
        rescheduler's epoch summaries: flows measured, paths pinned), ``trigger_late_max_us``,
        ``trigger_skipped``, ``trigger_skipped_run_max`` and ``trigger_generated`` (schema:
        :mod:`testbed.mechanisms.f10.run`).
        """
        def since_t0(ns):
            return (ns - t0_ns) / 1e9 if t0_ns else None

        wall_minus_monotonic_ns = time.time_ns() - time.monotonic_ns()
        with self._lock:
            transitions = [dict({key: value for key, value in row.items()
                                 if key not in ("received_ns", "event_monotonic_ns")},
                                at_s=since_t0(row["received_ns"]),
                                switch_at_s=since_t0(row["event_monotonic_ns"] + wall_minus_monotonic_ns)
                                if row.get("event_monotonic_ns") is not None else None)
                           for row in self.transitions]
            detections = list(self.detections)
        return {"detections": detections, "transitions": transitions,
                "pushbacks": [dict({key: value for key, value in row.items() if key != "at_ns"},
                                   at_s=since_t0(row["at_ns"])) for row in self.pushbacks],
                "reschedules": [dict({key: value for key, value in row.items() if key != "time_ns"},
                                     at_s=since_t0(row["time_ns"])) for row in self.reschedules],
                "reschedule_epochs": [dict({key: value for key, value in row.items() if key != "time_ns"},
                                           at_s=since_t0(row["time_ns"])) for row in self.reschedule_epochs],
                "trigger_late_max_us": dict(self.trigger_late_max_us),
                "trigger_skipped": dict(self.trigger_skipped), "trigger_generated": dict(self.trigger_generated),
                "trigger_skipped_run_max": dict(self.trigger_skipped_run_max)}

    def _listen(self, switch, client):
        """Keep the detector reports a switch sends (a thread per switch)."""
        while not self._stop.is_set():
            packet = client.get_packet_in(timeout=0.5)
            if packet is None or packet.metadata.get("reason") != REPORT_DETECTOR:
                continue
            received_ns = time.time_ns()
            meta = packet.metadata
            origin = self._clock_origins.get(switch)
            row = {"switch": switch, "port": meta["port"], "status": "up" if meta["status"] else "down",
                   "switch_time_us": meta["timestamp_us"], "frames": meta["frames"],
                   "holddown_us": meta["holddown_us"], "backoff_level": meta["backoff_level"],
                   "received_ns": received_ns,
                   # the transition on CLOCK_MONOTONIC (None when the target does not tell its origin)
                   "event_monotonic_ns": None if origin is None else origin + meta["timestamp_us"] * 1000,
                   "link": sorted(self._port_links.get((switch, meta["port"]), ()))}
            with self._lock:
                self.transitions.append(row)
                self._match(row)
            if self.rescheduler is not None:
                self.rescheduler.links_changed()
            if self._pushback_agent is not None:
                self._pushback_agent.port_changed(switch, meta["port"], row["link"], down=row["status"] == "down")

    @property
    def pushbacks(self):
        """Records of the pushback each link change set off (empty without ``pushback``)."""
        return list(self._pushback_agent.records) if self._pushback_agent is not None else []

    def notify(self, failure):
        """Record a failure (F10 does not reroute on it); its detection is matched with the reports."""
        super().notify(failure)
        if self.rescheduler is not None:
            self.rescheduler.notify(failure)
        with self._lock:
            self._failures.append(failure)
            for row in list(self.transitions):
                self._match(row)

    def _match(self, row):
        """Pair a transition with the latest failure of its link before it (first transition wins)."""
        link = frozenset(row["link"])
        for failure in reversed(self._failures):
            if failure.applied_ns > row["received_ns"]:
                continue
            links = {frozenset(failure.link)} if failure.link else \
                {pair for pair in failure.failed_links if failure.switch in pair}
            wanted = "up" if failure.action == "link_up" else "down"
            if link in links and row["status"] == wanted:
                if id(failure) in self._detected:
                    return
                self._detected.add(id(failure))
                reported_s = (row["received_ns"] - failure.applied_ns) / 1e9
                on_switch_clock = row["event_monotonic_ns"] is not None and bool(failure.applied_monotonic_ns)
                detected_s = ((row["event_monotonic_ns"] - failure.applied_monotonic_ns) / 1e9
                              if on_switch_clock else reported_s)
                self.detections.append({"failure_index": failure.index,
                                        "action": failure.action, "switch": row["switch"], "port": row["port"],
                                        "detection_s": detected_s, "reported_s": reported_s,
                                        "clock": "switch" if on_switch_clock else "controller"})
                return

    def stop(self):
        """Keep the triggers' lateness and counts, stop the rescheduler and the listeners, then the sessions (safe
        twice)."""
        if self.rescheduler is not None:
            self.rescheduler.stop()
        for switch in self._switches:
            try:
                status = switch.packet_generator_status().get(TRIGGER_APP)
            except (AttributeError, TestbedError):
                continue  # BMv2 (an injector, no such status) or a switch that is gone
            if status is not None:
                self.trigger_late_max_us[switch.name] = status["late_max_us"]
                self.trigger_skipped[switch.name] = status["skipped"]
                self.trigger_generated[switch.name] = status["generated"]
                self.trigger_skipped_run_max[switch.name] = status["skipped_run_max"]
        self._switches = []
        self._stop.set()
        for thread in self._listeners:
            thread.join(timeout=5)
        self._listeners = []
        super().stop()


def _neighbor(graph, switch, port):
    """The node on the other end of ``switch``'s ``port``."""
    for _, other, data in graph.edges(switch, data=True):
        if port_toward(data, switch) == port:
            return other
    return None
