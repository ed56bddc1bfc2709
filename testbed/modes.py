"""Load-balancing modes, their P4 programs and their run-time parameters: the one table of each.

A spec names either ``program`` (a path) or ``mode``; :func:`program_for_mode`
turns a mode into its program under ``p4src/``.

Run-time parameters (``mode_params`` in a spec, ``--sweep NAME=...`` in
``testbed compare``, ``POST /fabric/params`` of the os-ken app) are described
once, in :data:`PARAMETERS`: type, allowed range, unit, and the P4 object that
carries the value.  That object is a **parameter table**: a keyless table whose
default action copies its action parameters into metadata on every packet.
A controller sets the values by modifying the table's default entry over
P4Runtime, which every P4Runtime server implements (BMv2's included; its
server answers UNIMPLEMENTED to register reads and writes, p4lang/PI
``proto/frontend/src/device_mgr.cpp``).  The P4 program's ``default_action``
holds the same defaults as :data:`PARAMETERS` (checked by a test), so a switch
behaves the same before and after a controller writes the defaults.

Following one parameter from YAML to the switch::

    mode_params: {flowlet_interval_us: 300}          # the spec
    PARAMETERS["flowlet_interval_us"].check(300)     # type and range, by field path
    write_parameters(clients, p4info, {...})         # controllers/parameters.py
    MyIngress.flowlet_params default action          # p4src/flowlet.p4
        set_flowlet_params(interval_us=300, load_aware=0)
"""
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import testbed.p4src
from testbed.errors import ParameterError

P4SRC_DIR = os.path.dirname(os.path.abspath(testbed.p4src.__file__))


@dataclass(frozen=True)
class Mode:
    """One load-balancing mode.

    Attributes:
        name: the mode's name in specs and on the command line.
        program: file name under ``p4src/``.
        description: one line for help and reports.
        parameters: the ``mode_params`` keys this mode's program takes.
        packet_generator: the program needs periodic trigger frames (the embedded target's
            packet generator; an injector port on BMv2).
        topology: the topology kind the mode runs on (its parameters stay the spec's), or None
            for the spec's kind (F10's modes compare wirings: portland and fattree-local run a
            standard FatTree, f10 an AB FatTree).
        controller: the controller kind the mode needs, or None for the spec's.
        detection_delay_ms: the controller's reaction delay when the spec gives none, or None
            for the general default.
        controller_options: ``((option, value), ...)`` given to the mode's controller (the spec's
            own controller options come on top): f10 runs pushback and the epoch rescheduler,
            fattree-local neither.
        node_programs: ``((role, program), ...)``: switch roles that run another program than
            ``program`` (DSF: fabric and spine nodes run p4src/dsf_fabric.p4).
        seeded_parameters: run-time parameters derived from the spec's seed when it gives none.
    """

    name: str
    program: str
    description: str
    parameters: tuple = field(default=())
    packet_generator: bool = False
    topology: Optional[str] = None
    controller: Optional[str] = None
    detection_delay_ms: Optional[float] = None
    controller_options: tuple = field(default=())
    node_programs: tuple = field(default=())
    seeded_parameters: tuple = field(default=())


