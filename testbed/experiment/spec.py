"""Experiment specs: YAML in, a validated :class:`ExperimentSpec` out.

A spec (every field but ``name`` and ``seed`` has a default)::

    name: leafspine-ecmp-failure        # required; names the output folder
    seed: 7                             # required; every random choice derives from it
    topology: {kind: clos, params: {leaves: 2, spines: 2, hosts_per_leaf: 2}, shape_links: false,
               queue_frames: 64,            # shape_links only: frames each link end queues (default 1000)
               link_delay_us: 100,          # added one-way delay of every switch-to-switch link (both ways)
               link_delays: [{link: [leaf0, spine1], delay_us: 400}]}   # per link, replacing link_delay_us
    target: auto                        # auto | embedded | bmv2
    backend: auto                       # python | native | auto: the embedded switches' pipeline
                                        # (default $TESTBED_BACKEND or auto; testbed.p4.native)
    mode: ecmp                          # a mode of a mechanism (testbed.modes.MODES: ecmp, eecmp, spray,
                                        # flowlet, pinning, f10, fattree-local, portland, dsf ...) or
                                        # program: PATH
    mode_params: {flowlet_interval_us: 500, hash_seed: 3}   # testbed.modes.PARAMETERS: ranges, P4 tables
    controller: {kind: static, detection_delay_ms: 50}   # a controller kind (testbed.mechanisms):
                                        # static | none | osken | f10 | dsf ...  (a mode with its own
                                        # controller uses it; the others use this one, also in
                                        # `testbed compare`); more keys: the options a kind declares,
                                        # given to that kind only, e.g. f10's monitored_switches:
                                        # [c0, a0_0], rescheduler_epoch_ms: 200, recovered_holddown_ms
    traffic:
      - {pattern: stream, hosts: [h1, h3, h2, h4], size_bytes: 65536, qps: 2,
         qp_scaling: roundrobin, udp_sport: per_qp, rate_mbps: 10, start_s: 0, duration_s: 4, mtu: 1024,
         pacing: even}                  # even | poisson | lognormal (streams: gaps of the rate's mean
                                        # spacing, exponential or log-normal with gap_sigma: 1.0; seed 002 7.2)
      - {pattern: stream, hosts: [h1, h4], rate_mbps: 5, pacing: lognormal, gap_sigma: 1.0,
         on_s: {median: 0.05, sigma: 1.0}, off_s: {median: 0.1, sigma: 1.0}}   # log-normal on/off periods
    failures:
      - {at_s: 1.5, action: link_down, link: [l1, s1]}
      - {at_s: 3.0, action: link_up, link: [l1, s1]}
      - {at_s: 2.0, action: switch_crash, switch: s2}
      - {at_s: 1.0, action: lossy_link, link: [l1, s1], loss: 0.01}   # netem, else embedded ports;
                                                                      # a later link_up ends it
    failure_trace:                      # optional: random failures drawn with the seed (seed 002, 7.2)
      start_s: 1.0                      # failures start in [start_s, end_s); repairs after end_s are dropped
      end_s: 4.0
      links: {between_failures_s: {median: 1.0, sigma: 0.8}, repair_s: {median: 0.5, sigma: 0.8}}
      switches: {between_failures_s: {median: 3.0, sigma: 0.8}, repair_s: {median: 1.0, sigma: 0.5}}
    duration_s: 5
    repeat: 1                           # runs per mode/sweep point in `testbed compare` (--repeat);
                                        # seeds: testbed.experiment.repeats.repeat_seeds
    metrics: [link_load, mmr, goodput, loss, out_of_order, recovery, timeline, controller]
    out_dir: results/leafspine-ecmp-failure

results.json always records every measurement; ``metrics`` choose the
extra files (``link_load``/``mmr``: link_load.csv and link_load.png;
``timeline``: throughput.png) and the lines ``testbed run`` prints.

Traffic ``pattern`` is ``stream`` (paced point-to-point streams: hosts are
paired in order, h1->h3, h2->h4) or a collective of
:data:`testbed.traffic.collectives.PATTERNS`.  ``hosts`` is a list of names,
``all``, or ``{random: N}`` (N hosts drawn with the spec's seed).
``udp_sport`` is the UDP source-port rule of the entry's QPs: ``per_qp``
(default; each QP its own port, as Linux derives it) or ``per_nic_pair`` (one
port for every QP between two NICs: 5-tuple ECMP then sees one flow per NIC
pair and only E-ECMP separates the QPs; seed 004 4.1).

``failure_trace`` adds ``link_down``/``link_up`` entries to ``failures``, drawn
by :func:`testbed.experiment.failure_traces.lognormal_trace` from the spec's
seed: log-normal times between failures and to repair (median in seconds,
log-scale spread ``sigma``), one process for switch-to-switch links and one
for switches (never edge switches; a switch failure takes all its fabric
links down together).  Each drawn entry records its ``cause``.  A mode that
changes the topology (``f10`` runs the AB FatTree) draws the trace again on
its own topology with the same seed: switch failures are then the same,
link failures fall on that topology's links.

Run-time parameters a run's mode takes and the spec does not give, where the
parameter is drawn from the seed (``hash_seed``, DSF's ``dsf_ibm_seed``), get
their value from :func:`derive_seed`; ``seeded_params`` lists them.

Every error names the field path, the allowed values and the value given (shortened
when long): ``traffic[1].rate_mbps: must be a number in (0, 10000] (got -5)``.
Every number has a range a run on one machine can honour: times (``duration_s``,
``start_s``, ``at_s``, the trace window) at most a day (:data:`MAX_DURATION_S`),
rates at most 10 Gbit/s, collective sizes at most 1 GiB, the detection delay at
most a minute, a log-normal's median in [1 ms, a day] and ``sigma`` in [0, 4] (every
draw finite), at most 10,000 drawn failures per process; the name (a folder name)
is at most 100 bytes.  Numbers must be finite (no ``.inf`` or ``.nan``), names and
paths free of control characters (NUL, newline).  The file itself is read within bounds
(:mod:`testbed.experiment.spec_yaml`:
UTF-8 text of at most 1 MiB, at most 32 levels deep, no key given twice,
YAML aliases only while the expanded document has at most 100,000 values),
and the topology is sized by its generator before anything is built.  :func:`derive_seed` gives
each random choice its own stable seed from the spec's seed and a label, so
the same spec places the same flows on every run.
"""
import copy
import hashlib
import math
import os
import random
from dataclasses import asdict, dataclass, field, replace
from typing import List, Optional, Tuple

