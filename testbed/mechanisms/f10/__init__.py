"""F10, a fault-tolerant engineered network (seed 002): AB FatTree, data-plane failure detection, local
rerouting, pushback and epoch rescheduling, with its baselines fattree-local and PortLand.

Code of this family: ``p4src/f10.p4`` with ``p4src/include/f10_headers.p4``,
``p4src/include/f10_detector.p4``; ``topologies/ab_fattree.py`` (the wiring) and
``topologies/f10/`` (detours, path counts, pushback simulated message by
message); ``controllers/f10/`` (the controller, primary and backup routes,
pushback, the epoch rescheduler and its greedy placement); its run hooks in
:mod:`testbed.mechanisms.f10.run`.

The detector's parameters live in the parameter table ``MyEgress.detector_params``
(default action ``MyEgress.set_detector_params``, p4src/include/f10_detector.p4).
"""
from testbed.errors import ParameterError, SpecError
from testbed.mechanisms.base import ControllerKind, ControllerOption, Mechanism, Mode, Parameter

#: the port F10's trigger frames enter on (PKTGEN_PORT_ID of p4src/include/f10_headers.p4)
PACKET_GENERATOR_PORT = 510

_DETECTOR, _SET_DETECTOR = "MyEgress.detector_params", "MyEgress.set_detector_params"
_DETECTOR_PARAMETERS = ("probe_period_us", "detector_window_periods", "detector_down_below",
                        "detector_up_at_least", "holddown_us", "holddown_max_us", "backoff_reset_us")
_F10_PARAMETERS = _DETECTOR_PARAMETERS + ("hash_seed",)

# Defaults: what 20 embedded switches (a k=4 AB FatTree) sustain on a 2-core machine with probes on
# every link and no false alarm: 20 ms probes (about 0.8 core for the fabric), t = 100 ms
# (benchmarks/bench_f10_probes.py; F10's own timescale, ~1 ms, needs a faster data plane)
PARAMETERS = (
    Parameter("probe_period_us", 100, 1_000_000, "us", _DETECTOR, _SET_DETECTOR, "probe_period_us", 20_000,
              "F10: a fabric port that sent nothing for this long sends a probe; also the detector's bucket"),
    # at least 2: the two ends' periods are not in phase, so a one-period window may hold no probe at all
    Parameter("detector_window_periods", 2, 8, "probe periods", _DETECTOR, _SET_DETECTOR, "window_buckets", 5,
              "F10's t: the window over which valid frames are counted, in probe periods"),
    Parameter("detector_down_below", 1, 10_000, "frames", _DETECTOR, _SET_DETECTOR, "down_below", 1,
              "F10's c: a working port is declared down when fewer valid frames than this arrive in a window"),
    Parameter("detector_up_at_least", 1, 10_000, "frames", _DETECTOR, _SET_DETECTOR, "up_at_least", 3,
              "F10's d: a down port comes back after a window with at least this many valid frames"),
    Parameter("holddown_us", 1, 60_000_000, "us", _DETECTOR, _SET_DETECTOR, "holddown_us", 200_000,
              "the shortest time a port stays down (doubled for each new down within backoff_reset_us)"),
    Parameter("holddown_max_us", 1, 60_000_000, "us", _DETECTOR, _SET_DETECTOR, "holddown_max_us", 3_200_000,
              "the longest hold-down the backoff reaches"),
    Parameter("backoff_reset_us", 1, 600_000_000, "us", _DETECTOR, _SET_DETECTOR, "backoff_reset_us", 1_000_000,
              "a down this long after the previous one starts the hold-down again from holddown_us"),
)
_BY_NAME = {parameter.name: parameter for parameter in PARAMETERS}


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
    merged = {name: values.get(name, _BY_NAME[name].default) for name in _DETECTOR_PARAMETERS}
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
                             f"an integer in [{window_us}, {_BY_NAME['holddown_us'].maximum}] us",
                             f"at least the window t = {periods} x {merged['probe_period_us']} us")
    if merged["holddown_max_us"] < merged["holddown_us"]:
        raise ParameterError(f"{field_path}.holddown_max_us", merged["holddown_max_us"],
                             f"an integer in [{merged['holddown_us']}, {_BY_NAME['holddown_max_us'].maximum}] us",
                             "at least holddown_us")
    shortest_cycle_us = merged["holddown_us"] + window_us
    if merged["backoff_reset_us"] < shortest_cycle_us:
        raise ParameterError(f"{field_path}.backoff_reset_us", merged["backoff_reset_us"],
                             f"an integer in [{shortest_cycle_us}, {_BY_NAME['backoff_reset_us'].maximum}] us",
                             "at least holddown_us + t: a flapping port goes down again no sooner, so a "
                             "shorter reset would never double the hold-down")


