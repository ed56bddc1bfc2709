"""FC+ (seed 001): expander fabrics run lossless (PFC), routed by KSP, DF-KSP, FC+ (1L/2L) or FC, with a
PFC deadlock detector.

Code of this family: ``topologies/fcplus/`` (topologies, routings, channel
dependency graphs, throughput LP); ``p4src/fcplus.p4`` (QP-hashed path choice,
priority transitions); PFC in the embedded target's traffic manager
(``testbed/p4/v1model/pfc.py``, ``traffic_manager.py``); ``controllers/fcplus/``
(entries from the routing, port queues and PFC settings); the deadlock
detector and run hooks in this package.

Its parameters are the controller's (no parameter table): routing size,
lossless classes, port rate and the PFC thresholds, all in packets.
"""
from testbed.mechanisms.base import ControllerKind, ControllerOption, Mechanism, Mode, Parameter

PARAMETERS = (
    Parameter("fcplus_k", 1, 64, "paths", None, None, None, 4, "FC+: K, paths per ToR pair"),
    Parameter("fcplus_n_lp", 1, 3, "classes", None, None, None, 2,
              "FC+: N_lp, lossless classes DF-KSP may use (paths with T_du <= N_lp - 1)"),
    Parameter("pfc_lossless", 0, 3, "classes", None, None, None, 3,
              "PFC: classes 1..n are lossless (0: PFC off, every class lossy)"),
    Parameter("fabric_port_rate_pps", 0, 1_000_000, "packets/s", None, None, None, 300,
              "egress rate of every ToR-ToR port (0: unlimited); low so queues build at emulation speed"),
    Parameter("host_port_rate_pps", 0, 1_000_000, "packets/s", None, None, None, 1000,
              "egress rate of every ToR port toward a host (0: unlimited)"),
    Parameter("queue_depth_packets", 1, 100_000, "packets", None, None, None, 64,
              "depth of each lossy egress queue"),
    Parameter("pfc_buffer_packets", 2, 1 << 20, "packets", None, None, None, 64,
              "PFC: packets one (ingress port, lossless class) may hold"),
    Parameter("pfc_xoff_packets", 1, 1 << 20, "packets", None, None, None, 16, "PFC: XOFF threshold"),
    Parameter("pfc_xon_packets", 0, 1 << 20, "packets", None, None, None, 8, "PFC: XON threshold"),
    Parameter("pfc_headroom_packets", 0, 1 << 20, "packets", None, None, None, 48,
              "PFC: room above XOFF for packets in flight (>= 1 with lossless classes)"),
    Parameter("deadlock_hold_ms", 1, 600_000, "ms", None, None, None, 1000,
              "deadlock detector: how long a cycle of paused queues must make no progress"),
)

#: the mode parameters that are PFC settings (checked together by checks.py)
PFC_FIELDS = ("pfc_buffer_packets", "pfc_xoff_packets", "pfc_xon_packets", "pfc_headroom_packets")
#: one switch's whole PFC setting: the keys of a switch's entry in ``controller.pfc_switches``
PFC_SWITCH_FIELDS = ("pfc_lossless",) + PFC_FIELDS


def _mode(name, routing, description, topology=None):
    return Mode(name, "fcplus.p4", description,
                tuple(parameter.name for parameter in PARAMETERS), topology=topology, controller="fcplus",
                controller_options=(("routing", routing),), target_features=("pfc",))


MECHANISM = Mechanism(
    name="fcplus",
    description="FC+: expander fabrics under PFC with KSP, DF-KSP, FC+ (1L/2L) or FC routing; deadlock detection",
    order=3,
    modes=(
        _mode("fcplus_ksp", "ksp", "FC+ fabric, K shortest paths on one lossless class (may deadlock)"),
        _mode("fcplus_dfksp", "dfksp", "FC+ fabric, DF-KSP: K shortest paths with T_du <= N_lp - 1, "
              "a lossless class per down-up turn"),
        _mode("fcplus_1l", "fcplus1l", "FC+ (1L-K): K shortest up-down paths, one lossless class"),
        _mode("fcplus_2l", "fcplus2l", "FC+ (2L-K): DF-KSP on two lossless classes"),
        _mode("fc_updown", "fc", "FC: edge-disjoint up-down paths, one lossless class"),
        _mode("clos_updown", "fcplus1l", "the leaf-spine Clos of the FC+ fabric's switches, ports and hosts "
              "(topology fcplus_clos), up-down (leaf-spine-leaf) paths, one lossless class", topology="fcplus_clos"),
    ),
    parameters=PARAMETERS,
    controllers=(
        ControllerKind("fcplus", "programs fcplus.p4 from the FC+ routing over P4Runtime; port queues and PFC "
                       "over the embedded switches' control sockets; never reroutes",
                       "testbed.controllers.fcplus.controller:FCPlusController",
                       options=(ControllerOption(
                           "pfc_switches", "per switch, its own PFC settings instead of mode_params' pfc_*: "
                           "{switch: {" + ", ".join(PFC_SWITCH_FIELDS) + "}} (all five)",
                           "testbed.mechanisms.fcplus.checks:check_pfc_switches"),),
                       constructor_options=("routing",), recovers=False),
    ),
    topology_kinds=(),
    check_parameters="testbed.mechanisms.fcplus.checks:check_parameters",
    hooks="testbed.mechanisms.fcplus.run:FCPlusHooks",
)
