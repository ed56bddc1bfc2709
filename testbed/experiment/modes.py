"""Load-balancing modes and the P4 program each one runs: the one table that maps them.

A spec names either ``program`` (a path) or ``mode``; :func:`program_for_mode`
turns a mode into the program under ``p4src/``.  Programs that are not
written yet give an error that names the mode and the missing file.

Mode parameters (``mode_params`` in a spec) are written by the controller
after the pipeline is pushed; :data:`MODE_PARAMETERS` says which P4 object
carries each one (a register, index 0), found in the program's P4Info by the
last component of its name.
"""
import os
from dataclasses import dataclass, field

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
        parameters: the ``mode_params`` keys this mode uses.
    """

    name: str
    program: str
    description: str
    parameters: tuple = field(default=())


#: mode name -> Mode (the single place that maps modes to programs)
MODES = {
    "ecmp": Mode("ecmp", "ecmp.p4", "5-tuple ECMP: crc16 of src/dst address, protocol, ports and the seed",
                 ("hash_seed",)),
    "eecmp": Mode("eecmp", "eecmp.p4", "E-ECMP: the 5-tuple plus the RoCE BTH destination QP",
                  ("hash_seed",)),
    "spray": Mode("spray", "spray.p4", "per-packet spraying over every equal-cost uplink", ("hash_seed",)),
    "flowlet": Mode("flowlet", "flowlet.p4", "flowlet switching: a new path after an idle gap",
                    ("flowlet_interval_us", "hash_seed")),
    "pinning": Mode("pinning", "pinning.p4", "path pinning by destination slice"),
}

#: mode_params key -> (candidate register names (last name component), scale from the spec's unit)
MODE_PARAMETERS = {
    "flowlet_interval_us": (("flowlet_interval_us", "flowlet_interval", "flowlet_timeout"), 1),
    "hash_seed": (("hash_seed", "ecmp_seed"), 1),
}


def mode_names():
    """Return the mode names in table order."""
    return list(MODES)


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


def available_modes():
    """Return the modes whose programs exist now."""
    return [name for name, mode in MODES.items() if os.path.exists(os.path.join(P4SRC_DIR, mode.program))]
