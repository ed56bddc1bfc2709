"""Client arbitration of a P4Runtime server: primary and backup controllers per role.

Rules (P4Runtime specification, "Client Arbitration and Controller Replication"):

* Every StreamChannel announces (device_id, role, election_id) in its first
  MasterArbitrationUpdate.  An unknown device_id closes the stream with NOT_FOUND;
  an election_id another live controller of the role uses, with INVALID_ARGUMENT.
  A later update that changes device_id or role closes it with FAILED_PRECONDITION.
* Let ``election_id_past`` be the highest election id the server has ever seen for
  the role.  A controller whose election id is >= it becomes (or stays) primary and
  raises it; any other controller (or one without an election id) is a backup.
  When the primary disconnects or downgrades itself there is *no* primary until a
  controller sends an election id >= ``election_id_past`` (nobody is promoted
  automatically).
* Notifications carry ``election_id_past`` (unset if there never was a primary) and a
  status: OK for the primary, ALREADY_EXISTS for backups while there is a primary,
  NOT_FOUND for backups when there is none.  Every controller of the role is
  notified when the primary changes (new primary, downgrade, disconnect); otherwise
  only the sender of the update.
* Write and SetForwardingPipelineConfig are accepted only from the primary of the
  role the request names, identified by (device_id, role, election_id); anything
  else is PERMISSION_DENIED (:meth:`Arbiter.check_primary`).  Read needs no
  election id: backups (and clients without a stream) may read.
"""
import threading

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from testbed.p4runtime.errors import P4RuntimeError


def election_int(uint128):
    """The integer value of a ``p4.v1.Uint128``."""
    return (uint128.high << 64) | uint128.low


class Connection:
    """One StreamChannel: its role, election id and outgoing message sink.

    Args:
        send: callable(StreamMessageResponse) that queues a message on the stream.
    """

    def __init__(self, send):
        self.send = send
        self.device_id = None
        self.role = ""
        self.election_id = None  # int, or None for "no election id" (backup only)
        self.arbitrated = False


class Arbiter:
    """Tracks the connections of a server and the primary of each role.

    Args:
        device_id: the server's device id.
    """

    def __init__(self, device_id):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._connections = []
        self._primary = {}  # role -> Connection
        self._highest = {}  # role -> highest election id ever seen (election_id_past)

    def primary(self, role=""):
        """The primary Connection of ``role``, or None."""
        with self._lock:
            return self._primary.get(role)

    def update(self, conn, arbitration):
        """Handle a MasterArbitrationUpdate from ``conn``.

        Raises:
            P4RuntimeError: NOT_FOUND (unknown device id), FAILED_PRECONDITION (device
                id or role changed), INVALID_ARGUMENT (election id used by another
                live controller of the role).  The caller closes the stream with it.
        """
        role = arbitration.role.name if arbitration.HasField("role") else ""
        election = election_int(arbitration.election_id) if arbitration.HasField("election_id") else None
        if conn.arbitrated:
            if arbitration.device_id != conn.device_id:
                raise P4RuntimeError("FAILED_PRECONDITION",
                                     f"device_id changed from {conn.device_id} to {arbitration.device_id}")
            if role != conn.role:
                raise P4RuntimeError("FAILED_PRECONDITION",
                                     f"role changed from {conn.role or '<default>'} to {role or '<default>'}; "
                                     f"open a new stream to change roles")
        elif arbitration.device_id != self.device_id:
            raise P4RuntimeError("NOT_FOUND", f"device id {arbitration.device_id} not found "
                                              f"(this switch is device {self.device_id})")
        with self._lock:
            if election is not None:
                for other in self._connections:
                    if other is not conn and other.role == role and other.election_id == election:
                        raise P4RuntimeError("INVALID_ARGUMENT",
                                             f"election id {election} is already used by another live "
                                             f"controller of role {role or '<default>'}")
            conn.device_id = arbitration.device_id
            conn.role = role
            conn.election_id = election
            if not conn.arbitrated:
                conn.arbitrated = True
                self._connections.append(conn)
            past = self._highest.get(role)
            previous = self._primary.get(role)
            if election is not None and (past is None or election >= past):
                self._primary[role] = conn
                self._highest[role] = election
                notify_all = True
            elif previous is conn:  # the primary downgraded itself
                del self._primary[role]
                notify_all = True
            else:
                notify_all = False
            notify = self._notifications_locked(role if notify_all else None, conn)
        for target, message in notify:
            target.send(message)

    def remove(self, conn):
        """Forget a closed stream; if it was the primary, tell the role there is none."""
        with self._lock:
            if conn not in self._connections:
                return
            self._connections.remove(conn)
            if self._primary.get(conn.role) is not conn:
                return
            del self._primary[conn.role]
            notify = self._notifications_locked(conn.role, None)
        for target, message in notify:
            target.send(message)

    def _notifications_locked(self, role, sender):
        notify = []
        for conn in self._connections:
            if (role is not None and conn.role == role) or conn is sender:
                notify.append((conn, self._message_locked(conn)))
        return notify

    def _message_locked(self, conn):
        primary = self._primary.get(conn.role)
        past = self._highest.get(conn.role)
        response = p4runtime_pb2.StreamMessageResponse()
        update = response.arbitration
        update.device_id = self.device_id
        if conn.role:
            update.role.name = conn.role
        if past is not None:
            update.election_id.high = past >> 64
            update.election_id.low = past & ((1 << 64) - 1)
        if primary is conn:
            update.status.code = code_pb2.OK
            update.status.message = "primary"
        elif primary is not None:
            update.status.code = code_pb2.ALREADY_EXISTS
            update.status.message = "backup: another controller is primary"
        else:
            update.status.code = code_pb2.NOT_FOUND
            update.status.message = "backup: there is no primary"
        return response

    def check_primary(self, role, election_id_msg, has_election_id, what):
        """Check that a Write/SetForwardingPipelineConfig comes from the primary of its role.

        The P4Runtime specification ("Write RPC" and "SetForwardingPipelineConfig
        RPC", check 2; "Client Arbitration and Controller Replication") requires the
        request's (device_id, role, election_id) to name the current primary of that
        role.  So a request without an election id, one naming a role that has no
        primary (never had one, or its primary left), and one whose election id is
        not the primary's are all refused.  Roles are not configured out of band
        here (every role name a controller arbitrates for is accepted, with full
        pipeline access), so no role is "unknown" (NOT_FOUND): a role nobody
        arbitrated for simply has no primary.

        Args:
            role: the request's role name ("" for the default role).
            election_id_msg: the request's ``p4.v1.Uint128`` election id.
            has_election_id: whether the request set the election id.
            what: the RPC name for the message.

        Raises:
            P4RuntimeError: PERMISSION_DENIED unless the request comes from the primary.
        """
        name = role or "<default>"
        with self._lock:
            primary = self._primary.get(role)
            primary_election = primary.election_id if primary is not None else None
        if not has_election_id:
            raise P4RuntimeError("PERMISSION_DENIED",
                                 f"{what}: no election_id given; only the primary controller of role "
                                 f"{name} may write (open a StreamChannel and arbitrate first)")
        election = election_int(election_id_msg)
        if primary is None:
            raise P4RuntimeError("PERMISSION_DENIED",
                                 f"{what}: role {name} has no primary controller; only the primary "
                                 f"may write")
        if election != primary_election:
            raise P4RuntimeError("PERMISSION_DENIED",
                                 f"{what}: election id {election} is not the one of the primary "
                                 f"controller of role {name}; only the primary may write")
