"""The mechanism families, found by folder: the one place the generic code learns what exists.

Every package under ``testbed/mechanisms/`` declares one
:class:`~testbed.mechanisms.base.Mechanism` as ``MECHANISM`` in its
``__init__.py``: its modes, run-time parameters, controller kinds and their
options, and (by name, imported only when a run needs them) its run hooks.
Adding a mechanism is adding such a package (and its code in ``p4src/``,
``topologies/`` and ``controllers/``); nothing here or in the runner, the spec
parser, the results, ``testbed compare``, the plots or the fabric changes.

A mechanism's own code lives in folders named after it, one per layer::

    p4src/<name>*.p4, p4src/include/<name>*.p4   the P4 programs
    topologies/<name>...                          topology generators and pure graph algorithms
    controllers/<name>/                           its controller and control-plane algorithms
    testbed/mechanisms/<name>/                    this declaration, its run hooks, metrics, plots
"""
import functools
import importlib
import pkgutil

from testbed.errors import ParameterError
from testbed.mechanisms.base import ANY_OPTION, ControllerKind, ControllerOption, Mechanism, Mode, Parameter

__all__ = ["ControllerKind", "ControllerOption", "Mechanism", "Mode", "Parameter", "mechanisms", "modes",
           "parameters", "controller_kinds", "controller_kind", "mechanism_of_mode", "default_mode",
           "default_controller_kind", "hooks_for", "load"]


@functools.lru_cache(maxsize=1)
def mechanisms():
    """Every mechanism, in their ``order``.

    Raises:
        TypeError: a package under testbed/mechanisms/ declares no ``MECHANISM``, or two declare the
            same mode, parameter or controller kind.
    """
    found = []
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        mechanism = getattr(module, "MECHANISM", None)
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"testbed/mechanisms/{info.name}/__init__.py declares no MECHANISM")
        found.append(mechanism)
    found.sort(key=lambda mechanism: (mechanism.order, mechanism.name))
    for what in ("modes", "parameters", "controllers"):
        seen = {}
        for mechanism in found:
            for item in getattr(mechanism, what):
                if item.name in seen:
                    raise TypeError(f"{what[:-1]} {item.name!r} is declared by {seen[item.name]} and {mechanism.name}")
                seen[item.name] = mechanism.name
    return tuple(found)


def modes():
    """``{name: Mode}`` of every mechanism, in the mechanisms' order."""
    return {mode.name: mode for mechanism in mechanisms() for mode in mechanism.modes}


def parameters():
    """``{name: Parameter}`` of every mechanism."""
    return {parameter.name: parameter for mechanism in mechanisms() for parameter in mechanism.parameters}


def controller_kinds():
    """``{name: ControllerKind}`` of every mechanism."""
    return {kind.name: kind for mechanism in mechanisms() for kind in mechanism.controllers}


def controller_kind(name, field_path="controller"):
    """The :class:`ControllerKind` called ``name``.

    Raises:
        ParameterError: no such kind (the known ones listed).
    """
    kinds = controller_kinds()
    if name not in kinds:
        raise ParameterError(field_path, name, "one of: " + ", ".join(kinds))
    return kinds[name]


def mechanism_of_mode(mode):
    """The :class:`Mechanism` that declares ``mode``, or None."""
    for mechanism in mechanisms():
        if any(item.name == mode for item in mechanism.modes):
            return mechanism
    return None


def default_controller_kind():
    """The name of the controller kind a run has when neither it nor its mode names one."""
    return next(name for name, kind in controller_kinds().items() if kind.default)


def default_mode():
    """The name of the mode a spec runs when it names neither mode nor program."""
    return next(name for name, mode in modes().items() if mode.default)


def load(reference):
    """The object a ``"module:attribute"`` reference names (a controller factory, run hooks)."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


@functools.lru_cache(maxsize=None)
def _hooks(name):
    mechanism = next(item for item in mechanisms() if item.name == name)
    if mechanism.hooks is None:
        from testbed.mechanisms.hooks import RunHooks

        return RunHooks(mechanism)
    return load(mechanism.hooks)(mechanism)


def hooks_for(spec=None):
    """The run hooks of the mechanisms that apply to a run of ``spec`` (None: of every mechanism)."""
    every = [_hooks(mechanism.name) for mechanism in mechanisms()]
    return every if spec is None else [hooks for hooks in every if hooks.applies(spec)]


def make_controller(kind, detection_delay_ms=None, **options):
    """The controller of ``kind`` (see :class:`testbed.controllers.contract.Controller`).

    Args:
        kind: a controller kind of :func:`controller_kinds`.
        detection_delay_ms: its reaction delay after a failure (None: the controller's default).
        **options: its options (those the kind declares).

    Raises:
        ParameterError: unknown kind, or an option it does not take.
    """
    declared = controller_kind(kind)
    allowed = [option.name for option in declared.options] + list(declared.constructor_options)
    extra = sorted(set(options) - set(allowed))
    if extra and declared.constructor_options != ANY_OPTION:
        raise ParameterError("controller_options", extra,
                             (", ".join(allowed) or "none") + f" for the {kind} controller")
    factory = load(declared.factory)
    return factory(**options) if detection_delay_ms is None else factory(detection_delay_ms, **options)
