"""The client's action profile part: members and (selector) groups."""
from p4.v1 import p4runtime_pb2


class ActionProfilesMixin:
    """Action profile members and groups by profile name."""

    def _member(self, kind, profile, member_id, action=None, params=None):
        info = self._lookup("action_profiles", profile)

        def fill(entity):
            member = entity.action_profile_member
            member.action_profile_id = info.preamble.id
            member.member_id = member_id
            if action is not None:
                self._action_msg(action, params, member.action)
        self._write_one(kind, fill)

    def insert_member(self, profile, member_id, action, params=None):
        """Add an action profile member running ``action(params)``."""
        self._member("INSERT", profile, member_id, action, params)

    def modify_member(self, profile, member_id, action, params=None):
        """Change a member's action."""
        self._member("MODIFY", profile, member_id, action, params)

    def delete_member(self, profile, member_id):
        """Remove a member."""
        self._member("DELETE", profile, member_id)

    def _group(self, kind, profile, group_id, members=(), max_size=0):
        info = self._lookup("action_profiles", profile)

        def fill(entity):
            group = entity.action_profile_group
            group.action_profile_id = info.preamble.id
            group.group_id = group_id
            for member in members:
                member_id, weight = member if isinstance(member, (tuple, list)) else (member, 1)
                group.members.add(member_id=member_id, weight=weight)
            if max_size:
                group.max_size = max_size
        self._write_one(kind, fill)

    def insert_group(self, profile, group_id, members, max_size=0):
        """Add a selector group; ``members`` are member ids or (member_id, weight)."""
        self._group("INSERT", profile, group_id, members, max_size)

    def modify_group(self, profile, group_id, members):
        """Replace a group's members."""
        self._group("MODIFY", profile, group_id, members)

    def delete_group(self, profile, group_id):
        """Remove a group."""
        self._group("DELETE", profile, group_id)

    def read_members(self, profile):
        """{member_id: (action name, {param: int})} of a profile."""
        info = self._lookup("action_profiles", profile)
        entity = p4runtime_pb2.Entity()
        entity.action_profile_member.action_profile_id = info.preamble.id
        return {e.action_profile_member.member_id: self._action_view(e.action_profile_member.action)
                for e in self.read([entity])}

    def read_groups(self, profile):
        """{group_id: [(member_id, weight), ...]} of a selector."""
        info = self._lookup("action_profiles", profile)
        entity = p4runtime_pb2.Entity()
        entity.action_profile_group.action_profile_id = info.preamble.id
        return {e.action_profile_group.group_id: [(m.member_id, m.weight)
                                                  for m in e.action_profile_group.members]
                for e in self.read([entity])}