@dataclass(frozen=True)
class Parameter:
    """One run-time parameter of the P4 programs.

    Attributes:
        name: its key in ``mode_params``.
        minimum, maximum: the allowed integer range (inclusive).
        unit: unit of the value ("us", "" for a plain number).
        table: P4Info name of the parameter table that carries it.
        action: the table's default action.
        action_param: the action parameter that takes the value.
        default: the value the program's ``default_action`` has, written when a spec gives none.
        description: one line for help and errors.

    A parameter whose ``table`` is None is read by the controller only (it is in no P4
    table: DSF's Input Balanced Mode switch and seed, the fabric links' queue limit).
    """

    name: str
    minimum: int
    maximum: int
    unit: str
    table: str
    action: str
    action_param: str
    default: int
    description: str

    @property
    def in_program(self):
        """True when a P4 parameter table carries the value (False: the controller reads it)."""
        return self.table is not None

    def allowed(self):
        """The allowed values as text (``"an integer in [1, 10000000] us"``)."""
        unit = f" {self.unit}" if self.unit else ""
        return f"an integer in [{self.minimum}, {self.maximum}]{unit}"

    def check(self, value, field_path=None, text=False):
        """Return ``value`` as an int if it is allowed.

        Integral floats (``300.0``) are accepted; fractions, booleans, NaN and
        values out of range are refused.

        Args:
            value: the value given (a YAML or JSON number).
            field_path: the field named in the error (default: the parameter's name).
            text: also accept a number written as text (a command-line argument).

        Returns:
            int: the value.

        Raises:
            ParameterError: naming the field and the allowed range.

        >>> PARAMETERS["flowlet_interval_us"].check(300.0)
        300
        >>> PARAMETERS["flowlet_interval_us"].check(0.5)
        Traceback (most recent call last):
        ...
        testbed.errors.ParameterError: invalid flowlet_interval_us=0.5: allowed values are an integer in [1, 10000000] us
        """
        path = field_path or self.name
        number = value
        if isinstance(value, str) and text:
            try:
                number = int(value.strip(), 0)
            except ValueError:
                try:
                    number = float(value)
                except ValueError:
                    raise ParameterError(path, value, self.allowed()) from None
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise ParameterError(path, value, self.allowed())
        if isinstance(number, float):
            if not math.isfinite(number) or not number.is_integer():
                raise ParameterError(path, value, self.allowed())
            number = int(number)
        if not self.minimum <= number <= self.maximum:
            raise ParameterError(path, value, self.allowed())
        return number


_DETECTOR_PARAMETERS = ("probe_period_us", "detector_window_periods", "detector_down_below",
                        "detector_up_at_least", "holddown_us", "holddown_max_us", "backoff_reset_us")
_F10_PARAMETERS = _DETECTOR_PARAMETERS + ("hash_seed",)

_DSF_PARAMETERS = ("dsf_cell_bytes", "dsf_grant_bytes", "dsf_credit_rate_pct", "dsf_voq_depth_pkts",
                   "dsf_reassembly_timeout_us", "dsf_credits", "dsf_input_balanced", "dsf_ibm_seed",
                   "dsf_fabric_queue_frames")

#: mode name -> Mode (the single place that maps modes to programs)
MODES = {
    "ecmp": Mode("ecmp", "ecmp.p4", "5-tuple ECMP: crc16 of src/dst address, protocol, ports and the seed",
                 ("hash_seed",)),
    "eecmp": Mode("eecmp", "eecmp.p4", "E-ECMP: the 5-tuple plus the RoCE BTH destination QP",
                  ("hash_seed",)),
    "spray": Mode("spray", "spray.p4", "per-packet spraying over every equal-cost uplink", ("hash_seed",)),
    "flowlet": Mode("flowlet", "flowlet.p4", "flowlet switching: a new path after an idle gap",
                    ("flowlet_interval_us", "flowlet_load_aware", "hash_seed")),
    "pinning": Mode("pinning", "pinning.p4", "path pinning by destination slice"),
    # F10 and its baselines (seed 002, section 7.4): the same failure trace and traffic on each
    "f10": Mode("f10", "f10.p4", "F10: AB FatTree, data-plane failure detector, probes and local rerouting",
                _F10_PARAMETERS, packet_generator=True, topology="abfattree", controller="f10",
                controller_options=(("pushback", True), ("rescheduler_epoch_ms", 500))),
    "fattree-local": Mode("fattree-local", "f10.p4",
                          "standard FatTree with F10's detector and local rerouting (longer detours)",
                          _F10_PARAMETERS, packet_generator=True, topology="fattree", controller="f10",
                          controller_options=(("pushback", False),)),
    "portland": Mode("portland", "ecmp.p4",
                     "PortLand-like: standard FatTree, ECMP, the controller reroutes after its keepalive "
                     "timeout (65 ms, seed 002 section 7.4)", ("hash_seed",), topology="fattree",
                     controller="static", detection_delay_ms=65.0),
    # DSF (seed 000); its Clos baselines are ecmp and eecmp on the same dsf topology (RDSWs as leaves)
    "dsf": Mode("dsf", "dsf_rdsw.p4",
                "DSF: VOQs gated by credit, cells sprayed over links with reachability, in-order reassembly, "
                "Input Balanced Mode", _DSF_PARAMETERS, topology="dsf", controller="dsf",
                node_programs=(("fdsw", "dsf_fabric.p4"), ("sdsw", "dsf_fabric.p4")),
                seeded_parameters=("dsf_ibm_seed",)),
}

