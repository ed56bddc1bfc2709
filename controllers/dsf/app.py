"""The DSF control plane as an os-ken (Ryu API) application: reachability and Input Balanced Mode.

:class:`DSFFabricApp` runs under :mod:`testbed.controllers.launcher` beside
:class:`testbed.controllers.notify.FabricRestApp` (link notices, status,
parameters over REST) and shares their :class:`~testbed.controllers.fabric_app.FabricContext`:

* at start it reads the running network's state file, rebuilds the topology,
  pushes p4src/dsf_rdsw.p4 to the interface nodes and p4src/dsf_fabric.p4 to the
  fabric and spine nodes, writes addressing and reachability
  (:class:`~testbed.controllers.dsf.programming.DSFProgrammer`) and the run-time
  parameters (``MyIngress.dsf_params`` on the RDSWs);
* on every link event (:class:`~testbed.controllers.fabric_app.EventLinkStatus`)
  it recomputes every node's reachability from the topology and the link state,
  applies Input Balanced Mode (``dsf_input_balanced``; withdrawals seeded by
  ``dsf_ibm_seed``, :func:`testbed.controllers.dsf.reachability.ibm_rng`) and
  writes the difference over P4Runtime; each reaction records the withdrawals.

Its status (``GET /fabric/status``) adds ``dsf``: ``{"input_balanced", "ibm_seed",
"withdrawals": {dest rdsw: [[advertiser, neighbour, key]]}, "failed_links",
"nodes": {rdsw: node number}, "system_ports": {host: number}}``.
"""
import logging
import time

from os_ken.base import app_manager
from os_ken.controller import event
from os_ken.controller.handler import set_ev_cls

from testbed.controllers.dsf.programming import DSFProgrammer, node_program_paths
from testbed.controllers.fabric_app import (EventFabricProgrammed, EventLinkStatus, EventParamsChanged,
                                            FabricContext, running_network)
from testbed.controllers.parameters import write_parameters
from testbed.modes import PARAMETERS
from testbed.topologies.graph import node_pair

LOG = logging.getLogger("testbed.controllers.dsf.app")


class _EventProgramDSF(event.EventBase):
    """Internal: program the DSF fabric (sent by the app to itself at start)."""


def controller_parameters(params):
    """The controller-only DSF parameters in force: ``{"dsf_input_balanced", "dsf_ibm_seed"}``."""
    return {name: params.get(name, PARAMETERS[name].default) for name in ("dsf_input_balanced", "dsf_ibm_seed")}


