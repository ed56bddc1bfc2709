"""What every controller of a running fabric offers the fabric and the experiment runner.

A controller kind is declared by a mechanism
(:class:`~testbed.mechanisms.base.ControllerKind`) and made by
:func:`testbed.mechanisms.make_controller`; the fabric
(:class:`testbed.fabrics.Fabric`) and the runner use it only through
:class:`Controller`.
"""
from dataclasses import dataclass, field
from typing import FrozenSet, List, Optional, Protocol, Set, Tuple, runtime_checkable

DEFAULT_DETECTION_DELAY_MS = 50.0
#: what can happen to a running fabric (:meth:`testbed.fabrics.Fabric.apply_failure`, a spec's ``failures``)
FAILURE_ACTIONS = ("link_down", "link_up", "switch_crash", "lossy_link")


def element_label(link=None, switch=None):
    """The failed element as text: ``"a-b"`` for a link, the switch's name for a switch.

    >>> element_label(("l1", "s1")), element_label(switch="s2")
    ('l1-s1', 's2')
    """
    return "-".join(link) if link else (switch or "")


@dataclass
class Failure:
    """A failure (or repair) applied to a running fabric, as a controller is told of it.

    Attributes:
        action: ``link_down``, ``link_up``, ``switch_crash`` or ``lossy_link``.
        link: the two node names of a link action.
        switch: the switch of ``switch_crash``.
        loss: the loss fraction of ``lossy_link``.
        applied_ns: wall-clock ns when it was applied.
        applied_monotonic_ns: the same instant on CLOCK_MONOTONIC (the embedded switches' clock).
        failed_links: every link down after it (frozensets of two node names).
        crashed: every switch dead after it.
        index: its position in a spec's ``failures`` (None when applied by hand).
        done_ns: wall-clock ns when applying it was done.
        mechanism: how a lossy link was emulated (``"netem"``, ``"embedded-port"``), else None.
    """

    action: str
    link: Optional[Tuple[str, str]] = None
    switch: Optional[str] = None
    loss: Optional[float] = None
    applied_ns: int = 0
    failed_links: Set[FrozenSet[str]] = field(default_factory=set)
    crashed: Set[str] = field(default_factory=set)
    index: Optional[int] = None
    done_ns: int = 0
    mechanism: Optional[str] = None
    applied_monotonic_ns: int = 0

    def label(self):
        """Short text for plots and logs (``link_down l1-s1``)."""
        extra = f" loss={self.loss}" if self.loss is not None else ""
        return f"{self.action} {element_label(self.link, self.switch)}{extra}".strip()


@runtime_checkable
class Controller(Protocol):
    """The interface of a fabric's controller.

    Attributes:
        kind: its controller kind's name.
        reactions: rows of results.json's ``controller.reactions`` (one per failure it was told of).
        notes: lines for results.json's ``controller.notes``.
        entries_written: table entries it wrote.
        mode_params_written: ``{name: value}`` of the run-time parameters it wrote.
    """

    kind: str
    reactions: List[dict]
    notes: List[str]
    entries_written: int
    mode_params_written: dict

    def start(self, network, pipeline, mode_params, required_params=(), state_file=None, log_path=None,
              progress=None):
        """Program the running ``network``: pipeline, routes, run-time parameters.

        Args:
            network: the running :class:`~testbed.emulation.network.FabricNetwork`.
            pipeline: the :class:`~testbed.targets.PipelineConfig` to push.
            mode_params: ``{name: int}`` run-time parameters (checked).
            required_params: names the program must carry (refused otherwise).
            state_file: the network's state file, for controllers in another process.
            log_path: the controller's log, for controllers in another process.
            progress: ``progress(step, done, total)`` told how programming advances, or None.
        """

    def notify(self, failure: "Failure"):
        """Tell it a failure happened (it reacts as its kind does)."""

    def client(self, switch):
        """Its P4Runtime session to ``switch`` if it has one in this process (writes allowed), else None."""

    def set_time_zero(self, t0_ns):
        """The run's time zero (wall-clock ns), for the times it records."""

    def results(self, t0_ns):
        """More keys of results.json's ``controller`` section (its mechanism's schema says which)."""

    def stop(self):
        """Stop it and close its sessions (safe to call twice)."""
