"""Cells: the fabric header's bytes, segmentation of a packet into data cells, control cells.

A cell is an Ethernet frame (EtherType :data:`~.constants.ETHERTYPE_DSF`)
carrying the 20-byte fabric header of p4src/include/dsf_headers.p4 and, for a
data cell, a piece of a packet.  The Ethernet addresses name the nodes
(``02:d5:f0:00:<node>``) so captures are readable; nothing forwards on them.
"""
from dataclasses import dataclass

from testbed.p4.v1model.dsf.constants import (CELL_DATA, ETHERTYPE_DSF,
                                              HEADER_BYTES, HEADER_STRUCT, INITIAL_TTL)

_MAC_PREFIX = bytes.fromhex("02d5f000")
_ETHERTYPE = ETHERTYPE_DSF.to_bytes(2, "big")


@dataclass(frozen=True)
class CellHeader:
    """The fields of a fabric header (see p4src/include/dsf_headers.p4 for their meaning)."""

    cell_type: int
    src_node: int
    dst_node: int
    dst_port: int = 0
    tc: int = 0
    seq: int = 0
    cell_index: int = 0
    last: int = 0
    payload_len: int = 0
    credit_bytes: int = 0
    ttl: int = INITIAL_TTL

    def pack(self):
        """The header's 20 bytes."""
        return HEADER_STRUCT.pack((self.cell_type << 4) | (self.last << 3) | self.tc, self.ttl, self.src_node,
                                  self.dst_node, self.dst_port, self.seq & 0xFFFFFFFF, self.cell_index,
                                  self.payload_len, self.credit_bytes & 0xFFFFFFFF)

    @classmethod
    def unpack(cls, data):
        """Parse the first 20 bytes of ``data``.

        Raises:
            ValueError: fewer than 20 bytes.
        """
        if len(data) < HEADER_BYTES:
            raise ValueError(f"a fabric header needs {HEADER_BYTES} bytes, got {len(data)}")
        first, ttl, src, dst, port, seq, index, length, credit = HEADER_STRUCT.unpack_from(data)
        return cls(first >> 4, src, dst, port, first & 0x7, seq, index, (first >> 3) & 1, length, credit, ttl)


def ethernet(src_node, dst_node):
    """The Ethernet header of a cell from ``src_node`` to ``dst_node``."""
    return (_MAC_PREFIX + (dst_node & 0xFFFF).to_bytes(2, "big") + _MAC_PREFIX
            + (src_node & 0xFFFF).to_bytes(2, "big") + _ETHERTYPE)


def cell_frame(header, payload=b""):
    """A whole cell frame: Ethernet, the fabric header, the payload."""
    return ethernet(header.src_node, header.dst_node) + header.pack() + payload


def cell_count(length, cell_bytes):
    """Cells a packet of ``length`` bytes needs with cells of ``cell_bytes`` (fabric header included)."""
    room = cell_bytes - HEADER_BYTES
    return max(1, -(-length // room))


def segment(packet, src_node, dst_node, dst_port, tc, seq, cell_bytes):
    """Cut ``packet`` into data cell frames, in order.

    A packet of L bytes needs n = ceil(L / (cell_bytes - 20)) cells; they carry
    pieces of equal size (the first ``L mod n`` one byte more) rather than n - 1
    full cells and a short tail, so cells sprayed round robin also balance the
    links' bytes whatever the position of a packet's cells in the rotation.

    Args:
        packet: the packet's bytes.
        src_node, dst_node, dst_port, tc: the VOQ and its nodes.
        seq: the packet's sequence number in its VOQ.
        cell_bytes: the cell size (fabric header + payload), at least ``HEADER_BYTES + 1``.

    Returns:
        list[bytes]: the frames; the last one has ``last`` set.
    """
    count = cell_count(len(packet), cell_bytes)
    size, extra = divmod(len(packet), count)
    eth = ethernet(src_node, dst_node)
    frames = []
    offset = 0
    for index in range(count):
        piece = packet[offset:offset + size + (1 if index < extra else 0)]
        offset += len(piece)
        header = CellHeader(CELL_DATA, src_node, dst_node, dst_port, tc, seq, index,
                            1 if index == count - 1 else 0, len(piece))
        frames.append(eth + header.pack() + piece)
    return frames
