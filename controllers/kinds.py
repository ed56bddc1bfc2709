"""The routing controllers every mechanism builds on, behind the interface of :mod:`testbed.controllers.contract`.

The load-balancing mechanism declares them (``testbed/mechanisms/lb``); other
mechanisms' controllers (F10's, DSF's) extend them:

* ``static``: :class:`StaticController` runs the project's
  :class:`~testbed.controllers.fabric_programmer.FabricProgrammer` in the
  caller's process: it pushes the pipeline, the routes and the run-time
  parameters, and after each failure waits ``detection_delay_ms`` (standing
  for failure detection) and recomputes routes without the failed links,
  recording when it reacted.
* ``none``: :class:`NoRecoveryController`, the same programming, but routes never
  change after a failure (the no-recovery baseline).
* ``osken``: the os-ken fabric application started through
  :mod:`testbed.controllers.launcher` (:class:`OskenController`).
"""
import queue
import threading
import time

from testbed.controllers.contract import DEFAULT_DETECTION_DELAY_MS
from testbed.controllers.fabric_programmer import programmer_for_network
from testbed.controllers.launcher import FabricController
from testbed.controllers.parameters import write_parameters
from testbed.errors import TestbedError


def write_mode_params(clients, p4info, mode_params, required=()):
    """Write run-time parameters on every switch; refuse when a required one has no table.

    Args:
        clients: ``{switch: P4RuntimeClient}`` (primary sessions).
        p4info: the program's P4Info.
        mode_params: ``{name: int}`` (checked against :data:`testbed.modes.PARAMETERS`).
        required: parameters the mode needs; the program must carry them.

    Returns:
        tuple: ``(written {name: value}, notes [str])``.

    Raises:
        TestbedError: a required parameter has no parameter table in the program.
    """
    written, notes = write_parameters(clients, p4info, mode_params)
    missing = [name for name in required if name not in written]
    if missing:
        raise TestbedError("; ".join(note for note in notes if note.startswith(f"mode_params.{missing[0]}="))
                           or f"mode_params.{missing[0]}: not written")
    return written, notes


class _ReactingController:
    """Common part: reaction rows, a worker thread that reacts after the detection delay.

    Subclasses implement ``start`` and ``_react(failure)`` -> ``(done ns, entries written, compute s)``.
    """

    kind = None

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS, react=True):
        self.detection_delay_ms = detection_delay_ms
        self.detection_delay_s = detection_delay_ms / 1000.0
        self.react = react
        self.reactions = []
        self.notes = []
        self.entries_written = 0
        self.mode_params_written = {}
        self._queue = queue.Queue()
        self._worker = None
        self._t0_ns = None
        self._lock = threading.Lock()

    def _start_worker(self):
        self._worker = threading.Thread(target=self._work, name="controller-reactions", daemon=True)
        self._worker.start()

    def set_time_zero(self, t0_ns):
        """Set the run's time zero (reaction times are reported relative to it)."""
        self._t0_ns = t0_ns

    def _since_t0(self, ns, fallback_ns):
        return (ns - (self._t0_ns or fallback_ns)) / 1e9

    def notify(self, failure):
        """Tell the controller a failure happened (it reacts after the detection delay).

        Args:
            failure: the :class:`Failure` (with the links and switches down after it).
        """
        row = {"failure_index": failure.index, "action": failure.action,
               "failed_at_s": self._since_t0(failure.applied_ns, failure.applied_ns),
               "reacted_at_s": None, "reaction_s": None, "compute_s": None, "entries_written": None,
               "error": None}
        with self._lock:
            self.reactions.append(row)
        if self.react:
            self._queue.put((row, failure))

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            row, failure = item
            delay_ns = failure.applied_ns + int(self.detection_delay_s * 1e9) - time.time_ns()
            if delay_ns > 0:
                time.sleep(delay_ns / 1e9)
            try:
                done_ns, written, compute_s = self._react(failure)
                row.update(reacted_at_s=self._since_t0(done_ns, failure.applied_ns),
                           reaction_s=(done_ns - failure.applied_ns) / 1e9, compute_s=compute_s,
                           entries_written=written)
            except Exception as error:  # noqa: BLE001 - recorded in the results, the run goes on
                row["error"] = f"{type(error).__name__}: {error}"

    def client(self, switch):
        """This controller's P4Runtime session to ``switch``, or None (not in this process)."""
        return None

    def results(self, t0_ns):
        """More keys for results.json's ``controller`` section (none here; mechanisms' controllers add theirs)."""
        return {}

    def _stop_worker(self):
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(timeout=30)
            self._worker = None


