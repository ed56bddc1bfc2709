"""RoCEv2 packet building and parsing.

Frames are Ethernet / IPv4 / UDP (destination port 4791) / BTH / payload /
ICRC, built with Scapy's own :mod:`scapy.contrib.roce` (the BTH layer and its
ICRC).  Senders build a *template* frame once per (queue pair, payload
length) with Scapy and then patch the few per-packet bytes (opcode, PSN, the
payload header) into a copy; :func:`icrc` recomputes the ICRC of a patched
frame exactly as Scapy does (the tests check the two agree bit for bit).

Conventions chosen here (documented so switches and receivers can rely on
them):

* **UDP source port** follows the Linux RDMA core rule used by RoCE NICs
  (``rdma_get_udp_sport`` with no GRH flow label): the flow label is
  ``fl = lqpn * rqpn`` folded as ``fl ^= fl >> 20; fl ^= fl >> 40`` and masked
  to 20 bits, then the port is ``0xC000 | ((fl & 0x3FFF) ^ (fl >> 14 & 0x3F))``.
  So the port is a function of the two QP numbers only, in 49152..65535.
* **DSCP**: data packets carry :data:`DSCP_DATA` (26, AF31, the usual RoCE
  lossless class); control packets (clear-to-send, ACK, FIN) carry
  :data:`DSCP_CONTROL` (46, EF) so a switch can put them in a higher-priority
  queue (seed 004 section 5.2.2 / 6.1).
* **RETH**: RDMA WRITE FIRST and ONLY packets carry the 16-byte RDMA
  Extended Transport Header after the BTH (virtual address, R_Key, DMA length
  = message length) as the IBTA requires; ``scapy.contrib.roce`` has no RETH
  layer, so it is packed here (:data:`RETH`) and carried in Scapy's payload.
  Wireshark/tshark dissect it as RETH.  ACKNOWLEDGE packets carry the 4-byte
  AETH (syndrome, MSN; :data:`AETH`) instead.  Either extension header sits
  between the BTH and the payload header (:func:`extension_length`).
* **Payload header** (:data:`HEADER`, 32 bytes, network order) at the start of
  every RDMA payload (after the RETH when there is one): magic ``0x5442``, version, kind (data / cts / ack / fin),
  stream id, message id, per-QP packet sequence (not wrapped), transmit time in
  ns (``time.time_ns()`` of the sender; Mininet hosts share the clock), the
  message length in bytes and the byte offset of this packet in the message.
  The header is part of the message bytes.  In control packets the fields mean: CTS - ``stream`` is the granted chunk;
  ACK - ``msg_id`` the acknowledged message, ``msg_bytes`` the acknowledged
  (sender's) QP number; NAK - ``msg_bytes`` that QP number, ``stream`` the first
  missing per-QP sequence and ``offset`` how many are missing.
  A payload is never shorter than the header, so the last packet of a message
  whose remainder is below 32 bytes is padded; :func:`data_bytes` gives the
  real message bytes a packet carries.
"""
import struct
import zlib

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

ROCE_UDP_PORT = 4791
"""IANA UDP destination port of RoCEv2."""

PSN_MODULO = 1 << 24
"""PSNs are 24-bit and wrap to 0 after 2**24 - 1."""

DSCP_DATA = 26
"""DSCP of RDMA data packets."""

DSCP_CONTROL = 46
"""DSCP of control packets (CTS, ACK, FIN): a separate, higher-priority class."""

DEFAULT_MTU = 1024
"""Default RoCE path MTU: bytes of BTH payload per packet."""

# BTH opcodes of the RC transport (IBTA opcode table, as in scapy.contrib.roce).
OP_RDMA_WRITE_FIRST = 0x06
OP_RDMA_WRITE_MIDDLE = 0x07
OP_RDMA_WRITE_LAST = 0x08
OP_RDMA_WRITE_ONLY = 0x0A
OP_SEND_ONLY = 0x04
OP_ACKNOWLEDGE = 0x11