from testbed import mechanisms
from testbed import modes as mode_table
from testbed.controllers.contract import DEFAULT_DETECTION_DELAY_MS, FAILURE_ACTIONS, element_label
from testbed.emulation.links import MAX_QUEUE_FRAMES
from testbed.emulation.netem import netem_available
from testbed.errors import ParameterError, SpecError, short_repr
from testbed.experiment.failure_traces import (MAX_MEDIAN_S, MIN_MEDIAN_S, FailureProcess, LogNormal,
                                               lognormal_trace)
from testbed.experiment.spec_yaml import read_spec_yaml
from testbed.p4.native import BACKENDS, default_backend
from testbed.targets import TARGETS, embedded_only_needs, resolve_target
from testbed.topologies.graph import node_pair
from testbed.traffic.sender import MAX_SIGMA, PACING_RULES

STREAM_PATTERN = "stream"
QP_SCALING = ("roundrobin", "split")
UDP_SPORT_RULES = ("per_qp", "per_nic_pair")
METRICS = ("link_load", "mmr", "goodput", "loss", "out_of_order", "recovery", "timeline", "controller")
MAX_QPS = 255
MAX_TRAFFIC_ENTRIES = 255
MAX_SEED = 2 ** 64 - 1
MAX_REPEAT = 100  # runs per mode or sweep point a comparison takes (each a full emulation)
MAX_NAMES_LISTED = 12  # node names an error message lists before "... (N in all)"
DEFAULT_RATE_MBPS = 10.0
# Bounds a run on one machine can honour (each named in the error of a value beyond it):
MAX_DURATION_S = 86_400.0  # a run, and every time in it: a day
MAX_RATE_MBPS = 10_000.0  # a stream's rate: 10 Gbit/s, more than one machine's veths carry
MAX_SIZE_BYTES = 1 << 30  # a collective's message: 1 GiB
MAX_DETECTION_DELAY_MS = 60_000.0  # the controller's reaction: a minute
MAX_LINK_DELAY_US = 1_000_000.0  # a link's added one-way delay: a second
MAX_NAME_BYTES = 100  # the name is the results folder's name (file names end at 255 bytes, with suffixes)
MAX_PATH_BYTES = 1024  # out_dir (each of its parts at most 255 bytes, the file-name limit)
DEFAULT_SIZE_BYTES = 64 * 1024
DEFAULT_MTU = 1024
DEFAULT_TAIL_S = 1.0

_TOP_FIELDS = ("name", "seed", "topology", "target", "backend", "program", "mode", "mode_params", "controller",
               "traffic", "failures", "failure_trace", "duration_s", "repeat", "metrics", "out_dir",
               "servers", "placement", "cross_link")
_TRAFFIC_FIELDS = ("pattern", "hosts", "size_bytes", "qps", "qp_scaling", "udp_sport", "rate_mbps", "start_s",
                   "duration_s", "mtu", "pacing", "gap_sigma", "on_s", "off_s")
_FAILURE_FIELDS = ("at_s", "action", "link", "switch", "loss")
_FAILURE_TRACE_FIELDS = ("start_s", "end_s", "links", "switches")
_FAILURE_PROCESS_FIELDS = ("between_failures_s", "repair_s")
_LOGNORMAL_FIELDS = ("median", "sigma")


# ---------------------------------------------------------------------- dataclasses
@dataclass
class TopologySpec:
    """``topology``: the generator kind, its parameters, and whether links are shaped to capacity.

    ``shape_links: true`` shapes every veth to its ``capacity_mbps`` with tc
    htb, so an overloaded uplink really drops (goodput then reflects balance);
    ``queue_frames`` then sets how many frames each link end queues before it
    drops (default the veth's 1,000: seconds at a few Mbit/s).
    ``link_delay_us`` delays every switch-to-switch link by that much in each
    direction, ``link_delays`` (``[{link: [a, b], delay_us: N}]``) single links
    instead: netem where the kernel has it, else the embedded switches' ports
    (so the fabric's round-trip time is known; a ``link_up`` or ``lossy_link``
    of the link later replaces its delay).
    """

    kind: str
    params: dict = field(default_factory=dict)
    shape_links: bool = False
    link_delay_us: float = 0.0
    link_delays: list = field(default_factory=list)
    queue_frames: Optional[int] = None

    def delays_us(self, topo):
        """``{(a, b): one-way delay in us}`` of every switch-to-switch link of ``topo`` that is delayed.

        >>> from testbed.topologies.clos import ClosTopo
        >>> spec = TopologySpec("clos", link_delay_us=100, link_delays=[{"link": ["spine1", "leaf0"], "delay_us": 400}])
        >>> spec.delays_us(ClosTopo(leaves=2, spines=2, hosts_per_leaf=1))
        {('leaf0', 'spine0'): 100.0, ('leaf0', 'spine1'): 400.0, ('leaf1', 'spine0'): 100.0, ('leaf1', 'spine1'): 100.0}
        """
        given = {node_pair(*entry["link"]): float(entry["delay_us"]) for entry in self.link_delays}
        delays = {}
        for a, b in sorted(_switch_link_pairs(topo)):
            delay = given.get(node_pair(a, b), float(self.link_delay_us))
            if delay > 0:
                delays[(a, b)] = delay
        return delays


@dataclass
class ControllerSpec:
    """``controller``: who programs routes and how fast it reacts to failures.

    ``kind`` is a controller kind of :func:`testbed.mechanisms.controller_kinds`
    (``static``: the runner's in-process FabricProgrammer recomputes routes
    ``detection_delay_ms`` after each failure; ``none``: routes are pushed once and
    never change; ``osken``: the os-ken fabric application; a mechanism's own).
    ``options`` are the other keys, each an option some kind declares; a kind
    gets those it declares (:meth:`options_for`), so one spec can be compared
    under modes with other controllers (``testbed compare --modes portland,f10``).
    """

    kind: str = ""
    detection_delay_ms: float = DEFAULT_DETECTION_DELAY_MS
    detection_delay_given: bool = False  # the spec set it (a mode's default does not replace it)
    requested_kind: Optional[str] = None  # the spec's kind, for modes without their own controller
    options: dict = field(default_factory=dict)

    def options_for(self, kind):
        """The options the controller ``kind`` takes, of those the spec gives."""
        declared = {option.name for option in mechanisms.controller_kind(kind).options}
        return {name: value for name, value in self.options.items() if name in declared}


