"""The packet replication engine (PRE): multicast groups and clone sessions.

What we follow (P4Runtime spec, "PacketReplicationEngineEntry"; BMv2
``simple_switch`` documentation on multicast and cloning):

* A multicast group is a list of replicas ``(egress_port, instance)``; the
  instance becomes ``standard_metadata.egress_rid`` of the copy.  Group id 0 is
  not a group (``mcast_grp == 0`` means no multicast) and ids are 16 bits wide in
  v1model, so both are INVALID_ARGUMENT.  The same (port, instance) twice in one
  group is INVALID_ARGUMENT.
* Replica order: P4Runtime leaves it unspecified.  BMv2 behind the PI server
  (p4lang/PI ``proto/frontend/src/pre_mc_mgr.cpp``) turns a group into one
  multicast node per instance (rid), in increasing rid order, each with a port
  set replicated in increasing port order; so we store and emit multicast
  replicas sorted by (instance, port).  (After a MODIFY that adds a new rid,
  BMv2 appends that node last; we keep the sorted order.)  Clone session
  replicas keep the order given.
* A clone session has replicas (usually one), a class of service and
  ``packet_length_bytes`` (truncation of the clone, 0 = whole packet).  Session
  ids are 32-bit unsigned.
* insert of an existing id is ALREADY_EXISTS, modify/delete of a missing one
  NOT_FOUND.

``replicas()`` and ``get()`` return the stored objects (no copy, for the data
plane); writes replace them rather than changing them.
"""
import threading
from dataclasses import dataclass
from typing import Tuple

from testbed.p4.state.errors import StateError, check_uint


def _check_replicas(replicas, where):
    seen = set()
    out = []
    for item in replicas:
        try:
            port, instance = item
        except (TypeError, ValueError):
            raise StateError("INVALID_ARGUMENT",
                             f"{where}: replica {item!r} is not (egress_port, instance)") from None
        check_uint(port, 32, f"{where}: replica egress_port")
        check_uint(instance, 16, f"{where}: replica instance")
        if (port, instance) in seen:
            raise StateError("INVALID_ARGUMENT",
                             f"{where}: replica (port {port}, instance {instance}) given twice")
        seen.add((port, instance))
        out.append((port, instance))
    return out


def _by_instance_then_port(replica):
    return replica[1], replica[0]


class MulticastGroups:
    """Multicast groups of the PRE."""

    def __init__(self):
        self._groups = {}
        self._lock = threading.Lock()

    @staticmethod
    def _check_id(group_id):
        if not isinstance(group_id, int) or isinstance(group_id, bool) \
                or group_id < 1 or group_id > 0xFFFF:
            raise StateError("INVALID_ARGUMENT",
                             f"multicast group id {group_id!r} must be in 1..65535")

    def insert(self, group_id, replicas):
        """Create a group.

        Args:
            group_id: 1..65535.
            replicas: list of ``(egress_port, instance)``.

        Raises:
            StateError: INVALID_ARGUMENT, ALREADY_EXISTS.
        """
        self._check_id(group_id)
        checked = _check_replicas(replicas, f"multicast group {group_id}")
        with self._lock:
            if group_id in self._groups:
                raise StateError("ALREADY_EXISTS", f"multicast group {group_id} already exists")
            self._groups[group_id] = sorted(checked, key=_by_instance_then_port)

    def modify(self, group_id, replicas):
        """Replace the replicas of a group.

        Raises:
            StateError: INVALID_ARGUMENT, NOT_FOUND.
        """
        self._check_id(group_id)
        checked = _check_replicas(replicas, f"multicast group {group_id}")
        with self._lock:
            if group_id not in self._groups:
                raise StateError("NOT_FOUND", f"multicast group {group_id} does not exist")
            self._groups[group_id] = sorted(checked, key=_by_instance_then_port)

    def delete(self, group_id):
        """Remove a group.

        Raises:
            StateError: INVALID_ARGUMENT, NOT_FOUND.
        """
        self._check_id(group_id)
        with self._lock:
            if self._groups.pop(group_id, None) is None:
                raise StateError("NOT_FOUND", f"multicast group {group_id} does not exist")

    def replicas(self, group_id):
        """The replicas of a group sorted by (instance, port), or [] when unknown.

        The list returned is the stored one: read it, do not change it.
        """
        return self._groups.get(group_id, [])

    def entries(self):
        """``[(group_id, replicas)]`` of every group, in creation order."""
        return list(self._groups.items())

    def reset(self):
        """Remove every group."""
        with self._lock:
            self._groups = {}


@dataclass(frozen=True)
class CloneSession:
    """One clone session.

    Attributes:
        session_id: the session id.
        replicas: tuple of ``(egress_port, instance)``.
        class_of_service: P4Runtime class_of_service.
        packet_length_bytes: truncate clones to this length (0 = no truncation).
    """

    session_id: int
    replicas: Tuple[Tuple[int, int], ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0


class CloneSessions:
    """Clone (mirror) sessions of the PRE."""

    def __init__(self):
        self._sessions = {}
        self._lock = threading.Lock()

    @staticmethod
    def _make(session_id, replicas, class_of_service, packet_length_bytes):
        check_uint(session_id, 32, "clone session id")
        where = f"clone session {session_id}"
        checked = _check_replicas(replicas, where)
        check_uint(class_of_service, 32, f"{where}: class_of_service")
        check_uint(packet_length_bytes, 32, f"{where}: packet_length_bytes")
        return CloneSession(session_id, tuple(checked), class_of_service, packet_length_bytes)

    def insert(self, session_id, replicas, class_of_service=0, packet_length_bytes=0):
        """Create a session.

        Raises:
            StateError: INVALID_ARGUMENT, ALREADY_EXISTS.
        """
        session = self._make(session_id, replicas, class_of_service, packet_length_bytes)
        with self._lock:
            if session_id in self._sessions:
                raise StateError("ALREADY_EXISTS", f"clone session {session_id} already exists")
            self._sessions[session_id] = session

    def modify(self, session_id, replicas, class_of_service=0, packet_length_bytes=0):
        """Replace a session.

        Raises:
            StateError: INVALID_ARGUMENT, NOT_FOUND.
        """
        session = self._make(session_id, replicas, class_of_service, packet_length_bytes)
        with self._lock:
            if session_id not in self._sessions:
                raise StateError("NOT_FOUND", f"clone session {session_id} does not exist")
            self._sessions[session_id] = session

    def delete(self, session_id):
        """Remove a session.

        Raises:
            StateError: NOT_FOUND.
        """
        with self._lock:
            if self._sessions.pop(session_id, None) is None:
                raise StateError("NOT_FOUND", f"clone session {session_id} does not exist")

    def get(self, session_id):
        """The :class:`CloneSession`, or None when unknown."""
        return self._sessions.get(session_id)

    def entries(self):
        """Every :class:`CloneSession`, in creation order."""
        return list(self._sessions.values())

    def reset(self):
        """Remove every session."""
        with self._lock:
            self._sessions = {}
