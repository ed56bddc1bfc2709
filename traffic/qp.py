"""Queue pairs, PSN arithmetic and the two QP-scaling strategies of seed 004 4.2.4.

A NIC-to-NIC transfer is posted as messages over ``Q`` queue pairs:

* ``roundrobin`` posts each whole message to the next QP in turn (what Meta
  found to work best for NCCL message sizes);
* ``split`` cuts every message into ``Q`` parts (MTU-aligned, as equal as
  possible), one per QP, so each QP carries smaller messages.

Within a QP a message is a run of RDMA WRITE packets (FIRST/MIDDLE.../LAST or
ONLY) with consecutive 24-bit PSNs; the NIC interleaves the packets of its
active QPs, which :func:`interleave` reproduces packet by packet.

QP numbers are deterministic so receivers and switches (E-ECMP hashes the
destination QP) see stable values: in traffic job ``job`` (0..255), the QP a
host of rank ``a`` uses towards rank ``b`` with index ``j`` has number
``QPN_BASE + job * 2**16 + b * MAX_QPS + j`` at ``a`` and
``QPN_BASE + job * 2**16 + a * MAX_QPS + j`` at ``b`` (the destination QP of
its packets).  The top byte of every QP number is therefore the job, which
lets several jobs share a host: each receiver keeps only its job's packets
(:func:`job_of_qpn`).

The UDP source port of a QP's packets follows one of :data:`UDP_SPORT_RULES`
(seed 004 4.1-4.2): ``per_qp`` (default) derives it from the QP's two numbers
as Linux ``rdma_get_udp_sport`` does, so every QP is its own 5-tuple flow;
``per_nic_pair`` gives every QP between two NICs the one port of the pair's
first QP (NICs that keep one source port per NIC pair), so a 5-tuple hash sees
a single flow per NIC pair and only a hash over the destination QP (E-ECMP)
tells the QPs apart.
"""
import itertools
import random
import threading
import zlib
from dataclasses import dataclass, field
from typing import Optional

from testbed.traffic import roce

QP_SCALING_STRATEGIES = ("roundrobin", "split")
"""Names accepted for the QP-scaling strategy."""

MAX_QPS = 256
"""Largest number of QPs per NIC pair."""

QPN_BASE = 0x1000
"""Lowest QP number handed out (low QPNs are special in InfiniBand)."""

MAX_RANKS = (0x10000 - QPN_BASE) // MAX_QPS
"""Ranks per job whose QP numbers stay inside the job's 2**16 block (240)."""

MAX_JOB = 255
"""Largest job number (the top byte of a 24-bit QP number)."""

UDP_SPORT_PER_QP = "per_qp"
UDP_SPORT_PER_NIC_PAIR = "per_nic_pair"
UDP_SPORT_RULES = (UDP_SPORT_PER_QP, UDP_SPORT_PER_NIC_PAIR)
"""Names accepted for the UDP source-port rule (see the module docstring)."""


def job_of_qpn(qpn):
    """The traffic job a QP number belongs to (its top byte)."""
    return (qpn >> 16) & 0xFF


_job_counter = itertools.count(random.SystemRandom().randrange(MAX_JOB))
_job_lock = threading.Lock()


def allocate_job():
    """A job number (1..255) for a new traffic run; successive calls in a process differ.

    Runs started by one process never share a number until 255 further runs were
    started; runs from different processes start at random points of the cycle.
    """
    with _job_lock:
        return next(_job_counter) % MAX_JOB + 1


def psn_add(psn, count):
    """Return ``psn + count`` modulo 2**24."""
    return (psn + count) % roce.PSN_MODULO


def psn_delta(newer, older):
    """Signed distance from ``older`` to ``newer`` on the 24-bit PSN circle.

    Args:
        newer: a PSN.
        older: a PSN.

    Returns:
        int: in ``-2**23 .. 2**23 - 1``; positive when ``newer`` is ahead.
    """
    delta = (newer - older) % roce.PSN_MODULO
    if delta >= roce.PSN_MODULO // 2:
        delta -= roce.PSN_MODULO
    return delta


