"""The os-ken fabric controller: routes and ECMP groups over P4Runtime, failure reaction, parameters.

Applications (Ryu API, run by os-ken's ``AppManager`` through
:mod:`testbed.controllers.launcher`):

* :class:`FabricRoutingApp` (this module): reads the running network's state
  file (``/run/testbed/net.json``), rebuilds its topology, pushes the P4
  pipeline and the equal-cost host routes / ECMP groups to every switch
  (:class:`testbed.controllers.fabric_programmer.FabricProgrammer`), writes
  the run-time parameters (:data:`testbed.modes.PARAMETERS`: flowlet
  interval, hash seed...) into the program's parameter tables, and, on a link status event, recomputes the routes
  without the failed links and writes only the difference: the PortLand-like
  controller baseline (seed 002, section 7.4).  It logs and reports (status)
  when the failure was noticed and when the new routes were written.  A
  switch that cannot be reached (crashed) is reported in a note and the
  reaction's ``unreachable_switches``; the others are still updated.
  Failures come from REST notices, or from its own port monitor
  (``[fabric] port_poll_ms``: the operstate of every inter-switch port, the
  counterpart of OpenFlow port-status messages).
* :class:`testbed.controllers.te_app.FabricTeApp`: centralized TE (seed 004
  section 4.3), greedy placement pinned with exact-match entries.
* :class:`testbed.controllers.notify.FabricRestApp`: the REST interface that
  turns notices (``POST /fabric/links``...) into the events below.

The apps share one :class:`FabricContext` (os-ken ``_CONTEXTS``): the
configuration, the topology, the P4Runtime sessions and the status; there is
no module-level mutable state.  Events (``os_ken.controller.event.EventBase``):
:class:`EventLinkStatus`, :class:`EventFlowsAnnounced`,
:class:`EventParamsChanged`, :class:`EventFabricProgrammed`.

Routing (option ``[fabric] routing``; ``mode`` is its deprecated old name):
``ecmp`` (routes, reaction to failures), ``route-only`` (program once, ignore
failures), ``te`` (``ecmp`` plus the TE app).  With ``[fabric] oneshot = true`` the
controller exits after programming (status 0, or 1 on error).

os-ken, eventlet and gRPC
-------------------------
os-ken 4.x selects its hub with the environment variable ``OSKEN_HUB_TYPE``
(read once, when ``os_ken.lib.hub`` is first imported).  Its default is
``native``: app event loops are real OS threads and nothing is
monkey-patched.  With ``OSKEN_HUB_TYPE=eventlet`` (``eventlet.monkey_patch()``,
eventlet 0.41, grpcio 1.85) P4Runtime does NOT work: the client's
StreamChannel closes at once ("the switch closed the stream": grpc's C-core
threads consume a request iterator built on a green queue), and running the
whole client in a real thread through ``eventlet.tpool.execute`` deadlocks.
So the launcher always runs the apps with the native hub, and these apps call
:class:`testbed.p4runtime.client.P4RuntimeClient` directly from their event
threads.  Note that the native hub's spawned threads swallow exceptions
silently (``TaskExit`` is ``Exception``), so every handler here logs its own
errors.  os-ken 4.x no longer ships ``osken-manager`` nor ``os_ken.app.wsgi``:
the launcher is the manager, and the REST app serves WSGI with WebOb/Routes
(the libraries ``os_ken.app.wsgi`` was built on) and ``wsgiref``.
"""
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

from oslo_config import cfg as oslo_cfg
from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import event
from os_ken.controller.handler import set_ev_cls

from testbed.controllers.fabric_programmer import FabricProgrammer, RoutingTables
from testbed.controllers.parameters import write_parameters
from testbed.modes import PARAMETERS
from testbed.topologies.graph import is_host, node_pair, port_toward

LOG = logging.getLogger("testbed.controllers.fabric_app")

ROUTINGS = ("ecmp", "route-only", "te")