_DETECTOR, _SET_DETECTOR = "MyEgress.detector_params", "MyEgress.set_detector_params"
_DSF, _SET_DSF = "MyIngress.dsf_params", "MyIngress.set_dsf_params"

#: parameter name -> Parameter (the single place that describes run-time parameters)
PARAMETERS = {
    "hash_seed": Parameter(
        "hash_seed", 0, 0xFFFFFFFF, "", "MyIngress.lb_params", "MyIngress.set_lb_params", "hash_seed", 0,
        "seed mixed into the flow hash (p4src/include/flow_hash.p4)"),
    "flowlet_interval_us": Parameter(
        "flowlet_interval_us", 1, 10_000_000, "us", "MyIngress.flowlet_params",
        "MyIngress.set_flowlet_params", "interval_us", 512,
        "idle gap after which a flow's next packet starts a new flowlet (p4src/flowlet.p4)"),
    "flowlet_load_aware": Parameter(
        "flowlet_load_aware", 0, 1, "", "MyIngress.flowlet_params", "MyIngress.set_flowlet_params",
        "load_aware", 0, "1: a new flowlet keeps its port when that port's queue is shorter (p4src/flowlet.p4)"),
    # F10's failure detector (p4src/include/f10_detector.p4); t = detector_window_periods x probe_period_us.
    # Defaults: what 20 embedded switches (a k=4 AB FatTree) sustain on a 2-core machine with probes on
    # every link and no false alarm: 20 ms probes (about 0.8 core for the fabric), t = 100 ms
    # (benchmarks/bench_f10_probes.py; F10's own timescale, ~1 ms, needs a faster data plane)
    "probe_period_us": Parameter(
        "probe_period_us", 100, 1_000_000, "us", _DETECTOR, _SET_DETECTOR, "probe_period_us", 20_000,
        "F10: a fabric port that sent nothing for this long sends a probe; also the detector's bucket"),
    # at least 2: the two ends' periods are not in phase, so a one-period window may hold no probe at all
    "detector_window_periods": Parameter(
        "detector_window_periods", 2, 8, "probe periods", _DETECTOR, _SET_DETECTOR, "window_buckets", 5,
        "F10's t: the window over which valid frames are counted, in probe periods"),
    "detector_down_below": Parameter(
        "detector_down_below", 1, 10_000, "frames", _DETECTOR, _SET_DETECTOR, "down_below", 1,
        "F10's c: a working port is declared down when fewer valid frames than this arrive in a window"),
    "detector_up_at_least": Parameter(
        "detector_up_at_least", 1, 10_000, "frames", _DETECTOR, _SET_DETECTOR, "up_at_least", 3,
        "F10's d: a down port comes back after a window with at least this many valid frames"),
    "holddown_us": Parameter(
        "holddown_us", 1, 60_000_000, "us", _DETECTOR, _SET_DETECTOR, "holddown_us", 200_000,
        "the shortest time a port stays down (doubled for each new down within backoff_reset_us)"),
    "holddown_max_us": Parameter(
        "holddown_max_us", 1, 60_000_000, "us", _DETECTOR, _SET_DETECTOR, "holddown_max_us", 3_200_000,
        "the longest hold-down the backoff reaches"),
    "backoff_reset_us": Parameter(
        "backoff_reset_us", 1, 600_000_000, "us", _DETECTOR, _SET_DETECTOR, "backoff_reset_us", 1_000_000,
        "a down this long after the previous one starts the hold-down again from holddown_us"),
    # DSF (p4src/dsf_rdsw.p4, p4src/include/dsf.p4); the fabric header is 20 bytes, a link's MTU 1500
    "dsf_cell_bytes": Parameter(
        "dsf_cell_bytes", 21, 1500, "bytes (fabric header of 20 bytes + payload, at most the MTU)", _DSF,
        _SET_DSF, "cell_bytes", 512,
        "DSF: cell size on a fabric link, the 20-byte fabric header included (Jericho: up to 256)"),
    "dsf_grant_bytes": Parameter(
        "dsf_grant_bytes", 1, 1_000_000, "bytes", _DSF, _SET_DSF, "grant_bytes", 4096,
        "DSF: bytes of packet one credit grant lets a VOQ send"),
    "dsf_credit_rate_pct": Parameter(
        "dsf_credit_rate_pct", 1, 100, "% of the egress port rate", _DSF, _SET_DSF, "credit_rate_pct", 100,
        "DSF: the egress port scheduler's grant rate, in percent of the port's rate (never above it)"),
    "dsf_voq_depth_pkts": Parameter(
        "dsf_voq_depth_pkts", 1, 100_000, "packets", _DSF, _SET_DSF, "voq_depth", 1024,
        "DSF: packets one VOQ holds; more are tail-dropped at the ingress node"),
    "dsf_reassembly_timeout_us": Parameter(
        "dsf_reassembly_timeout_us", 100, 10_000_000, "us", _DSF, _SET_DSF, "reassembly_timeout_us", 200_000,
        "DSF: how long reassembly waits for a missing cell before it gives the packet up"),
    "dsf_credits": Parameter(
        "dsf_credits", 0, 1, "", _DSF, _SET_DSF, "credits", 1,
        "DSF: 1 VOQs send only against credit from the egress port scheduler; 0 send at once"),
    "dsf_input_balanced": Parameter(
        "dsf_input_balanced", 0, 1, "", None, None, None, 1,
        "DSF controller: 1 applies Input Balanced Mode on link events, 0 only withdraws lost paths"),
    "dsf_ibm_seed": Parameter(
        "dsf_ibm_seed", 0, 0xFFFFFFFF, "", None, None, None, 0,
        "DSF controller: seed of Input Balanced Mode's random link choices (default: from the spec's seed)"),
    "dsf_fabric_queue_frames": Parameter(
        "dsf_fabric_queue_frames", 1, 10_000, "frames", None, None, None, 128,
        "DSF controller: queue of each shaped fabric link (tc pfifo under the link's htb class)"),
}


