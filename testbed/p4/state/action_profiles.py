"""Runtime state of ``action_profile`` and ``action_selector`` instances.

What we follow and where it is documented:

* Group member choice.  BMv2's action profile (``ActionProfile::GroupMgr::
  get_from_hash`` in p4lang/behavioral-model ``src/bm_sim/action_profile.cpp``)
  keeps each group's members in a sorted set of member handles and picks the
  n-th one with ``n = hash % group_size``.  BMv2 allocates a member handle when
  the member is created, the lowest one free (``HandleMgr::get_handle``), so the
  order is neither the member ids' nor the group's list order: we keep the
  same handles and sort by them.
* Weighted members.  BMv2 itself has no weights; the PI P4Runtime server in
  front of it (p4lang/PI ``proto/frontend/src/action_prof_mgr.cpp``,
  ``ActionProfMemberMap`` keeping several target handles per member) realizes a
  member of weight *w* as *w* BMv2 members (handles): a group update walks the
  members in id order and creates the copies a member lacks (lowest free
  handles again), and afterwards deletes, last first, the copies that no group
  needs any more.  We do the same: the selection list holds one member id per
  handle, in handle order, and the choice is ``selection[hash % len(selection)]``.
* Group size.  As in PI's ``validate_max_group_size`` and the P4Runtime spec
  (ActionProfileGroup.max_size): a negative ``max_size`` or one larger than the
  P4Info ``max_group_size`` is INVALID_ARGUMENT; a group whose total weight
  exceeds its ``max_size`` (or the static ``max_group_size``) is
  RESOURCE_EXHAUSTED.
* Deleting a member still used by a group or a table entry, or a group still
  used by a table entry, is refused (BMv2 ``MBR_STILL_USED`` / ``GRP_STILL_USED``);
  the status is FAILED_PRECONDITION.
* The P4Info ``size`` of a profile bounds the number of members
  (RESOURCE_EXHAUSTED beyond it).  For a selector it also bounds the sum of the
  member weights over all its groups (P4Info ``ActionProfile``: without
  ``selector_size_semantics``, as p4c writes it, sizes are sums of weights), as
  ``max_group_size`` bounds one group's: RESOURCE_EXHAUSTED beyond either.  PI
  and BMv2 enforce neither bound on the sum over groups (they accept it).
"""
import heapq
import threading

from testbed.p4.state.errors import StateError
from testbed.p4.state.validation import normalize_call
from testbed.p4.state.watch import notifies


class Member:
    """One action profile member: an action with its arguments.

    Attributes:
        member_id: the P4Runtime member id.
        action: action name.
        args: tuple of argument values.
    """

    __slots__ = ("member_id", "action", "args")

    def __init__(self, member_id, action, args):
        self.member_id = member_id
        self.action = action
        self.args = args

    def __repr__(self):
        return f"Member({self.member_id}, {self.action}, {self.args})"


class Group:
    """One action selector group.

    Attributes:
        group_id: the P4Runtime group id.
        members: list of ``(member_id, weight)`` sorted by member id (as P4Runtime reads list them).
        max_size: the ``max_size`` given at creation (0 = target maximum).
        selection: tuple of member ids, each repeated ``weight`` times, in the
            order the hash indexes: BMv2's member handles (see the module docstring).
    """

    __slots__ = ("group_id", "members", "max_size", "selection")

    def __init__(self, group_id, members, max_size, handles):
        self.group_id = group_id
        self.members = members
        self.max_size = max_size
        pairs = sorted((handle, mid) for mid, weight in members for handle in handles[mid][:weight])
        self.selection = tuple(mid for _handle, mid in pairs)

    def __repr__(self):
        return f"Group({self.group_id}, members={self.members}, max_size={self.max_size})"


