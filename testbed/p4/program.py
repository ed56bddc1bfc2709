"""The control-plane view of a loaded P4 program.

This module is the contract between the embedded target's compiler
(``testbed.p4.frontend`` / ``testbed.p4.compiler``), which fills a
:class:`ProgramInfo` from the source, and everything that talks to the
control plane: P4Info generation (``testbed.p4runtime.p4info``), the runtime
state of tables and externs (``testbed.p4.state``) and the P4Runtime server.

Names are the fully qualified names p4c gives in P4Info: objects declared in a
control are prefixed with the control's name (``"MyIngress.ipv4_lpm"``),
top-level actions are not (``"NoAction"``), and an ``@name("...")``
annotation replaces the local name (a leading dot makes it absolute).
Match-field names are the key expression as written (``"hdr.ipv4.dstAddr"``)
unless ``@name`` overrides it.  IDs are not stored here: P4Info generation
derives them from the names the way p4c does.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

PRIORITY_MATCH_KINDS = ("ternary", "range", "optional")
"""Match kinds that make a table's entries need a priority (P4Runtime spec, "TableEntry")."""


@dataclass
class SourceLocation:
    """Where a declaration stands in the source."""

    filename: str
    line: int

    def __str__(self):
        return f"{self.filename}:{self.line}"


@dataclass
class MatchField:
    """One key of a table.

    ``match_type`` is ``exact``, ``lpm``, ``ternary``, ``range``, ``optional`` or
    ``selector``; ``selector`` keys feed the action selector's hash and are not
    part of the match in P4Runtime.
    """

    name: str
    bitwidth: int
    match_type: str
    annotations: List[str] = field(default_factory=list)


@dataclass
class ActionParam:
    """One directionless (control-plane supplied) parameter of an action."""

    name: str
    bitwidth: int


@dataclass
class Action:
    """An action the control plane can name in entries and default actions."""

    name: str
    params: List[ActionParam] = field(default_factory=list)
    annotations: List[str] = field(default_factory=list)
    location: Optional[SourceLocation] = None


@dataclass
class ActionRef:
    """An action a table may run, with its scope (``@tableonly``/``@defaultonly``)."""

    name: str
    scope: str = "TABLE_AND_DEFAULT"


@dataclass
class ActionCall:
    """An action with its argument values (for default actions and const entries)."""

    action: str
    args: Tuple[int, ...] = ()


@dataclass
class KeyMatch:
    """The match of one key in a const entry.

    ``kind`` is the table key's match type.  ``value`` is always set;
    ``mask`` is used by ternary/optional (``None`` in ``optional`` means
    wildcard), ``prefix_len`` by lpm, ``high`` by range (``value`` is low).
    A key given as ``_`` / ``default`` is a wildcard: ternary mask 0, lpm
    prefix 0, full range.
    """

    kind: str
    value: int = 0
    mask: Optional[int] = None
    prefix_len: Optional[int] = None
    high: Optional[int] = None


@dataclass
class ConstEntry:
    """An entry of a table's ``const entries`` (or ``entries``) list."""

    matches: List[KeyMatch]
    action: ActionCall
    priority: Optional[int] = None


@dataclass
class Table:
    """A match-action table."""

    name: str
    match_fields: List[MatchField]
    action_refs: List[ActionRef]
    size: int = 1024
    default_action: Optional[ActionCall] = None
    const_default_action: bool = False
    const_entries: List[ConstEntry] = field(default_factory=list)
    entries_are_const: bool = False
    implementation: Optional[str] = None  # name of an ActionProfile / selector
    direct_counter: Optional[str] = None
    direct_meter: Optional[str] = None
    idle_timeout: bool = False
    annotations: List[str] = field(default_factory=list)
    location: Optional[SourceLocation] = None

    @property
    def match_keys(self):
        """The keys that take part in the match (all but ``selector`` keys)."""
        return [f for f in self.match_fields if f.match_type != "selector"]

    @property
    def selector_keys(self):
        """The keys hashed by the table's action selector."""
        return [f for f in self.match_fields if f.match_type == "selector"]

    @property
    def needs_priority(self):
        """True when entries need a priority (any ternary, range or optional key)."""
        return any(f.match_type in PRIORITY_MATCH_KINDS for f in self.match_fields)


@dataclass
class ActionProfile:
    """An ``action_profile`` or ``action_selector`` instance."""

    name: str
    table_names: List[str]
    size: int
    with_selector: bool = False
    algorithm: Optional[str] = None  # a v1model HashAlgorithm name, selectors only
    output_width: Optional[int] = None  # selector hash output width in bits
    max_group_size: int = 0


@dataclass
class Counter:
    """An indexed ``counter``."""

    name: str
    size: int
    unit: str = "BOTH"


@dataclass
class DirectCounter:
    """A ``direct_counter`` attached to one table."""

    name: str
    table_name: str
    unit: str = "BOTH"


@dataclass
class Meter:
    """An indexed ``meter`` (two-rate three-color, like BMv2)."""

    name: str
    size: int
    unit: str = "BYTES"


@dataclass
class DirectMeter:
    """A ``direct_meter`` attached to one table."""

    name: str
    table_name: str
    unit: str = "BYTES"


@dataclass
class Register:
    """A ``register<bit<W>>(size)`` instance."""

    name: str
    bitwidth: int
    size: int


@dataclass
class DigestField:
    """One member of the struct a ``digest`` call sends."""

    name: str
    bitwidth: int


@dataclass
class Digest:
    """A digest, named after the type of the data it sends (as p4c names it)."""

    name: str
    fields: List[DigestField]


@dataclass
class PacketMetadataField:
    """One field of a ``@controller_header`` header."""

    name: str
    bitwidth: int


@dataclass
class ControllerPacketMetadata:
    """A ``@controller_header("packet_in"|"packet_out")`` header."""

    name: str
    fields: List[PacketMetadataField]
    type_name: Optional[str] = None  # the header type; p4c derives the P4Info id from it

    @property
    def bitwidth(self):
        """Total width in bits (a multiple of 8 for a well-formed header)."""
        return sum(f.bitwidth for f in self.fields)


@dataclass
class ProgramInfo:
    """Everything about a program that the control plane can see."""

    name: str
    tables: Dict[str, Table] = field(default_factory=dict)
    actions: Dict[str, Action] = field(default_factory=dict)
    action_profiles: Dict[str, ActionProfile] = field(default_factory=dict)
    counters: Dict[str, Counter] = field(default_factory=dict)
    direct_counters: Dict[str, DirectCounter] = field(default_factory=dict)
    meters: Dict[str, Meter] = field(default_factory=dict)
    direct_meters: Dict[str, DirectMeter] = field(default_factory=dict)
    registers: Dict[str, Register] = field(default_factory=dict)
    digests: Dict[str, Digest] = field(default_factory=dict)
    controller_packet_metadata: Dict[str, ControllerPacketMetadata] = field(default_factory=dict)
    #: extern functions (``mark_to_drop``, ``digest``...) called from the controls' apply blocks
    #: or from the actions P4Info lists, sorted; p4c's P4Info has a ``type_info`` when there is one
    extern_function_calls: List[str] = field(default_factory=list)