class DSFFabricApp(app_manager.OSKenApp):
    """Reachability tables and Input Balanced Mode for every node of a DSF fabric."""

    _CONTEXTS = {"fabric": FabricContext}
    _EVENTS = [EventFabricProgrammed]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = kwargs["fabric"]
        self.failed_pairs = set()

    def start(self):
        """Start the event loop and queue the initial programming."""
        thread = super().start()
        self.send_event(self.name, _EventProgramDSF())
        return thread

    def close(self):
        """Close the P4Runtime sessions."""
        programmer, self.fabric.programmer = self.fabric.programmer, None
        if programmer is not None:
            programmer.close()

    def _dsf_status(self, programmer):
        state = programmer.reachability
        return {"input_balanced": programmer.input_balanced, "ibm_seed": programmer.ibm_seed,
                "withdrawals": {dest: [list(w) for w in rows] for dest, rows in state.withdrawals.items() if rows},
                "failed_links": sorted(sorted(pair) for pair in self.failed_pairs),
                "nodes": dict(programmer.addressing.nodes),
                "system_ports": {host: port.number for host, port in programmer.addressing.system_ports.items()}}

    @set_ev_cls(_EventProgramDSF)
    def _program(self, _ev):
        """Push the node programs, addressing, reachability and parameters; report ready or the error."""
        fabric = self.fabric
        config = fabric.config
        try:
            from testbed.targets import pipeline_config

            started = time.monotonic()
            state, graph, switches, target = running_network(config)
            paths = node_program_paths(config.program)
            pipelines = {role: pipeline_config(path, target) for role, path in paths.items()}
            chosen = controller_parameters(config.params)
            programmer = DSFProgrammer(graph, switches, pipelines, config.election_id,
                                       input_balanced=chosen["dsf_input_balanced"], ibm_seed=chosen["dsf_ibm_seed"])
            fabric.state, fabric.graph, fabric.pipeline, fabric.programmer = state, graph, pipelines["rdsw"], programmer
            programmer.connect()
            written = programmer.program()
            if self.failed_pairs:  # link notices that came while programming
                written += programmer.reroute(self.failed_pairs)["entries_written"]
            params = self._write_params(config.params)
            fabric.update_status(ready=True, routes_version=1, last_routes_written=time.time(),
                                 program=pipelines["rdsw"].program_path, target=target,
                                 switches=sorted(switches), entries_written=written, params=params,
                                 dsf=self._dsf_status(programmer))
            LOG.info("DSF fabric programmed: %d nodes, %d updates, %.2f s", len(switches), written,
                     time.monotonic() - started)
            self.send_event_to_observers(EventFabricProgrammed(1))
        except Exception as error:  # reported through the status
            LOG.exception("programming the DSF fabric failed")
            fabric.update_status(error=f"{type(error).__name__}: {error}")

    def _write_params(self, params):
        """Write the P4 parameters on the RDSWs; return every parameter in force (controller-only ones too)."""
        programmer = self.fabric.programmer
        current = dict(self.fabric.status()["params"])
        written, notes = write_parameters(programmer.rdsw_clients(), programmer.pipeline.p4info, params, current)
        for note in notes:
            self.fabric.add_note(note)
        current.update(written)
        current.update({name: value for name, value in params.items() if not PARAMETERS[name].in_program})
        current.update({"dsf_input_balanced": int(programmer.input_balanced), "dsf_ibm_seed": programmer.ibm_seed})
        return current

    @set_ev_cls(EventParamsChanged)
    def _params_changed(self, ev):
        """New parameters at run time: P4 ones are written, Input Balanced Mode's apply from the next event."""
        programmer = self.fabric.programmer
        if programmer is None:
            self.fabric.add_note("parameters ignored: the fabric is not programmed")
            return
        try:
            chosen = controller_parameters(dict({"dsf_input_balanced": int(programmer.input_balanced),
                                                 "dsf_ibm_seed": programmer.ibm_seed}, **ev.params))
            programmer.input_balanced = bool(chosen["dsf_input_balanced"])
            programmer.ibm_seed = chosen["dsf_ibm_seed"]
            self.fabric.update_status(params=self._write_params(ev.params))
        except Exception as error:
            LOG.exception("writing parameters failed")
            self.fabric.add_note(f"writing parameters {ev.params} failed: {error}")

    @set_ev_cls(EventLinkStatus)
    def _link_status(self, ev):
        """Recompute reachability and Input Balanced Mode for the new link state; write the difference."""
        fabric = self.fabric
        LOG.info("link %s-%s %s noticed at %.6f (from %s)", ev.a, ev.b, ev.status, ev.noticed_at, ev.source)
        fabric.update_status(last_failure_notice=ev.noticed_at)
        pair = node_pair(ev.a, ev.b)
        if ev.status == "down":
            self.failed_pairs.add(pair)
        else:
            self.failed_pairs.discard(pair)
        programmer = fabric.programmer
        if programmer is None or not fabric.status()["ready"]:
            fabric.add_note(f"link {ev.a}-{ev.b} {ev.status} noticed before the fabric was programmed")
            return
        try:
            result = programmer.reroute(self.failed_pairs)
        except Exception as error:
            LOG.exception("recomputing reachability failed")
            fabric.update_status(error=f"reachability after {ev.a}-{ev.b} {ev.status}: {error}")
            return
        written_at = time.time()
        version = fabric.status()["routes_version"] + 1
        for switch, message in sorted(programmer.unreachable.items()):
            fabric.add_note(f"after link {ev.a}-{ev.b} {ev.status}: switch {switch} not updated ({message})")
        fabric.update_status(routes_version=version, last_routes_written=written_at,
                             failed_links=sorted(sorted(p) for p in self.failed_pairs),
                             dsf=self._dsf_status(programmer))
        fabric.add_reaction({"link": [ev.a, ev.b], "status": ev.status, "source": ev.source,
                             "noticed_at": ev.noticed_at, "routes_written_at": written_at,
                             "reaction_s": time.monotonic() - ev.noticed_mono, "compute_s": result["compute_s"],
                             "compute_write_s": result["seconds"], "entries_written": result["entries_written"],
                             "changed": True, "routes_version": version, "withdrawals": result["withdrawals"],
                             "unreachable_switches": sorted(programmer.unreachable)})
        LOG.info("reacted to link %s-%s %s: reachability v%d, %d updates, withdrawals toward %s", ev.a, ev.b,
                 ev.status, version, result["entries_written"], sorted(result["withdrawals"]))
