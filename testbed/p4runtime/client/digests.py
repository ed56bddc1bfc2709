"""The client's digest part: configuring digests, receiving and acknowledging digest lists."""
import dataclasses
import queue
from typing import Dict, List

from p4.v1 import p4runtime_pb2


@dataclasses.dataclass
class DigestList:
    """A received DigestList: digest name, list id, and one {field: int} dict per digest."""

    name: str
    list_id: int
    data: List[Dict[str, int]]


class DigestsMixin:
    """Digest configuration (DigestEntry) and the DigestLists the switch streams."""

    def enable_digest(self, name, max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0, modify=False):
        """Configure a digest so the switch streams it (DigestEntry INSERT or MODIFY)."""
        info = self._lookup("digests", name)

        def fill(entity):
            entity.digest_entry.digest_id = info.preamble.id
            config = entity.digest_entry.config
            config.max_timeout_ns, config.max_list_size = max_timeout_ns, max_list_size
            config.ack_timeout_ns = ack_timeout_ns
        self._write_one("MODIFY" if modify else "INSERT", fill)

    def disable_digest(self, name):
        """Stop a digest (DigestEntry DELETE)."""
        info = self._lookup("digests", name)
        self._write_one("DELETE", lambda e: setattr(e.digest_entry, "digest_id", info.preamble.id))

    def get_digest(self, timeout=1.0):
        """The next :class:`DigestList`, or None after ``timeout`` seconds (or a closed stream)."""
        try:
            message = self._digest_q.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            self._digest_q.put(None)
            return None
        info = self._idx().by_id("digests", message.digest_id)
        struct = self._idx().p4info.type_info.structs.get(info.type_spec.struct.name)
        names = [m.name for m in struct.members] if struct is not None else []
        data = []
        for item in message.data:
            values = [int.from_bytes(m.bitstring, "big") for m in item.struct.members]
            data.append(dict(zip(names, values)) if names else {str(i): v for i, v in enumerate(values)})
        return DigestList(info.preamble.name, message.list_id, data)

    def ack_digest(self, name, list_id):
        """Acknowledge a DigestList (when ``auto_ack_digests`` is off)."""
        request = p4runtime_pb2.StreamMessageRequest()
        request.digest_ack.digest_id = self._lookup("digests", name).preamble.id
        request.digest_ack.list_id = list_id
        self._outbox.put(request)