KIND_DATA = 0
KIND_CTS = 1
KIND_ACK = 2
KIND_FIN = 3
KIND_NAK = 4

AETH_SYNDROME_ACK = 0x00
AETH_SYNDROME_NAK_PSN_SEQUENCE_ERROR = 0x60

RETH = struct.Struct("!QII")
"""RDMA Extended Transport Header: virtual address, R_Key, DMA length."""
RETH_LEN = RETH.size
RETH_VIRTUAL_ADDRESS = 0x7F0000000000
"""Virtual address written into RETHs (the emulated remote buffer)."""
AETH = struct.Struct("!I")
"""ACK Extended Transport Header: syndrome (8 bits) and MSN (24 bits)."""
AETH_LEN = AETH.size

HEADER = struct.Struct("!HBBIIIQII")
"""Payload header: magic, version, kind, stream, msg_id, seq, tx_ns, msg_bytes, offset."""
HEADER_MAGIC = 0x5442
HEADER_VERSION = 1

ETH_LEN = 14
IPV4_LEN = 20
UDP_LEN = 8
BTH_LEN = 12
ICRC_LEN = 4
BTH_OFFSET = ETH_LEN + IPV4_LEN + UDP_LEN
"""Offset of the BTH in frames built here (IPv4 without options)."""
PAYLOAD_OFFSET = BTH_OFFSET + BTH_LEN
FRAME_OVERHEAD = PAYLOAD_OFFSET + ICRC_LEN
"""Bytes of a frame that are not BTH payload (headers and ICRC)."""

_ICRC_LRH_PSEUDO = b"\xff" * 8


def has_reth(opcode):
    """True if packets with this BTH opcode carry a RETH (RDMA WRITE FIRST/ONLY, READ request)."""
    return (opcode & 0x1F) in (0x06, 0x0A, 0x0B, 0x0C) and opcode < 0x80


def has_aeth(opcode):
    """True if packets with this BTH opcode carry an AETH (ACKNOWLEDGE, READ responses first/last/only)."""
    return (opcode & 0x1F) in (0x0D, 0x0F, 0x10, 0x11, 0x12) and opcode < 0x80


def extension_length(opcode):
    """Bytes of extension headers (RETH or AETH) between the BTH and the payload for ``opcode``."""
    if has_reth(opcode):
        return RETH_LEN
    if has_aeth(opcode):
        return AETH_LEN
    return 0


def pack_aeth(msn, syndrome=0):
    """An AETH: syndrome 0 is a positive ACK; MSN is the message sequence number (24 bits)."""
    return AETH.pack(((syndrome & 0xFF) << 24) | (msn & 0xFFFFFF))


def pack_reth(dqpn, msg_bytes):
    """The RETH of a message: fixed virtual address, R_Key derived from the QP, DMA length."""
    return RETH.pack(RETH_VIRTUAL_ADDRESS, (dqpn * 0x9E37) & 0xFFFFFFFF, msg_bytes & 0xFFFFFFFF)


def udp_source_port(local_qpn, remote_qpn):
    """UDP source port a RoCE NIC uses for a QP pair (Linux ``rdma_get_udp_sport``).

    Args:
        local_qpn: QP number at the sender (24 bits).
        remote_qpn: destination QP number (24 bits).

    Returns:
        int: a port in 0xC000..0xFFFF.
    """
    flow = (local_qpn & 0xFFFFFF) * (remote_qpn & 0xFFFFFF)
    flow ^= flow >> 20
    flow ^= flow >> 40
    flow &= 0xFFFFF
    low = (flow & 0x3FFF) ^ ((flow & 0xFC000) >> 14)
    return 0xC000 | low