FABRIC_OPTS = [
    cfg.StrOpt("state_file", default="/run/testbed/net.json",
               help="state file of the running network (FabricNetwork)"),
    cfg.StrOpt("program", default=None,
               help="P4 program to push (default: the switches' 'program' in the state file, "
                    "else p4src/l3_ecmp.p4)"),
    cfg.StrOpt("target", default="auto", help="P4 target: auto, embedded or bmv2"),
    cfg.BoolOpt("push_pipeline", default=True, help="SetForwardingPipelineConfig before writing routes"),
    cfg.StrOpt("routing", default="ecmp", deprecated_name="mode", help="ecmp, route-only or te"),
    cfg.BoolOpt("oneshot", default=False, help="exit after programming the fabric"),
    cfg.IntOpt("election_id_high", default=0, help="P4Runtime election id (high)"),
    cfg.IntOpt("election_id_low", default=1, help="P4Runtime election id (low)"),
    cfg.StrOpt("rest_host", default="127.0.0.1", help="REST listen address"),
    cfg.IntOpt("rest_port", default=8080, help="REST listen port"),
    cfg.IntOpt("watch_pid", default=None,
               help="pid of the process that started the controller: exit when it is no longer the parent"),
    cfg.IntOpt("port_poll_ms", default=0,
               help="poll switch port operstate every N ms and treat a port going down as a "
                    "link failure (0: off; failures then come from REST notices)"),
    cfg.StrOpt("te_table", default="MyIngress.te_pin", help="exact-match table of pinned flows"),
    cfg.StrOpt("te_action", default="MyIngress.te_set_nhop", help="action of pinned entries (p4src/te.p4)"),
    oslo_cfg.DictOpt("te_match_fields", default={"src_ip": "hdr.ipv4.srcAddr", "dst_ip": "hdr.ipv4.dstAddr"},
                help="logical flow key -> P4 match field of te_table"),
    cfg.StrOpt("te_flows_file", default=None,
               help="JSON list of flows {name, src, dst, rate, match} placed at start"),
]
# one option per run-time parameter of the P4 programs (testbed/modes.py), range-checked by oslo.config
FABRIC_OPTS += [cfg.IntOpt(parameter.name, default=None, min=parameter.minimum, max=parameter.maximum,
                           help=f"{parameter.description}; written at start if given")
                for parameter in PARAMETERS.values()]
cfg.CONF.register_opts(FABRIC_OPTS, group="fabric")


# -- events ----------------------------------------------------------------------------
class EventLinkStatus(event.EventBase):
    """Every link between nodes ``a`` and ``b`` changed status.

    Attributes:
        a, b: node names (topology names, e.g. ``"leaf0"``, ``"spine1"``).
        status: ``"up"`` or ``"down"``.
        noticed_at: wall-clock time (``time.time()``) the controller learned it.
        noticed_mono: ``time.monotonic()`` at the same moment (for reaction times).
        source: who told (``"rest"``, ``"port-monitor"``).
    """

    def __init__(self, a, b, status, noticed_at=None, noticed_mono=None, source="rest"):
        super().__init__()
        self.a = a
        self.b = b
        self.status = status
        self.noticed_at = time.time() if noticed_at is None else noticed_at
        self.noticed_mono = time.monotonic() if noticed_mono is None else noticed_mono
        self.source = source


class EventFlowsAnnounced(event.EventBase):
    """Known flows for TE: ``flows`` (list of :class:`testbed.controllers.te.Flow`).

    ``replace``: the list replaces every known flow (else it adds/updates by name).
    """

    def __init__(self, flows, replace=True):
        super().__init__()
        self.flows = list(flows)
        self.replace = replace


class EventParamsChanged(event.EventBase):
    """New run-time parameters: ``params`` ``{name: int}`` (names of :data:`testbed.modes.PARAMETERS`, checked)."""

    def __init__(self, params):
        super().__init__()
        self.params = dict(params)


