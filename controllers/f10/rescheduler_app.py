"""F10's epoch rescheduler as an os-ken app: every epoch, measure, place, pin, and reweight the ECMP groups.

Seed 002, sections 5.3, 6.1 and 6.2.  Every ``epoch_ms`` :class:`F10RescheduleApp`:

1. reads ``MyEgress.egress_port_counter`` of every switch over P4Runtime (the
   load of every directed fabric link, :mod:`testbed.controllers.f10.load_estimate`)
   and the direct counters of the ToRs' ``MyIngress.f10_flows`` entries (what
   each host sent to each host of another ToR: the epoch's flows,
   :mod:`testbed.controllers.f10.scheduled_flows`);
2. takes the failed links (detector transitions, failures the controller was
   told of) and the recovered links still held down: a link that came back is
   held down for ``recovered_holddown_ms`` (5.3: it must prove stable before
   the scheduler gives it traffic; local reroutes and pushback stay until the
   controller reinstalls it);
3. places the flows, largest first, on the shortest paths of least
   ``sum 1/R(e)`` that avoid failed and held-down links
   (:func:`testbed.controllers.f10.scheduler.place_flows_greedy`, then
   :func:`~testbed.controllers.f10.scheduler.improve_placement`), pins each
   placed flow on its path (``f10_flows`` entries at every switch of it; a flow
   not placed this epoch is unpinned), and derives weights from the residual
   capacities left (:func:`~testbed.controllers.f10.scheduler.ecmp_weights`);
   a held-down link counts as failed there too, so that no switch sends it new
   traffic, not even one whose next hop leads to it further on (6.1: a new
   link's residual capacity is 0, "new flows do not use the link");
4. writes the weights into the routing table's ECMP groups with P4Runtime
   MODIFY (or INSERT) of ``ActionProfileGroup`` and, where destinations that
   shared a group now need different weights, MODIFY of their table entries
   (:mod:`testbed.controllers.f10.weighted_groups`,
   :mod:`testbed.controllers.f10.switch_groups`, which also says how BMv2's
   server takes weights); a failed link's member is left out of every group
   (no weight 0 in P4Runtime);
5. records every action: epoch, time, switch, group, old and new weights per
   next hop, entries written (:meth:`RescheduleContext.actions`), and a summary
   per epoch (:meth:`RescheduleContext.epochs`).

Between epochs, a failure the controller hears of (a detector transition,
:meth:`RescheduleContext.links_changed`; a failure it is told of,
:meth:`RescheduleContext.notify`) unpins at once the flows placed over the
failed link (5.3: failures are reported to the controller immediately); the
weights change at the next epoch.  Until then F10's data plane detours around
the failure (5.3: a failure seen before the controller reflects it is handled
locally).

Running it: :func:`start_rescheduler` starts the app in an os-ken ``AppManager``
of its own in the caller's process, on the primary P4Runtime sessions of the
caller's :class:`~testbed.controllers.fabric_programmer.FabricProgrammer` (a
switch has one primary session; only it may write), shared through the app's
``_CONTEXTS`` object :class:`RescheduleContext`.  It needs os-ken's native
hub (see :mod:`testbed.controllers.fabric_app` on eventlet and gRPC).  One
rescheduler runs per process (os-ken registers apps by name process-wide).
"""
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from os_ken.base import app_manager
from os_ken.controller import event
from os_ken.controller.handler import set_ev_cls
from os_ken.lib import hub
from p4.v1 import p4runtime_pb2

from testbed.controllers.f10.load_estimate import fabric_ports, link_loads
from testbed.controllers.f10.rescheduler_options import DEFAULT_RECOVERED_HOLDDOWN_MS, rescheduler_options
from testbed.controllers.f10.scheduled_flows import ScheduledFlows, host_flows
from testbed.controllers.f10.scheduler import (DEFAULT_MAX_WEIGHT, ecmp_weights, improve_placement, link_ids,
                                               place_flows_greedy)
from testbed.controllers.f10.switch_groups import SwitchGroups
from testbed.errors import TestbedError
from testbed.topologies.graph import hosts_by_ip

LOG = logging.getLogger("testbed.controllers.f10.rescheduler_app")
EGRESS_COUNTER = "MyEgress.egress_port_counter"  # p4src/f10.p4
READ_WORKERS = 8  # switches whose counters are read at the same time


class EventEpoch(event.EventBase):
    """Run one epoch now; ``done`` (a threading.Event or None) is set when it is over."""

    def __init__(self, done=None):
        super().__init__()
        self.done = done