def write_opcodes(packet_count):
    """BTH opcodes of an RDMA WRITE message split into ``packet_count`` packets.

    Args:
        packet_count: number of packets (>= 1).

    Returns:
        list[int]: ONLY for one packet, else FIRST, MIDDLE..., LAST.

    Raises:
        ValueError: if ``packet_count`` < 1.
    """
    if packet_count < 1:
        raise ValueError("a message has at least one packet")
    if packet_count == 1:
        return [OP_RDMA_WRITE_ONLY]
    return [OP_RDMA_WRITE_FIRST] + [OP_RDMA_WRITE_MIDDLE] * (packet_count - 2) + [OP_RDMA_WRITE_LAST]


def payload_lengths(message_bytes, mtu=DEFAULT_MTU):
    """Split a message into BTH payload lengths of at most ``mtu`` bytes.

    Args:
        message_bytes: message size (>= 1).
        mtu: path MTU in payload bytes (>= :data:`HEADER` size).

    Returns:
        list[int]: payload length per packet; the last one is padded up to the
        header size if shorter.
    """
    if message_bytes < 1:
        raise ValueError("message_bytes must be >= 1")
    if mtu < HEADER.size:
        raise ValueError(f"mtu must be >= {HEADER.size}")
    full, rest = divmod(message_bytes, mtu)
    lengths = [mtu] * full
    if rest:
        lengths.append(max(rest, HEADER.size))
    return lengths


def data_bytes(payload_length, message_bytes, offset):
    """Message bytes a packet really carries (its payload minus padding).

    Args:
        payload_length: BTH payload length of the packet.
        message_bytes: total message size from the header.
        offset: the packet's byte offset in the message.

    Returns:
        int
    """
    return max(0, min(payload_length, message_bytes - offset))


def build_frame(src_mac, dst_mac, src_ip, dst_ip, sport, dqpn, psn, opcode, payload,
                dscp=DSCP_DATA, ackreq=False, ttl=64):
    """Build one RoCEv2 frame with Scapy (ICRC computed by ``scapy.contrib.roce``).

    Args:
        src_mac, dst_mac: Ethernet addresses.
        src_ip, dst_ip: IPv4 addresses.
        sport: UDP source port (see :func:`udp_source_port`).
        dqpn: destination QP number.
        psn: packet sequence number (taken modulo 2**24).
        opcode: BTH opcode.
        payload: bytes after the BTH (including the RETH when the opcode needs one).
        dscp: DSCP value (ECN bits left 0).
        ackreq: the BTH AckReq bit.
        ttl: IPv4 TTL.

    Returns:
        bytes: the complete frame (without Ethernet FCS).
    """
    packet = (
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, tos=(dscp & 0x3F) << 2, ttl=ttl, flags="DF", id=0)
        / UDP(sport=sport, dport=ROCE_UDP_PORT, chksum=0)
        / BTH(opcode=opcode, dqpn=dqpn, psn=psn % PSN_MODULO, ackreq=1 if ackreq else 0)
        / Raw(payload)
    )
    return bytes(packet)


def pack_header(kind, stream, msg_id, seq, tx_ns, msg_bytes, offset):
    """Pack the 32-byte payload header (see module docstring)."""
    return HEADER.pack(HEADER_MAGIC, HEADER_VERSION, kind, stream & 0xFFFFFFFF, msg_id & 0xFFFFFFFF,
                       seq & 0xFFFFFFFF, tx_ns, msg_bytes & 0xFFFFFFFF, offset & 0xFFFFFFFF)