class EventFabricProgrammed(event.EventBase):
    """The routing app has pushed the pipeline and routes (``routes_version``)."""

    def __init__(self, routes_version):
        super().__init__()
        self.routes_version = routes_version


class _EventProgramFabric(event.EventBase):
    """Internal: program the fabric (sent by the routing app to itself at start)."""


# -- configuration and shared context -----------------------------------------------------
@dataclass
class FabricConfig:
    """The ``[fabric]`` options as a plain object (see ``FABRIC_OPTS`` for meanings)."""

    state_file: str = "/run/testbed/net.json"
    program: Optional[str] = None
    target: str = "auto"
    push_pipeline: bool = True
    routing: str = "ecmp"
    oneshot: bool = False
    election_id: tuple = (0, 1)
    rest_host: str = "127.0.0.1"
    rest_port: int = 8080
    params: Dict[str, int] = field(default_factory=dict)
    watch_pid: Optional[int] = None
    port_poll_ms: int = 0
    te_table: str = "MyIngress.te_pin"
    te_action: str = "MyIngress.te_set_nhop"
    te_match_fields: Dict[str, str] = field(default_factory=lambda: {"src_ip": "hdr.ipv4.srcAddr",
                                                                      "dst_ip": "hdr.ipv4.dstAddr"})
    te_flows_file: Optional[str] = None

    @classmethod
    def from_conf(cls, group):
        """Build from an oslo.config group (``cfg.CONF.fabric``).

        Raises:
            ParameterError: unknown routing.
        """
        from testbed.errors import ParameterError

        if group.routing not in ROUTINGS:
            raise ParameterError("fabric.routing", group.routing, "one of: " + ", ".join(ROUTINGS))
        return cls(state_file=group.state_file, program=group.program, target=group.target,
                   push_pipeline=group.push_pipeline, routing=group.routing, oneshot=group.oneshot,
                   election_id=(group.election_id_high, group.election_id_low),
                   rest_host=group.rest_host, rest_port=group.rest_port,
                   params={name: getattr(group, name) for name in PARAMETERS
                           if getattr(group, name) is not None},
                   watch_pid=group.watch_pid,
                   port_poll_ms=group.port_poll_ms, te_table=group.te_table, te_action=group.te_action,
                   te_match_fields=dict(group.te_match_fields or {}), te_flows_file=group.te_flows_file)


class FabricContext:
    """What the fabric apps share (an os-ken ``_CONTEXTS`` object, one instance per manager).

    Attributes:
        config: :class:`FabricConfig` (from ``cfg.CONF.fabric`` unless given).
        state: the running network's description (set when programmed).
        graph: the topology multigraph.
        pipeline: the :class:`testbed.targets.PipelineConfig` pushed.
        programmer: the :class:`FabricProgrammer` holding the P4Runtime sessions.
        finished: set when the controller should exit (oneshot done, or fatal error).
        exit_status: the exit status to use when ``finished`` is set.
    """

    def __init__(self, config=None):
        self.config = config if config is not None else FabricConfig.from_conf(cfg.CONF.fabric)
        self.state = None
        self.graph = None
        self.pipeline = None
        self.programmer = None
        self.finished = threading.Event()
        self.exit_status = 0
        self._lock = threading.Lock()
        self._status = {"ready": False, "error": None, "routing": self.config.routing, "routes_version": 0,
                        "last_failure_notice": None, "last_routes_written": None,
                        "last_reaction_s": None, "reactions": [], "failed_links": [],
                        "params": {}, "notes": [], "te": {"enabled": False, "version": 0, "entries": 0,
                                                          "flows": 0, "unplaced": [], "max_load": 0.0},
                        "rest": None}

    def update_status(self, **fields):
        """Set top-level status fields (thread-safe)."""
        with self._lock:
            self._status.update(fields)

    def update_te_status(self, **fields):
        """Set fields of the ``te`` part of the status."""
        with self._lock:
            self._status["te"].update(fields)

    def add_note(self, note):
        """Record (and log) a note, e.g. a parameter the program cannot take."""
        LOG.info("note: %s", note)
        with self._lock:
            self._status["notes"].append(note)

    def add_reaction(self, reaction):
        """Append one failure reaction record and make it the latest."""
        with self._lock:
            self._status["reactions"].append(reaction)
            self._status["last_reaction_s"] = reaction["reaction_s"]

    def status(self):
        """Return a JSON-able copy of the status."""
        with self._lock:
            return json.loads(json.dumps(self._status))

    def finish(self, exit_status):
        """Ask the manager to stop with ``exit_status``."""
        self.exit_status = exit_status
        self.finished.set()


