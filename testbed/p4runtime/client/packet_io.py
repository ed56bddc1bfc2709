"""The client's packet I/O part: PacketOut with named metadata, and PacketIns as received."""
import dataclasses
import queue
from typing import Dict

from p4.v1 import p4runtime_pb2

from testbed.errors import ParameterError
from testbed.p4runtime.convert import encode
from testbed.p4runtime.values import parse_value


@dataclasses.dataclass
class PacketIn:
    """A received PacketIn: payload and {metadata name: int}."""

    payload: bytes
    metadata: Dict[str, int]


class PacketIOMixin:
    """PacketOut and PacketIn over the session's stream."""

    def packet_out(self, payload, **metadata):
        """Send a PacketOut; ``metadata`` names the packet_out header fields (e.g. egress_port=2)."""
        index = self._idx()
        request = p4runtime_pb2.StreamMessageRequest()
        request.packet.payload = bytes(payload)
        header = index.packet_metadata("packet_out")
        for name, value in metadata.items():
            if header is None:
                raise ParameterError(name, value, "no metadata (the program has no packet_out header)")
            field = next((f for f in header.metadata if f.name == name), None)
            if field is None:
                raise ParameterError(name, value, ", ".join(f.name for f in header.metadata))
            request.packet.metadata.add(metadata_id=field.id,
                                        value=encode(parse_value(value, field.bitwidth, name)))
        self._outbox.put(request)

    def get_packet_in(self, timeout=1.0):
        """The next :class:`PacketIn`, or None after ``timeout`` seconds (or a closed stream)."""
        try:
            message = self._packet_q.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            self._packet_q.put(None)
            return None
        header = self._idx().packet_metadata("packet_in")
        fields = {f.id: f for f in header.metadata} if header is not None else {}
        metadata = {}
        for item in message.metadata:
            field = fields.get(item.metadata_id)
            name = field.name if field is not None else str(item.metadata_id)
            metadata[name] = int.from_bytes(item.value, "big")
        return PacketIn(bytes(message.payload), metadata)
