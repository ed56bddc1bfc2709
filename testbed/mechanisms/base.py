"""What a mechanism family declares about itself: its modes, run-time parameters, controllers and options.

A *mechanism* is one family of fabric designs the testbed emulates (load
balancing, F10, DSF, FC+ ...).  Its package under ``testbed/mechanisms/``
holds a :class:`Mechanism`: plain data the rest of the testbed loops over
(:mod:`testbed.mechanisms` finds every package), and, separately, the code
that runs only while an experiment of it runs (its :class:`RunHooks
<testbed.mechanisms.hooks.RunHooks>`, named by ``hooks`` and imported when a
run needs them).  The declarations import nothing but this module and
:mod:`testbed.errors`, so every layer (controllers included) may read them.

Following one parameter from a spec to the switch: ``mode_params:
{probe_period_us: 2000}`` is checked by :meth:`Parameter.check` of the
parameter its mechanism declares (``table``, ``action``, ``action_param``
name the P4 parameter table), and a controller writes it into that table's
default action (:func:`testbed.controllers.parameters.write_parameters`).
"""
import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from testbed.errors import ParameterError

ANY_OPTION = "*"  # constructor_options of a controller that checks its options itself (an os-ken app's)


@dataclass(frozen=True)
class Parameter:
    """One run-time parameter of the P4 programs (or of a controller).

    Attributes:
        name: its key in ``mode_params``.
        minimum, maximum: the allowed integer range (inclusive).
        unit: unit of the value ("us", "" for a plain number).
        table: P4Info name of the parameter table that carries it (a keyless table whose default
            action copies its parameters into metadata), or None when only a controller reads it.
        action: the table's default action.
        action_param: the action parameter that takes the value.
        default: the value the program's ``default_action`` has, written when a spec gives none.
        description: one line for help and errors.
        seeded_bits: when a run takes this parameter and its spec gives none, its value is drawn
            from the spec's seed, this many bits of it (None: the default is used).
    """

    name: str
    minimum: int
    maximum: int
    unit: str
    table: Optional[str]
    action: Optional[str]
    action_param: Optional[str]
    default: int
    description: str
    seeded_bits: Optional[int] = None

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

        >>> Parameter("n", 1, 10, "us", None, None, None, 1, "").check(3.0)
        3
        >>> Parameter("n", 1, 10, "us", None, None, None, 1, "").check(0.5)
        Traceback (most recent call last):
        ...
        testbed.errors.ParameterError: invalid n=0.5: allowed values are an integer in [1, 10] us
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


@dataclass(frozen=True)
class Mode:
    """One mode: a program and how a run of it is set up.

    Attributes:
        name: the mode's name in specs and on the command line.
        program: file name under ``p4src/``.
        description: one line for help and reports.
        parameters: the ``mode_params`` keys this mode's program or controller takes.
        packet_generator_port: the port periodic trigger frames enter on (the embedded target's
            packet generator; on BMv2 an injector's veth port of that number), or None.
        topology: the topology kind the mode runs on (the spec's parameters stay), or None for
            the spec's kind (a baseline and its subject may compare wirings).
        controller: the controller kind the mode needs, or None for the spec's.
        detection_delay_ms: the controller's reaction delay when the spec gives none, or None
            for the general default.
        controller_options: ``((option, value), ...)`` given to the mode's controller (the spec's
            own controller options come on top).
        node_programs: ``((role, program), ...)``: switch roles that run another program than
            ``program``.
        target_features: features only the embedded target has that the mode needs
            (names of :data:`testbed.targets.EMBEDDED_FEATURES`, e.g. ``"pfc"``): BMv2 is refused.
        default: the mode a spec runs when it names neither mode nor program (one mode has it).
    """

    name: str
    program: str
    description: str
    parameters: tuple = field(default=())
    packet_generator_port: Optional[int] = None
    topology: Optional[str] = None
    controller: Optional[str] = None
    detection_delay_ms: Optional[float] = None
    controller_options: tuple = field(default=())
    node_programs: tuple = field(default=())
    target_features: tuple = field(default=())
    default: bool = False


@dataclass(frozen=True)
class ControllerOption:
    """One option of a controller kind, as a spec gives it under ``controller:``.

    Attributes:
        name: the key (``controller.<name>`` in a spec, a keyword of the controller's constructor).
        description: one line for help and errors.
        check: ``check(value, field_path, switches)`` returns the value to pass or raises
            :class:`~testbed.errors.SpecError` naming the field (``switches``: the topology's
            switch names, for options that name switches); or its ``"module:attribute"``, imported
            when a spec gives the option (as a mechanism's ``check_parameters``).
    """

    name: str
    description: str
    check: Union[Callable, str]


@dataclass(frozen=True)
class ControllerKind:
    """A controller a fabric can run (``controller.kind`` of a spec, ``controller=`` of a fabric).

    Attributes:
        name: the kind's name.
        description: one line for help.
        factory: ``"module:attribute"`` of a callable ``(detection_delay_ms, **options)`` returning
            the controller (see :class:`testbed.controllers.contract.Controller`); imported when used.
        options: the :class:`ControllerOption` it takes from a spec.
        constructor_options: more keywords the factory takes that a mode or the Python API
            may give but a spec may not (a mode's ``controller_options``); ``"*"``
            (:data:`ANY_OPTION`) for a controller that checks its own options.
        recovers: it reroutes around failures; False for a no-recovery baseline, whose flows
            a failure cuts are not expected back (:func:`testbed.experiment.analysis.unrecovered_flows`).
        reads_state_file: it runs in another process and reads the network from its state file,
            published before it starts (a fabric without one gets a private one).
        default: the kind a fabric or spec runs when it names none and its mode has none (one kind has it).
    """

    name: str
    description: str
    factory: str
    options: tuple = field(default=())
    constructor_options: tuple = field(default=())
    recovers: bool = True
    reads_state_file: bool = False
    default: bool = False


@dataclass(frozen=True)
class Mechanism:
    """A mechanism family: the declarations the generic code loops over.

    Attributes:
        name: its name (the package name under ``testbed/mechanisms/``).
        description: one line.
        order: its place when mechanisms are listed (modes of lower orders come first).
        modes: its :class:`Mode` objects.
        parameters: its :class:`Parameter` objects.
        controllers: its :class:`ControllerKind` objects.
        topology_kinds: topology kinds whose runs it measures whatever the mode (a baseline
            mode run on its topology still gets its measurements).
        check_parameters: ``check(values, field_path)`` refusing values that are each in range
            but wrong together (raises ParameterError), or None.
        hooks: ``"module:attribute"`` of its :class:`~testbed.mechanisms.hooks.RunHooks`, or None.
    """

    name: str
    description: str
    order: int
    modes: tuple = field(default=())
    parameters: tuple = field(default=())
    controllers: tuple = field(default=())
    topology_kinds: tuple = field(default=())
    check_parameters: Optional[Union[Callable, str]] = None
    hooks: Optional[str] = None
