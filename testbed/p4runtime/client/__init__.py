"""A P4Runtime client for controllers and tests that works with names, not ids.

Works against the embedded target and BMv2 (``simple_switch_grpc``) alike::

    from testbed.p4runtime.client import P4RuntimeClient

    with P4RuntimeClient("127.0.0.1:9560", device_id=1, election_id=(0, 1)) as sw:
        sw.set_pipeline("p4src/l3_ecmp.p4")                       # embedded target
        # sw.set_pipeline(p4info="build/x.p4info.txt", device_config="build/x.json", target="bmv2")
        sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)},
                              "MyIngress.set_nhop", {"port": 1, "dmac": "00:00:00:00:01:01"})
        for entry in sw.read_table_entries("MyIngress.ipv4_lpm"):
            print(entry.match, entry.action, entry.params)
        sw.packet_out(b"...", egress_port=2)
        packet = sw.get_packet_in(timeout=1.0)                    # PacketIn or None

Values may be ints, bytes, IPv4/IPv6/MAC strings; match specs per kind are described
in :mod:`testbed.p4runtime.values`.

Arbitration follows the P4Runtime spec: a controller is primary (``is_primary``) when
its election id is >= the highest the switch has ever seen for the role, so a
controller that reconnects must reuse (or exceed) its old election id; nobody is
promoted when the primary leaves.  Every failing RPC raises
:class:`P4RuntimeClientError` with the gRPC status name in ``code`` and, for a Write,
the per-update ``errors`` (index, code, message), which its message lists.

Many updates are best sent in few Writes: inside ``with sw.batch():`` the write
methods only collect their updates, which are sent at the end of the block in
Writes of up to ``batch_size`` updates (:meth:`P4RuntimeClient.write_batch`).  The
channel raises gRPC's metadata limit so that the per-update errors of a batch of
any size arrive (see :mod:`testbed.p4runtime.limits`).

The client is one class assembled from a part per concern, each in its own module:

* :mod:`~testbed.p4runtime.client.session`: channel, stream thread, arbitration,
  unary calls, Write/Read and batches (``CHANNEL_OPTIONS``, ``DEFAULT_BATCH_SIZE``);
* :mod:`~testbed.p4runtime.client.errors`: :class:`P4RuntimeClientError` and how gRPC
  failures become it;
* :mod:`~testbed.p4runtime.client.pipeline`: the switch's P4Info and names, get/set pipeline;
* :mod:`~testbed.p4runtime.client.tables`: table entries, default actions, idle timeouts;
* :mod:`~testbed.p4runtime.client.action_profiles`: members and groups;
* :mod:`~testbed.p4runtime.client.counters`, :mod:`~testbed.p4runtime.client.meters`,
  :mod:`~testbed.p4runtime.client.registers`: indexed and direct counters and meters, registers;
* :mod:`~testbed.p4runtime.client.pre`: multicast groups and clone sessions;
* :mod:`~testbed.p4runtime.client.digests`: digest configuration and digest lists;
* :mod:`~testbed.p4runtime.client.packet_io`: PacketOut and PacketIn.
"""
from testbed.p4runtime.client.action_profiles import ActionProfilesMixin
from testbed.p4runtime.client.counters import CountersMixin
from testbed.p4runtime.client.digests import DigestList, DigestsMixin
from testbed.p4runtime.client.errors import P4RuntimeClientError, describe_failures
from testbed.p4runtime.client.meters import MetersMixin
from testbed.p4runtime.client.packet_io import PacketIn, PacketIOMixin
from testbed.p4runtime.client.pipeline import PipelineMixin
from testbed.p4runtime.client.pre import PacketReplicationMixin
from testbed.p4runtime.client.registers import RegistersMixin
from testbed.p4runtime.client.session import CHANNEL_OPTIONS, DEFAULT_BATCH_SIZE, Session
from testbed.p4runtime.client.tables import TableEntryView, TablesMixin
from testbed.p4runtime.embedded import embedded_pipeline


class P4RuntimeClient(TablesMixin, ActionProfilesMixin, CountersMixin, MetersMixin, RegistersMixin,
                      PacketReplicationMixin, DigestsMixin, PacketIOMixin, PipelineMixin, Session):
    """A P4Runtime session with one switch.

    Args:
        address: "host:port" of the switch's P4Runtime server.
        device_id: the switch's device id.
        election_id: (high, low) election id, or None to connect as a backup.
        role: role name, or None for the default role.
        timeout: seconds to wait for the arbitration reply (and per unary RPC).
        connect: open the stream and arbitrate now.
        auto_ack_digests: ack every DigestList as it arrives.

    Raises:
        P4RuntimeClientError: UNAVAILABLE when the server cannot be reached, or the
            status the server closed the stream with (e.g. INVALID_ARGUMENT for an
            election id another controller uses).
    """


__all__ = [
    "CHANNEL_OPTIONS", "DEFAULT_BATCH_SIZE", "DigestList", "P4RuntimeClient", "P4RuntimeClientError", "PacketIn",
    "TableEntryView", "describe_failures", "embedded_pipeline",
]
