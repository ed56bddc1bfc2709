"""IEEE 802.1Qbb priority flow control: the PAUSE frame's wire format and a switch's PFC settings.

A PFC PAUSE frame is a MAC control frame (802.3 Annex 31D)::

    dst 01:80:c2:00:00:01 | src | ethertype 0x8808 | opcode 0x0101 |
    class-enable vector (16 bits, bit i = priority i) | 8 x quanta (16 bits each) | pad to 60 bytes

A quantum is 512 bit times of the link.  Quanta 0 for an enabled class
resumes it at once (XON).  MAC control frames end at the MAC: a switch
consumes them on receive and never forwards them.

The traffic manager (:mod:`testbed.p4.v1model.traffic_manager`) does the
buffer accounting and pausing; this module holds the one definition of the
frame (built and read with ``struct`` on the forwarding path; the Scapy layer
:class:`testbed.p4.v1model.pfc_scapy.PFCPause` dissects captures) and of the
settings, checked with errors that name the field.
"""
import struct
from dataclasses import dataclass
from typing import FrozenSet, Iterable, List, Optional, Tuple

from testbed.errors import ParameterError

__all__ = ["PFC_ETHERTYPE", "PFC_OPCODE", "PFC_DST_MAC", "PRIORITIES", "MAX_QUANTA",
           "DEFAULT_QUANTUM_NS", "PfcConfig", "build_pause", "parse_pause", "quantum_ns", "c_layout"]

#: MAC control ethertype.
PFC_ETHERTYPE = 0x8808
#: MAC control opcode of a priority-based PAUSE (0x0001 is the 802.3x whole-link PAUSE).
PFC_OPCODE = 0x0101
#: the reserved multicast address MAC control frames go to.
PFC_DST_MAC = bytes.fromhex("0180c2000001")
#: traffic classes a PAUSE frame carries.
PRIORITIES = 8
#: the largest pause time a frame can ask, in quanta.
MAX_QUANTA = 0xFFFF
#: one quantum (512 bit times) on a port with no bit rate configured: taken as 1 Gb/s.
DEFAULT_QUANTUM_NS = 512

_HEADER = struct.Struct("!6s6sHHH8H")
_FRAME_BYTES = 60  # the minimum Ethernet frame without FCS


def c_layout():
    """The frame's layout as C macros, for the native packet loop (which builds and reads PAUSE frames
    too): ``{name: value}``, passed to its compiler as ``-Dname=value``.

    >>> c_layout()
    {'PFC_CLASSES': 8, 'PAUSE_BYTES': 60, 'PAUSE_HEADER': 34, 'PAUSE_VECTOR_AT': 16, 'PAUSE_QUANTA_AT': 18}
    """
    vector_at = struct.calcsize("!6s6sHH")  # dst, src, ethertype, opcode
    return {"PFC_CLASSES": PRIORITIES, "PAUSE_BYTES": _FRAME_BYTES, "PAUSE_HEADER": _HEADER.size,
            "PAUSE_VECTOR_AT": vector_at, "PAUSE_QUANTA_AT": vector_at + 2}


def quantum_ns(rate_bps: Optional[int]) -> float:
    """Length of one pause quantum (512 bit times) on a link of ``rate_bps``.

    >>> quantum_ns(1_000_000)
    512000.0
    >>> quantum_ns(None)
    512
    """
    if not rate_bps:
        return DEFAULT_QUANTUM_NS
    return 512 * 1e9 / rate_bps


def build_pause(src_mac: bytes, quanta: Iterable[Tuple[int, int]]) -> bytes:
    """Build a PFC PAUSE frame.

    Args:
        src_mac: the sending port's MAC address (6 bytes).
        quanta: ``(priority, quanta)`` pairs; each sets the priority's enable bit.

    Returns:
        the 60-byte frame.

    Raises:
        ParameterError: a priority outside 0..7 or quanta outside 0..65535.

    >>> frame = build_pause(bytes(6), [(3, 0xFFFF)])
    >>> parse_pause(frame)
    [(3, 65535)]
    >>> len(frame)
    60
    """
    vector = 0
    times = [0] * PRIORITIES
    for priority, value in quanta:
        if not 0 <= priority < PRIORITIES:
            raise ParameterError("priority", priority, f"an integer in [0, {PRIORITIES - 1}]")
        if not 0 <= value <= MAX_QUANTA:
            raise ParameterError("quanta", value, f"an integer in [0, {MAX_QUANTA}]")
        vector |= 1 << priority
        times[priority] = value
    frame = _HEADER.pack(PFC_DST_MAC, src_mac, PFC_ETHERTYPE, PFC_OPCODE, vector, *times)
    return frame + bytes(_FRAME_BYTES - len(frame))


