"""Runtime state of match-action tables: entries, default action, lookup.

What we follow and where it is documented:

* Match kinds (P4_16 spec, "Match kinds" and the v1model/BMv2 ``simple_switch``
  documentation; P4Runtime spec, "FieldMatch"): exact = equal; lpm = longest
  matching prefix wins; ternary/range/optional = among matching entries the
  highest P4Runtime priority wins (larger number = wins; BMv2 uses the inverse
  internally and the PI server converts).  A table with any ternary, range or
  optional key needs priorities, also when it has an lpm key, which then acts as
  a prefix mask.  Ties (equal priority, both match) are left to the target by
  P4Runtime; here the entry inserted first wins.
* Write validation (P4Runtime spec, "TableEntry" / "FieldMatch"; BMv2 rejects
  the same): values wider than the key, a ternary value with bits outside its
  mask, an lpm value with bits beyond the prefix, a prefix longer than the key,
  range low > high, a priority missing (or given) where the table needs (or
  does not need) one, an action that is not the table's or is ``@defaultonly``
  in an entry / ``@tableonly`` as default, wrong argument count or width: all
  INVALID_ARGUMENT.  Duplicate match (same key and priority) ALREADY_EXISTS,
  missing entry NOT_FOUND, table at its ``size`` RESOURCE_EXHAUSTED, writing a
  table whose entries are ``const`` or a ``const default_action``
  PERMISSION_DENIED.
* Default action: the program's ``default_action`` or ``NoAction`` when none is
  given (p4c's implicit default); ``reset_default`` goes back to it.
* Direct counters and meters: their data lives on the entry; BMv2 counts a
  direct counter only when the entry is hit, so the data plane calls
  ``table.direct_counter.count(result.entry, nbytes)`` after a hit itself.
* Const entries without explicit priorities in a table that needs priorities:
  the first entry listed has the highest priority (P4_16 spec, "Entries").
* Selector groups: an entry may not point to an empty group (BMv2
  ``EMPTY_GRP``, reported as FAILED_PRECONDITION).  If a group has no member at
  lookup time, the lookup behaves as a miss.

Lookup cost: exact tables one dict lookup; lpm one dict per prefix length in
use, longest first; ternary/optional (and lpm mixed with them) one dict per
distinct mask tuple ("tuple space search"), visited in decreasing order of the
best priority they hold so the search stops early; entries with a real range
are scanned in priority order.

Threads: writers take the table's lock; ``lookup`` takes no lock.  Writers only
replace whole small containers or do single dict stores, so a concurrent
lookup sees either the old or the new state.
"""
import bisect
import threading
from dataclasses import dataclass, field
from typing import List, Optional

from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state.errors import StateError, check_uint
from testbed.p4.state.validation import normalize_call
from testbed.p4.state.watch import notifies


@dataclass
class TableEntry:
    """One table entry as written over P4Runtime.

    Exactly one of ``action``, ``member_id`` and ``group_id`` is set.  Equality
    compares the match, the action reference and the priority only.

    Attributes:
        matches: one :class:`KeyMatch` per *match* key, in
            ``table.info.match_keys`` order (selector keys excluded).
        action: the direct action call.
        member_id: the action profile member.
        group_id: the action selector group.
        priority: required iff ``table.info.needs_priority``; larger wins.
        idle_timeout_ns: idle timeout (0 = none; only for tables with idle timeout).
        controller_metadata: opaque P4Runtime ``controller_metadata``.
        metadata: opaque P4Runtime ``metadata`` bytes.
        counter_packets: direct counter packets (runtime data).
        counter_bytes: direct counter bytes (runtime data).
        meter: direct meter cell (:class:`testbed.p4.state.stateful.TrTcmMeter`) or None.
        last_hit_ns: time of the last hit the data plane recorded, or None.
        is_const: True for an entry installed from the program's entries list.
    """

    matches: List[KeyMatch]
    action: Optional[ActionCall] = None
    member_id: Optional[int] = None
    group_id: Optional[int] = None
    priority: Optional[int] = None
    idle_timeout_ns: int = field(default=0, compare=False)
    controller_metadata: int = field(default=0, compare=False)
    metadata: bytes = field(default=b"", compare=False)
    counter_packets: int = field(default=0, compare=False)
    counter_bytes: int = field(default=0, compare=False)
    meter: object = field(default=None, compare=False, repr=False)
    last_hit_ns: Optional[int] = field(default=None, compare=False, repr=False)
    is_const: bool = field(default=False, compare=False, repr=False)
    # Internal: lookup rank and the cached result of a direct-action entry.
    _prio: int = field(default=0, init=False, compare=False, repr=False)
    _seq: int = field(default=0, init=False, compare=False, repr=False)
    _result: object = field(default=None, init=False, compare=False, repr=False)
    _checks: object = field(default=None, init=False, compare=False, repr=False)