class EventFailure(event.EventBase):
    """The controller was told of a failure (a :class:`testbed.controllers.kinds.Failure`)."""

    def __init__(self, failure):
        super().__init__()
        self.failure = failure


class EventLinksChanged(event.EventBase):
    """A detector reported a transition (the rows are in the controller's ``transitions``)."""


class RescheduleContext:
    """What the rescheduler shares with the controller that runs it (its os-ken ``_CONTEXTS`` object).

    Args:
        programmer: a connected FabricProgrammer (primary sessions, graph, routing table names).
        epoch_ms: the epoch.
        recovered_holddown_ms: how long a recovered link gets no weight.
        transitions: the F10 controller's list of detector transitions (read, never written).
        max_weight: weight of the best next hop before reduction.
        clock: monotonic seconds (hold-downs, rates).

    Raises:
        ParameterError: bad ``epoch_ms`` or ``recovered_holddown_ms``.
    """

    def __init__(self, programmer, epoch_ms, recovered_holddown_ms=DEFAULT_RECOVERED_HOLDDOWN_MS,
                 transitions=None, max_weight=DEFAULT_MAX_WEIGHT, clock=time.monotonic):
        options = rescheduler_options(epoch_ms, recovered_holddown_ms)
        self.programmer = programmer
        self.epoch_s = options["epoch_ms"] / 1000.0
        self.holddown_s = options["recovered_holddown_ms"] / 1000.0
        self.transitions = transitions if transitions is not None else []
        self.max_weight = max_weight
        self.clock = clock
        self.app = None
        self.manager = None
        self._lock = threading.Lock()
        self._actions, self._epochs = [], []

    def notify(self, failure):
        """Tell the rescheduler of a failure: flows placed over it are unpinned now, weights change at the next
        epoch."""
        self.app.send_event(self.app.name, EventFailure(failure))

    def links_changed(self):
        """A detector transition was appended to ``transitions``: unpin the flows over a link now down."""
        self.app.send_event(self.app.name, EventLinksChanged())

    def run_epoch(self, timeout=60.0):
        """Run one epoch now and wait for it.

        Raises:
            TestbedError: not done within ``timeout`` seconds.
        """
        done = threading.Event()
        self.app.send_event(self.app.name, EventEpoch(done))
        if not done.wait(timeout):
            raise TestbedError(f"rescheduling epoch not done after {timeout} s")

    def record(self, epoch_row, actions):
        """Keep an epoch's summary and its actions."""
        with self._lock:
            self._epochs.append(epoch_row)
            self._actions.extend(actions)

    def actions(self):
        """Every action so far (rows for results.json).

        Returns:
            list: one dict per group written or given entries in an epoch: ``epoch``,
            ``time_ns`` (wall clock, after the switch's writes), ``switch``, ``group``,
            ``write`` (``"insert"``, ``"modify"``, or None when only entries moved to it),
            ``old`` / ``new`` weights as ``{"<port>:<neighbour>": weight}`` (``old`` None for
            a new group), ``destinations`` (hosts whose entry names it), ``moved`` (those
            moved to it) and ``entries_written`` (P4Runtime updates).
        """
        with self._lock:
            return list(self._actions)

    def epochs(self):
        """Every epoch's summary so far.

        Returns:
            list: one dict per epoch: ``epoch``, ``time_ns`` (wall clock at its start),
            ``interval_s`` (since the previous counter reading), ``read_s`` / ``compute_s`` /
            ``write_s`` / ``duration_s``, ``flows``, ``offered_mbps`` and ``flow_mbps`` (the host-pair
            flows measured: their number, total and each one's rate), ``paths`` (flow -> switches it
            was placed and pinned through), ``unplaced``, ``failed_links`` and ``held_down`` (link
            ids), ``link_loads_mbps``
            (``"<sender>><receiver>"`` -> Mbit/s), ``pins_written`` (``f10_flows`` updates),
            ``updates`` (P4Runtime updates written, pins included) and
            ``errors`` (a switch that could not be read or written, an epoch that failed).
        """
        with self._lock:
            return list(self._epochs)

    def stop(self):
        """Stop the app (safe to call twice); the records stay readable."""
        manager, self.manager = self.manager, None
        if manager is not None:
            manager.close()

    def close(self):
        """os-ken closes its contexts at teardown: the sessions belong to the controller."""