@dataclass
class TrafficSpec:
    """One entry of ``traffic`` (hosts resolved to names; ``seed`` derived).

    ``job`` is the entry's traffic job number (index + 1): the top byte of its
    QP numbers (:mod:`testbed.traffic.qp`), so QP numbers, UDP source ports
    and hence ECMP placement are the same on every run, and entries may share
    hosts (each receiver keeps only its job's packets).
    """

    pattern: str
    hosts: List[str]
    size_bytes: int = DEFAULT_SIZE_BYTES
    qps: int = 1
    qp_scaling: str = "roundrobin"
    udp_sport: str = "per_qp"
    pacing: str = "even"
    gap_sigma: float = 1.0              # log-scale spread of lognormal gaps
    on_s: Optional[LogNormal] = None    # streams: on periods (with off_s), else always on
    off_s: Optional[LogNormal] = None
    rate_mbps: float = DEFAULT_RATE_MBPS
    start_s: float = 0.0
    duration_s: Optional[float] = None
    mtu: int = DEFAULT_MTU
    seed: int = 0
    job: int = 1

    def receivers(self):
        """Hosts that receive in this entry (streams: every second host; collectives: all)."""
        return self.hosts[1::2] if self.pattern == STREAM_PATTERN else list(self.hosts)

    def pairs(self):
        """``[(src, dst)]`` of a stream entry."""
        return list(zip(self.hosts[0::2], self.hosts[1::2]))


@dataclass
class FailureSpec:
    """One entry of ``failures``."""

    at_s: float
    action: str
    link: Optional[Tuple[str, str]] = None
    switch: Optional[str] = None
    loss: Optional[float] = None
    cause: Optional[str] = None  # drawn by failure_trace: "link a-b" or "switch s" (None: written in the spec)

    def label(self):
        """Short text for plots and logs (``link_down l1-s1``)."""
        extra = f" loss={self.loss}" if self.loss is not None else ""
        if self.cause and self.cause.startswith("switch"):
            extra += f" ({self.cause})"
        return f"{self.action} {element_label(self.link, self.switch)}{extra}".strip()


@dataclass
class FailureTraceSpec:
    """``failure_trace``: random failures drawn in ``[start_s, end_s)`` (see the module docstring)."""

    start_s: float
    end_s: float
    links: Optional[FailureProcess] = None
    switches: Optional[FailureProcess] = None

    def failures(self, graph, seed):
        """The trace's entries on a topology graph: ``[FailureSpec]`` with their ``cause``."""
        events = lognormal_trace(graph, derive_seed(seed, "failure_trace"), self.start_s, self.end_s,
                                 links=self.links, switches=self.switches)
        return [FailureSpec(at_s=at_s, action=action, link=link, cause=cause)
                for at_s, action, link, cause in events]


@dataclass
class ExperimentSpec:
    """A validated experiment.

    Attributes:
        name, seed: as given.
        topology: :class:`TopologySpec`.
        target: ``auto``, ``embedded`` or ``bmv2``.
        backend: the embedded switches' pipeline backend, ``python``, ``native`` or ``auto``.
        mode: the load-balancing mode (None when ``program`` was given).
        program: absolute path of the P4 program to run.
        mode_params: run-time parameters (:data:`testbed.modes.PARAMETERS`), checked.
        seeded_params: the names in ``mode_params`` drawn from the seed (the spec gave no value).
        controller: :class:`ControllerSpec`.
        traffic: list of :class:`TrafficSpec`.
        failures: list of :class:`FailureSpec`: those written in the spec, in its order, then
            those drawn by ``failure_trace`` in time order (the runner applies all in time order).
        failure_trace: :class:`FailureTraceSpec` or None.
        duration_s: the run's length.
        metrics: the metrics to report (plots and summary lines).
        out_dir: default output directory.
        repeat: how many times ``testbed compare`` runs each mode or sweep point.
        source: the file it came from (None for dicts).
        raw: the data it was parsed from (for :meth:`with_seed`; not recorded).
    """

    name: str
    seed: int
    topology: TopologySpec
    target: str = "auto"
    backend: str = "auto"
    mode: Optional[str] = None
    program: str = ""
    mode_params: dict = field(default_factory=dict)
    seeded_params: List[str] = field(default_factory=list)
    controller: ControllerSpec = field(default_factory=ControllerSpec)
    traffic: List[TrafficSpec] = field(default_factory=list)
    failures: List[FailureSpec] = field(default_factory=list)
    failure_trace: Optional["FailureTraceSpec"] = None
    duration_s: float = 0.0
    metrics: List[str] = field(default_factory=lambda: list(METRICS))
    out_dir: str = ""
    repeat: int = 1
    servers: List = field(default_factory=list)
    placement: dict = field(default_factory=dict)
    cross_link: str = "vxlan"
    source: Optional[str] = None
    raw: Optional[dict] = field(default=None, repr=False, compare=False)

    def to_dict(self):
        """JSON-able form (as recorded in results.json)."""
        data = asdict(self)
        data.pop("raw")
        for failure in data["failures"]:
            if failure["link"] is not None:
                failure["link"] = list(failure["link"])
        return data

    def build_topology(self):
        """Build the topology object (a Mininet Topo; no network is started)."""
        from testbed.topologies.registry import make_topology

        return make_topology(self.topology.kind, **self.topology.params)

    def with_seed(self, seed):
        """Return this spec as if written with ``seed``: every choice drawn from the seed drawn again.

        Traffic seeds, randomly chosen hosts, failure traces and seeded parameters
        follow the new seed; everything the spec states stays.  The mode and
        parameters given since parsing (:meth:`with_mode`, ``mode_params``) are not
        carried over: apply them to the result.

        Raises:
            ValueError: the spec was not parsed from data (:func:`parse_spec`) and ``seed`` is not its own.
        """
        if seed == self.seed:
            return copy.deepcopy(self)
        if self.raw is None:
            raise ValueError("only a spec parsed by parse_spec can be drawn again with another seed")
        return parse_spec(dict(self.raw, seed=seed), source=self.source, check_machine=False)

    def with_mode(self, mode):
        """Return a copy of this spec running ``mode``: its program, and its topology kind and
        controller where the mode has its own (see :class:`testbed.modes.Mode`).

        Raises:
            ParameterError: unknown mode, or its program does not exist.
        """
        program = mode_table.program_for_mode(mode)
        spec = replace(copy.deepcopy(self), mode=mode, program=program)
        _apply_mode(spec, mode_table.MODES[mode])
        return spec