def parse_pause(frame: bytes) -> Optional[List[Tuple[int, int]]]:
    """Read a PFC PAUSE frame.

    Returns:
        ``[(priority, quanta), ...]`` for the enabled classes in priority
        order, or None when ``frame`` is not a PFC PAUSE frame (another
        ethertype or opcode, or too short).

    >>> parse_pause(bytes(60)) is None
    True
    """
    if len(frame) < _HEADER.size or frame[12:14] != b"\x88\x08" or frame[14:16] != b"\x01\x01":
        return None
    fields = _HEADER.unpack_from(frame)
    vector = fields[4]
    return [(priority, fields[5 + priority]) for priority in range(PRIORITIES) if vector >> priority & 1]


@dataclass(frozen=True)
class PfcConfig:
    """A switch's PFC settings (the same on every port).

    Thresholds count packets held in the switch's buffer that came in on one
    port with one priority (wherever they wait to leave).

    Attributes:
        lossless: the priorities PFC protects (0..7); the others stay lossy.
        buffer_packets: the most packets of one (ingress port, lossless
            priority) the buffer holds; one more is dropped (a headroom
            overrun, which a correct setting never sees).
        xoff_packets: at this many the upstream neighbour is paused.
        xon_packets: at this many or fewer, after a pause, it is resumed.
        headroom_packets: room above XOFF for what is in flight when the
            PAUSE goes out: ``buffer_packets - xoff_packets`` must be at least this.
        pause_quanta: the quanta an XOFF frame asks (refreshed at half time
            while the threshold stays crossed).
    """

    lossless: FrozenSet[int]
    buffer_packets: int = 256
    xoff_packets: int = 32
    xon_packets: int = 16
    headroom_packets: int = 64
    pause_quanta: int = MAX_QUANTA

    @classmethod
    def checked(cls, lossless, buffer_packets=256, xoff_packets=32, xon_packets=16,
                headroom_packets=64, pause_quanta=MAX_QUANTA, field_prefix=""):
        """Build a PfcConfig, refusing wrong values.

        Raises:
            ParameterError: naming ``field_prefix + field`` and the allowed values.

        >>> PfcConfig.checked([3], buffer_packets=100, xoff_packets=120)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        testbed.errors.ParameterError: invalid xoff_packets=120: allowed values are an integer in [1, 36] ...
        """
        p = field_prefix
        if isinstance(lossless, (str, bytes)) or not hasattr(lossless, "__iter__"):
            raise ParameterError(p + "lossless", lossless, "a list of priorities in [0, 7]")
        priorities = []
        for value in lossless:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < PRIORITIES:
                raise ParameterError(p + "lossless", lossless, "a list of priorities in [0, 7]")
            priorities.append(value)
        _int(p + "buffer_packets", buffer_packets, 2, 1 << 20)
        if priorities:
            _int(p + "headroom_packets", headroom_packets, 1, buffer_packets - 1,
                 "a lossless priority needs headroom for the packets in flight while a PAUSE travels")
        else:
            _int(p + "headroom_packets", headroom_packets, 0, buffer_packets - 1)
        _int(p + "xoff_packets", xoff_packets, 1, buffer_packets - headroom_packets,
             f"XOFF plus headroom_packets={headroom_packets} must fit in buffer_packets={buffer_packets}")
        _int(p + "xon_packets", xon_packets, 0, xoff_packets - 1, "XON is below XOFF")
        _int(p + "pause_quanta", pause_quanta, 1, MAX_QUANTA)
        return cls(frozenset(priorities), buffer_packets, xoff_packets, xon_packets, headroom_packets,
                   pause_quanta)


def _int(field, value, low, high, reason=None):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParameterError(field, value, f"an integer in [{low}, {high}]", reason=reason)