def _switch_names(value, path, switches):
    if not isinstance(value, list) or not value or not all(isinstance(name, str) for name in value):
        raise SpecError(path, value, "must be a list of switch names")
    for index, name in enumerate(value):
        if name not in switches:
            shown = ", ".join(list(switches)[:12]) + (f", ... ({len(switches)} in all)" if len(switches) > 12 else "")
            raise SpecError(f"{path}[{index}]", name, "not a switch of the topology; switches: " + shown)
    return list(value)


def _boolean(value, path, _switches):
    if not isinstance(value, bool):
        raise SpecError(path, value, "must be true or false")
    return value


MAX_OPTION_MS = 3_600_000  # an epoch or hold-down of an hour: beyond that it never acts within a run


def _milliseconds(exclusive):
    allowed = f"a number of milliseconds in {'(' if exclusive else '['}0, {MAX_OPTION_MS}]"

    def check(value, path, _switches):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
                or not (0 < value if exclusive else 0 <= value) or not value <= MAX_OPTION_MS:
            raise SpecError(path, value, f"must be {allowed}")
        return float(value)
    return check


MECHANISM = Mechanism(
    name="f10",
    description="F10: AB FatTree, data-plane failure detector, local rerouting, pushback, epoch rescheduling",
    order=1,
    modes=(
        Mode("f10", "f10.p4", "F10: AB FatTree, data-plane failure detector, probes and local rerouting",
             _F10_PARAMETERS, packet_generator_port=PACKET_GENERATOR_PORT, topology="abfattree", controller="f10",
             controller_options=(("pushback", True), ("rescheduler_epoch_ms", 500))),
        Mode("fattree-local", "f10.p4", "standard FatTree with F10's detector and local rerouting (longer detours)",
             _F10_PARAMETERS, packet_generator_port=PACKET_GENERATOR_PORT, topology="fattree", controller="f10",
             controller_options=(("pushback", False),)),
        Mode("portland", "ecmp.p4", "PortLand-like: standard FatTree, ECMP, the controller reroutes after its "
             "keepalive timeout (65 ms, seed 002 section 7.4)", ("hash_seed",), topology="fattree",
             controller="static", detection_delay_ms=65.0),
    ),
    parameters=PARAMETERS,
    controllers=(
        ControllerKind(
            "f10", "programs p4src/f10.p4 (backups, detector, triggers) and records the detectors' reports; "
            "the data plane reroutes", "testbed.controllers.f10.controller:F10Controller",
            options=(
                ControllerOption("monitored_switches", "probe and detect only on these switches and the links "
                                 "between them (default: all)", _switch_names),
                ControllerOption("rescheduler_epoch_ms", "run F10's epoch rescheduler with this epoch (default: "
                                 "off; mode f10 runs it every 500 ms)", _milliseconds(exclusive=True)),
                ControllerOption("recovered_holddown_ms", "how long the rescheduler gives a recovered link no "
                                 "weight", _milliseconds(exclusive=False)),
                ControllerOption("pushback", "run F10's pushback on the detectors' reports (default: mode f10 "
                                 "on, fattree-local off; off, every rerouted packet keeps taking its detour)",
                                 _boolean),
            )),
    ),
    check_parameters=check_combination,
    hooks="testbed.mechanisms.f10.run:F10Hooks",
)