def load_topology(state):
    """Rebuild the topology multigraph of a running network from its state description.

    Raises:
        TestbedError: the state names no topology kind.
    """
    from testbed.errors import TestbedError
    from testbed.topologies.registry import make_topology

    kind = state.get("kind")
    if not kind:
        raise TestbedError("the network state names no topology kind")
    return make_topology(kind, **(state.get("params") or {})).graph()


def p4_switches(state):
    """``{name: {"grpc", "device_id"}}`` of the state's P4 switches (those with a gRPC address)."""
    return {name: {"grpc": info["grpc"], "device_id": info["device_id"]}
            for name, info in sorted((state.get("switches") or {}).items()) if info.get("grpc")}


def running_network(config):
    """The running network the controller is to program: ``(state, graph, P4 switches, target)``.

    ``target`` is the config's, or with ``auto`` the one the switches run.

    Raises:
        TestbedError / OSError: the state file is unreadable or names no topology kind.
        RuntimeError: it lists no P4 switch.
    """
    from testbed.emulation.state import read_state

    state = read_state(config.state_file)
    graph = load_topology(state)
    switches = p4_switches(state)
    if not switches:
        raise RuntimeError(f"{config.state_file} lists no P4 switches (started with switch=bridge?)")
    target = config.target
    if target == "auto":  # the target the switches run
        target = state["switches"][next(iter(switches))].get("target") or "auto"
    return state, graph, switches, target


def program_path(config, state):
    """The P4 program to push: the config's, else the one the switches were started for, else l3_ecmp."""
    if config.program:
        return config.program
    for info in (state.get("switches") or {}).values():
        if info.get("program"):
            return info["program"]
    import testbed.p4src

    return os.path.join(os.path.dirname(testbed.p4src.__file__), "l3_ecmp.p4")


def find_object(p4info, kind, name):
    """Return the full name of the P4Info object of ``kind`` (``"registers"``, ``"tables"``...) called ``name``.

    A short name matches the last component of a full name (``hash_seed``
    matches ``MyIngress.hash_seed``).

    Returns:
        str or None: the full name, or None if the program has no such object.
    """
    for obj in getattr(p4info, kind):
        full = obj.preamble.name
        if full == name or full.split(".")[-1] == name:
            return full
    return None