def mode_names():
    """Return the mode names in table order."""
    return list(MODES)


def check_parameters(values, field_path="mode_params"):
    """Check a mapping of parameter values against :data:`PARAMETERS`.

    Args:
        values: ``{name: value}``.
        field_path: prefix of the field paths in errors.

    Returns:
        dict: ``{name: int}``.

    Raises:
        ParameterError: an unknown name or a value out of range (field path ``mode_params.NAME``).
    """
    checked = {}
    for name, value in values.items():
        if name not in PARAMETERS:
            raise ParameterError(f"{field_path}.{name}", value, "a parameter name: " + ", ".join(PARAMETERS))
        checked[name] = PARAMETERS[name].check(value, f"{field_path}.{name}")
    check_combination(checked, field_path)
    return checked


def check_combination(values, field_path="mode_params"):
    """Refuse parameter values that are each in range but wrong together.

    F10's detector (missing values take their defaults; ``w`` is
    ``detector_window_periods``, ``P`` the probe period, ``t = w x P``):

    * ``c`` (``detector_down_below``) and ``d`` (``detector_up_at_least``) at most
      ``w - 1``: an idle link gets one probe per period, but the two ends' periods
      are not in phase and their triggers run late by varying amounts, so a window
      of ``w`` periods is sure of ``w - 1`` probes only (while the lateness stays
      under half a period).  A larger ``c`` takes idle links down, a larger ``d``
      may never bring them back.
    * ``d >= c``: a port whose windows hold between ``d`` and ``c - 1`` frames would
      come up and go down again every window.
    * ``holddown_us >= t``: a hold-down shorter than the window could not have been
      decided by it; ``holddown_max_us >= holddown_us``.
    * ``backoff_reset_us >= holddown_us + t``: a flapping port goes down again one
      hold-down and about one window (the one that empties it) after the previous
      down at the earliest; a shorter reset would never double the hold-down.

    Args:
        values: ``{name: int}`` (each already checked).
        field_path: prefix of the field paths in errors.

    Raises:
        ParameterError: naming the field and the allowed range.

    >>> try:
    ...     check_combination({"detector_window_periods": 4, "detector_down_below": 4})
    ... except ParameterError as error:
    ...     print(error.field, "|", error.allowed)
    mode_params.detector_down_below | an integer in [1, 3]
    """
    if not any(name in values for name in _DETECTOR_PARAMETERS):
        return
    merged = {name: values.get(name, PARAMETERS[name].default) for name in _DETECTOR_PARAMETERS}
    periods = merged["detector_window_periods"]
    sure = periods - 1
    window_us = periods * merged["probe_period_us"]
    for name in ("detector_down_below", "detector_up_at_least"):
        if merged[name] > sure:
            raise ParameterError(f"{field_path}.{name}", merged[name], f"an integer in [1, {sure}]",
                                 f"a window of {periods} probe periods is sure of {sure} probes on an idle "
                                 "link: the two ends' periods are not in phase")
    if merged["detector_up_at_least"] < merged["detector_down_below"]:
        raise ParameterError(f"{field_path}.detector_up_at_least", merged["detector_up_at_least"],
                             f"an integer in [{merged['detector_down_below']}, {sure}]",
                             "at least detector_down_below, or a port would come up and go down every window")
    if merged["holddown_us"] < window_us:
        raise ParameterError(f"{field_path}.holddown_us", merged["holddown_us"],
                             f"an integer in [{window_us}, {PARAMETERS['holddown_us'].maximum}] us",
                             f"at least the window t = {periods} x {merged['probe_period_us']} us")
    if merged["holddown_max_us"] < merged["holddown_us"]:
        raise ParameterError(f"{field_path}.holddown_max_us", merged["holddown_max_us"],
                             f"an integer in [{merged['holddown_us']}, {PARAMETERS['holddown_max_us'].maximum}] us",
                             "at least holddown_us")
    shortest_cycle_us = merged["holddown_us"] + window_us
    if merged["backoff_reset_us"] < shortest_cycle_us:
        raise ParameterError(f"{field_path}.backoff_reset_us", merged["backoff_reset_us"],
                             f"an integer in [{shortest_cycle_us}, {PARAMETERS['backoff_reset_us'].maximum}] us",
                             "at least holddown_us + t: a flapping port goes down again no sooner, so a "
                             "shorter reset would never double the hold-down")


