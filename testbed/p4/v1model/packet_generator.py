"""A packet generator for the embedded target, modelled on Tofino's: timer-triggered frames into ingress.

v1model has no timer, so a P4 program that must act periodically (a failure
detector closing its windows, probes on idle links) needs frames that arrive
on their own.  Tofino's packet generator creates them inside the switch: an
*application* fires every ``period`` and injects a frame built from a template
into the ingress pipeline on an internal port.  This module is that part for
the embedded target:

* :meth:`PacketGenerator.configure` sets application ``app``: the internal
  ``port`` the frames enter on, the ``period`` and the ``template`` (the frame's
  bytes, Ethernet header first).  Setting it again changes it at run time;
  :meth:`stop` ends it.
* The device asks :meth:`next_due_ns` when it must next wake up and injects
  what :meth:`due` returns, through the same parser and ingress as any frame.

Differences from Tofino, on purpose: the frame is the template as given, with
no pktgen header in front (so BMv2, which has no generator, gets the same
frames from an injector on a dedicated port and one P4 program serves both
targets); one frame per period (no batches).  When the switch process fell
behind (a loaded machine) and several periods passed, one frame is generated
and the missed periods are counted in ``skipped`` rather than sent in a burst,
so timers stay periodic and the lag is visible in :meth:`status` (with
``late_max_us``, the longest a frame went out after its due time).

The native packet loop runs the timers itself (pktgen.c of
:mod:`testbed.embedded_switch.native_io`): :meth:`PacketGenerator.attach` hands
them over, and this object stays where applications are configured and their
status is read.
"""
import threading
from dataclasses import dataclass

MAX_APPS = 8
MIN_PERIOD_NS = 100_000  # 100 us: the embedded pipeline cannot keep up with faster timers
MAX_PERIOD_NS = 60_000_000_000
MIN_FRAME = 14  # an Ethernet header
MAX_FRAME = 1514


@dataclass
class GeneratorApp:
    """One application: its port, period, template and counters."""

    port: int
    period_ns: int
    template: bytes
    next_ns: int
    generated: int = 0
    skipped: int = 0
    skipped_run_max: int = 0  # the most periods skipped in a row (the switch was busy that long)
    late_max_ns: int = 0   # the latest a frame went out after its due time (the switch was busy)

    def describe(self):
        """JSON-able state."""
        return {"port": self.port, "period_us": self.period_ns / 1000.0, "template_bytes": len(self.template),
                "generated": self.generated, "skipped": self.skipped, "skipped_run_max": self.skipped_run_max,
                "late_max_us": self.late_max_ns / 1000.0}


class PacketGenerator:
    """Timer-triggered applications of one switch.

    Args:
        clock_ns: the device's monotonic clock (ns).
    """

    def __init__(self, clock_ns):
        self.clock_ns = clock_ns
        self._apps = {}
        self._lock = threading.Lock()
        self._timers = None

    def attach(self, timers):
        """Let ``timers`` generate the frames from now on, with the applications' timers and counters.

        Args:
            timers: an object with ``set_app(number, app)``, ``stop_app(number)`` and
                ``read_app(number, app)`` (which copies its timer and counters into the
                :class:`GeneratorApp`), such as the native loop's generator.  While it is
                attached, :meth:`configure` and :meth:`stop` go through to it, :meth:`status`
                reads it, and :meth:`due` and :meth:`next_due_ns` have nothing (it injects).
        """
        with self._lock:
            for number, app in sorted(self._apps.items()):
                timers.set_app(number, app)
            self._timers = timers

    def detach(self):
        """Take the timers back from the attached object, with their counters, and stop them there (nothing if
        none is attached)."""
        with self._lock:
            timers, self._timers = self._timers, None
            if timers is not None:
                for number, app in self._apps.items():
                    timers.read_app(number, app)
                    timers.stop_app(number)

    def configure(self, app, port, period_ns, template):
        """Start (or change) application ``app``: ``template`` enters ingress on ``port`` every ``period_ns``.

        The first frame comes at the next multiple of the period on the clock, at most one period from
        now: every switch's applications of one period fire together, so on an emulated fabric a
        switch's own trigger and the probes its neighbours sent at that instant are handled in one
        wake-up of its process more often than at scattered phases.

        Raises:
            ValueError: an app number outside ``0..MAX_APPS-1``, a port outside 0..511, a
                period outside ``[MIN_PERIOD_NS, MAX_PERIOD_NS]`` or a template shorter than
                an Ethernet header or longer than 1514 bytes (the message names the field).
        """
        if isinstance(app, bool) or not isinstance(app, int) or not 0 <= app < MAX_APPS:
            raise ValueError(f"app: {app!r} is not an application number 0..{MAX_APPS - 1}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 511:
            raise ValueError(f"port: {port!r} is not a 9-bit port number")
        if isinstance(period_ns, bool) or not isinstance(period_ns, int) \
                or not MIN_PERIOD_NS <= period_ns <= MAX_PERIOD_NS:
            raise ValueError(f"period: {period_ns!r} ns is outside [{MIN_PERIOD_NS}, {MAX_PERIOD_NS}] ns")
        template = bytes(template)
        if not MIN_FRAME <= len(template) <= MAX_FRAME:
            raise ValueError(f"template: {len(template)} bytes; allowed {MIN_FRAME} to {MAX_FRAME}")
        with self._lock:
            self._apps[app] = GeneratorApp(port, period_ns, template, (self.clock_ns() // period_ns + 1) * period_ns)
            if self._timers is not None:
                self._timers.set_app(app, self._apps[app])

    def stop(self, app):
        """End application ``app`` (nothing if it does not run)."""
        with self._lock:
            if self._apps.pop(app, None) is not None and self._timers is not None:
                self._timers.stop_app(app)

    def next_due_ns(self):
        """When the next frame is due (monotonic ns), or None when no application runs or the timers are attached."""
        with self._lock:
            if self._timers is not None:
                return None
            return min((app.next_ns for app in self._apps.values()), default=None)

    def due(self, now_ns=None):
        """The frames whose time has come: ``[(port, frame)]``, one per application at most, in application
        order (none while the timers are attached)."""
        now = self.clock_ns() if now_ns is None else now_ns
        frames = []
        with self._lock:
            if self._timers is not None:
                return frames
            for _, app in sorted(self._apps.items()):
                if app.next_ns > now:
                    continue
                periods = (now - app.next_ns) // app.period_ns + 1
                app.skipped += periods - 1
                app.skipped_run_max = max(app.skipped_run_max, periods - 1)
                app.late_max_ns = max(app.late_max_ns, now - (app.next_ns + (periods - 1) * app.period_ns))
                app.generated += 1
                app.next_ns += periods * app.period_ns
                frames.append((app.port, app.template))
        return frames

    def status(self):
        """``{app: {"port", "period_us", "template_bytes", "generated", "skipped", "skipped_run_max",
        "late_max_us"}}``."""
        with self._lock:
            if self._timers is not None:
                for number, app in self._apps.items():
                    self._timers.read_app(number, app)
            return {number: app.describe() for number, app in sorted(self._apps.items())}
