"""Apply a spec's failure schedule to a running fabric, each failure at its time.

:class:`FailureScheduler` is a thread keyed to the run's time zero: it sleeps
until ``t0 + at_s`` of each failure (in time order), applies it through
:meth:`testbed.fabrics.Fabric.apply_failure` (which also tells the
controller), and records when it was applied (``applied_at_s``: when applying
began; ``apply_s``: how long it took).  Actions:

* ``link_down`` / ``link_up``: both interfaces of every link between the two
  nodes go down / up (a switch's end first, by one ioctl, so the link fails at
  the recorded instant: testbed.emulation.links); ``link_up`` also ends an
  earlier ``lossy_link`` on that link (the link is healthy again);
* ``switch_crash``: the switch process is killed (SIGKILL); all its links count as failed;
* ``lossy_link``: a ``netem`` loss qdisc on both interfaces where the kernel
  has netem, else loss inside the embedded P4 switches' ports (frames leaving
  each switch end of the link are dropped with the given probability); the
  row's ``mechanism`` says which (``"netem"`` or ``"embedded-port"``).  BMv2
  without netem is refused by the spec check before the run.
"""
import threading
import time

from testbed.controllers.contract import element_label


def log_row(index, failure):
    """The results.json row of ``spec.failures[index]`` before it is applied (``failures[]``)."""
    return {"index": index, "action": failure.action, "element": element_label(failure.link, failure.switch),
            "loss": failure.loss,
            "cause": failure.cause, "planned_at_s": failure.at_s, "applied_at_s": None, "apply_s": None,
            "error": None, "mechanism": None}


class FailureScheduler(threading.Thread):
    """Applies failures at ``t0_ns + at_s`` on a running fabric.

    Args:
        fabric: the running :class:`~testbed.fabrics.Fabric`.
        failures: the spec's :class:`~testbed.experiment.spec.FailureSpec` list.
        t0_ns: the run's time zero (wall-clock ns).
        progress: callable for one-line progress messages.

    Attributes:
        log: rows of results.json's ``failures`` (one per spec entry, in spec order).
    """

    def __init__(self, fabric, failures, t0_ns, progress=print):
        super().__init__(name="failure-scheduler", daemon=True)
        self.fabric = fabric
        self.failures = list(failures)
        self.t0_ns = t0_ns
        self.progress = progress
        self.log = [log_row(index, failure) for index, failure in enumerate(self.failures)]
        self._cancelled = threading.Event()

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
                applied = self.fabric.apply_failure(failure.action, link=failure.link, switch=failure.switch,
                                                    loss=failure.loss, index=index)
            except Exception as error:  # noqa: BLE001 - recorded, the run goes on
                self.log[index]["error"] = f"{type(error).__name__}: {error}"
                self.progress(f"  t={failure.at_s:.2f}s {failure.label()}: FAILED: {error}")
                continue
            self.log[index]["mechanism"] = applied.mechanism
            self.log[index]["applied_at_s"] = (applied.applied_ns - self.t0_ns) / 1e9
            self.log[index]["apply_s"] = (applied.done_ns - applied.applied_ns) / 1e9
            self.progress(f"  t={(applied.applied_ns - self.t0_ns) / 1e9:.2f}s {failure.label()}")