class StaticController(_ReactingController):
    """Routes from an in-process FabricProgrammer; reroutes after a detection delay.

    Args:
        detection_delay_ms: time between a failure and the reaction.
        react: False for the ``none`` kind (never reroute).
    """

    kind = "static"

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS, react=True):
        super().__init__(detection_delay_ms, react)
        self.programmer = None

    def start(self, network, pipeline, mode_params, required_params=(), progress=None, **_options):
        """Connect to every switch, push pipeline, routes and run-time parameters.

        Args:
            network: the running :class:`~testbed.emulation.network.FabricNetwork`.
            pipeline: the :class:`~testbed.targets.PipelineConfig` to push.
            mode_params: ``{name: int}`` run-time parameters (checked).
            required_params: names the program must carry.
            progress: ``callable(step, done, total)`` (see :class:`FabricProgrammer`), or None.
        """
        self.programmer = programmer_for_network(network, pipeline, progress=progress)
        self.programmer.connect()
        self.entries_written = self.programmer.program()
        self.mode_params_written, notes = write_mode_params(self.programmer.clients, pipeline.p4info,
                                                            mode_params, required_params)
        self.notes += notes
        if not self.react:
            self.notes.append(f"controller.kind {self.kind}: routes are never recomputed after a failure")
        self._start_worker()

    def client(self, switch):
        """The primary P4Runtime session to ``switch`` (None once the switch was forgotten)."""
        return self.programmer.clients.get(switch) if self.programmer is not None else None

    def _react(self, failure):
        for switch in failure.crashed:
            self.programmer.forget_switch(switch)
        outcome = self.programmer.reroute({tuple(sorted(link)) for link in failure.failed_links})
        return time.time_ns(), outcome["entries_written"], outcome.get("compute_s")

    def stop(self):
        """Stop the reaction worker and close every session (safe to call twice)."""
        self._stop_worker()
        if self.programmer is not None:
            self.programmer.close()
            self.programmer = None


class NoRecoveryController(StaticController):
    """Routes pushed once and never recomputed after a failure: the no-recovery baseline.

    Args:
        detection_delay_ms: recorded only (it never reacts).
    """

    kind = "none"

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS):
        super().__init__(detection_delay_ms, react=False)


class OskenController(_ReactingController):
    """The os-ken fabric application (:class:`testbed.controllers.launcher.FabricController`).

    Args:
        detection_delay_ms: time between a failure and the notice the app gets.
        **options: more ``[fabric]`` options of the app (``routing="te"``, ``port_poll_ms=20``...).

    It reads the network from the state file, pushes pipeline, routes and
    parameters; the runner tells it about each failure over its REST API
    after the detection delay and reads its reaction from ``/fabric/status``.
    """

    kind = "osken"
    REACTION_TIMEOUT_S = 20.0
    apps = None  # the app modules to run (None: those of the [fabric] mode)

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS, **options):
        super().__init__(detection_delay_ms, react=True)
        self.options = dict(options)
        self.controller = None

    def start(self, network, pipeline, mode_params, required_params=(), state_file=None, log_path=None,
              progress=None):
        """Launch the os-ken application on the running fabric and wait until it programmed it.

        Args:
            network: the running network (its state file must be published).
            pipeline: the :class:`~testbed.targets.PipelineConfig` (program and target).
            mode_params: ``{name: int}`` run-time parameters.
            required_params: names the program must carry.
            state_file: the network's state file, which the app reads.
            log_path: the controller's log.
            progress: not used: the application programs the switches in its own process
                and reports only when it is done.

        Raises:
            TestbedError: no state file, the launcher is missing, or the controller failed.
        """
        if not state_file:
            raise TestbedError("controller.kind osken needs the network's state file")
        options = dict(self.options)
        options.update(mode_params)
        self.controller = FabricController(state_file, program=pipeline.program_path, target=pipeline.target,
                                           log_path=log_path, **options)
        if self.apps:
            self.controller.apps = list(self.apps)
        status = self.controller.start()
        self.entries_written = int(status.get("entries_written") or 0)
        self.mode_params_written = dict(status.get("params") or {})
        self.notes += list(status.get("notes") or [])
        missing = [name for name in required_params if name not in self.mode_params_written]
        if missing:
            raise TestbedError(f"mode_params.{missing[0]}: the os-ken controller could not write it: "
                               + "; ".join(self.notes))
        self._start_worker()

    def _react(self, failure):
        client = self.controller.client
        before = len(client.status().get("reactions", []))
        if failure.action == "switch_crash":
            pairs = sorted(tuple(sorted(pair)) for pair in failure.failed_links if failure.switch in pair)
            status = "down"
        else:
            pairs = [tuple(failure.link)]
            status = "up" if failure.action == "link_up" else "down"
        for a, b in pairs:
            client.link_status(a, b, status)
        done = client.wait_for(lambda s: len(s.get("reactions", [])) >= before + len(pairs) or s.get("error"),
                               timeout=self.REACTION_TIMEOUT_S)
        if done.get("error"):
            raise TestbedError(f"os-ken controller: {done['error']}")
        mine = done["reactions"][before:]
        written = sum(int(r.get("entries_written") or 0) for r in mine)
        compute = [r.get("compute_s") for r in mine if r.get("compute_s") is not None]
        return (int(max(r["routes_written_at"] for r in mine) * 1e9), written,
                sum(compute) if compute else None)

    def stop(self):
        """Stop the reaction worker and the controller process (safe to call twice)."""
        self._stop_worker()
        controller, self.controller = self.controller, None
        if controller is not None:
            controller.stop()
