"""The client's packet replication engine part: multicast groups and clone sessions."""
from p4.v1 import p4runtime_pb2


class PacketReplicationMixin:
    """Multicast groups and clone sessions; replicas are ports or (port, instance) pairs."""

    @staticmethod
    def _replicas(out, replicas):
        for replica in replicas:
            port, instance = replica if isinstance(replica, (tuple, list)) else (replica, 0)
            out.add(egress_port=port, instance=instance)

    def _mcast(self, kind, group_id, replicas=()):
        def fill(entity):
            group = entity.packet_replication_engine_entry.multicast_group_entry
            group.multicast_group_id = group_id
            self._replicas(group.replicas, replicas)
        self._write_one(kind, fill)

    def insert_multicast_group(self, group_id, replicas):
        """Create a multicast group; ``replicas`` are ports or (port, instance) pairs."""
        self._mcast("INSERT", group_id, replicas)

    def modify_multicast_group(self, group_id, replicas):
        """Replace a multicast group's replicas."""
        self._mcast("MODIFY", group_id, replicas)

    def delete_multicast_group(self, group_id):
        """Delete a multicast group."""
        self._mcast("DELETE", group_id)

    def read_multicast_groups(self):
        """{group_id: [(port, instance), ...]}."""
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        result = {}
        for e in self.read([entity]):
            group = e.packet_replication_engine_entry.multicast_group_entry
            result[group.multicast_group_id] = [(_replica_port(r), r.instance) for r in group.replicas]
        return result

    def _clone(self, kind, session_id, replicas=(), class_of_service=0, packet_length_bytes=0):
        def fill(entity):
            session = entity.packet_replication_engine_entry.clone_session_entry
            session.session_id = session_id
            self._replicas(session.replicas, replicas)
            session.class_of_service = class_of_service
            session.packet_length_bytes = packet_length_bytes
        self._write_one(kind, fill)

    def insert_clone_session(self, session_id, replicas, class_of_service=0, packet_length_bytes=0):
        """Create a clone session (``packet_length_bytes`` > 0 truncates clones)."""
        self._clone("INSERT", session_id, replicas, class_of_service, packet_length_bytes)

    def modify_clone_session(self, session_id, replicas, class_of_service=0, packet_length_bytes=0):
        """Replace a clone session."""
        self._clone("MODIFY", session_id, replicas, class_of_service, packet_length_bytes)

    def delete_clone_session(self, session_id):
        """Delete a clone session."""
        self._clone("DELETE", session_id)

    def read_clone_sessions(self):
        """{session_id: ([(port, instance)], class_of_service, packet_length_bytes)}."""
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.clone_session_entry.SetInParent()
        result = {}
        for e in self.read([entity]):
            s = e.packet_replication_engine_entry.clone_session_entry
            result[s.session_id] = ([(_replica_port(r), r.instance) for r in s.replicas],
                                    s.class_of_service, s.packet_length_bytes)
        return result


def _replica_port(replica):
    """The egress port of a read Replica (its ``port`` bytes, or the deprecated ``egress_port``)."""
    if replica.WhichOneof("port_kind") == "port":
        return int.from_bytes(replica.port, "big")
    return replica.egress_port