def start_rescheduler(programmer, epoch_ms, recovered_holddown_ms=DEFAULT_RECOVERED_HOLDDOWN_MS, **options):
    """Run :class:`F10RescheduleApp` in this process, on ``programmer``'s sessions.

    Args:
        programmer: a connected, programmed FabricProgrammer.
        epoch_ms, recovered_holddown_ms, **options: see :class:`RescheduleContext`.

    Returns:
        RescheduleContext: ``notify(failure)``, ``actions()``, ``epochs()``, ``run_epoch()``, ``stop()``.

    Raises:
        ParameterError: bad options. TestbedError: not os-ken's native hub, or a rescheduler already runs.
    """
    context = RescheduleContext(programmer, epoch_ms, recovered_holddown_ms, **options)
    if hub.HUB_TYPE != "native":
        raise TestbedError(f"the rescheduler needs os-ken's native hub, not OSKEN_HUB_TYPE={hub.HUB_TYPE}")
    if app_manager.lookup_service_brick(F10RescheduleApp.__name__) is not None:
        raise TestbedError("a rescheduler already runs in this process")
    manager = app_manager.AppManager()
    manager.load_apps([__name__])
    manager.contexts["rescheduler"] = context
    manager.instantiate_apps(**manager.contexts)
    context.manager = manager
    return context