def program_for_mode(mode, field_path="mode"):
    """Return the absolute path of the P4 program of ``mode``.

    Args:
        mode: a key of :data:`MODES`.
        field_path: the spec field named in errors.

    Returns:
        str: path of the program.

    Raises:
        ParameterError: unknown mode, or its program does not exist (yet).
    """
    if mode not in MODES:
        raise ParameterError(field_path, mode, "one of: " + ", ".join(MODES))
    path = os.path.join(P4SRC_DIR, MODES[mode].program)
    if not os.path.exists(path):
        raise ParameterError(field_path, mode, "a mode whose program exists",
                             f"mode {mode!r} needs p4src/{MODES[mode].program}, which does not exist yet")
    return path


def resolve_program(program, field_path="program"):
    """The mode and P4 file a ``program`` argument names.

    Args:
        program: a mode name (``"ecmp"``), a path to a ``.p4`` file, or the name of
            a program under ``p4src/`` with or without ``.p4`` (``"l3_ecmp"``).
        field_path: the field named in errors.

    Returns:
        tuple: ``(mode or None, absolute path)``.

    Raises:
        ParameterError: no such mode or file.
    """
    if not isinstance(program, str) or not program.strip():
        raise ParameterError(field_path, program, "a mode (" + ", ".join(MODES) + ") or a P4 file")
    if program in MODES:
        return program, program_for_mode(program, field_path)
    candidates = [program, os.path.join(P4SRC_DIR, os.path.basename(program))]
    if not program.endswith(".p4"):
        candidates.append(os.path.join(P4SRC_DIR, os.path.basename(program) + ".p4"))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return None, os.path.abspath(candidate)
    raise ParameterError(field_path, program, "a mode (" + ", ".join(MODES) + ") or a P4 file",
                         "no such P4 program")


def available_modes():
    """Return the modes whose programs exist now."""
    return [name for name, mode in MODES.items() if os.path.exists(os.path.join(P4SRC_DIR, mode.program))]