class ActionProfileState:
    """Members and groups of one action profile / selector.

    Args:
        info: the :class:`testbed.p4.program.ActionProfile`.
        program: the :class:`testbed.p4.program.ProgramInfo` (for the actions of
            the tables that use the profile).

    Attributes:
        info: the profile description.
        lock: re-entrant lock writers hold while changing members and groups
            (tables take it too when they reference members or groups).
    """

    def __init__(self, info, program):
        self.info = info
        self._program_actions = program.actions
        allowed, scopes = set(), {}
        for table_name in info.table_names:
            table = program.tables.get(table_name)
            if table is None:
                continue
            for ref in table.action_refs:
                allowed.add(ref.name)
                scopes[ref.name] = ref.scope
        self._allowed = allowed
        self._scopes = scopes
        self._where = f"action profile {info.name}"
        self.lock = threading.RLock()
        self.watchers = []  # called after each write (testbed.p4.state.watch)
        self.reset()

    @notifies
    def reset(self):
        """Remove every member and group."""
        with self.lock:
            self._members = {}
            self._groups = {}
            self._member_refs = {}
            self._group_refs = {}
            # BMv2's member handles: per member its copies' handles (the first is its own) and
            # PI's count of users per weight (the member itself counts as one of weight 1)
            self._handles = {}
            self._weight_users = {}
            self._next_handle = 0
            self._free_handles = []  # a heap: released handles below _next_handle

    def _new_handle(self):
        if self._free_handles:
            return heapq.heappop(self._free_handles)
        self._next_handle += 1
        return self._next_handle - 1

    def _update_copies(self, old_members, new_members):
        """PI's group update: copies created in member id order, unneeded ones deleted afterwards."""
        old, new = dict(old_members), dict(new_members)
        changed = sorted(set(old) | set(new))
        for member_id in changed:
            handles = self._handles[member_id]
            while len(handles) < new.get(member_id, 0):
                handles.append(self._new_handle())
            users = self._weight_users[member_id]
            if old.get(member_id):
                users[old[member_id]] -= 1
            if new.get(member_id):
                users[new[member_id]] = users.get(new[member_id], 0) + 1
        for member_id in changed:
            self._purge_copies(member_id)

    def _purge_copies(self, member_id):
        users = self._weight_users[member_id]
        needed = max((weight for weight, count in users.items() if count > 0), default=1)
        handles = self._handles[member_id]
        while len(handles) > needed:
            heapq.heappush(self._free_handles, handles.pop())

    # --- members -----------------------------------------------------------

    def _check_id(self, value, what):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> 32:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: {what} {value!r} is not a 32-bit unsigned integer")

    @notifies
    def insert_member(self, member_id, call):
        """Add a member.

        Args:
            member_id: new member id.
            call: the member's :class:`ActionCall`.

        Raises:
            StateError: ALREADY_EXISTS for a used id, RESOURCE_EXHAUSTED when the
                profile is full, INVALID_ARGUMENT for a bad action call.
        """
        self._check_id(member_id, "member id")
        call = normalize_call(self._program_actions, call, self._allowed, self._where,
                              "DEFAULT_ONLY", self._scopes)
        with self.lock:
            if member_id in self._members:
                raise StateError("ALREADY_EXISTS", f"{self._where}: member {member_id} already exists")
            if self.info.size and len(self._members) >= self.info.size:
                raise StateError("RESOURCE_EXHAUSTED",
                                 f"{self._where}: full ({self.info.size} members)")
            self._members[member_id] = Member(member_id, call.action, call.args)
            self._member_refs[member_id] = 0
            self._handles[member_id] = [self._new_handle()]
            self._weight_users[member_id] = {1: 1}

    @notifies
    def modify_member(self, member_id, call):
        """Replace a member's action call.

        Raises:
            StateError: NOT_FOUND for an unknown member, INVALID_ARGUMENT for a bad call.
        """
        call = normalize_call(self._program_actions, call, self._allowed, self._where,
                              "DEFAULT_ONLY", self._scopes)
        with self.lock:
            if member_id not in self._members:
                raise StateError("NOT_FOUND", f"{self._where}: member {member_id} does not exist")
            # A new object, swapped in with one dict store: lookups never see half a member.
            self._members[member_id] = Member(member_id, call.action, call.args)

    @notifies
    def delete_member(self, member_id):
        """Remove a member.

        Raises:
            StateError: NOT_FOUND for an unknown member, FAILED_PRECONDITION when a
                group or a table entry still uses it.
        """
        with self.lock:
            if member_id not in self._members:
                raise StateError("NOT_FOUND", f"{self._where}: member {member_id} does not exist")
            if self._member_refs.get(member_id):
                raise StateError("FAILED_PRECONDITION",
                                 f"{self._where}: member {member_id} is still used by "
                                 f"{self._member_refs[member_id]} group(s)/table entries")
            del self._members[member_id]
            del self._member_refs[member_id]
            for handle in self._handles.pop(member_id):
                heapq.heappush(self._free_handles, handle)
            del self._weight_users[member_id]

    def get_member(self, member_id):
        """The :class:`Member` with this id, or None."""
        return self._members.get(member_id)

    def members(self):
        """All members (list of :class:`Member`, insertion order)."""
        return list(self._members.values())

    # --- groups ------------------------------------------------------------

    def _check_group_members(self, group_id, members, max_size):
        if not self.info.with_selector:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: is not an action selector and has no groups")
        if not isinstance(max_size, int) or max_size < 0:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: group {group_id}: max_size {max_size!r} must be >= 0")
        static_max = self.info.max_group_size or 0
        if static_max and max_size > static_max:
            raise StateError("INVALID_ARGUMENT",
                             f"{self._where}: group {group_id}: max_size {max_size} exceeds "
                             f"max_group_size {static_max}")
        weights = {}
        for item in members:
            member_id, weight = item
            if member_id in weights:
                raise StateError("INVALID_ARGUMENT",
                                 f"{self._where}: group {group_id}: member {member_id} listed twice")
            if not isinstance(weight, int) or weight < 1:
                raise StateError("INVALID_ARGUMENT",
                                 f"{self._where}: group {group_id}: member {member_id}: "
                                 f"weight {weight!r} must be >= 1")
            if member_id not in self._members:
                raise StateError("NOT_FOUND",
                                 f"{self._where}: group {group_id}: member {member_id} does not exist")
            weights[member_id] = weight
        total = sum(weights.values())
        limit = max_size or static_max
        if limit and total > limit:
            raise StateError("RESOURCE_EXHAUSTED",
                             f"{self._where}: group {group_id}: total weight {total} exceeds "
                             f"the group size limit {limit}")
        if self.info.size:
            others = sum(weight for group in self._groups.values() if group.group_id != group_id
                         for _, weight in group.members)
            if others + total > self.info.size:
                raise StateError("RESOURCE_EXHAUSTED",
                                 f"{self._where}: group {group_id}: the groups' member weights would sum to "
                                 f"{others + total}, over the profile's size {self.info.size}")
        return sorted(weights.items())

    @notifies
    def insert_group(self, group_id, members, max_size=0):
        """Create a selector group.

        Args:
            group_id: new group id.
            members: list of ``(member_id, weight)``; weight >= 1.
            max_size: the group's maximum total weight (0 = no own limit).

        Raises:
            StateError: ALREADY_EXISTS, NOT_FOUND (unknown member), INVALID_ARGUMENT
                (not a selector, bad weight, duplicate member, bad max_size),
                RESOURCE_EXHAUSTED (total weight over the limit).
        """
        self._check_id(group_id, "group id")
        with self.lock:
            if group_id in self._groups:
                raise StateError("ALREADY_EXISTS", f"{self._where}: group {group_id} already exists")
            sorted_members = self._check_group_members(group_id, members, max_size)
            for member_id, _ in sorted_members:
                self._member_refs[member_id] += 1
            self._update_copies([], sorted_members)
            self._groups[group_id] = Group(group_id, sorted_members, max_size, self._handles)
            self._group_refs[group_id] = 0

    @notifies
    def modify_group(self, group_id, members, max_size=None):
        """Replace a group's members.

        Args:
            group_id: existing group id.
            members: the new list of ``(member_id, weight)``.
            max_size: new max_size, or None to keep the current one.

        Raises:
            StateError: NOT_FOUND for an unknown group or member, plus the checks of
                :meth:`insert_group`.
        """
        with self.lock:
            old = self._groups.get(group_id)
            if old is None:
                raise StateError("NOT_FOUND", f"{self._where}: group {group_id} does not exist")
            if max_size is None:
                max_size = old.max_size
            sorted_members = self._check_group_members(group_id, members, max_size)
            if not sorted_members and self._group_refs.get(group_id):
                # BMv2 refuses table entries pointing to an empty group (EMPTY_GRP);
                # emptying a referenced group would leave such an entry behind.
                raise StateError("FAILED_PRECONDITION",
                                 f"{self._where}: group {group_id} is used by table entries "
                                 f"and cannot become empty")
            for member_id, _ in sorted_members:
                self._member_refs[member_id] += 1
            for member_id, _ in old.members:
                self._member_refs[member_id] -= 1
            self._update_copies(old.members, sorted_members)
            self._groups[group_id] = Group(group_id, sorted_members, max_size, self._handles)
            # other groups' selections stay valid: a group update only adds or removes copies
            # beyond what any other group uses

    @notifies
    def delete_group(self, group_id):
        """Remove a group.

        Raises:
            StateError: NOT_FOUND for an unknown group, FAILED_PRECONDITION when a
                table entry still uses it.
        """
        with self.lock:
            group = self._groups.get(group_id)
            if group is None:
                raise StateError("NOT_FOUND", f"{self._where}: group {group_id} does not exist")
            if self._group_refs.get(group_id):
                raise StateError("FAILED_PRECONDITION",
                                 f"{self._where}: group {group_id} is still used by "
                                 f"{self._group_refs[group_id]} table entries")
            for member_id, _ in group.members:
                self._member_refs[member_id] -= 1
            self._update_copies(group.members, [])
            del self._groups[group_id]
            del self._group_refs[group_id]

    def get_group(self, group_id):
        """The :class:`Group` with this id, or None."""
        return self._groups.get(group_id)

    def groups(self):
        """All groups (list of :class:`Group`, insertion order)."""
        return list(self._groups.values())

    def choose(self, group_id, selector_hash):
        """The member a packet with this selector hash uses in a group.

        Args:
            group_id: the group.
            selector_hash: the hash of the selector keys (non-negative int).

        Returns:
            Member | None: the chosen member, None for an unknown or empty group.
        """
        group = self._groups.get(group_id)
        if group is None or not group.selection:
            return None
        selection = group.selection
        return self._members[selection[selector_hash % len(selection)]]

    # --- references from table entries ------------------------------------

    def acquire(self, member_id=None, group_id=None, where=None):
        """Record that a table entry points at a member or group.

        Args:
            member_id: the member the entry uses, or None.
            group_id: the group the entry uses, or None.
            where: the table named in error messages.

        Raises:
            StateError: NOT_FOUND for an unknown member/group, INVALID_ARGUMENT for a
                group on a profile without selector, FAILED_PRECONDITION for an
                empty group (BMv2 ``EMPTY_GRP``).
        """
        where = where or self._where
        with self.lock:
            if member_id is not None:
                if member_id not in self._members:
                    raise StateError("NOT_FOUND",
                                     f"{where}: member {member_id} does not exist in {self._where}")
                self._member_refs[member_id] += 1
            else:
                if not self.info.with_selector:
                    raise StateError("INVALID_ARGUMENT",
                                     f"{where}: {self._where} is not a selector, entries cannot "
                                     f"use groups")
                group = self._groups.get(group_id)
                if group is None:
                    raise StateError("NOT_FOUND",
                                     f"{where}: group {group_id} does not exist in {self._where}")
                if not group.members:
                    raise StateError("FAILED_PRECONDITION",
                                     f"{where}: group {group_id} of {self._where} is empty")
                self._group_refs[group_id] += 1

    def release(self, member_id=None, group_id=None):
        """Undo one :meth:`acquire` (the entry was deleted or changed)."""
        with self.lock:
            if member_id is not None:
                if member_id in self._member_refs:
                    self._member_refs[member_id] -= 1
            elif group_id in self._group_refs:
                self._group_refs[group_id] -= 1
