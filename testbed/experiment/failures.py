"""Apply a spec's failure schedule to a running fabric, each failure at its time.

:class:`FailureScheduler` is a thread keyed to the run's time zero: it sleeps
until ``t0 + at_s`` of each failure (in time order), applies it, records when
it was applied (``applied_at_s``: when applying began; ``apply_s``: how long
it took), and tells the controller.  Actions:

* ``link_down`` / ``link_up``: both interfaces of every link between the two
  nodes go down / up (Mininet ``configLinkStatus``); ``link_up`` also ends an
  earlier ``lossy_link`` on that link (the link is healthy again);
* ``switch_crash``: the switch process is killed (SIGKILL); all its links count as failed;
* ``lossy_link``: a ``netem`` loss qdisc on both interfaces where the kernel
  has netem, else loss inside the embedded P4 switches' ports (frames leaving
  each switch end of the link are dropped with the given probability, see
  :meth:`~testbed.emulation.network.FabricNetwork.impair_link`); the row's
  ``mechanism`` says which (``"netem"`` or ``"embedded-port"``).  BMv2 without
  netem is refused by the spec check before the run.
"""
import os
import signal
import threading
import time

from testbed.errors import EmulationError
from testbed.experiment.spec import netem_available


class FailureScheduler(threading.Thread):
    """Applies failures at ``t0_ns + at_s`` and notifies the controller.

    Args:
        fabric: the running :class:`~testbed.emulation.network.FabricNetwork`.
        failures: the spec's :class:`~testbed.experiment.spec.FailureSpec` list.
        controller: object with ``notify(...)`` (see :mod:`testbed.experiment.control`).
        t0_ns: the run's time zero (wall-clock ns).
        progress: callable for one-line progress messages.

    Attributes:
        log: rows of results.json's ``failures`` (one per spec entry, in spec order).
        crashed: switches killed so far.
    """

    def __init__(self, fabric, failures, controller, t0_ns, progress=print):
        super().__init__(name="failure-scheduler", daemon=True)
        self.fabric = fabric
        self.failures = list(failures)
        self.controller = controller
        self.t0_ns = t0_ns
        self.progress = progress
        self.failed_links = set()
        self.crashed = set()
        self.log = [{"index": index, "action": f.action,
                     "target": "-".join(f.link) if f.link else (f.switch or ""), "loss": f.loss,
                     "planned_at_s": f.at_s, "applied_at_s": None, "apply_s": None, "error": None,
                     "mechanism": None}
                    for index, f in enumerate(self.failures)]
        self._cancelled = threading.Event()
        self.last_mechanism = None  # how the last lossy_link was emulated (or cleared)
        self.lossy_links = {}  # frozenset(link) -> mechanism, while lossy

    def cancel(self):
        """Stop before applying the remaining failures."""
        self._cancelled.set()

    def run(self):
        """Apply every failure at its time (the thread's body)."""
        order = sorted(range(len(self.failures)), key=lambda i: self.failures[i].at_s)
        for index in order:
            failure = self.failures[index]
            wait_s = (self.t0_ns + int(failure.at_s * 1e9) - time.time_ns()) / 1e9
            if wait_s > 0 and self._cancelled.wait(wait_s):
                return
            if self._cancelled.is_set():
                return
            try:
                applied_ns, done_ns = self.apply(failure)
            except Exception as error:  # noqa: BLE001 - recorded, the run goes on
                self.log[index]["error"] = f"{type(error).__name__}: {error}"
                self.progress(f"  t={failure.at_s:.2f}s {failure.label()}: FAILED: {error}")
                continue
            self.log[index]["mechanism"] = self.last_mechanism
            self.log[index]["applied_at_s"] = (applied_ns - self.t0_ns) / 1e9
            self.log[index]["apply_s"] = (done_ns - applied_ns) / 1e9
            self.progress(f"  t={(applied_ns - self.t0_ns) / 1e9:.2f}s {failure.label()}")
            self.controller.notify(index, failure, applied_ns, set(self.failed_links), set(self.crashed))

    # -- actions ---------------------------------------------------------------------------
    def apply(self, failure):
        """Apply one failure now.

        Returns:
            tuple: wall-clock ns ``(started, done)``; the failure takes effect in
            between (Mininet downs one interface, then the other), so ``started``
            is the failure's time.  A lossy_link's mechanism is left in ``last_mechanism``.
        """
        started_ns = time.time_ns()
        self.last_mechanism = None
        if failure.action == "link_down":
            self.fabric.link_status(failure.link[0], failure.link[1], "down")
            self.failed_links.add(frozenset(failure.link))
        elif failure.action == "link_up":
            self.fabric.link_status(failure.link[0], failure.link[1], "up")
            self.failed_links.discard(frozenset(failure.link))
            if frozenset(failure.link) in self.lossy_links:
                self.last_mechanism = self._clear_lossy(failure.link)
        elif failure.action == "switch_crash":
            self._crash(failure.switch)
        elif failure.action == "lossy_link":
            self.last_mechanism = self._lossy(failure.link, failure.loss)
        else:  # pragma: no cover - the spec refuses other actions
            raise EmulationError(f"unknown failure action {failure.action}")
        return started_ns, time.time_ns()

    def _crash(self, name):
        switch = self.fabric.net.get(name)
        process = getattr(switch, "process", None)
        if process is None or process.poll() is not None:
            raise EmulationError(f"switch {name} has no running process to crash")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        self.crashed.add(name)
        for a, b in self.fabric.topo.graph().edges(name):
            self.failed_links.add(frozenset((a, b)))

    def _lossy(self, link, loss):
        """Make the link lossy; returns the mechanism used (``"netem"`` or ``"embedded-port"``)."""
        if not netem_available():
            self.fabric.impair_link(link[0], link[1], loss)
            self.lossy_links[frozenset(link)] = "embedded-port"
            return "embedded-port"
        self.lossy_links[frozenset(link)] = "netem"
        a, b = (self.fabric.net.get(name) for name in link)
        for found in self.fabric.net.linksBetween(a, b):
            for intf in (found.intf1, found.intf2):
                result = intf.node.cmd(f"tc qdisc replace dev {intf.name} root netem loss {loss * 100:.4f}%")
                if result.strip():
                    raise EmulationError(f"netem on {intf.name}: {result.strip()}")
        return "netem"

    def _clear_lossy(self, link):
        """Remove a lossy_link's loss; returns the mechanism it used."""
        mechanism = self.lossy_links.pop(frozenset(link))
        if mechanism == "embedded-port":
            self.fabric.impair_link(link[0], link[1], 0.0)
            return mechanism
        a, b = (self.fabric.net.get(name) for name in link)
        for found in self.fabric.net.linksBetween(a, b):
            for intf in (found.intf1, found.intf2):
                intf.node.cmd(f"tc qdisc del dev {intf.name} root")
        return mechanism
