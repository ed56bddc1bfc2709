"""Load balancing over equal-cost paths (seed 004 sections 4.1-4.5): ECMP, E-ECMP, spraying, flowlets, pinning.

Code of this family: ``p4src/{l3_ecmp,ecmp,eecmp,spray,flowlet,pinning,te}.p4`` with
``p4src/include/{flow_hash,lb_metadata,routing}.p4``; the routes and ECMP groups
every controller installs (``controllers/routing.py``,
``controllers/fabric_programmer.py``); the controllers ``static`` and ``none``
(``controllers/kinds.py``) and the os-ken apps (``controllers/fabric_app.py``,
traffic engineering in ``controllers/te.py``, ``controllers/te_app.py``); its run
hooks in :mod:`testbed.mechanisms.lb.run`.

Parameters live in parameter tables (a keyless table whose default action
carries the values): ``MyIngress.lb_params`` / ``set_lb_params(hash_seed)``
(include/flow_hash.p4), ``MyIngress.flowlet_params`` /
``set_flowlet_params(interval_us, load_aware)`` (flowlet.p4).
"""
from testbed.mechanisms.base import ANY_OPTION, ControllerKind, Mechanism, Mode, Parameter

_LB, _SET_LB = "MyIngress.lb_params", "MyIngress.set_lb_params"
_FLOWLET, _SET_FLOWLET = "MyIngress.flowlet_params", "MyIngress.set_flowlet_params"

MECHANISM = Mechanism(
    name="lb",
    description="load balancing over equal-cost paths: ECMP, E-ECMP, spraying, flowlets, pinning",
    order=0,
    modes=(
        Mode("ecmp", "ecmp.p4", "5-tuple ECMP: crc16 of src/dst address, protocol, ports and the seed",
             ("hash_seed",), default=True),
        Mode("eecmp", "eecmp.p4", "E-ECMP: the 5-tuple plus the RoCE BTH destination QP", ("hash_seed",)),
        Mode("spray", "spray.p4", "per-packet spraying over every equal-cost uplink", ("hash_seed",)),
        Mode("flowlet", "flowlet.p4", "flowlet switching: a new path after an idle gap",
             ("flowlet_interval_us", "flowlet_load_aware", "hash_seed")),
        Mode("pinning", "pinning.p4", "path pinning by destination slice"),
    ),
    parameters=(
        Parameter("hash_seed", 0, 0xFFFFFFFF, "", _LB, _SET_LB, "hash_seed", 0,
                  "seed mixed into the flow hash (p4src/include/flow_hash.p4)", seeded_bits=16),
        Parameter("flowlet_interval_us", 1, 10_000_000, "us", _FLOWLET, _SET_FLOWLET, "interval_us", 512,
                  "idle gap after which a flow's next packet starts a new flowlet (p4src/flowlet.p4)"),
        Parameter("flowlet_load_aware", 0, 1, "", _FLOWLET, _SET_FLOWLET, "load_aware", 0,
                  "1: a new flowlet keeps its port when that port's queue is shorter (p4src/flowlet.p4)"),
    ),
    controllers=(
        ControllerKind("static", "the runner's own controller: routes, then a reroute detection_delay_ms after "
                       "each failure it is told of", "testbed.controllers.kinds:StaticController", default=True),
        ControllerKind("none", "routes pushed once, never recomputed (the no-recovery baseline)",
                       "testbed.controllers.kinds:NoRecoveryController", recovers=False),
        ControllerKind("osken", "the os-ken fabric apps (routing, failure reaction, traffic engineering, REST)",
                       "testbed.controllers.kinds:OskenController", constructor_options=ANY_OPTION,
                       reads_state_file=True),
    ),
    hooks="testbed.mechanisms.lb.run:LoadBalancingHooks",
)
