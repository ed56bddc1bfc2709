"""The PFC PAUSE frame as a Scapy layer, so captures and tests dissect it (``Ether() / PFCPause()``).

The wire format and its constants live in :mod:`testbed.p4.v1model.pfc`;
the forwarding path builds and reads frames there with ``struct``.
"""
from scapy.fields import FlagsField, ShortField, XShortField
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

from testbed.p4.v1model.pfc import PFC_DST_MAC, PFC_ETHERTYPE, PFC_OPCODE, PRIORITIES

__all__ = ["PFCPause", "PFC_DST"]

#: the destination address of MAC control frames, as Scapy writes it.
PFC_DST = ":".join(f"{byte:02x}" for byte in PFC_DST_MAC)


class PFCPause(Packet):
    """IEEE 802.1Qbb priority-based PAUSE: opcode, class-enable vector, 8 pause times in quanta.

    >>> frame = Ether(dst=PFC_DST, src="02:00:00:00:00:01") / PFCPause(class_enable=0x08, quanta3=0xFFFF)
    >>> dissected = Ether(bytes(frame))
    >>> dissected[PFCPause].quanta3, int(dissected[PFCPause].class_enable)
    (65535, 8)
    """

    name = "PFC PAUSE"
    fields_desc = [XShortField("opcode", PFC_OPCODE),
                   FlagsField("class_enable", 0, 16, [f"C{i}" for i in range(16)])] + \
        [ShortField(f"quanta{i}", 0) for i in range(PRIORITIES)]

    def extract_padding(self, s):
        return b"", s


bind_layers(Ether, PFCPause, type=PFC_ETHERTYPE)
