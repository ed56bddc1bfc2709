"""Linux AF_PACKET socket facts shared by the embedded switch and the traffic tools.

The emulated switches and the hosts' receivers read frames from raw packet
sockets.  When a process does not read fast enough, the kernel drops frames
at the socket's receive buffer: losses of the emulator, not of the emulated
network, which a trustworthy result must tell apart.  The kernel counts them
(``PACKET_STATISTICS``, packet(7)); :class:`SocketDrops` keeps the running
total (reading the statistics resets the kernel's counters).
"""
import socket
import struct

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6          # struct tpacket_stats {unsigned tp_packets, tp_drops}
PACKET_IGNORE_OUTGOING = 23    # Linux >= 4.20: do not read back what we send
_TPACKET_STATS = struct.Struct("II")


class SocketDrops:
    """The frames a packet socket's receive buffer dropped, in total since :meth:`read` was first called.

    Args:
        sock: an AF_PACKET socket.
    """

    def __init__(self, sock):
        self.sock = sock
        self.total = 0

    def read(self):
        """Add what the kernel dropped since the last read; return the total (0 if unavailable)."""
        try:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
        except OSError:
            return self.total
        _packets, drops = _TPACKET_STATS.unpack(raw)
        self.total += drops
        return self.total


def open_packet_socket(protocol=ETH_P_ALL):
    """A raw AF_PACKET socket for ``protocol`` (an EtherType; all frames by default)."""
    return socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(protocol))
