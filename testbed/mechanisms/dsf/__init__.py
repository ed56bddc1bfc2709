"""DSF, Meta's disaggregated scheduled fabric (seed 000): VOQs with credit scheduling, cells sprayed over the
fabric, in-order reassembly, reachability and Input Balanced Mode.

Code of this family: ``p4src/dsf_rdsw.p4`` (interface nodes) and
``p4src/dsf_fabric.p4`` (fabric and spine nodes) with
``p4src/include/dsf*.p4``; the embedded target's DSF traffic manager
(``testbed/p4/v1model/dsf/``: VOQs, credits, segmentation, reassembly, declared
to P4 as ``@embedded_only`` externs); ``topologies/dsf/topology.py`` and
``topologies/dsf/reachability.py``; ``controllers/dsf/`` (addressing,
reachability, programming, the os-ken app); its run hooks, metrics and plots
in this package.

The traffic manager's parameters live in the parameter table ``MyIngress.dsf_params``
(default action ``MyIngress.set_dsf_params``, p4src/include/dsf.p4); the last
three parameters are the controller's only.
"""
from testbed.mechanisms.base import ANY_OPTION, ControllerKind, Mechanism, Mode, Parameter

_DSF, _SET_DSF = "MyIngress.dsf_params", "MyIngress.set_dsf_params"

# the fabric header is 20 bytes, a link's MTU 1500
PARAMETERS = (
    Parameter("dsf_cell_bytes", 21, 1500, "bytes (fabric header of 20 bytes + payload, at most the MTU)", _DSF,
              _SET_DSF, "cell_bytes", 512,
              "DSF: cell size on a fabric link, the 20-byte fabric header included (Jericho: up to 256)"),
    Parameter("dsf_grant_bytes", 1, 1_000_000, "bytes", _DSF, _SET_DSF, "grant_bytes", 4096,
              "DSF: bytes of packet one credit grant lets a VOQ send"),
    Parameter("dsf_credit_rate_pct", 1, 100, "% of the egress port rate", _DSF, _SET_DSF, "credit_rate_pct", 100,
              "DSF: the egress port scheduler's grant rate, in percent of the port's rate (never above it)"),
    Parameter("dsf_voq_depth_pkts", 1, 100_000, "packets", _DSF, _SET_DSF, "voq_depth", 1024,
              "DSF: packets one VOQ holds; more are tail-dropped at the ingress node"),
    Parameter("dsf_reassembly_timeout_us", 100, 10_000_000, "us", _DSF, _SET_DSF, "reassembly_timeout_us",
              200_000, "DSF: how long reassembly waits for a missing cell before it gives the packet up"),
    Parameter("dsf_credits", 0, 1, "", _DSF, _SET_DSF, "credits", 1,
              "DSF: 1 VOQs send only against credit from the egress port scheduler; 0 send at once"),
    Parameter("dsf_input_balanced", 0, 1, "", None, None, None, 1,
              "DSF controller: 1 applies Input Balanced Mode on link events, 0 only withdraws lost paths"),
    Parameter("dsf_ibm_seed", 0, 0xFFFFFFFF, "", None, None, None, 0,
              "DSF controller: seed of Input Balanced Mode's random link choices (default: from the spec's seed)",
              seeded_bits=32),
    Parameter("dsf_fabric_queue_frames", 1, 10_000, "frames", None, None, None, 128,
              "DSF controller: queue of each shaped fabric link (tc pfifo under the link's htb class)"),
)

MECHANISM = Mechanism(
    name="dsf",
    description="DSF: VOQs gated by credit, cells sprayed over links with reachability, in-order reassembly, "
                "Input Balanced Mode",
    order=2,
    modes=(
        Mode("dsf", "dsf_rdsw.p4", "DSF: VOQs gated by credit, cells sprayed over links with reachability, "
             "in-order reassembly, Input Balanced Mode", tuple(parameter.name for parameter in PARAMETERS),
             topology="dsf", controller="dsf",
             node_programs=(("fdsw", "dsf_fabric.p4"), ("sdsw", "dsf_fabric.p4"))),
    ),
    parameters=PARAMETERS,
    controllers=(
        ControllerKind("dsf", "the os-ken DSF app: node programs, reachability, Input Balanced Mode on every "
                       "link event", "testbed.controllers.dsf.controller:DSFController",
                       constructor_options=ANY_OPTION),
    ),
    # the IP Clos baselines (ecmp, eecmp) on a DSF topology are measured the same way
    topology_kinds=("dsf",),
    hooks="testbed.mechanisms.dsf.run:DSFHooks",
)