def _apply_mode(spec, mode):
    """Give ``spec`` the topology kind, controller and reaction delay its ``mode`` fixes.

    Raises:
        SpecError: the mode's topology kind does not take the spec's topology parameters.
    """
    if mode.topology and mode.topology != spec.topology.kind:
        from testbed.topologies.registry import make_topology

        try:
            make_topology(mode.topology, **spec.topology.params)
        except ParameterError as error:
            raise SpecError("mode", mode.name, f"runs on a {mode.topology} topology, whose parameters do not "
                            f"fit topology.params ({error})") from None
        spec.topology.kind = mode.topology
        if spec.failure_trace is not None:
            written = [failure for failure in spec.failures if failure.cause is None]
            spec.failures = written + spec.failure_trace.failures(
                make_topology(mode.topology, **spec.topology.params).graph(), spec.seed)
    if mode.controller:
        spec.controller.kind = mode.controller
    elif spec.controller.requested_kind:
        spec.controller.kind = spec.controller.requested_kind  # not the kind a previous mode fixed
    _seed_parameters(spec.mode_params, spec.seeded_params, mode.name, spec.seed)
    if mode.detection_delay_ms is not None and not spec.controller.detection_delay_given:
        spec.controller.detection_delay_ms = mode.detection_delay_ms


def _seed_parameters(values, seeded, mode, seed):
    """Draw from ``seed`` the seeded parameters of ``mode`` missing from ``values``; list them in ``seeded``."""
    for parameter in mode_table.seeded_parameters(mode):
        if parameter.name not in values:
            values[parameter.name] = derive_seed(seed, parameter.name) & ((1 << parameter.seeded_bits) - 1)
            seeded.append(parameter.name)


# ---------------------------------------------------------------------- seeds
def derive_seed(seed, *labels):
    """A stable 32-bit seed for one random choice, from the spec's seed and labels.

    ``derive_seed(7, "traffic", 0)`` is the same on every machine and run
    (SHA-256, not Python's salted ``hash``).
    """
    text = "/".join([str(seed)] + [str(label) for label in labels])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


# ---------------------------------------------------------------------- checkers
def _require_mapping(value, path):
    if not isinstance(value, dict):
        raise SpecError(path, value, "must be a mapping")
    return value


def on_servers(spec, servers, cross_link=None):
    """``spec`` run over ``servers`` (a list of entries, or ``"a,b"``) with ``cross_link`` (default: the
    spec's), the spec's own servers and placement replaced (``testbed run/compare --servers``).

    Raises:
        SpecError: a cross_link that is not vxlan or ssh, or servers that are not a list of names.
    """
    if isinstance(servers, str):
        servers = [item.strip() for item in servers.split(",") if item.strip()]
    data = {"servers": list(servers), "placement": {}, "cross_link": cross_link or spec.cross_link}
    servers, placement, cross_link = _parse_servers(data, spec.build_topology())
    raw = dict(spec.raw or {}, **data)
    return replace(spec, servers=servers, placement=placement, cross_link=cross_link, raw=raw)


def _parse_servers(data, topo):
    """``servers`` (a fabric over several servers), ``placement`` ({node: server}) and ``cross_link``."""
    servers = data.get("servers", [])
    if not isinstance(servers, list) or not all(isinstance(entry, (str, dict)) for entry in servers):
        raise SpecError("servers", servers, "must be a list of server names (localhost, user@host, tb-srv1) "
                                            "or {host, user, identity, known_hosts, python}")
    placement = data.get("placement", {})
    if not isinstance(placement, dict) or (placement and not servers):
        raise SpecError("placement", placement, "must be a mapping node: server, with servers")
    nodes = set(topo.nodes())
    names = ["localhost"] + [entry if isinstance(entry, str) else entry.get("name", entry.get("host"))
                             for entry in servers]
    for node, server in placement.items():
        if node not in nodes:
            raise SpecError(f"placement.{node}", node, "must name a node of the topology")
        if server not in names:
            raise SpecError(f"placement.{node}", server, "must be one of the servers: " + ", ".join(names))
    cross_link = _choice(data.get("cross_link", "vxlan"), ("vxlan", "ssh"), "cross_link")
    return list(servers), dict(placement), cross_link


def _check_keys(data, allowed, path):
    for key in data:
        if key not in allowed:
            name = key if isinstance(key, str) and len(key) <= 60 and key.isprintable() else short_repr(key, 60)
            where = f"{path}.{name}" if path else name
            raise SpecError(where, data[key], "unknown field; allowed: " + ", ".join(allowed), show_value=False)


