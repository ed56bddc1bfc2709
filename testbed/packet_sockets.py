"""Linux AF_PACKET socket facts shared by the embedded switch and the traffic tools.

The emulated switches and the hosts' receivers read frames from raw packet
sockets.  When a process does not read fast enough, the kernel drops frames
at the socket's receive buffer: losses of the emulator, not of the emulated
network, which a trustworthy result must tell apart.  The kernel counts them
(``PACKET_STATISTICS``, packet(7)); :class:`SocketDrops` keeps the running
total (reading the statistics resets the kernel's counters).  Before it
drops, a process falling behind makes frames wait: the kernel's receive
timestamps (``SO_TIMESTAMPNS``) against the time a frame is read give that
wait, kept as a histogram by :class:`ReceiveLag`.
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


SO_TIMESTAMPNS = 35            # socket(7): receive timestamps as struct timespec (SCM_TIMESTAMPNS)
_TIMESPEC = struct.Struct("qq")
#: lag thresholds (ms) of :class:`ReceiveLag`'s histogram
LAG_BUCKETS_MS = (1, 10, 50, 200)


def enable_timestamps(sock):
    """Ask the kernel to stamp every frame it queues on ``sock`` (read with :func:`receive_stamped`)."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def receive_stamped(sock, bufsize):
    """One frame and the wall-clock ns at which the kernel queued it (None without a stamp).

    A socket with :func:`enable_vlan_tags` gets its frames' 802.1Q tags back (see there).

    Returns:
        tuple: ``(frame, address, kernel_ns)``; raises BlockingIOError when nothing waits.
    """
    frame, ancillary, _flags, address = sock.recvmsg(bufsize, _ANCILLARY_BYTES)
    for level, kind, data in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA:
            frame = _with_vlan_tag(frame, data)
    return frame, address, kernel_stamp(ancillary)


def kernel_stamp(ancillary):
    """The wall-clock ns of a ``SO_TIMESTAMPNS`` stamp in a ``recvmsg`` ancillary list, or None."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack(data[:_TIMESPEC.size])
            return seconds * 1_000_000_000 + nanoseconds
    return None


PACKET_AUXDATA = 8             # packet(7): struct tpacket_auxdata with every received frame
_TPACKET_AUXDATA = struct.Struct("IIIHHHH")  # status, len, snaplen, mac, net, vlan_tci, vlan_tpid
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ETH_P_8021Q = 0x8100
# room for a timestamp and the auxdata together (a smaller buffer truncates the second one away)
_ANCILLARY_BYTES = 128


def enable_vlan_tags(sock):
    """Have :func:`receive_stamped` and :func:`receive_frame` give ``sock``'s frames their VLAN tags back.

    The kernel removes the outer 802.1Q/802.1ad tag of every received frame before packet
    sockets see it (whatever the device's offloads) and reports it in ``PACKET_AUXDATA``;
    libpcap puts it back, and so must anything that reads a port as BMv2 does.
    """
    sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)


def receive_frame(sock, bufsize):
    """One frame, with its VLAN tag when the kernel took one out (see :func:`enable_vlan_tags`).

    Returns:
        tuple: ``(frame, address)``; raises BlockingIOError when nothing waits.
    """
    frame, ancillary, _flags, address = sock.recvmsg(bufsize, _ANCILLARY_BYTES)
    for level, kind, data in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA:
            frame = _with_vlan_tag(frame, data)
    return frame, address


def _with_vlan_tag(frame, auxdata):
    """``frame`` with the tag ``auxdata`` (a struct tpacket_auxdata) reports put back after the MAC addresses."""
    if len(auxdata) < _TPACKET_AUXDATA.size:
        return frame
    status, _len, _snaplen, _mac, _net, tci, tpid = _TPACKET_AUXDATA.unpack(auxdata[:_TPACKET_AUXDATA.size])
    # libpcap's test: a valid tag, or a non-zero TCI from kernels that do not set the flag
    if not (status & TP_STATUS_VLAN_VALID or tci):
        return frame
    if not status & TP_STATUS_VLAN_TPID_VALID:
        tpid = ETH_P_8021Q
    return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]


class ReceiveLag:
    """How long frames waited in a socket before the process read them: a cumulative histogram.

    A process that keeps up reads a frame within a fraction of a millisecond;
    one starved of CPU lets frames wait (and, when the buffer fills, the kernel
    drops them: :class:`SocketDrops`).  ``counts[i]`` is the number of samples
    that waited at least ``LAG_BUCKETS_MS[i]``; counts only grow, so two
    snapshots give what happened between them.
    """

    def __init__(self):
        self.samples = 0
        self.counts = [0] * len(LAG_BUCKETS_MS)

    def record(self, lag_ns):
        """Count one sample that waited ``lag_ns``."""
        self.samples += 1
        lag_ms = lag_ns / 1e6
        for index, threshold in enumerate(LAG_BUCKETS_MS):
            if lag_ms >= threshold:
                self.counts[index] += 1

    def describe(self):
        """``{"samples": n, "at_least_ms": {"1": n1, "10": n10, ...}}``."""
        return {"samples": self.samples,
                "at_least_ms": {str(threshold): count for threshold, count in zip(LAG_BUCKETS_MS, self.counts)}}