def queue_pair_number(owner_rank, peer_rank, index, job=0):
    """QP number at host ``owner_rank`` for its QP ``index`` towards ``peer_rank`` in ``job``.

    Raises:
        ValueError: if the index, ranks or job are out of range.
    """
    if not 0 <= index < MAX_QPS:
        raise ValueError(f"QP index must be in 0..{MAX_QPS - 1}")
    if not 0 <= peer_rank < MAX_RANKS or not 0 <= owner_rank < MAX_RANKS:
        raise ValueError(f"ranks must be in 0..{MAX_RANKS - 1}")
    if not 0 <= job <= MAX_JOB:
        raise ValueError(f"job must be in 0..{MAX_JOB}")
    return QPN_BASE + (job << 16) + peer_rank * MAX_QPS + index


def udp_source_port_for(rule, src_rank, dst_rank, index, job=0):
    """UDP source port of QP ``index`` from ``src_rank`` to ``dst_rank`` under a source-port rule.

    Args:
        rule: one of :data:`UDP_SPORT_RULES`.
        src_rank: rank of the sending host.
        dst_rank: rank of the receiving host.
        index: the QP's index in its NIC pair.
        job: traffic job number.

    Returns:
        int: ``per_qp``: :func:`roce.udp_source_port` of the QP's two numbers;
        ``per_nic_pair``: the same for QP 0 of the pair, whatever ``index`` is.

    Raises:
        ValueError: unknown rule, or QP numbers out of range.
    """
    if rule not in UDP_SPORT_RULES:
        raise ValueError(f"unknown UDP source-port rule {rule!r}; allowed: " + ", ".join(UDP_SPORT_RULES))
    if rule == UDP_SPORT_PER_NIC_PAIR:
        index = 0
    return roce.udp_source_port(queue_pair_number(src_rank, dst_rank, index, job),
                                queue_pair_number(dst_rank, src_rank, index, job))


def initial_psn(src_rank, dst_rank, index, seed=0):
    """Deterministic pseudo-random start PSN of a QP (NICs pick random ones)."""
    return zlib.crc32(f"{seed}:{src_rank}:{dst_rank}:{index}".encode()) % roce.PSN_MODULO


@dataclass
class QueuePair:
    """The sending side of one reliable-connection queue pair.

    Attributes:
        local_qpn: QP number at the sender.
        remote_qpn: QP number at the receiver (the BTH destination QP).
        next_psn: PSN of the next packet (wraps at 2**24).
        index: position of this QP in its NIC pair's QP list.
        next_msg_id: id given to the next message posted on this QP.
        next_seq: unwrapped count of packets sent (carried in the payload header).
        sport: UDP source port of its packets; None: derived from the two QP numbers
            (``per_qp``, :func:`roce.udp_source_port`).
    """

    local_qpn: int
    remote_qpn: int
    next_psn: int = 0
    index: int = 0
    next_msg_id: int = 0
    next_seq: int = 0
    sport: Optional[int] = None

    @property
    def udp_sport(self):
        """UDP source port of this QP's packets (``sport``, or :func:`roce.udp_source_port`)."""
        if self.sport is not None:
            return self.sport
        return roce.udp_source_port(self.local_qpn, self.remote_qpn)

    def take_psns(self, count):
        """Reserve ``count`` consecutive PSNs; return the first one."""
        first = self.next_psn
        self.next_psn = psn_add(self.next_psn, count)
        self.next_seq += count
        return first


def make_queue_pairs(src_rank, dst_rank, count, seed=0, start_psn=None, job=0, udp_sport=UDP_SPORT_PER_QP):
    """Create the ``count`` QPs a host uses towards one peer.

    Args:
        src_rank: rank of the sending host.
        dst_rank: rank of the receiving host.
        count: number of QPs (1..MAX_QPS).
        seed: varies the start PSNs.
        start_psn: force every QP to start at this PSN (tests of the wrap).
        job: traffic job number (0..255; see the module docstring).
        udp_sport: UDP source-port rule, one of :data:`UDP_SPORT_RULES`.

    Returns:
        list[QueuePair]

    Raises:
        ValueError: count out of range or unknown ``udp_sport`` rule.
    """
    if not 1 <= count <= MAX_QPS:
        raise ValueError(f"QP count must be in 1..{MAX_QPS}")
    if udp_sport not in UDP_SPORT_RULES:
        raise ValueError(f"unknown UDP source-port rule {udp_sport!r}; allowed: " + ", ".join(UDP_SPORT_RULES))
    pairs = []
    for index in range(count):
        psn = initial_psn(src_rank, dst_rank, index, seed) if start_psn is None else start_psn
        pairs.append(QueuePair(local_qpn=queue_pair_number(src_rank, dst_rank, index, job),
                               remote_qpn=queue_pair_number(dst_rank, src_rank, index, job),
                               next_psn=psn % roce.PSN_MODULO, index=index,
                               sport=udp_source_port_for(udp_sport, src_rank, dst_rank, index, job)))
    return pairs