# -- the routing app ---------------------------------------------------------------------
class FabricRoutingApp(app_manager.OSKenApp):
    """Routes and ECMP groups for every switch; recomputation on link failures; parameters.

    See the module docstring for the options and events.
    """

    _CONTEXTS = {"fabric": FabricContext}
    _EVENTS = [EventFabricProgrammed, EventLinkStatus]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = kwargs["fabric"]
        self.failed_pairs = set()
        self._monitor = None
        self._monitor_stop = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self):
        """Start the event loop and queue the initial programming."""
        thread = super().start()
        self.send_event(self.name, _EventProgramFabric())
        return thread

    def close(self):
        """Stop the port monitor and close the P4Runtime sessions."""
        self._monitor_stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        programmer, self.fabric.programmer = self.fabric.programmer, None
        if programmer is not None:
            programmer.close()

    # -- programming -----------------------------------------------------------------------
    @set_ev_cls(_EventProgramFabric)
    def _program_fabric(self, _ev):
        """Push the pipeline, routes and parameters to every switch; report ready or the error."""
        fabric = self.fabric
        config = fabric.config
        try:
            from testbed.targets import pipeline_config

            started = time.monotonic()
            state, graph, switches, target = running_network(config)
            pipeline = pipeline_config(program_path(config, state), target)
            programmer = FabricProgrammer(graph, switches, pipeline, RoutingTables(), config.election_id)
            fabric.state, fabric.graph, fabric.pipeline = state, graph, pipeline
            fabric.programmer = programmer
            programmer.failed_links = {tuple(sorted(pair)) for pair in self.failed_pairs}
            programmer.connect()
            if config.push_pipeline:
                programmer.push_pipeline()
            written = programmer.install_routes()
            if programmer.unreachable:
                raise RuntimeError("switches not programmed: " + "; ".join(
                    f"{name}: {message}" for name, message in sorted(programmer.unreachable.items())))
            self._write_params(config.params)
            now = time.time()
            fabric.update_status(ready=True, routes_version=1, last_routes_written=now,
                                 program=pipeline.program_path, target=pipeline.target,
                                 switches=sorted(switches), entries_written=written)
            LOG.info("fabric programmed: %d switches, %d route entries, %.2f s (program %s, target %s)",
                     len(switches), written, time.monotonic() - started, pipeline.program_path,
                     pipeline.target)
            self.send_event_to_observers(EventFabricProgrammed(1))
            if config.port_poll_ms > 0 and config.routing != "route-only":
                self._start_port_monitor()
            if config.oneshot:
                fabric.finish(0)
        except Exception as error:  # reported through the status and the exit status
            LOG.exception("programming the fabric failed")
            fabric.update_status(error=f"{type(error).__name__}: {error}")
            if config.oneshot:
                fabric.finish(1)

    # -- parameters ------------------------------------------------------------------------
    def _write_params(self, params):
        """Write run-time parameters into the program's parameter tables on every switch."""
        if not params:
            return
        fabric = self.fabric
        written, notes = write_parameters(fabric.programmer.clients, fabric.pipeline.p4info, params,
                                          current=fabric.status()["params"])
        for note in notes:
            fabric.add_note(note)
        if written:
            current = fabric.status()["params"]
            current.update(written)
            fabric.update_status(params=current)
            LOG.info("parameters %s written on %d switches", written, len(fabric.programmer.clients))

    @set_ev_cls(EventParamsChanged)
    def _params_changed(self, ev):
        """Write new mechanism parameters at run time."""
        if self.fabric.programmer is None:
            self.fabric.add_note("parameters ignored: the fabric is not programmed")
            return
        try:
            self._write_params(ev.params)
        except Exception as error:
            LOG.exception("writing parameters failed")
            self.fabric.add_note(f"writing parameters {ev.params} failed: {error}")

    # -- failures ----------------------------------------------------------------------------
    @set_ev_cls(EventLinkStatus)
    def _link_status(self, ev):
        """Recompute routes without the failed links, write the difference, record the reaction."""
        fabric = self.fabric
        pair = node_pair(ev.a, ev.b)
        LOG.info("link %s-%s %s noticed at %.6f (from %s)", ev.a, ev.b, ev.status, ev.noticed_at, ev.source)
        fabric.update_status(last_failure_notice=ev.noticed_at)
        if fabric.config.routing == "route-only":
            LOG.info("route-only routing: link %s-%s %s not acted upon", ev.a, ev.b, ev.status)
            return
        before = set(self.failed_pairs)
        if ev.status == "down":
            self.failed_pairs.add(pair)
        else:
            self.failed_pairs.discard(pair)
        if fabric.programmer is None or not fabric.status()["ready"]:
            fabric.add_note(f"link {ev.a}-{ev.b} {ev.status} noticed before the fabric was programmed: "
                            "used when routes are next computed")
            return
        if self.failed_pairs == before:
            LOG.info("link %s-%s already %s: routes unchanged", ev.a, ev.b, ev.status)
            fabric.add_reaction({"link": [ev.a, ev.b], "status": ev.status, "source": ev.source,
                                 "noticed_at": ev.noticed_at, "routes_written_at": time.time(),
                                 "reaction_s": time.monotonic() - ev.noticed_mono, "compute_write_s": 0.0,
                                 "entries_written": 0, "changed": False,
                                 "routes_version": fabric.status()["routes_version"]})
            return
        try:
            result = fabric.programmer.reroute({tuple(sorted(p)) for p in self.failed_pairs})
        except Exception as error:
            LOG.exception("recomputing routes failed")
            fabric.update_status(error=f"reroute after {ev.a}-{ev.b} {ev.status}: {error}")
            return
        written_at = time.time()
        reaction = time.monotonic() - ev.noticed_mono
        unreachable = dict(fabric.programmer.unreachable or {})
        for switch, message in sorted(unreachable.items()):
            fabric.add_note(f"after link {ev.a}-{ev.b} {ev.status}: switch {switch} not updated ({message})")
        version = fabric.status()["routes_version"] + 1
        fabric.update_status(routes_version=version, last_routes_written=written_at,
                             failed_links=sorted(sorted(p) for p in self.failed_pairs))
        fabric.add_reaction({"link": [ev.a, ev.b], "status": ev.status, "source": ev.source,
                             "noticed_at": ev.noticed_at, "routes_written_at": written_at,
                             "reaction_s": reaction, "compute_write_s": result["seconds"],
                             "entries_written": result["entries_written"], "changed": True,
                             "routes_version": version, "unreachable_switches": sorted(unreachable)})
        LOG.info("reacted to link %s-%s %s: routes v%d written at %.6f, %.1f ms after the notice "
                 "(%d entries)", ev.a, ev.b, ev.status, version, written_at, reaction * 1000.0,
                 result["entries_written"])

    # -- port monitor -----------------------------------------------------------------------
    def _start_port_monitor(self):
        """Watch the operstate of every switch port on a switch-switch link."""
        ports = self._fabric_ports()
        self._monitor = threading.Thread(target=self._watch_ports, args=(ports,), name="fabric-port-monitor",
                                         daemon=True)
        self._monitor.start()
        LOG.info("port monitor: %d switch ports every %d ms", len(ports), self.fabric.config.port_poll_ms)

    def _fabric_ports(self):
        """``{interface: (switch, neighbour, netns_pid)}`` for the switch ends of inter-switch links.

        ``netns_pid`` is a process in the switch's network namespace (BMv2's), None for the root one.
        """
        graph, state = self.fabric.graph, self.fabric.state
        ports = {}
        for u, v, data in graph.edges(data=True):
            if is_host(graph, u) or is_host(graph, v):
                continue
            for here, there in ((u, v), (v, u)):
                info = state["switches"].get(here) or {}
                intf = info.get("ports", {}).get(str(port_toward(data, here)))
                if intf:
                    ports[intf] = (here, there, info.get("netns_pid"))
        return ports

    def _watch_ports(self, ports):
        """Poll port states; send a link event when a pair's state changes (both ends considered)."""
        from testbed.emulation.namespaces import interface_is_up, namespace_socket

        period = self.fabric.config.port_poll_ms / 1000.0
        sockets = {pid: namespace_socket(pid) for _here, _there, pid in ports.values()}
        known = {}
        try:
            while not self._monitor_stop.wait(period):
                try:
                    pair_up = {}
                    for intf, (here, there, pid) in ports.items():
                        pair = node_pair(here, there)
                        pair_up[pair] = pair_up.get(pair, True) and interface_is_up(sockets[pid], intf)
                    for pair, up in sorted(pair_up.items(), key=lambda item: sorted(item[0])):
                        if known.get(pair, True) != up:
                            a, b = sorted(pair)
                            self.send_event_to_observers(EventLinkStatus(a, b, "up" if up else "down",
                                                                         source="port-monitor"))
                        known[pair] = up
                except Exception:
                    LOG.exception("port monitor")
        finally:
            for sock in sockets.values():
                sock.close()