class F10RescheduleApp(app_manager.OSKenApp):
    """Every epoch: counters, flows, placement, weighted ECMP groups (see the module text)."""

    _CONTEXTS = {"rescheduler": RescheduleContext}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.context = kwargs["rescheduler"]
        self.context.app = self
        graph = self.context.programmer.graph
        self.ports = fabric_ports(graph)
        self.hosts = hosts_by_ip(graph)
        self.max_total = next((p.max_group_size for p in self.context.programmer.pipeline.p4info.action_profiles
                               if p.preamble.name == self.context.programmer.tables.selector), 0)
        self.told, self.detector_down, self.crashed = set(), set(), set()
        self.failed, self.recovered_at = set(), {}
        self.seen_transitions = 0
        self.groups = {}  # switch -> SwitchGroups (read again after a failed write)
        self.scheduled = ScheduledFlows(self.context.programmer)
        self.sample = None  # (clock, {switch: {port: bytes}}, {(src, dst): bytes})
        self.epoch = 0
        self.pool = ThreadPoolExecutor(max_workers=READ_WORKERS, thread_name_prefix="f10-rescheduler-read")
        self._stopping = threading.Event()

    def start(self):
        """Start the event loop and the epoch timer."""
        super().start()
        self.threads.append(hub.spawn(self._tick))

    def stop(self):
        """Stop the timer, then the event loop (after the events already queued)."""
        self._stopping.set()
        super().stop()
        self.pool.shutdown(wait=True)

    def _tick(self):
        """Send an epoch event every ``epoch_s`` (an epoch that overruns delays the next)."""
        period = self.context.epoch_s
        deadline = time.monotonic() + period
        while not self._stopping.wait(max(0.0, deadline - time.monotonic())):
            done = threading.Event()
            self.send_event(self.name, EventEpoch(done))
            while not done.wait(0.2):
                if self._stopping.is_set():
                    return
            deadline = max(deadline + period, time.monotonic())

    @set_ev_cls(EventFailure)
    def _failure(self, ev):
        """Links told down (every link down after the failure), crashed switches."""
        graph = self.context.programmer.graph
        self.told = link_ids(graph, [tuple(pair) for pair in ev.failure.failed_links])
        self.crashed = set(ev.failure.crashed)
        self._unpin_failed()

    @set_ev_cls(EventLinksChanged)
    def _links_changed(self, _ev):
        self._unpin_failed()

    def _unpin_failed(self):
        """Unpin the flows placed over a link now failed (errors are logged: the next epoch writes again)."""
        failed, _ = self._update_links(self.context.clock())
        _, errors = self.scheduled.unpin(failed, self._writable())
        for error in errors:
            LOG.warning("unpinning flows over failed links: %s", error)

    def _writable(self):
        return sorted(set(self.context.programmer.clients) - self.crashed)

    def _update_links(self, now):
        """Failed links (told or from the detectors) and recovered links still held down."""
        rows = self.context.transitions[self.seen_transitions:]
        self.seen_transitions += len(rows)
        for row in rows:
            (self.detector_down.add if row["status"] == "down" else self.detector_down.discard)(
                (row["switch"], row["port"]))
        failed = set(self.told)
        failed.update(self.ports[s][p][0] for s, p in self.detector_down if p in self.ports.get(s, {}))
        for link in self.failed - failed:
            self.recovered_at[link] = now
        for link in failed:
            self.recovered_at.pop(link, None)
        self.failed = failed
        self.recovered_at = {link: t for link, t in self.recovered_at.items() if now - t < self.context.holddown_s}
        return failed, set(self.recovered_at)

    @set_ev_cls(EventEpoch)
    def _epoch(self, ev):
        """One epoch; its errors are recorded, never raised (os-ken's threads would hide them)."""
        self.epoch += 1
        clock, graph = self.context.clock, self.context.programmer.graph
        started = clock()
        row = {"epoch": self.epoch, "time_ns": time.time_ns(), "errors": []}
        actions = []
        try:
            failed, held = self._update_links(started)
            ports, pairs = self._read_counters(row["errors"])
            previous, self.sample = self.sample, (started, ports, pairs)
            loads, flows = {}, []
            if previous is not None and started > previous[0]:
                row["interval_s"] = started - previous[0]
                loads = link_loads(graph, previous[1], ports, row["interval_s"])
                flows = host_flows(previous[2], pairs, row["interval_s"])
            read = clock()
            schedule = improve_placement(graph, flows, place_flows_greedy(graph, flows, sorted(failed), sorted(held)),
                                         sorted(failed), sorted(held))
            weights = ecmp_weights(graph, schedule.residual, sorted(failed | held), (),
                                   max_weight=self.context.max_weight)
            computed = clock()
            pins, errors = self.scheduled.pin(flows, schedule.paths, self._writable())
            row["errors"] += errors
            for switch in self._writable():
                actions += self._reweight(switch, weights.get(switch, {}), failed, row["errors"])
            row.update(read_s=read - started, compute_s=computed - read, write_s=clock() - computed,
                       flows=len(flows), offered_mbps=sum(flow.rate for flow in flows),
                       flow_mbps={flow.name: flow.rate for flow in flows}, unplaced=schedule.unplaced,
                       paths={name: [hop.node for hop in path][1:] for name, path in sorted(schedule.paths.items())},
                       failed_links=sorted(failed), held_down=sorted(held),
                       link_loads_mbps={f"{sender}>{_other(link, sender)}": mbps
                                        for (link, sender), mbps in sorted(loads.items())},
                       pins_written=pins, updates=pins + sum(action["entries_written"] for action in actions))
        except Exception as error:  # noqa: BLE001 - recorded in the results, the next epoch runs
            LOG.exception("rescheduling epoch %d failed", self.epoch)
            row["errors"].append(f"{type(error).__name__}: {error}")
        finally:
            row["duration_s"] = clock() - started
            self.context.record(row, actions)
            if ev.done is not None:
                ev.done.set()

    def _read_counters(self, errors):
        """``({switch: {fabric port: bytes sent}}, {(src, dst): bytes sent})`` of the switches that answered."""
        switches = [s for s in sorted(self.context.programmer.clients) if s not in self.crashed and s in self.ports]
        ports, pairs = {}, {}
        for switch, read in zip(switches, self.pool.map(self._read_switch, switches)):
            if isinstance(read, Exception):
                errors.append(f"{switch}: reading counters: {read}")
                self.scheduled.forget(switch)
            else:
                ports[switch] = read[0]
                pairs.update(read[1])
        return ports, pairs

    def _read_switch(self, switch):
        """The egress byte counts of a switch's fabric ports and of its host pairs (the error, if it failed)."""
        client = self.context.programmer.clients[switch]
        try:
            counter_id = client.index.by_name("counters", EGRESS_COUNTER).preamble.id
            entities = []
            for port in sorted(self.ports[switch]):
                entities.append(p4runtime_pb2.Entity())
                entities[-1].counter_entry.counter_id = counter_id
                entities[-1].counter_entry.index.index = port
            ports = {e.counter_entry.index.index: e.counter_entry.data.byte_count for e in client.read(entities)}
            return ports, self.scheduled.read(switch)
        except Exception as error:  # noqa: BLE001 - a dead switch must not stop the epoch
            return error

    def _reweight(self, switch, weights, failed, errors):
        """Write one switch's new group weights; returns its action rows."""
        programmer, ports = self.context.programmer, self.ports.get(switch, {})
        try:
            if switch not in self.groups:
                self.groups[switch] = SwitchGroups(programmer.clients[switch], programmer.tables, self.hosts,
                                                   {port: there for port, (_, there) in ports.items()},
                                                   self.max_total)
            rows = self.groups[switch].reweight(weights, [port for port, (link, _) in ports.items()
                                                          if link in failed])
        except Exception as error:  # noqa: BLE001 - the other switches go on; this one is read again
            self.groups.pop(switch, None)
            errors.append(f"{switch}: {type(error).__name__}: {error}")
            return []
        now_ns = time.time_ns()
        return [dict(row, epoch=self.epoch, time_ns=now_ns, switch=switch) for row in rows]


def _other(link, node):
    """The other end of a link id ``(a, a_port, b, b_port)``."""
    return link[2] if link[0] == node else link[0]
