"""Modes, their P4 programs and their run-time parameters, over every mechanism.

Each mechanism declares its modes and parameters in its own package
(``testbed/mechanisms/<name>/__init__.py``, see :mod:`testbed.mechanisms`);
this module joins them into the tables the rest of the testbed uses and
checks values against them.  A spec names either ``program`` (a path) or
``mode``; :func:`program_for_mode` turns a mode into its program under ``p4src/``.

Run-time parameters (``mode_params`` in a spec, ``--sweep NAME=...`` in
``testbed compare``, ``POST /fabric/params`` of the os-ken app) are described
once, by the mechanism that uses them (:class:`~testbed.mechanisms.base.Parameter`:
type, allowed range, unit, and the P4 object that carries the value).  That
object is a **parameter table**: a keyless table whose default action copies
its action parameters into metadata on every packet.  A controller sets the
values by modifying the table's default entry over P4Runtime, which every
P4Runtime server implements (BMv2's included; its server answers UNIMPLEMENTED
to register reads and writes, p4lang/PI ``proto/frontend/src/device_mgr.cpp``).
The P4 program's ``default_action`` holds the same defaults as the declaration
(checked by a test), so a switch behaves the same before and after a
controller writes the defaults.

Following one parameter from YAML to the switch::

    mode_params: {flowlet_interval_us: 300}          # the spec
    PARAMETERS["flowlet_interval_us"].check(300)     # declared in testbed/mechanisms/lb/__init__.py
    write_parameters(clients, p4info, {...})         # controllers/parameters.py
    MyIngress.flowlet_params default action          # p4src/flowlet.p4
        set_flowlet_params(interval_us=300, load_aware=0)
"""
import os

import testbed.p4src
from testbed import mechanisms
from testbed.errors import ParameterError
from testbed.mechanisms.base import Mode, Parameter

P4SRC_DIR = os.path.dirname(os.path.abspath(testbed.p4src.__file__))

#: mode name -> Mode, over every mechanism
MODES = mechanisms.modes()
#: parameter name -> Parameter, over every mechanism
PARAMETERS = mechanisms.parameters()

__all__ = ["MODES", "PARAMETERS", "Mode", "Parameter", "check_parameters", "program_for_mode", "resolve_program",
           "seeded_parameters"]


def check_parameters(values, field_path="mode_params"):
    """Check a mapping of parameter values against :data:`PARAMETERS`, alone and together.

    Args:
        values: ``{name: value}``.
        field_path: prefix of the field paths in errors.

    Returns:
        dict: ``{name: int}``.

    Raises:
        ParameterError: an unknown name, a value out of range, or values wrong together
            (field path ``mode_params.NAME``).

    >>> check_parameters({"flowlet_interval_us": 300.0})
    {'flowlet_interval_us': 300}
    """
    checked = {}
    for name, value in values.items():
        if name not in PARAMETERS:
            raise ParameterError(f"{field_path}.{name}", value, "a parameter name: " + ", ".join(PARAMETERS))
        checked[name] = PARAMETERS[name].check(value, f"{field_path}.{name}")
    for mechanism in mechanisms.mechanisms():
        check = mechanism.check_parameters
        if check is not None:
            (mechanisms.load(check) if isinstance(check, str) else check)(checked, field_path)
    return checked


def seeded_parameters(mode):
    """The parameters a run of ``mode`` draws from its spec's seed when the spec gives none.

    Args:
        mode: a mode name, or None (a spec naming a program: any parameter might be its).

    Returns:
        list: the :class:`~testbed.mechanisms.base.Parameter` objects.
    """
    names = MODES[mode].parameters if mode is not None else PARAMETERS
    return [PARAMETERS[name] for name in names if PARAMETERS[name].seeded_bits]


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