def icrc(frame, l3_offset=ETH_LEN):
    """Compute the RoCEv2 ICRC of an Ethernet/IPv4 frame, as Scapy does.

    The CRC32 covers 8 bytes of 0xff (pseudo LRH), the IPv4 header with TOS,
    TTL and checksum set to all ones, the UDP header with checksum all ones,
    the BTH with its FECN/BECN/reserved byte all ones, and the payload.

    Args:
        frame: the frame (bytes-like) including its 4 trailing ICRC bytes.
        l3_offset: offset of the IPv4 header.

    Returns:
        bytes: the 4 ICRC bytes as they appear on the wire.
    """
    view = memoryview(frame)
    ihl = (view[l3_offset] & 0x0F) * 4
    ip_header = bytearray(view[l3_offset:l3_offset + ihl])
    ip_header[1] = 0xFF  # TOS (DSCP/ECN)
    ip_header[8] = 0xFF  # TTL
    ip_header[10:12] = b"\xff\xff"  # header checksum
    udp_offset = l3_offset + ihl
    udp_header = bytearray(view[udp_offset:udp_offset + UDP_LEN])
    udp_header[6:8] = b"\xff\xff"
    bth_offset = udp_offset + UDP_LEN
    bth = bytearray(view[bth_offset:bth_offset + BTH_LEN])
    bth[4] = 0xFF  # FECN, BECN, reserved
    crc = zlib.crc32(_ICRC_LRH_PSEUDO)
    crc = zlib.crc32(ip_header, crc)
    crc = zlib.crc32(udp_header, crc)
    crc = zlib.crc32(bth, crc)
    crc = zlib.crc32(view[bth_offset + BTH_LEN:len(view) - ICRC_LEN], crc)
    return struct.pack("<I", crc & 0xFFFFFFFF)


class FramePatcher:
    """Fast per-packet variant of a template frame built by Scapy.

    The template is built once (``build_frame``); :meth:`frame` copies it,
    writes opcode, PSN, AckReq, the RETH (if the template has one) and the
    payload header, and recomputes the ICRC from a CRC state precomputed over
    the constant masked IP/UDP prefix.  A template only serves opcodes with
    the same extension header length (:func:`extension_length`).

    Args:
        template: a frame from :func:`build_frame` (IPv4 without options).
        extension: bytes of RETH/AETH the template carries after the BTH.
    """

    def __init__(self, template, extension=0):
        self.template = bytes(template)
        self.extension = extension
        self.with_reth = extension == RETH_LEN
        self.header_offset = PAYLOAD_OFFSET + extension
        masked = bytearray(self.template[ETH_LEN:BTH_OFFSET])
        masked[1] = 0xFF
        masked[8] = 0xFF
        masked[10:12] = b"\xff\xff"
        masked[IPV4_LEN + 6:IPV4_LEN + 8] = b"\xff\xff"
        self._prefix_crc = zlib.crc32(bytes(masked), zlib.crc32(_ICRC_LRH_PSEUDO))
        self._buffer = bytearray(self.template)
        self.length = len(self.template)

    def frame(self, opcode, psn, header, ackreq=False, extension=None):
        """Return a new frame (bytes) with these per-packet fields.

        Args:
            opcode: BTH opcode.
            psn: packet sequence number (wrapped modulo 2**24 here).
            header: 32 packed header bytes (:func:`pack_header`).
            ackreq: the BTH AckReq bit.
            extension: RETH (:func:`pack_reth`) or AETH (:func:`pack_aeth`) bytes
                for templates that have one.
        """
        buf = self._buffer
        buf[BTH_OFFSET] = opcode
        psn %= PSN_MODULO
        buf[BTH_OFFSET + 8] = 0x80 if ackreq else 0
        buf[BTH_OFFSET + 9] = psn >> 16
        buf[BTH_OFFSET + 10] = (psn >> 8) & 0xFF
        buf[BTH_OFFSET + 11] = psn & 0xFF
        if extension is not None:
            buf[PAYLOAD_OFFSET:PAYLOAD_OFFSET + len(extension)] = extension
        buf[self.header_offset:self.header_offset + HEADER.size] = header
        self.finish(buf)
        return bytes(buf)

    def finish(self, buf):
        """Recompute the ICRC of ``buf`` (a patched copy of the template) in place."""
        bth = bytes(buf[BTH_OFFSET:PAYLOAD_OFFSET])
        masked_bth = bth[:4] + b"\xff" + bth[5:]
        crc = zlib.crc32(masked_bth, self._prefix_crc)
        crc = zlib.crc32(memoryview(buf)[PAYLOAD_OFFSET:self.length - ICRC_LEN], crc)
        struct.pack_into("<I", buf, self.length - ICRC_LEN, crc & 0xFFFFFFFF)