def _number(value, path, minimum=None, exclusive=False, maximum=None, integer=False):
    """``value`` if it is a number (``integer``: an int) within the bounds, else a SpecError naming ``path``
    and the allowed range (``exclusive``: the minimum itself is not allowed)."""
    kind = "an integer" if integer else "a number"
    low, high = (bound if isinstance(bound, int) else f"{bound:g}" for bound in (minimum or 0, maximum or 0))
    if minimum is not None and maximum is not None:
        allowed = f"{kind} in {'(' if exclusive else '['}{low}, {high}]"
    elif minimum is not None:
        allowed = f"{kind} {'>' if exclusive else '>='} {low}"
    else:
        allowed = kind if maximum is None else f"{kind} <= {high}"
    if isinstance(value, bool) or not isinstance(value, (int,) if integer else (int, float)):
        raise SpecError(path, value, f"must be {allowed}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(path, value, "must be a finite " + allowed[len("a "):])
    if (minimum is not None and (value <= minimum if exclusive else value < minimum)) or \
            (maximum is not None and value > maximum):
        raise SpecError(path, value, f"must be {allowed}")
    return value


def _choice(value, allowed, path):
    if not isinstance(value, str) or value not in allowed:
        raise SpecError(path, value, f"unknown {short_repr(value)}; allowed: " + ", ".join(allowed),
                        show_value=False)
    return value


def _string(value, path):
    if not isinstance(value, str) or not value.strip():
        raise SpecError(path, value, "must be a non-empty string")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        raise SpecError(path, value, "must not contain control characters (NUL, newline, tab ...)")
    return value


def _list(value, path, what):
    """``value`` if it is a list; None and a missing field give []."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(path, value, f"must be a list of {what}")
    return value


def _names_text(names):
    """Node names for an error message: all of a few, else the first ones and the count."""
    names = list(names)
    if len(names) <= MAX_NAMES_LISTED:
        return ", ".join(names)
    return ", ".join(names[:MAX_NAMES_LISTED]) + f", ... ({len(names)} in all)"


# ---------------------------------------------------------------------- sections
def _parse_topology(data):
    from testbed.topologies.registry import TOPOLOGY_KINDS, make_topology

    if "topology" not in data:
        raise SpecError("topology", None, "is required (kind and params)", show_value=False)
    section = _require_mapping(data["topology"], "topology")
    _check_keys(section, ("kind", "params", "shape_links", "queue_frames", "link_delay_us", "link_delays"),
                "topology")
    shape_links = section.get("shape_links", False)
    if not isinstance(shape_links, bool):
        raise SpecError("topology.shape_links", shape_links, "must be true or false")
    queue_frames = section.get("queue_frames")
    if queue_frames is not None:
        queue_frames = _number(queue_frames, "topology.queue_frames", minimum=1, maximum=MAX_QUEUE_FRAMES,
                               integer=True)
        if not shape_links:
            raise SpecError("topology.queue_frames", queue_frames, "only with shape_links: true")
    if "kind" not in section:
        raise SpecError("topology.kind", None, "is required; allowed: " + ", ".join(TOPOLOGY_KINDS),
                        show_value=False)
    kind = _choice(section["kind"], list(TOPOLOGY_KINDS), "topology.kind")
    params = section.get("params")
    params = _require_mapping({} if params is None else params, "topology.params")
    try:
        topo = make_topology(kind, **params)
    except SpecError:
        raise
    except ParameterError as error:
        problem = f"must be {error.allowed}" + (f" ({error.reason})" if error.reason else "")
        raise SpecError(f"topology.params.{error.field}", error.value, problem) from None
    delay = float(_number(section.get("link_delay_us", 0), "topology.link_delay_us", minimum=0,
                          maximum=MAX_LINK_DELAY_US))
    return TopologySpec(kind, dict(params), shape_links, delay, _parse_link_delays(section, topo), queue_frames), topo


def _parse_link_delays(section, topo):
    """``topology.link_delays`` -> ``[{"link": [a, b], "delay_us": float}]`` (switch-to-switch links only)."""
    entries = _list(section.get("link_delays"), "topology.link_delays", "entries {link: [a, b], delay_us: N}")
    links = _switch_link_pairs(topo)
    parsed, seen = [], set()
    for index, raw in enumerate(entries):
        path = f"topology.link_delays[{index}]"
        raw = _require_mapping(raw, path)
        _check_keys(raw, ("link", "delay_us"), path)
        link = raw.get("link")
        if not isinstance(link, list) or len(link) != 2 or not all(isinstance(n, str) for n in link):
            raise SpecError(f"{path}.link", link, "must be a list of two switch names [a, b]")
        if tuple(sorted(link)) not in links:
            raise SpecError(f"{path}.link", link, "no link between two switches of the topology (a host's link "
                            "has a switch port at one end only, so it cannot be delayed both ways)")
        if node_pair(*link) in seen:
            raise SpecError(f"{path}.link", link, "is given twice")
        seen.add(node_pair(*link))
        if "delay_us" not in raw:
            raise SpecError(f"{path}.delay_us", None, "is required (microseconds)", show_value=False)
        delay = float(_number(raw["delay_us"], f"{path}.delay_us", minimum=0, maximum=MAX_LINK_DELAY_US))
        parsed.append({"link": list(link), "delay_us": delay})
    return parsed


def _option_check(option):
    """A controller option's check: the callable, or the one its ``"module:attribute"`` names."""
    return mechanisms.load(option.check) if isinstance(option.check, str) else option.check


def _parse_controller(data, switches):
    section = data.get("controller")
    default = mechanisms.default_controller_kind()
    if section is None:
        return ControllerSpec(default, requested_kind=default)
    if isinstance(section, str):
        section = {"kind": section}
    section = _require_mapping(section, "controller")
    declared = {}
    for kind in mechanisms.controller_kinds().values():
        for option in kind.options:
            declared.setdefault(option.name, option)
    _check_keys(section, ("kind", "detection_delay_ms") + tuple(declared), "controller")
    kind = _choice(section.get("kind", default), list(mechanisms.controller_kinds()), "controller.kind")
    delay = _number(section.get("detection_delay_ms", DEFAULT_DETECTION_DELAY_MS),
                    "controller.detection_delay_ms", minimum=0, maximum=MAX_DETECTION_DELAY_MS)
    options = {name: _option_check(declared[name])(value, f"controller.{name}", switches)
               for name, value in section.items() if name in declared}
    return ControllerSpec(kind, float(delay), "detection_delay_ms" in section, requested_kind=kind, options=options)


def _parse_program(data, seed):
    program = data.get("program")
    mode = data.get("mode")
    if program is not None and mode is not None:
        raise SpecError("program", program, "give either program or mode, not both", show_value=False)
    if program is not None:
        _string(program, "program")
        try:
            _, path = mode_table.resolve_program(program)
        except ParameterError:
            raise SpecError("program", program, "no such P4 program") from None
        resolved_mode = None
    else:
        resolved_mode = _choice(mode if mode is not None else mechanisms.default_mode(), list(mode_table.MODES),
                                "mode")
        try:
            path = mode_table.program_for_mode(resolved_mode)
        except ParameterError as error:
            raise SpecError("mode", resolved_mode, error.reason or str(error)) from None
    params = data.get("mode_params")
    params = _require_mapping({} if params is None else params, "mode_params")
    _check_keys(params, tuple(mode_table.PARAMETERS), "mode_params")
    try:
        resolved = mode_table.check_parameters(params)
    except ParameterError as error:
        problem = f"must be {error.allowed}" + (f" ({error.reason})" if error.reason else "")
        raise SpecError(error.field, error.value, problem) from None
    seeded = []
    _seed_parameters(resolved, seeded, resolved_mode, seed)
    return resolved_mode, path, resolved, seeded


def _resolve_hosts(value, path, all_hosts, seed, index):
    if value == "all":
        return list(all_hosts)
    if isinstance(value, dict):
        _check_keys(value, ("random",), path)
        count = _number(value.get("random"), f"{path}.random", minimum=2, maximum=len(all_hosts), integer=True)
        rng = random.Random(derive_seed(seed, "traffic", index, "hosts"))
        return rng.sample(list(all_hosts), count)
    if not isinstance(value, list) or not value:
        raise SpecError(path, value, "must be a list of host names, 'all' or {random: N}")
    known = set(all_hosts)
    names = []
    listed = set()
    for position, name in enumerate(value):
        if not isinstance(name, str) or name not in known:
            raise SpecError(f"{path}[{position}]", name,
                            "not a host of the topology; hosts: " + _names_text(all_hosts))
        if name in listed:
            raise SpecError(f"{path}[{position}]", name, "host listed twice")
        names.append(name)
        listed.add(name)
    return names


def _parse_traffic(data, all_hosts, seed):
    from testbed.traffic.collectives import PATTERNS

    entries = _list(data.get("traffic"), "traffic", "traffic entries")
    if len(entries) > MAX_TRAFFIC_ENTRIES:
        raise SpecError("traffic", f"{len(entries)} entries",
                        f"at most {MAX_TRAFFIC_ENTRIES} entries (traffic job numbers)")
    patterns = (STREAM_PATTERN,) + tuple(PATTERNS)
    parsed = []
    for index, raw in enumerate(entries):
        path = f"traffic[{index}]"
        raw = _require_mapping(raw, path)
        _check_keys(raw, _TRAFFIC_FIELDS, path)
        if "pattern" not in raw:
            raise SpecError(f"{path}.pattern", None, "is required; allowed: " + ", ".join(patterns),
                            show_value=False)
        pattern = _choice(raw["pattern"], patterns, f"{path}.pattern")
        if "hosts" not in raw:
            raise SpecError(f"{path}.hosts", None, "is required", show_value=False)
        hosts = _resolve_hosts(raw["hosts"], f"{path}.hosts", all_hosts, seed, index)
        if pattern == STREAM_PATTERN and (len(hosts) < 2 or len(hosts) % 2):
            raise SpecError(f"{path}.hosts", hosts, "a stream needs an even number of hosts (sender, receiver, ...)")
        if pattern != STREAM_PATTERN and len(hosts) < 2:
            raise SpecError(f"{path}.hosts", hosts, "a collective needs at least 2 hosts")
        entry = TrafficSpec(pattern=pattern, hosts=hosts, seed=derive_seed(seed, "traffic", index), job=index + 1)
        entry.size_bytes = _number(raw.get("size_bytes", entry.size_bytes), f"{path}.size_bytes", minimum=1,
                                   maximum=MAX_SIZE_BYTES, integer=True)
        entry.qps = _number(raw.get("qps", entry.qps), f"{path}.qps", minimum=1, maximum=MAX_QPS, integer=True)
        entry.qp_scaling = _choice(raw.get("qp_scaling", entry.qp_scaling), QP_SCALING, f"{path}.qp_scaling")
        entry.udp_sport = _choice(raw.get("udp_sport", entry.udp_sport), UDP_SPORT_RULES, f"{path}.udp_sport")
        entry.pacing = _choice(raw.get("pacing", entry.pacing), PACING_RULES, f"{path}.pacing")
        if entry.pacing != "even" and pattern != STREAM_PATTERN:
            raise SpecError(f"{path}.pacing", entry.pacing, "only a stream takes another pacing than even")
        if "gap_sigma" in raw:
            if entry.pacing != "lognormal":
                raise SpecError(f"{path}.gap_sigma", raw["gap_sigma"], "only with pacing: lognormal")
            entry.gap_sigma = float(_number(raw["gap_sigma"], f"{path}.gap_sigma", minimum=0, maximum=MAX_SIGMA))
        if "on_s" in raw or "off_s" in raw:
            if pattern != STREAM_PATTERN:
                raise SpecError(f"{path}.on_s", raw.get("on_s"), "only a stream has on and off periods")
            for name in ("on_s", "off_s"):
                if name not in raw:
                    raise SpecError(f"{path}.{name}", None, "is required with on_s and off_s together "
                                    "({median: seconds, sigma: log-scale spread})", show_value=False)
            entry.on_s = _parse_lognormal(raw["on_s"], f"{path}.on_s")
            entry.off_s = _parse_lognormal(raw["off_s"], f"{path}.off_s")
        entry.rate_mbps = float(_number(raw.get("rate_mbps", entry.rate_mbps), f"{path}.rate_mbps", minimum=0,
                                        exclusive=True, maximum=MAX_RATE_MBPS))
        entry.start_s = float(_number(raw.get("start_s", 0.0), f"{path}.start_s", minimum=0, maximum=MAX_DURATION_S))
        if raw.get("duration_s") is not None:
            entry.duration_s = float(_number(raw["duration_s"], f"{path}.duration_s", minimum=0, exclusive=True,
                                             maximum=MAX_DURATION_S))
        entry.mtu = _number(raw.get("mtu", entry.mtu), f"{path}.mtu", minimum=64, maximum=9000, integer=True)
        parsed.append(entry)
    return parsed


def _link_pairs(topo):
    return {node_pair(record["a"], record["b"]) for record in topo.link_records()}


def _switch_link_pairs(topo):
    """``{(a, b)}`` (names sorted) of the links joining two switches."""
    switches = set(topo.switches())
    return {tuple(sorted((record["a"], record["b"]))) for record in topo.link_records()
            if record["a"] in switches and record["b"] in switches}


def _parse_failures(data, topo, switches):
    entries = _list(data.get("failures"), "failures", "failure entries")
    switch_names = set(switches)
    links = _link_pairs(topo)
    parsed = []
    for index, raw in enumerate(entries):
        path = f"failures[{index}]"
        raw = _require_mapping(raw, path)
        _check_keys(raw, _FAILURE_FIELDS, path)
        if "at_s" not in raw:
            raise SpecError(f"{path}.at_s", None, "is required", show_value=False)
        at_s = float(_number(raw["at_s"], f"{path}.at_s", minimum=0, maximum=MAX_DURATION_S))
        if "action" not in raw:
            raise SpecError(f"{path}.action", None, "is required; allowed: " + ", ".join(FAILURE_ACTIONS),
                            show_value=False)
        action = _choice(raw["action"], FAILURE_ACTIONS, f"{path}.action")
        failure = FailureSpec(at_s=at_s, action=action)
        if action == "switch_crash":
            if "switch" not in raw:
                raise SpecError(f"{path}.switch", None, "is required for switch_crash", show_value=False)
            if not isinstance(raw["switch"], str) or raw["switch"] not in switch_names:
                raise SpecError(f"{path}.switch", raw["switch"],
                                "not a switch of the topology; switches: " + _names_text(switches))
            if "link" in raw:
                raise SpecError(f"{path}.link", raw["link"], "not used by switch_crash (name the switch)")
            failure.switch = raw["switch"]
        else:
            if "link" not in raw:
                raise SpecError(f"{path}.link", None, f"is required for {action} ([node, node])", show_value=False)
            link = raw["link"]
            if not isinstance(link, list) or len(link) != 2 or not all(isinstance(n, str) for n in link):
                raise SpecError(f"{path}.link", link, "must be a list of two node names [a, b]")
            if frozenset(link) not in links:
                raise SpecError(f"{path}.link", link, "no such link in the topology")
            if "switch" in raw:
                raise SpecError(f"{path}.switch", raw["switch"], f"not used by {action} (name the link)")
            failure.link = (link[0], link[1])
            if action == "lossy_link":
                if "loss" not in raw:
                    raise SpecError(f"{path}.loss", None, "is required for lossy_link (a fraction in (0, 1])",
                                    show_value=False)
                failure.loss = float(_number(raw["loss"], f"{path}.loss", minimum=0, exclusive=True, maximum=1))
            elif "loss" in raw:
                raise SpecError(f"{path}.loss", raw["loss"], "only lossy_link takes a loss")
        parsed.append(failure)
    return parsed


def _parse_lognormal(raw, path):
    raw = _require_mapping(raw, path)
    _check_keys(raw, _LOGNORMAL_FIELDS, path)
    for name in _LOGNORMAL_FIELDS:
        if name not in raw:
            raise SpecError(f"{path}.{name}", None, f"is required (median: seconds in [{MIN_MEDIAN_S}, "
                            f"{MAX_MEDIAN_S}]; sigma: log-scale spread in [0, {MAX_SIGMA}])", show_value=False)
    return LogNormal(float(_number(raw["median"], f"{path}.median", minimum=MIN_MEDIAN_S, maximum=MAX_MEDIAN_S)),
                     float(_number(raw["sigma"], f"{path}.sigma", minimum=0, maximum=MAX_SIGMA)))


def _parse_failure_trace(data, topo, seed):
    """``failure_trace`` -> (:class:`FailureTraceSpec` or None, its failures on ``topo``)."""
    raw = data.get("failure_trace")
    if raw is None:
        return None, []
    raw = _require_mapping(raw, "failure_trace")
    _check_keys(raw, _FAILURE_TRACE_FIELDS, "failure_trace")
    for name in ("start_s", "end_s"):
        if name not in raw:
            raise SpecError(f"failure_trace.{name}", None, "is required (seconds)", show_value=False)
    start_s = float(_number(raw["start_s"], "failure_trace.start_s", minimum=0, maximum=MAX_DURATION_S))
    end_s = float(_number(raw["end_s"], "failure_trace.end_s", minimum=start_s, exclusive=True,
                          maximum=MAX_DURATION_S))
    processes = {}
    for kind in ("links", "switches"):
        if kind not in raw:
            continue
        path = f"failure_trace.{kind}"
        section = _require_mapping(raw[kind], path)
        _check_keys(section, _FAILURE_PROCESS_FIELDS, path)
        for name in _FAILURE_PROCESS_FIELDS:
            if name not in section:
                raise SpecError(f"{path}.{name}", None, "is required ({median, sigma})", show_value=False)
        processes[kind] = FailureProcess(_parse_lognormal(section["between_failures_s"], f"{path}.between_failures_s"),
                                         _parse_lognormal(section["repair_s"], f"{path}.repair_s"))
    if not processes:
        raise SpecError("failure_trace", raw, "needs links, switches or both (what fails)")
    trace = FailureTraceSpec(start_s, end_s, **processes)
    try:
        return trace, trace.failures(topo.graph(), seed)
    except ParameterError as error:
        raise SpecError(error.field, error.value, error.allowed) from None


# ---------------------------------------------------------------------- capabilities
def lossy_link_mechanism(target):
    """How a ``lossy_link`` failure is emulated here for a resolved target, or None when it cannot be.

    Args:
        target: ``embedded`` or ``bmv2`` (as :func:`resolve_spec_target` resolved it).

    Returns:
        str or None: ``"netem"`` (the kernel's qdisc, preferred), ``"embedded-port"``
        (loss inside the embedded switch's ports) or None (BMv2 without netem).
    """
    if netem_available():
        return "netem"
    return "embedded-port" if target == "embedded" else None


def resolve_spec_target(spec, target=None):
    """The target a spec runs on here, and why ``auto`` did not pick an installed BMv2.

    ``auto`` picks the embedded target when the spec needs what only it has (the
    DSF traffic manager's externs; lossy links on a kernel without netem, where
    only the embedded switches' ports can drop frames) and says so; ``bmv2`` is
    refused for such a spec before anything starts (:func:`testbed.targets.resolve_target`).

    Args:
        spec: the parsed spec.
        target: the target asked for (default: the spec's).

    Returns:
        tuple: ``(target, note)`` (note ``""`` unless auto chose the embedded target over BMv2).

    Raises:
        SpecError: field ``target``, naming what BMv2 lacks, or BMv2 not installed.
    """
    requested = target or spec.target
    if spec.servers and requested == "auto":
        requested = "embedded"  # over several servers auto means the embedded target (as testbed.fabric)
    lossy = any(failure.action == "lossy_link" for failure in spec.failures) \
        or bool(spec.topology.link_delay_us or spec.topology.link_delays)
    mode = mode_table.MODES.get(spec.mode) if spec.mode else None
    features = mode.target_features if mode is not None else ()
    try:
        return resolve_target(requested, embedded_only_needs(spec.program, lossy_links=lossy, features=features))
    except ParameterError as error:
        raise SpecError("target", requested, f"cannot be {requested} for this spec: {error.reason or error.allowed}",
                        show_value=False) from None


# ---------------------------------------------------------------------- entry points
def parse_spec(data, source=None, check_machine=True):
    """Validate a spec given as a dict.

    Args:
        data: the parsed YAML.
        source: the file it came from (recorded).
        check_machine: also refuse what this machine cannot emulate (see :func:`resolve_spec_target`).

    Returns:
        ExperimentSpec

    Raises:
        SpecError: the first invalid field, by path.
    """
    data = _require_mapping(data, "spec")
    _check_keys(data, _TOP_FIELDS, "")
    if "name" not in data:
        raise SpecError("name", None, "is required", show_value=False)
    name = _string(data["name"], "name")
    if any(char in name for char in "/\\") or name.startswith("."):
        raise SpecError("name", name, "must be usable as a folder name (no '/', not starting with '.')")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise SpecError("name", name, f"must be at most {MAX_NAME_BYTES} bytes (UTF-8) long: it "
                                                      f"names the results folder")
    if "seed" not in data:
        raise SpecError("seed", None, "is required (an integer; every random choice derives from it)",
                        show_value=False)
    seed = _number(data["seed"], "seed", minimum=0, maximum=MAX_SEED, integer=True)
    topology, topo = _parse_topology(data)
    target = _choice(data.get("target", "auto"), TARGETS, "target")
    backend = _choice(data.get("backend") or default_backend(), BACKENDS, "backend")
    mode, program, mode_params, seeded_params = _parse_program(data, seed)
    all_hosts = list(topo.hosts())
    switches = list(topo.switches())
    controller = _parse_controller(data, switches)
    traffic = _parse_traffic(data, all_hosts, seed)
    written = _parse_failures(data, topo, switches)
    failure_trace, drawn = _parse_failure_trace(data, topo, seed)
    ends = [entry.start_s + (entry.duration_s or 0.0) for entry in traffic]
    if failure_trace is not None:
        ends.append(failure_trace.end_s)
    default_duration = max(ends + [f.at_s for f in written] + [1.0]) + DEFAULT_TAIL_S
    duration = float(_number(data.get("duration_s", default_duration), "duration_s", minimum=0, exclusive=True,
                             maximum=MAX_DURATION_S))
    for index, entry in enumerate(traffic):
        if entry.start_s >= duration:
            raise SpecError(f"traffic[{index}].start_s", entry.start_s, f"must be < duration_s ({duration})")
        if entry.duration_s is not None and entry.start_s + entry.duration_s > duration:
            raise SpecError(f"traffic[{index}].duration_s", entry.duration_s,
                            f"start_s + duration_s must be <= duration_s ({duration})")
    for index, failure in enumerate(written):
        if failure.at_s >= duration:
            raise SpecError(f"failures[{index}].at_s", failure.at_s, f"must be < duration_s ({duration})")
    if failure_trace is not None and failure_trace.end_s > duration:
        raise SpecError("failure_trace.end_s", failure_trace.end_s, f"must be <= duration_s ({duration})")
    failures = written + drawn
    metrics = data.get("metrics", list(METRICS))
    if not isinstance(metrics, list):
        raise SpecError("metrics", metrics, "must be a list; allowed: " + ", ".join(METRICS))
    for index, metric in enumerate(metrics):
        _choice(metric, METRICS, f"metrics[{index}]")
    out_dir = data.get("out_dir", os.path.join("results", name))
    _string(out_dir, "out_dir")
    if len(out_dir.encode()) > MAX_PATH_BYTES or any(len(part.encode()) > 255 for part in out_dir.split("/")):
        raise SpecError("out_dir", out_dir, f"must be a path of at most {MAX_PATH_BYTES} bytes "
                                                            f"whose parts are at most 255 bytes each")
    repeat = _number(data.get("repeat", 1), "repeat", minimum=1, maximum=MAX_REPEAT, integer=True)
    servers, placement, cross_link = _parse_servers(data, topo)
    spec = ExperimentSpec(name=name, seed=seed, topology=topology, target=target, backend=backend, mode=mode,
                          program=program,
                          mode_params=mode_params, seeded_params=seeded_params, controller=controller,
                          traffic=traffic,
                          failures=failures, failure_trace=failure_trace, duration_s=duration,
                          metrics=list(metrics), out_dir=out_dir, repeat=repeat, servers=servers,
                          placement=placement, cross_link=cross_link, source=source,
                          raw=copy.deepcopy(data))
    if mode is not None:
        _apply_mode(spec, mode_table.MODES[mode])
    if check_machine:
        resolve_spec_target(spec)
    return spec


def load_spec(path, check_machine=True):
    """Read and validate a YAML spec file.

    The file is read within the bounds of :mod:`testbed.experiment.spec_yaml`:
    UTF-8, at most 1 MiB, 32 levels deep, no duplicate keys, aliases only
    while the expanded document stays small.

    Raises:
        SpecError: unreadable file, bad or unbounded YAML, or an invalid field.
    """
    data = read_spec_yaml(path)
    return parse_spec(data, source=os.path.abspath(path), check_machine=check_machine)