class LookupResult:
    """What a table lookup yields.

    Attributes:
        hit: True when an entry matched.
        action: the action name to run.
        args: its argument values.
        entry: the matched :class:`TableEntry` (None on a miss).
    """

    __slots__ = ("hit", "action", "args", "entry")

    def __init__(self, hit, action, args, entry):
        self.hit = hit
        self.action = action
        self.args = args
        self.entry = entry

    def __repr__(self):
        return f"LookupResult(hit={self.hit}, action={self.action!r}, args={self.args})"


class _MaskGroup:
    """Entries of a priority table that share one mask tuple."""

    __slots__ = ("masks", "mask0", "single", "buckets", "priorities")

    def __init__(self, masks):
        self.masks = masks
        self.single = len(masks) == 1
        self.mask0 = masks[0] if masks else 0
        self.buckets = {}   # masked key -> entries sorted by (-priority, seq)
        self.priorities = []  # sorted ascending, one per entry

    @property
    def max_priority(self):
        return self.priorities[-1] if self.priorities else -1


def _rank(entry):
    return (-entry._prio, entry._seq)


class TableState:
    """Entries, default action and lookup of one table.

    Args:
        info: the :class:`testbed.p4.program.Table`.
        program: the :class:`testbed.p4.program.ProgramInfo`.
        action_profile: the :class:`ActionProfileState` named by
            ``info.implementation``, or None.

    Attributes:
        info: the table description.
        direct_counter: the table's ``DirectCounterState`` or None (set by SwitchState).
        direct_meter: the table's ``DirectMeterState`` or None (set by SwitchState).
        action_profile: the table's action profile state or None.
        default_action: the current default :class:`ActionCall`.
    """

    def __init__(self, info, program, action_profile=None):
        self.info = info
        self.action_profile = action_profile
        self.direct_counter = None
        self.direct_meter = None
        self._program_actions = program.actions
        self._where = f"table {info.name}"
        self._keys = info.match_keys
        self._kinds = tuple(k.match_type for k in self._keys)
        self._widths = tuple(k.bitwidth for k in self._keys)
        self._full = tuple((1 << w) - 1 for w in self._widths)
        self._needs_priority = info.needs_priority
        self._allowed = {ref.name for ref in info.action_refs}
        self._scopes = {ref.name: ref.scope for ref in info.action_refs}
        self._lock = threading.RLock()
        kinds = set(self._kinds)
        if not self._keys:
            self._mode = "keyless"
        elif kinds == {"exact"}:
            self._mode = "exact"
        elif self._kinds.count("lpm") == 1 and kinds <= {"exact", "lpm"}:
            self._mode = "lpm"
            self._lpm_pos = self._kinds.index("lpm")
        else:
            self._mode = "generic"
        self.lookup = getattr(self, "_lookup_" + self._mode)
        self.watchers = []  # called after each write (testbed.p4.state.watch)
        self.refreshers = []  # called before entries are read: a native copy updates their direct counters
        self._initial_default = self._make_initial_default()
        self._install_initial()

    # --- set-up -------------------------------------------------------------

    def _make_initial_default(self):
        call = self.info.default_action or ActionCall("NoAction")
        if call.action == "NoAction" and "NoAction" not in self._allowed:
            # p4c's implicit default: NoAction is always allowed as default.
            return ActionCall("NoAction", ())
        return self._check_call(call, "TABLE_ONLY", default=True)

    def _install_initial(self):
        self._entries = {}      # canonical key -> entry, insertion order
        self._seq = 0
        self._levels = []       # lpm: [(mask, dict)], longest prefix first
        self._level_dicts = {}  # lpm: prefix_len -> dict
        self._mask_groups = {}  # generic: masks -> _MaskGroup
        self._group_order = []  # generic: groups by decreasing max priority
        self._range_entries = []  # generic: entries with a real range, by rank
        self._range_ranks = []
        self._set_default_call(self._initial_default)
        const = self.info.const_entries
        for index, ce in enumerate(const):
            priority = ce.priority
            if self._needs_priority and priority is None:
                priority = len(const) - index
            entry = TableEntry(list(ce.matches), ce.action, priority=priority)
            stored = self._insert(entry, check_const=False)
            stored.is_const = True

    @notifies
    def reset(self):
        """Remove all entries, reinstall the program's entries and default action."""
        with self._lock:
            if self.action_profile is not None:
                for entry in self._entries.values():
                    self.action_profile.release(entry.member_id, entry.group_id)
            self._install_initial()

    # --- validation -----------------------------------------------------------

    def _check_call(self, call, forbidden_scope, default=False):
        allowed = self._allowed
        if default and call is not None and getattr(call, "action", None) == "NoAction":
            allowed = allowed | {"NoAction"}
        where = self._where + (" default action" if default else "")
        return normalize_call(self._program_actions, call, allowed, where,
                              forbidden_scope, self._scopes)

    def _normalize_matches(self, matches):
        """Check matches; return (normalized KeyMatch list, canonical key parts)."""
        if matches is None:
            matches = []
        if len(matches) != len(self._keys) or not self._keys:
            if not self._keys:
                raise StateError("INVALID_ARGUMENT",
                                 f"{self._where}: has no match key; only its default action "
                                 f"can be set")
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: {len(matches)} key match(es) given, the table has "
                             f"{len(self._keys)} match key(s) "
                             f"({', '.join(k.name for k in self._keys)})")
        normalized, parts = [], []
        for key, full, km in zip(self._keys, self._full, matches):
            where = f"{self._where}: key {key.name}"
            kind = key.match_type
            if getattr(km, "kind", None) != kind:
                raise StateError("INVALID_ARGUMENT",
                                 f"{where}: match kind {getattr(km, 'kind', None)!r} given, "
                                 f"the key is {kind}")
            width = key.bitwidth
            value = km.value if km.value is not None else 0
            check_uint(value, width, where)
            if kind == "exact":
                normalized.append(KeyMatch("exact", value))
                parts.append(value)
            elif kind == "lpm":
                plen = km.prefix_len
                if plen is None:
                    plen = width
                if not isinstance(plen, int) or plen < 0 or plen > width:
                    raise StateError("INVALID_ARGUMENT",
                                     f"{where}: prefix_len {plen} exceeds bitwidth {width}"
                                     if isinstance(plen, int) and plen > width else
                                     f"{where}: prefix_len {plen!r} is not in 0..{width}")
                mask = full ^ ((1 << (width - plen)) - 1)
                if value & ~mask:
                    raise StateError("INVALID_ARGUMENT",
                                     f"{where}: value {value:#x} has bits set beyond "
                                     f"prefix_len {plen}")
                normalized.append(KeyMatch("lpm", value, prefix_len=plen))
                parts.append((value, plen))
            elif kind == "ternary":
                mask = full if km.mask is None else km.mask
                check_uint(mask, width, where + " mask")
                if value & ~mask:
                    raise StateError("INVALID_ARGUMENT",
                                     f"{where}: value {value:#x} has bits outside mask {mask:#x}")
                normalized.append(KeyMatch("ternary", value, mask=mask))
                parts.append((value, mask))
            elif kind == "optional":
                if km.mask is None:
                    normalized.append(KeyMatch("optional", 0, mask=None))
                    parts.append((0, 0))
                else:
                    if km.mask != full:
                        raise StateError("INVALID_ARGUMENT",
                                         f"{where}: optional match mask must be None (wildcard) "
                                         f"or all ones, got {km.mask!r}")
                    normalized.append(KeyMatch("optional", value, mask=full))
                    parts.append((value, full))
            elif kind == "range":
                high = value if km.high is None else km.high
                check_uint(high, width, where + " high")
                if value > high:
                    raise StateError("INVALID_ARGUMENT",
                                     f"{where}: range low {value} > high {high}")
                normalized.append(KeyMatch("range", value, high=high))
                parts.append((value, high))
            else:
                raise StateError("INVALID_ARGUMENT", f"{where}: unsupported match kind {kind}")
        return normalized, tuple(parts)

    def _check_priority(self, priority):
        if self._needs_priority:
            if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
                raise StateError("INVALID_ARGUMENT",
                                 f"{self._where}: needs a priority >= 1 (it has ternary, range or "
                                 f"optional keys), got {priority!r}")
            if priority >> 31:
                raise StateError("INVALID_ARGUMENT",
                                 f"{self._where}: priority {priority} does not fit in 31 bits")
            return priority
        if priority not in (None, 0):
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: takes no priority (no ternary, range or optional "
                             f"key), got {priority!r}")
        return None

    def _canonical_key(self, parts, priority):
        if self._mode == "exact":
            return parts
        return (parts, priority)

    def _check_target(self, entry):
        """Validate the action reference of an entry; return the normalized call."""
        given = [entry.action is not None, entry.member_id is not None,
                 entry.group_id is not None]
        if sum(given) != 1:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: an entry needs exactly one of action, member_id, "
                             f"group_id")
        if entry.action is not None:
            if self.action_profile is not None:
                raise StateError("INVALID_ARGUMENT",
                                 f"{self._where}: uses action profile {self.info.implementation}; "
                                 f"entries must give a member_id or group_id, not an action")
            return self._check_call(entry.action, "DEFAULT_ONLY")
        if self.action_profile is None:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: has no action profile; entries must give an action")
        return None

    def _check_idle_timeout(self, ttl):
        if ttl is None:
            return 0
        if not isinstance(ttl, int) or ttl < 0:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: idle_timeout_ns {ttl!r} must be >= 0")
        if ttl and not self.info.idle_timeout:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: does not support idle timeout")
        return ttl

    # --- writes ---------------------------------------------------------------

    @notifies
    def insert(self, entry):
        """Add an entry.

        Args:
            entry: the :class:`TableEntry` (not kept; a validated copy is stored).

        Returns:
            TableEntry: the stored entry (the object lookups return).

        Raises:
            StateError: PERMISSION_DENIED (const entries), INVALID_ARGUMENT (bad
                match, priority, action), NOT_FOUND (unknown member/group),
                ALREADY_EXISTS (same match and priority), RESOURCE_EXHAUSTED (full).
        """
        return self._insert(entry, check_const=True)

    def _insert(self, entry, check_const):
        with self._lock:
            if check_const and self.info.entries_are_const:
                raise StateError("PERMISSION_DENIED",
                                 f"{self._where}: its entries are const and cannot be written")
            matches, parts = self._normalize_matches(entry.matches)
            priority = self._check_priority(entry.priority)
            call = self._check_target(entry)
            ttl = self._check_idle_timeout(entry.idle_timeout_ns)
            key = self._canonical_key(parts, priority)
            if key in self._entries:
                raise StateError("ALREADY_EXISTS",
                                 f"{self._where}: an entry with this match"
                                 f"{' and priority' if priority is not None else ''} exists")
            if self.info.size and len(self._entries) >= self.info.size:
                raise StateError("RESOURCE_EXHAUSTED",
                                 f"{self._where}: full ({self.info.size} entries)")
            if self.action_profile is not None:
                self.action_profile.acquire(entry.member_id, entry.group_id, self._where)
            stored = TableEntry(matches, call, entry.member_id, entry.group_id, priority,
                                idle_timeout_ns=ttl,
                                controller_metadata=entry.controller_metadata,
                                metadata=entry.metadata)
            if priority is None and self._mode == "generic":
                # several lpm keys and nothing else: longer total prefix wins
                stored._prio = sum(m.prefix_len for m in matches if m.kind == "lpm")
            else:
                stored._prio = priority or 0
            self._seq += 1
            stored._seq = self._seq
            stored._result = self._direct_result(stored)
            self._entries[key] = stored
            self._index(stored, parts)
            return stored

    @notifies
    def modify(self, entry):
        """Change the action (and idle timeout / metadata) of an existing entry.

        The stored entry keeps its identity and its direct counter/meter data.

        Returns:
            TableEntry: the stored entry.

        Raises:
            StateError: PERMISSION_DENIED (const entries), NOT_FOUND (no entry with
                this match and priority), INVALID_ARGUMENT, NOT_FOUND (member/group).
        """
        with self._lock:
            if self.info.entries_are_const:
                raise StateError("PERMISSION_DENIED",
                                 f"{self._where}: its entries are const and cannot be written")
            stored = self._find_checked(entry.matches, entry.priority)
            call = self._check_target(entry)
            ttl = self._check_idle_timeout(entry.idle_timeout_ns)
            if self.action_profile is not None:
                self.action_profile.acquire(entry.member_id, entry.group_id, self._where)
                self.action_profile.release(stored.member_id, stored.group_id)
            stored.action, stored.member_id, stored.group_id = call, entry.member_id, entry.group_id
            stored.idle_timeout_ns = ttl
            stored.controller_metadata = entry.controller_metadata
            stored.metadata = entry.metadata
            stored._result = self._direct_result(stored)
            return stored

    @notifies
    def delete(self, entry):
        """Remove the entry with the same match and priority (the action is ignored).

        Returns:
            TableEntry: the removed entry.

        Raises:
            StateError: PERMISSION_DENIED (const entries), NOT_FOUND.
        """
        with self._lock:
            if self.info.entries_are_const:
                raise StateError("PERMISSION_DENIED",
                                 f"{self._where}: its entries are const and cannot be written")
            matches, parts = self._normalize_matches(entry.matches)
            priority = self._check_priority(entry.priority)
            key = self._canonical_key(parts, priority)
            stored = self._entries.get(key)
            if stored is None:
                raise StateError("NOT_FOUND", f"{self._where}: no entry with this match")
            self._unindex(stored, parts)
            del self._entries[key]
            if self.action_profile is not None:
                self.action_profile.release(stored.member_id, stored.group_id)
            return stored

    def clear(self):
        """Delete every non-const entry (as a P4Runtime wildcard delete would)."""
        with self._lock:
            if self.info.entries_are_const:
                raise StateError("PERMISSION_DENIED",
                                 f"{self._where}: its entries are const and cannot be written")
            for stored in [e for e in self._entries.values()]:
                self.delete(stored)

    @notifies
    def set_default(self, call):
        """Set the action run on a miss.

        Raises:
            StateError: PERMISSION_DENIED when the program's default action is
                const; INVALID_ARGUMENT for an action not in the table, a
                ``@tableonly`` action or bad arguments.
        """
        with self._lock:
            if self.info.const_default_action:
                raise StateError("PERMISSION_DENIED",
                                 f"{self._where}: the default action is const")
            self._set_default_call(self._check_call(call, "TABLE_ONLY", default=True))

    @notifies
    def reset_default(self):
        """Go back to the program's default action.

        Raises:
            StateError: PERMISSION_DENIED when the default action is const.
        """
        with self._lock:
            if self.info.const_default_action:
                raise StateError("PERMISSION_DENIED",
                                 f"{self._where}: the default action is const")
            self._set_default_call(self._initial_default)

    def _set_default_call(self, call):
        self.default_action = call
        self._default_result = LookupResult(False, call.action, tuple(call.args), None)

    # --- reads ----------------------------------------------------------------

    def entries(self):
        """All entries in insertion order (const entries first)."""
        self._refresh()
        return list(self._entries.values())

    def _refresh(self):
        for refresher in self.refreshers:
            refresher(self)

    def __len__(self):
        return len(self._entries)

    def find(self, matches, priority=None):
        """The stored entry with this match and priority, or None.

        Raises:
            StateError: INVALID_ARGUMENT for a malformed match or priority.
        """
        _, parts = self._normalize_matches(matches)
        priority = self._check_priority(priority)
        self._refresh()
        return self._entries.get(self._canonical_key(parts, priority))

    def _find_checked(self, matches, priority):
        stored = self.find(matches, priority)
        if stored is None:
            raise StateError("NOT_FOUND", f"{self._where}: no entry with this match")
        return stored

    def stored_entry(self, entry):
        """The stored entry equal in match and priority to ``entry``.

        Accepts the stored object itself without a search.

        Raises:
            StateError: NOT_FOUND when the table holds no such entry.
        """
        if isinstance(entry, TableEntry) and entry._seq:
            self._refresh()
            key_entry = self._entries.get(self._key_of(entry))
            if key_entry is entry:
                return entry
        return self._find_checked(entry.matches, entry.priority)

    def _key_of(self, stored):
        parts = []
        for m in stored.matches:
            kind = m.kind
            if kind == "exact":
                parts.append(m.value)
            elif kind == "lpm":
                parts.append((m.value, m.prefix_len))
            elif kind == "ternary":
                parts.append((m.value, m.mask))
            elif kind == "optional":
                parts.append((m.value, m.mask or 0))
            else:
                parts.append((m.value, m.high))
        return self._canonical_key(tuple(parts), stored.priority)

    def record_hit(self, entry, now_ns):
        """Note that the data plane hit ``entry`` at ``now_ns`` (for idle timeout)."""
        entry.last_hit_ns = now_ns

    def expired(self, now_ns):
        """Entries with an idle timeout that were not hit for that long.

        An entry never hit counts from the time it was first checked here.
        """
        out = []
        self._refresh()
        for entry in list(self._entries.values()):
            if entry.idle_timeout_ns:
                if entry.last_hit_ns is None:
                    entry.last_hit_ns = now_ns
                elif now_ns - entry.last_hit_ns >= entry.idle_timeout_ns:
                    out.append(entry)
        return out

    # --- lookup -----------------------------------------------------------------

    def lookup(self, key_values, selector_hash=None):
        """Match the key values and return the action to run.

        (Replaced per instance by the lookup specialised for the table's match
        kinds; this body only documents the signature.)

        Args:
            key_values: tuple (not list: exact tables use it as a dict key) of the
                match key values in ``info.match_keys`` order, selector keys excluded.
            selector_hash: hash of the selector keys (computed by the data plane
                with the selector's algorithm and output width), used only by
                entries pointing at a group; None counts as 0.

        Returns:
            LookupResult: the hit entry's action, or the default action on a miss.
        """
        return getattr(self, "_lookup_" + self._mode)(key_values, selector_hash)

    def _direct_result(self, entry):
        if entry.action is not None:
            return LookupResult(True, entry.action.action, entry.action.args, entry)
        return None

    def _resolve(self, entry, selector_hash):
        profile = self.action_profile
        if entry.member_id is not None:
            member = profile.get_member(entry.member_id)
        else:
            member = profile.choose(entry.group_id, selector_hash or 0)
        if member is None:
            return self._default_result
        return LookupResult(True, member.action, member.args, entry)

    def _lookup_keyless(self, key_values=(), selector_hash=None):
        return self._default_result

    def _lookup_exact(self, key_values, selector_hash=None):
        entry = self._entries.get(key_values)
        if entry is None:
            return self._default_result
        result = entry._result
        if result is None:
            return self._resolve(entry, selector_hash)
        return result

    def _lookup_lpm(self, key_values, selector_hash=None):
        if len(key_values) == 1:
            value = key_values[0]
            for mask, level in self._levels:
                entry = level.get(value & mask)
                if entry is not None:
                    break
            else:
                return self._default_result
        else:
            pos = self._lpm_pos
            value = key_values[pos]
            before, after = key_values[:pos], key_values[pos + 1:]
            for mask, level in self._levels:
                entry = level.get(before + (value & mask,) + after)
                if entry is not None:
                    break
            else:
                return self._default_result
        result = entry._result
        if result is None:
            return self._resolve(entry, selector_hash)
        return result

    def _lookup_generic(self, key_values, selector_hash=None):
        best = None
        best_prio = -1
        best_seq = 0
        for group in self._group_order:
            priorities = group.priorities
            if not priorities or priorities[-1] < best_prio:
                break
            if group.single:
                bucket = group.buckets.get(key_values[0] & group.mask0)
            else:
                bucket = group.buckets.get(tuple([v & m for v, m in zip(key_values, group.masks)]))
            if bucket:
                entry = bucket[0]
                if entry._prio > best_prio or (entry._prio == best_prio and entry._seq < best_seq):
                    best, best_prio, best_seq = entry, entry._prio, entry._seq
        for entry in self._range_entries:
            if entry._prio < best_prio:
                break
            if entry._prio == best_prio and entry._seq > best_seq:
                break
            if self._matches_checks(entry._checks, key_values):
                best = entry
                break
        if best is None:
            return self._default_result
        result = best._result
        if result is None:
            return self._resolve(best, selector_hash)
        return result

    def _range_checks_of(self, entry):
        """Per-key (low, high, mask) checks of an entry with a real range (mask None = range)."""
        checks = []
        for m, width, full in zip(entry.matches, self._widths, self._full):
            kind = m.kind
            if kind == "range":
                checks.append((m.value, m.high, None))
            elif kind == "lpm":
                checks.append((m.value, 0, full ^ ((1 << (width - m.prefix_len)) - 1)))
            elif kind == "exact":
                checks.append((m.value, 0, full))
            elif kind == "optional":
                checks.append((m.value, 0, 0 if m.mask is None else full))
            else:
                checks.append((m.value, 0, m.mask))
        return tuple(checks)

    @staticmethod
    def _matches_checks(checks, key_values):
        for (low, high, mask), value in zip(checks, key_values):
            if mask is None:
                if value < low or value > high:
                    return False
            elif value & mask != low:
                return False
        return True

    # --- index maintenance ----------------------------------------------------------

    def _masks_of(self, entry):
        """Per-key masks of a maskable entry, or None when it has a real range."""
        masks = []
        for m, width, full in zip(entry.matches, self._widths, self._full):
            kind = m.kind
            if kind == "exact":
                masks.append(full)
            elif kind == "lpm":
                masks.append(full ^ ((1 << (width - m.prefix_len)) - 1))
            elif kind == "ternary":
                masks.append(m.mask)
            elif kind == "optional":
                masks.append(0 if m.mask is None else full)
            else:  # range
                if m.value == 0 and m.high == full:
                    masks.append(0)
                elif m.value == m.high:
                    masks.append(full)
                else:
                    return None
        return tuple(masks)

    def _index(self, entry, parts):
        mode = self._mode
        if mode == "lpm":
            pos = self._lpm_pos
            plen = entry.matches[pos].prefix_len
            level = self._level_dicts.get(plen)
            if level is None:
                level = {}
                self._level_dicts[plen] = level
                width = self._widths[pos]
                mask = self._full[pos] ^ ((1 << (width - plen)) - 1)
                self._levels = sorted(
                    self._levels + [(mask, level)], key=lambda item: -bin(item[0]).count("1"))
            level[self._lpm_key(entry)] = entry
        elif mode == "generic":
            masks = self._masks_of(entry)
            if masks is None:
                entry._checks = self._range_checks_of(entry)
                rank = _rank(entry)
                pos = bisect.bisect(self._range_ranks, rank)
                self._range_ranks.insert(pos, rank)
                self._range_entries = (self._range_entries[:pos] + [entry]
                                       + self._range_entries[pos:])
                return
            group = self._mask_groups.get(masks)
            new_group = group is None
            if new_group:
                group = _MaskGroup(masks)
            bkey = self._bucket_key(entry, masks)
            bucket = list(group.buckets.get(bkey, ()))
            ranks = [_rank(e) for e in bucket]
            bucket.insert(bisect.bisect(ranks, _rank(entry)), entry)
            group.buckets[bkey] = bucket
            old_max = group.max_priority
            priorities = list(group.priorities)
            bisect.insort(priorities, entry._prio)
            group.priorities = priorities
            if new_group:
                self._mask_groups[masks] = group
            if new_group or group.max_priority != old_max:
                self._reorder_groups()

    def _unindex(self, entry, parts):
        mode = self._mode
        if mode == "lpm":
            plen = entry.matches[self._lpm_pos].prefix_len
            level = self._level_dicts[plen]
            del level[self._lpm_key(entry)]
            if not level:
                del self._level_dicts[plen]
                self._levels = [item for item in self._levels if item[1] is not level]
        elif mode == "generic":
            masks = self._masks_of(entry)
            if masks is None:
                pos = self._range_entries.index(entry)
                del self._range_ranks[pos]
                self._range_entries = self._range_entries[:pos] + self._range_entries[pos + 1:]
                return
            group = self._mask_groups[masks]
            bkey = self._bucket_key(entry, masks)
            bucket = [e for e in group.buckets[bkey] if e is not entry]
            if bucket:
                group.buckets[bkey] = bucket
            else:
                del group.buckets[bkey]
            old_max = group.max_priority
            priorities = list(group.priorities)
            del priorities[bisect.bisect_left(priorities, entry._prio)]
            group.priorities = priorities
            if not priorities:
                del self._mask_groups[masks]
                self._reorder_groups()
            elif group.max_priority != old_max:
                self._reorder_groups()

    def _reorder_groups(self):
        self._group_order = sorted(self._mask_groups.values(), key=lambda g: -g.max_priority)

    def _lpm_key(self, entry):
        if len(entry.matches) == 1:
            return entry.matches[0].value
        return tuple(m.value for m in entry.matches)

    @staticmethod
    def _bucket_key(entry, masks):
        if len(masks) == 1:
            return entry.matches[0].value & masks[0]
        return tuple(m.value & mask for m, mask in zip(entry.matches, masks))