class ParsedPacket:
    """Fields of one received RoCEv2 packet (see :func:`parse_frame`)."""

    __slots__ = ("src_ip", "dst_ip", "dscp", "sport", "opcode", "dqpn", "psn", "ackreq",
                 "kind", "stream", "msg_id", "seq", "tx_ns", "msg_bytes", "offset", "payload_length",
                 "reth", "aeth", "icrc_ok")

    def as_dict(self):
        """Return the fields as a dict."""
        return {name: getattr(self, name) for name in self.__slots__}


def parse_udp_payload(data, length=None):
    """Parse a UDP payload (BTH + payload + ICRC) as received on a UDP socket.

    Args:
        data: bytes-like starting at the BTH.
        length: number of valid bytes in ``data`` (defaults to ``len(data)``).

    Returns:
        tuple | None: ``(opcode, dqpn, psn, ackreq, header_fields, payload_length)``
        where ``header_fields`` is the unpacked :data:`HEADER` tuple and
        ``payload_length`` the RDMA payload (after any RETH), or None if the
        packet is not one of ours (too short or wrong magic).
    """
    if length is None:
        length = len(data)
    if length < BTH_LEN:
        return None
    extension = extension_length(data[0])
    payload_length = length - BTH_LEN - extension - ICRC_LEN
    if payload_length < HEADER.size:
        return None
    fields = HEADER.unpack_from(data, BTH_LEN + extension)
    if fields[0] != HEADER_MAGIC:
        return None
    opcode = data[0]
    dqpn = (data[5] << 16) | (data[6] << 8) | data[7]
    ackreq = data[8] >> 7
    psn = (data[9] << 16) | (data[10] << 8) | data[11]
    return opcode, dqpn, psn, ackreq, fields, payload_length


def parse_frame(frame, check_icrc=True):
    """Parse an Ethernet/IPv4/UDP/BTH frame built by this module.

    Args:
        frame: the whole frame.
        check_icrc: verify the ICRC.

    Returns:
        ParsedPacket | None: None if the frame is not IPv4/UDP to port 4791
        carrying our payload header.
    """
    if len(frame) < PAYLOAD_OFFSET + ICRC_LEN:
        return None
    if frame[12:14] != b"\x08\x00":
        return None
    ihl = (frame[ETH_LEN] & 0x0F) * 4
    if frame[ETH_LEN + 9] != 17:
        return None
    udp = ETH_LEN + ihl
    dport = (frame[udp + 2] << 8) | frame[udp + 3]
    if dport != ROCE_UDP_PORT:
        return None
    parsed = parse_udp_payload(memoryview(frame)[udp + UDP_LEN:])
    if parsed is None:
        return None
    opcode, dqpn, psn, ackreq, fields, payload_length = parsed
    packet = ParsedPacket()
    packet.src_ip = ".".join(str(b) for b in frame[ETH_LEN + 12:ETH_LEN + 16])
    packet.dst_ip = ".".join(str(b) for b in frame[ETH_LEN + 16:ETH_LEN + 20])
    packet.dscp = frame[ETH_LEN + 1] >> 2
    packet.sport = (frame[udp] << 8) | frame[udp + 1]
    packet.opcode, packet.dqpn, packet.psn, packet.ackreq = opcode, dqpn, psn, ackreq
    (_, _, packet.kind, packet.stream, packet.msg_id, packet.seq, packet.tx_ns, packet.msg_bytes,
     packet.offset) = fields
    packet.payload_length = payload_length
    packet.reth = RETH.unpack_from(frame, udp + UDP_LEN + BTH_LEN) if has_reth(opcode) else None
    packet.aeth = AETH.unpack_from(frame, udp + UDP_LEN + BTH_LEN)[0] if has_aeth(opcode) else None
    packet.icrc_ok = (icrc(frame, ETH_LEN) == bytes(frame[-ICRC_LEN:])) if check_icrc else None
    return packet
