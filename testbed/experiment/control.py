"""Controllers an experiment can run, behind one small interface.

``controller.kind`` in a spec picks one:

* ``static``: :class:`StaticController` runs the project's
  :class:`~testbed.controllers.fabric_programmer.FabricProgrammer` in the
  runner's process: it pushes the pipeline, the routes and the mode
  parameters, and after each failure waits ``detection_delay_ms`` (standing
  for failure detection) and recomputes routes without the failed links,
  recording when it reacted.
* ``none``: the same programming, but routes never change after a failure
  (the no-recovery baseline).
* ``osken``: the os-ken fabric application started through
  :mod:`testbed.controllers.launcher` (:class:`OskenController`).

Every controller offers ``start(fabric, pipeline, spec, required_params, state_file=, log_path=)``,
``notify(failure_index, failure, failed_at_ns, failed_links, crashed_switches)``,
``reactions`` (rows of results.json's ``controller.reactions``), ``notes``,
``entries_written``, ``mode_params_written`` and ``stop()``.
"""
import queue
import threading
import time

from testbed.controllers.fabric_programmer import programmer_for_network
from testbed.errors import TestbedError
from testbed.experiment.modes import MODE_PARAMETERS


def write_mode_params(clients, p4info, mode_params, required=()):
    """Write mode parameters into the registers that carry them (index 0) on every switch.

    Args:
        clients: ``{switch: P4RuntimeClient}`` (primary sessions).
        p4info: the program's P4Info.
        mode_params: ``{name: value}`` (see :data:`testbed.experiment.modes.MODE_PARAMETERS`).
        required: parameters the mode needs; missing registers for these raise.

    Returns:
        tuple: ``(written {name: register}, notes [str])``.

    Raises:
        TestbedError: a required parameter has no register in the program.
    """
    registers = {register.preamble.name.rsplit(".", 1)[-1]: register.preamble.name
                 for register in p4info.registers}
    written, notes = {}, []
    for name, value in sorted(mode_params.items()):
        candidates, scale = MODE_PARAMETERS[name]
        register = next((registers[c] for c in candidates if c in registers), None)
        if register is None:
            message = (f"mode_params.{name}: the program has no register named "
                       f"{' or '.join(candidates)}; not written")
            if name in required:
                raise TestbedError(message)
            notes.append(message)
            continue
        for client in clients.values():
            client.write_register(register, 0, int(value * scale))
        written[name] = register
    return written, notes


class _ReactingController:
    """Common part: reaction rows, a worker thread that reacts after the detection delay.

    Subclasses implement ``start`` and ``_react(row, failure, failed_at_ns, failed_links, crashed)``.
    """

    kind = None

    def __init__(self, detection_delay_ms=50.0, react=True):
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

    def notify(self, failure_index, failure, failed_at_ns, failed_links, crashed_switches=()):
        """Tell the controller a failure happened (it reacts after the detection delay).

        Args:
            failure_index: index in the spec's ``failures``.
            failure: the :class:`~testbed.experiment.spec.FailureSpec`.
            failed_at_ns: wall-clock ns when it was applied.
            failed_links: every link now down (node pairs).
            crashed_switches: switches now dead.
        """
        row = {"failure_index": failure_index, "action": failure.action,
               "failed_at_s": self._since_t0(failed_at_ns, failed_at_ns),
               "reacted_at_s": None, "reaction_s": None, "entries_written": None, "error": None}
        with self._lock:
            self.reactions.append(row)
        if self.react:
            self._queue.put((row, failure, failed_at_ns, set(failed_links), set(crashed_switches)))

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            row, failure, failed_at_ns, failed_links, crashed = item
            delay_ns = failed_at_ns + int(self.detection_delay_s * 1e9) - time.time_ns()
            if delay_ns > 0:
                time.sleep(delay_ns / 1e9)
            try:
                done_ns, written = self._react(row, failure, failed_at_ns, failed_links, crashed)
                row.update(reacted_at_s=self._since_t0(done_ns, failed_at_ns),
                           reaction_s=(done_ns - failed_at_ns) / 1e9, entries_written=written)
            except Exception as error:  # noqa: BLE001 - recorded in the results, the run goes on
                row["error"] = f"{type(error).__name__}: {error}"

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

    def __init__(self, detection_delay_ms=50.0, react=True):
        super().__init__(detection_delay_ms, react)
        self.programmer = None

    def start(self, fabric, pipeline, spec, required_params=(), **_options):
        """Connect to every switch, push pipeline, routes and mode parameters."""
        self.programmer = programmer_for_network(fabric, pipeline)
        self.programmer.connect()
        self.entries_written = self.programmer.program()
        self.mode_params_written, notes = write_mode_params(self.programmer.clients, pipeline.p4info,
                                                            spec.mode_params, required_params)
        self.notes += notes
        if not self.react:
            self.notes.append("controller.kind none: routes are never recomputed after a failure")
        self._start_worker()

    def _react(self, row, failure, failed_at_ns, failed_links, crashed):
        for switch in crashed:
            self.programmer.forget_switch(switch)
        outcome = self.programmer.reroute(failed_links)
        return time.time_ns(), outcome["entries_written"]

    def stop(self):
        """Stop the reaction worker and close every session (safe to call twice)."""
        self._stop_worker()
        if self.programmer is not None:
            self.programmer.close()
            self.programmer = None