def split_message(message_bytes, parts, mtu=roce.DEFAULT_MTU):
    """Split a message into at most ``parts`` MTU-aligned pieces, as equal as possible.

    Returns:
        list[int]: non-zero piece sizes summing to ``message_bytes``.
    """
    packets = -(-message_bytes // mtu)
    parts = max(1, min(parts, packets))
    base, extra = divmod(packets, parts)
    sizes = []
    remaining = message_bytes
    for part in range(parts):
        size = min(remaining, (base + (1 if part < extra else 0)) * mtu)
        sizes.append(size)
        remaining -= size
    return [size for size in sizes if size > 0]


def assign_messages(message_sizes, qp_count, strategy, mtu=roce.DEFAULT_MTU, first_qp=0):
    """Place messages on QPs with one of the QP-scaling strategies.

    Args:
        message_sizes: sizes in bytes of the messages to post, in order.
        qp_count: number of QPs.
        strategy: ``"roundrobin"`` or ``"split"``.
        mtu: path MTU (pieces of a split message are MTU multiples).
        first_qp: QP that receives the first message under round-robin.

    Returns:
        list[list[int]]: for each QP, the sizes of the messages it carries.

    Raises:
        ValueError: unknown strategy or a message size < 1.
    """
    if strategy not in QP_SCALING_STRATEGIES:
        raise ValueError(f"unknown QP scaling strategy {strategy!r}")
    per_qp = [[] for _ in range(qp_count)]
    for number, size in enumerate(message_sizes):
        if size < 1:
            raise ValueError("message size must be >= 1")
        if strategy == "roundrobin":
            per_qp[(first_qp + number) % qp_count].append(size)
        else:
            for index, piece in enumerate(split_message(size, qp_count, mtu)):
                per_qp[index].append(piece)
    return per_qp


@dataclass
class PacketSpec:
    """One packet to send: everything that varies per packet.

    Attributes:
        qp: the queue pair.
        opcode: BTH opcode.
        psn: PSN (already wrapped).
        seq: unwrapped per-QP packet sequence.
        msg_id: message id on this QP.
        msg_bytes: message size.
        offset: byte offset of the packet in its message.
        payload_length: BTH payload length.
        ackreq: AckReq bit (set on the last packet of a message).
    """

    qp: QueuePair
    opcode: int
    psn: int
    seq: int
    msg_id: int
    msg_bytes: int
    offset: int
    payload_length: int
    ackreq: bool = False
    tag: object = field(default=None, compare=False)


def message_packets(qp, message_bytes, mtu=roce.DEFAULT_MTU, tag=None):
    """Packets of one RDMA WRITE message posted on ``qp`` (advances its PSN).

    Args:
        qp: the queue pair.
        message_bytes: the message size.
        mtu: path MTU.
        tag: opaque value copied into each :class:`PacketSpec` (the flow it belongs to).

    Returns:
        list[PacketSpec]
    """
    lengths = roce.payload_lengths(message_bytes, mtu)
    opcodes = roce.write_opcodes(len(lengths))
    first_seq = qp.next_seq
    first_psn = qp.take_psns(len(lengths))
    msg_id = qp.next_msg_id
    qp.next_msg_id += 1
    packets = []
    offset = 0
    for number, (length, opcode) in enumerate(zip(lengths, opcodes)):
        packets.append(PacketSpec(qp=qp, opcode=opcode, psn=psn_add(first_psn, number),
                                  seq=first_seq + number, msg_id=msg_id, msg_bytes=message_bytes,
                                  offset=offset, payload_length=length,
                                  ackreq=number == len(lengths) - 1, tag=tag))
        offset += length
    return packets


def interleave(queues):
    """Merge per-QP packet lists round-robin, one packet per active QP in turn.

    Args:
        queues: iterables of packets, one per QP (or per flow).

    Yields:
        the packets in NIC transmission order.
    """
    iterators = [iter(queue) for queue in queues]
    while iterators:
        still_active = []
        for iterator in iterators:
            item = next(iterator, None)
            if item is not None:
                yield item
                still_active.append(iterator)
        iterators = still_active