class OskenController(_ReactingController):
    """The os-ken fabric application (:class:`testbed.controllers.launcher.FabricController`).

    It reads the network from the state file, pushes pipeline, routes and
    parameters; the runner tells it about each failure over its REST API
    after the detection delay and reads its reaction from ``/fabric/status``.
    """

    kind = "osken"
    REACTION_TIMEOUT_S = 20.0

    def __init__(self, detection_delay_ms=50.0):
        super().__init__(detection_delay_ms, react=True)
        self.controller = None

    def start(self, fabric, pipeline, spec, required_params=(), state_file=None, log_path=None):
        """Launch the os-ken application on the running fabric and wait until it programmed it.

        Raises:
            TestbedError: no state file, the launcher is missing, or the controller failed.
        """
        try:
            from testbed.controllers.launcher import FabricController
        except ImportError as error:
            raise TestbedError(f"controller.kind osken: testbed.controllers.launcher is not available "
                               f"({error}); use controller.kind static") from None
        if not state_file:
            raise TestbedError("controller.kind osken needs the network's state file")
        params = {key: int(value) for key, value in spec.mode_params.items()}
        self.controller = FabricController(state_file, program=spec.program, mode="ecmp", target=pipeline.target,
                                           log_path=log_path, **params)
        status = self.controller.start()
        self.entries_written = int(status.get("entries_written") or 0)
        self.mode_params_written = dict(status.get("params") or {})
        self.notes += list(status.get("notes") or [])
        missing = [name for name in required_params if name not in self.mode_params_written]
        if missing:
            raise TestbedError(f"mode_params.{missing[0]}: the os-ken controller could not write it: "
                               + "; ".join(self.notes))
        self._start_worker()

    def _react(self, row, failure, failed_at_ns, failed_links, crashed):
        client = self.controller.client
        before = len(client.status().get("reactions", []))
        if failure.action == "switch_crash":
            pairs = sorted(tuple(sorted(pair)) for pair in failed_links if failure.switch in pair)
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
        return int(max(r["routes_written_at"] for r in mine) * 1e9), written

    def stop(self):
        """Stop the reaction worker and the controller process (safe to call twice)."""
        self._stop_worker()
        controller, self.controller = self.controller, None
        if controller is not None:
            controller.stop()


def make_controller(spec):
    """The controller object for ``spec.controller``."""
    kind = spec.controller.kind
    if kind == "osken":
        return OskenController(spec.controller.detection_delay_ms)
    return StaticController(spec.controller.detection_delay_ms, react=(kind == "static"))
