"""RoCEv2-like receiver: per-QP accounting the way an RDMA NIC sees it.

Run inside a Mininet host::

    python -m testbed.traffic.receiver --duration 5 --json rx.json

Packets are captured on a UDP socket bound to port 4791 (default: cheapest,
the kernel hands over BTH + payload + ICRC) or on a raw AF_PACKET socket
(``--capture raw --intf h2-eth0``: sees DSCP and can check the ICRC).  With
``--job N`` (raw capture) a kernel socket filter keeps only the packets of
traffic job N (the top byte of the destination QP number, see
:mod:`testbed.traffic.qp`), so several jobs can run in one host at once; a
UDP "sink" socket on port 4791 then stops the kernel from answering with
ICMP port-unreachable (it never reads: what reaches it is dropped).

Accounting per queue pair (key: source IP and BTH destination QP), on
*unwrapped* PSNs (24-bit PSNs unwrapped relative to the highest one seen;
the first PSN of a QP is known from the payload header's sequence, which
counts packets from 0 at QP creation):

* ``received``: distinct PSNs that arrived.
* ``out_of_sequence``: the NIC OOS counter (seed 004 6.3.1): arrivals whose
  PSN is beyond the next expected PSN, i.e. each arrival that opens a gap
  counts once.  In-order arrivals never count.
* ``late``: arrivals of a PSN below the highest seen that had not arrived
  before (reordered packets filling a gap).
* ``duplicates``: arrivals of a PSN that had already arrived.
* ``lost``: PSNs skipped by a gap that did not arrive within ``loss_timeout``
  seconds (and, when the run ends, every PSN still missing).  If a packet
  declared lost arrives later it counts as late and is taken out of ``lost``,
  so ``received + lost`` is the number of PSNs the sender used up to the
  highest one seen.  Losses after the highest PSN received (tail loss) are
  invisible to PSN gaps; :func:`reconcile` compares with the sender's report.

Also: a throughput timeline in fixed bins of arrival time (absolute bin index
``rx_ns // bin_ns``), packets received per transmit-time bin (for
:func:`testbed.traffic.metrics.loss_in_window`), one-way latency
(``rx_ns - tx_ns``; Mininet hosts share the machine clock), message
completion times (first packet's transmit time to the arrival completing the
message) and delivery gaps longer than ``gap_ms`` (for time to recover).
``rx_ns`` is the kernel's receive stamp (``SO_TIMESTAMPNS``): when the packet
reached the host's socket, not when a busy machine let the receiver read it.

Delivery gaps are kept at two levels: ``gaps`` (nothing at all arrived at
this receiver for ``gap_ms``) and ``qp_gaps`` (one queue pair, i.e. one
5-tuple flow, received nothing for ``flow_gap_ms``).  On an ECMP fabric a
failed link stops only the flows hashed onto it while the others keep
delivering, so only ``qp_gaps`` show that outage.
"""
import argparse
import select
import signal
import socket
import sys
import time
from array import array

from testbed.packet_sockets import SocketDrops, enable_timestamps, kernel_stamp, open_packet_socket
from testbed.traffic import roce
from testbed.traffic.json_report import DEFAULT_BIN_MS, announce, emit_report
from testbed.traffic.qp import psn_delta

DEFAULT_LOSS_TIMEOUT = 0.2
DEFAULT_GAP_MS = 5.0
DEFAULT_FLOW_GAP_MS = 20.0  # per QP: longer than the packet spacing of a few-Mbit/s flow
MAX_QP_GAPS = 100_000
MAX_LATENCY_SAMPLES = 2_000_000


class QpAccount:
    """Sequence accounting of one queue pair (see module docstring)."""

    __slots__ = ("src_ip", "dqpn", "next_expected", "received", "out_of_sequence", "late", "duplicates",
                 "lost", "missing", "lost_psns", "bytes", "messages", "messages_done", "first_rx_ns",
                 "last_rx_ns", "highest_psn", "base", "gap")

    def __init__(self, src_ip, dqpn):
        self.src_ip = src_ip
        self.dqpn = dqpn
        self.next_expected = None
        self.received = 0
        self.out_of_sequence = 0
        self.late = 0
        self.duplicates = 0
        self.lost = 0
        self.missing = {}
        self.lost_psns = set()
        self.bytes = 0
        self.messages = {}
        self.messages_done = 0
        self.first_rx_ns = None
        self.last_rx_ns = None
        self.highest_psn = None
        self.base = None
        self.gap = None

    def accept(self, psn, seq, now_ns):
        """Account one arrival; return True if its PSN is new (not a duplicate).

        After the call, :attr:`gap` is ``(first, end)`` in per-QP sequence numbers
        (``end`` exclusive) when this arrival opened a gap, else None.

        Args:
            psn: the 24-bit PSN from the BTH.
            seq: the unwrapped per-QP sequence from the payload header.
            now_ns: arrival time.
        """
        if self.next_expected is None:
            # The header's sequence tells where this QP's PSNs started (if
            # it is small enough to be unambiguous on the PSN circle).
            self.next_expected = psn - seq if seq < (1 << 22) else psn
            self.base = self.next_expected
            self.first_rx_ns = now_ns
        self.gap = None
        reference = self.next_expected - 1
        unwrapped = reference + psn_delta(psn, reference % roce.PSN_MODULO)
        self.last_rx_ns = now_ns
        if unwrapped == self.next_expected:
            self.next_expected += 1
        elif unwrapped > self.next_expected:
            self.out_of_sequence += 1
            self.gap = (self.next_expected - self.base, unwrapped - self.base)
            for skipped in range(self.next_expected, unwrapped):
                self.missing[skipped] = now_ns
            self.next_expected = unwrapped + 1
        elif unwrapped in self.missing:
            del self.missing[unwrapped]
            self.late += 1
        elif unwrapped in self.lost_psns:
            self.lost_psns.discard(unwrapped)
            self.lost -= 1
            self.late += 1
        else:
            self.duplicates += 1
            return False
        self.received += 1
        self.highest_psn = (self.next_expected - 1) % roce.PSN_MODULO
        return True

    def expire(self, now_ns, timeout_ns):
        """Declare lost every missing PSN detected more than ``timeout_ns`` ago.

        Returns:
            int: PSNs newly declared lost.
        """
        if not self.missing:
            return 0
        expired = [psn for psn, since in self.missing.items() if now_ns - since >= timeout_ns]
        for psn in expired:
            del self.missing[psn]
            self.lost_psns.add(psn)
        self.lost += len(expired)
        return len(expired)

    def as_dict(self):
        """JSON-ready counters."""
        return {"src": self.src_ip, "dqpn": self.dqpn, "received": self.received,
                "lost": self.lost, "missing": len(self.missing), "out_of_sequence": self.out_of_sequence,
                "late": self.late, "duplicates": self.duplicates, "bytes": self.bytes,
                "messages_done": self.messages_done, "messages_incomplete": len(self.messages),
                "highest_psn": self.highest_psn,
                "next_seq": None if self.next_expected is None else self.next_expected,
                "first_rx_ns": self.first_rx_ns, "last_rx_ns": self.last_rx_ns}


class StreamProgress:
    """Distinct message bytes received from one source for one stream id."""

    __slots__ = ("bytes", "packets", "first_rx_ns", "last_rx_ns", "first_tx_ns")

    def __init__(self):
        self.bytes = 0
        self.packets = 0
        self.first_rx_ns = None
        self.last_rx_ns = None
        self.first_tx_ns = None


def _summary(values):
    """min/mean/p50/p99/max of a sequence of numbers (empty -> count 0)."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    count = len(ordered)

    def pick(fraction):
        return ordered[min(count - 1, int(fraction * count))]

    return {"count": count, "min": ordered[0], "mean": sum(ordered) / count, "p50": pick(0.5),
            "p99": pick(0.99), "max": ordered[-1]}


class RoceReceiver:
    """Accounts RoCEv2 packets; feed it with :meth:`handle` or let :meth:`run` capture.

    Args:
        bin_ms: width of the throughput timeline bins (1 or 10 ms are usual).
        loss_timeout: seconds after which a PSN gap is declared loss.
        gap_ms: delivery gaps (no packet at all) at least this long are recorded.
        flow_gap_ms: per-QP delivery gaps (one flow received nothing) at least this long
            are recorded in ``qp_gaps``.
        check_icrc: verify the ICRC of every packet (costs CPU).
        on_control: callable ``(src_ip, kind, header_fields)`` for control packets
            (CTS, ACK, FIN); data accounting never sees them.
        on_data: callable ``(src_ip, stream, progress)`` after each new data packet.
        on_ack_request: callable ``(src_ip, dqpn, msg_id, duplicate)`` when a message
            completes, and again when a duplicate of a completed message's AckReq
            packet arrives (a retransmission whose ACK was lost): the place to send
            an RC acknowledgement.
        on_sequence_error: callable ``(src_ip, dqpn, first_seq, end_seq)`` when an
            arrival opens a PSN gap (the place to send a NAK; sequences are the
            per-QP packet numbers of the payload header, ``end_seq`` exclusive).
    """

    def __init__(self, bin_ms=DEFAULT_BIN_MS, loss_timeout=DEFAULT_LOSS_TIMEOUT, gap_ms=DEFAULT_GAP_MS,
                 check_icrc=False, flow_gap_ms=DEFAULT_FLOW_GAP_MS, on_control=None, on_data=None, on_ack_request=None,
                 on_sequence_error=None):
        self.bin_ns = int(bin_ms * 1e6)
        self.loss_timeout_ns = int(loss_timeout * 1e9)
        self.gap_ns = int(gap_ms * 1e6)
        self.flow_gap_ns = int(flow_gap_ms * 1e6)
        self.qp_gaps = []
        self.check_icrc = check_icrc
        self.on_control = on_control
        self.on_data = on_data
        self.on_ack_request = on_ack_request
        self.on_sequence_error = on_sequence_error
        self.qps = {}
        self.streams = {}
        self.bins = {}
        self.rx_by_tx_bin = {}
        self.latencies = array("q")
        self.completion_ns = array("q")
        self.gaps = []
        self.last_arrival_ns = None
        self.first_arrival_ns = None
        self.foreign = 0
        self.icrc_errors = 0
        self.control_packets = 0
        self.dscp_counts = {}
        self.ttl_counts = {}  # (src ip, ttl) -> data packets
        self.start_ns = time.time_ns()
        self.end_ns = None

    def handle(self, src_ip, udp_payload, length=None, now_ns=None, frame=None, dscp=None, ttl=None):
        """Account one packet given its UDP payload (BTH onwards).

        Args:
            src_ip: source IPv4 address (dotted string).
            udp_payload: bytes-like starting at the BTH.
            length: valid bytes in ``udp_payload``.
            now_ns: arrival time (default: now).
            frame: the whole frame, when captured raw (used for the ICRC check).
            dscp: the IP DSCP, when captured raw (counted per class in the report).
            ttl: the IP TTL as it arrived, when captured raw (counted per source: the hops each
                packet crossed, so detours show as path dilation).

        Returns:
            bool: True if the packet was one of ours.
        """
        if now_ns is None:
            now_ns = time.time_ns()
        parsed = roce.parse_udp_payload(udp_payload, length)
        if parsed is None:
            self.foreign += 1
            return False
        opcode, dqpn, psn, ackreq, fields, payload_length = parsed
        if dscp is not None:
            self.dscp_counts[dscp] = self.dscp_counts.get(dscp, 0) + 1
        if self.check_icrc and frame is not None and roce.icrc(frame) != bytes(frame[-roce.ICRC_LEN:]):
            self.icrc_errors += 1
        _, _, kind, stream, msg_id, seq, tx_ns, msg_bytes, offset = fields
        if kind != roce.KIND_DATA:
            self.control_packets += 1
            if self.on_control is not None:
                self.on_control(src_ip, kind, fields)
            return True
        key = (src_ip, dqpn)
        account = self.qps.get(key)
        if account is None:
            account = self.qps[key] = QpAccount(src_ip, dqpn)
        if ttl is not None:
            ttl_key = (src_ip, ttl)
            self.ttl_counts[ttl_key] = self.ttl_counts.get(ttl_key, 0) + 1
        previous_rx_ns = account.last_rx_ns
        if not account.accept(psn, seq, now_ns):
            if ackreq and self.on_ack_request is not None and msg_id not in account.messages:
                self.on_ack_request(src_ip, dqpn, msg_id, True)
            return True
        if previous_rx_ns is not None and now_ns - previous_rx_ns >= self.flow_gap_ns \
                and len(self.qp_gaps) < MAX_QP_GAPS:
            self.qp_gaps.append((previous_rx_ns, now_ns, src_ip, dqpn))
        if account.gap is not None and self.on_sequence_error is not None:
            self.on_sequence_error(src_ip, dqpn, account.gap[0], account.gap[1])
        carried = roce.data_bytes(payload_length, msg_bytes, offset)
        account.bytes += carried
        # message completion
        message = account.messages.get(msg_id)
        if message is None:
            message = account.messages[msg_id] = [0, tx_ns]
        message[0] += carried
        if tx_ns < message[1]:
            message[1] = tx_ns
        if message[0] >= msg_bytes:
            del account.messages[msg_id]
            account.messages_done += 1
            self.completion_ns.append(now_ns - message[1])
            if self.on_ack_request is not None:
                self.on_ack_request(src_ip, dqpn, msg_id, False)
        # stream progress
        skey = (src_ip, stream)
        progress = self.streams.get(skey)
        if progress is None:
            progress = self.streams[skey] = StreamProgress()
            progress.first_rx_ns = now_ns
            progress.first_tx_ns = tx_ns
        progress.bytes += carried
        progress.packets += 1
        progress.last_rx_ns = now_ns
        if tx_ns < progress.first_tx_ns:
            progress.first_tx_ns = tx_ns
        # timelines
        index = now_ns // self.bin_ns
        slot = self.bins.get(index)
        if slot is None:
            slot = self.bins[index] = [0, 0]
        slot[0] += 1
        slot[1] += carried
        tx_index = tx_ns // self.bin_ns
        self.rx_by_tx_bin[tx_index] = self.rx_by_tx_bin.get(tx_index, 0) + 1
        if len(self.latencies) < MAX_LATENCY_SAMPLES:
            self.latencies.append(now_ns - tx_ns)
        if self.last_arrival_ns is not None and now_ns - self.last_arrival_ns >= self.gap_ns:
            self.gaps.append((self.last_arrival_ns, now_ns))
        if self.first_arrival_ns is None:
            self.first_arrival_ns = now_ns
        if self.last_arrival_ns is None or now_ns > self.last_arrival_ns:
            self.last_arrival_ns = now_ns
        if self.on_data is not None:
            self.on_data(src_ip, stream, progress)
        return True

    def expire(self, now_ns=None):
        """Turn PSN gaps older than the loss timeout into losses; return how many."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        return sum(account.expire(now_ns, self.loss_timeout_ns) for account in self.qps.values())

    def finish(self, now_ns=None):
        """End the run: every PSN still missing is declared lost."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        self.end_ns = now_ns
        for account in self.qps.values():
            account.expire(now_ns + self.loss_timeout_ns + 1, self.loss_timeout_ns)

    def totals(self):
        """Sum of the per-QP counters."""
        names = ("received", "lost", "out_of_sequence", "late", "duplicates", "bytes", "messages_done")
        total = {name: 0 for name in names}
        for account in self.qps.values():
            for name in names:
                total[name] += getattr(account, name)
        total["missing"] = sum(len(account.missing) for account in self.qps.values())
        return total

    def stream_bytes(self, src_ip, stream):
        """Distinct message bytes received so far from ``src_ip`` on ``stream``."""
        progress = self.streams.get((src_ip, stream))
        return 0 if progress is None else progress.bytes

    def report(self):
        """JSON-ready report of everything measured."""
        end_ns = self.end_ns or time.time_ns()
        totals = self.totals()
        first = self.first_arrival_ns
        last = self.last_arrival_ns
        active = max(1e-9, ((last or 0) - (first or 0)) / 1e9)
        bins = sorted(self.bins.items())
        return {
            "role": "receiver",
            "start_ns": self.start_ns, "end_ns": end_ns,
            "first_rx_ns": first, "last_rx_ns": last,
            "totals": totals,
            "goodput_mbps": totals["bytes"] * 8 / active / 1e6 if first is not None else 0.0,
            "foreign_packets": self.foreign, "icrc_errors": self.icrc_errors,
            "control_packets": self.control_packets,
            "dscp_counts": {str(k): v for k, v in sorted(self.dscp_counts.items())},
            "ttl_counts": [[src, ttl, count] for (src, ttl), count in sorted(self.ttl_counts.items())],
            "per_qp": [account.as_dict() for account in self.qps.values()],
            "streams": [{"src": src, "stream": stream, "bytes": p.bytes, "packets": p.packets,
                         "first_tx_ns": p.first_tx_ns, "first_rx_ns": p.first_rx_ns,
                         "last_rx_ns": p.last_rx_ns}
                        for (src, stream), p in self.streams.items()],
            "timeline": {"bin_ns": self.bin_ns, "first_bin": bins[0][0] if bins else None,
                         "bins": [[index, packets, data] for index, (packets, data) in bins]},
            "rx_by_tx_bin": {str(k): v for k, v in sorted(self.rx_by_tx_bin.items())},
            "latency_ns": _summary(self.latencies),
            "message_completion_ns": _summary(self.completion_ns),
            "gaps": [[start, stop] for start, stop in self.gaps],
            "gap_threshold_ns": self.gap_ns,
            "qp_gaps": [[start, stop, src, dqpn] for start, stop, src, dqpn in self.qp_gaps],
            "qp_gap_threshold_ns": self.flow_gap_ns,
        }


SO_ATTACH_FILTER = 26


def job_filter_program(job):
    """Classic BPF program accepting IPv4/UDP port 4791 frames whose destination QP's top byte is ``job``.

    Returns:
        list[tuple[int, int, int, int]]: ``(code, jt, jf, k)`` instructions.
    """
    return [
        (0x28, 0, 0, 12),                       # ldh [12]            ethertype
        (0x15, 0, 8, 0x0800),                   # jeq IPv4
        (0x30, 0, 0, 23),                       # ldb [23]            IP protocol
        (0x15, 0, 6, 17),                       # jeq UDP
        (0xB1, 0, 0, 14),                       # ldxb 4*([14]&0xf)   IP header length
        (0x48, 0, 0, 16),                       # ldh [x+16]          UDP destination port
        (0x15, 0, 3, roce.ROCE_UDP_PORT),       # jeq 4791
        (0x50, 0, 0, 14 + 8 + 5),               # ldb [x+27]          BTH destination QP, top byte
        (0x15, 0, 1, job),                      # jeq job
        (0x06, 0, 0, 0x40000),                  # ret whole frame
        (0x06, 0, 0, 0),                        # ret 0: drop
    ]


def attach_filter(sock, program):
    """Attach a classic BPF program to a socket (SO_ATTACH_FILTER)."""
    import ctypes
    import struct

    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code)
    fprog = struct.pack("HL", len(program), ctypes.addressof(buffer))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


ANCILLARY_BYTES = 64  # room for one SO_TIMESTAMPNS control message
#: after packets came, the receiver lets the next ones gather this long before it reads again: one
#: wake-up per batch instead of per packet (on an emulated fabric, a wake-up costs the cores more than
#: handling the packet); arrival times are the kernel's stamps, so batching changes no measurement
RECEIVE_BATCH_S = 0.02


class Capture:
    """A packet source for :class:`RoceReceiver` inside a host.

    Args:
        mode: ``"udp"`` (UDP socket on port 4791) or ``"raw"`` (AF_PACKET on ``intf``).
        intf: interface for raw capture.
        bind_ip: address the UDP socket binds to.
        rcvbuf: socket receive buffer in bytes (SO_RCVBUFFORCE as root).
        job: raw capture only: keep only packets of this traffic job (kernel filter),
            and hold a UDP sink socket on port 4791 so the kernel sends no ICMP errors.
    """

    def __init__(self, mode="udp", intf=None, bind_ip="0.0.0.0", rcvbuf=32 * 1024 * 1024, job=None):
        if mode not in ("udp", "raw"):
            raise ValueError("capture mode must be udp or raw")
        if job is not None and mode != "raw":
            raise ValueError("a job filter needs raw capture")
        self.mode = mode
        self.job = job
        self.sink = None
        if mode == "udp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        else:
            if not intf:
                raise ValueError("raw capture needs an interface")
            self.sock = open_packet_socket(0x0800)
        # frames the kernel dropped at the socket because this process was too slow (raw capture)
        self.socket_drops = SocketDrops(self.sock) if mode == "raw" else None
        try:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, 33, rcvbuf)  # SO_RCVBUFFORCE
            except OSError:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            if mode == "udp":
                self.sock.bind((bind_ip, roce.ROCE_UDP_PORT))
            else:
                if job is not None:
                    attach_filter(self.sock, job_filter_program(job))
                self.sock.bind((intf, 0x0800))  # Python's bind() converts to network order itself
                if job is not None:
                    self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    self.sink.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    self.sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
                    self.sink.bind((bind_ip, roce.ROCE_UDP_PORT))
            # arrival times from the kernel, when it queued the packet: a receiver the machine
            # descheduled for a while still times what arrived meanwhile right (latency, gaps)
            enable_timestamps(self.sock)
        except BaseException:
            self.close()
            raise
        self.buffer = bytearray(65536)
        self.view = memoryview(self.buffer)

    def pump(self, receiver, timeout=0.05, budget=4096):
        """Read every packet waiting (up to ``budget``), waiting at most ``timeout`` for the first.

        Returns:
            int: packets handed to the receiver.
        """
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return 0
        count = 0
        sock = self.sock
        buffer = self.buffer
        view = self.view
        handle = receiver.handle
        time_ns = time.time_ns
        receive = sock.recvmsg_into
        buffers = [buffer]
        raw = self.mode == "raw"
        job = self.job
        while count < budget:
            try:
                length, ancillary, _flags, address = receive(buffers, ANCILLARY_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            now = kernel_stamp(ancillary) if ancillary else None
            if now is None:
                now = time_ns()
            if raw:
                if address[2] in (socket.PACKET_OUTGOING, socket.PACKET_OTHERHOST):
                    continue  # our own frames, and frames a bridge flooded to us for another host
                if length < roce.PAYLOAD_OFFSET or buffer[roce.ETH_LEN + 9] != 17:
                    continue
                ihl = (buffer[roce.ETH_LEN] & 0x0F) * 4
                udp = roce.ETH_LEN + ihl
                if ((buffer[udp + 2] << 8) | buffer[udp + 3]) != roce.ROCE_UDP_PORT:
                    continue
                if job is not None and buffer[udp + roce.UDP_LEN + 5] != job:
                    continue  # another job's packet that came in before the filter was attached
                src_ip = socket.inet_ntoa(bytes(buffer[roce.ETH_LEN + 12:roce.ETH_LEN + 16]))
                ip_total = (buffer[roce.ETH_LEN + 2] << 8) | buffer[roce.ETH_LEN + 3]
                end = min(length, roce.ETH_LEN + ip_total)
                handle(src_ip, view[udp + roce.UDP_LEN:end], end - udp - roce.UDP_LEN, now,
                       frame=view[:end] if receiver.check_icrc else None, dscp=buffer[roce.ETH_LEN + 1] >> 2,
                       ttl=buffer[roce.ETH_LEN + 8])
            else:
                handle(address[0], view, length, now)
            count += 1
        return count

    def close(self):
        """Close the sockets."""
        self.sock.close()
        if self.sink is not None:
            self.sink.close()


def run_receiver(receiver, capture, duration=None, idle_timeout=None, until=None, batch_s=RECEIVE_BATCH_S):
    """Capture into ``receiver`` until a stop condition, then finish it.

    Args:
        receiver: a :class:`RoceReceiver`.
        capture: a :class:`Capture`.
        duration: stop after this many seconds.
        idle_timeout: stop once nothing arrived for this long (after the first packet).
        until: callable returning True to stop.
        batch_s: after a read that got packets, wait until this long after it began before the next.

    Returns:
        dict: the receiver's report.
    """
    start = time.monotonic()
    last_activity = start
    last_expire = start
    while True:
        woke = time.monotonic()
        got = capture.pump(receiver, timeout=0.02)
        now = time.monotonic()
        if got:
            last_activity = now
            if woke + batch_s > now:
                time.sleep(woke + batch_s - now)
                now = time.monotonic()
        if now - last_expire > 0.01:
            receiver.expire()
            last_expire = now
        if duration is not None and now - start >= duration:
            break
        if idle_timeout is not None and receiver.first_arrival_ns is not None and now - last_activity >= idle_timeout:
            break
        if until is not None and until():
            break
    receiver.finish()
    report = receiver.report()
    # the receiving process's own loss (the emulator's, not the network's); None: not measurable
    report["socket_drops"] = capture.socket_drops.read() if capture.socket_drops is not None else None
    return report


def reconcile(sender_report, receiver_report):
    """Count tail losses by comparing a sender's per-QP counts with the receiver's.

    Args:
        sender_report: report of :func:`testbed.traffic.sender.run_sender`.
        receiver_report: report of :class:`RoceReceiver` (the packets of that sender).

    Returns:
        dict: ``sent``, ``received`` and ``lost`` packets (sent - received) per
        QP key ``"dst/dqpn"`` and in total.
    """
    received = {}
    for entry in receiver_report["per_qp"]:
        if entry["src"] == sender_report["src_ip"]:
            received[entry["dqpn"]] = entry["received"]
    per_qp = {}
    for key, entry in sender_report["per_qp"].items():
        got = received.get(entry["dqpn"], 0)
        per_qp[key] = {"sent": entry["packets"], "received": got, "lost": entry["packets"] - got}
    return {"per_qp": per_qp, "sent": sum(v["sent"] for v in per_qp.values()),
            "received": sum(v["received"] for v in per_qp.values()),
            "lost": sum(v["lost"] for v in per_qp.values())}


def build_argument_parser():
    """Argument parser of ``python -m testbed.traffic.receiver``."""
    parser = argparse.ArgumentParser(prog="python -m testbed.traffic.receiver",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--capture", choices=("udp", "raw"), default="udp")
    parser.add_argument("--intf", help="interface (raw capture)")
    parser.add_argument("--duration", type=float,
                        help="stop after this many seconds (SIGTERM/SIGINT also stop it and write the report)")
    parser.add_argument("--idle-timeout", type=float, default=None,
                        help="stop when nothing arrived for this long after the first packet")
    parser.add_argument("--bin-ms", type=float, default=DEFAULT_BIN_MS)
    parser.add_argument("--loss-timeout", type=float, default=DEFAULT_LOSS_TIMEOUT)
    parser.add_argument("--gap-ms", type=float, default=DEFAULT_GAP_MS)
    parser.add_argument("--flow-gap-ms", type=float, default=DEFAULT_FLOW_GAP_MS,
                        help="record a queue pair's delivery gaps at least this long (qp_gaps)")
    parser.add_argument("--check-icrc", action="store_true")
    parser.add_argument("--job", type=int, help="raw capture: keep only this traffic job's packets (0..255)")
    parser.add_argument("--ready-file", help="write 'ready' into this file once the socket is open "
                        "(-: a line on stdout, before the report)")
    parser.add_argument("--json", help="write the report here (default: stdout)")
    return parser


def main(argv=None):
    """Command-line entry point; returns the exit status."""
    args = build_argument_parser().parse_args(argv)
    if args.duration is None and args.idle_timeout is None:
        args.idle_timeout = 2.0
    receiver = RoceReceiver(bin_ms=args.bin_ms, loss_timeout=args.loss_timeout, gap_ms=args.gap_ms,
                            check_icrc=args.check_icrc, flow_gap_ms=args.flow_gap_ms)
    capture = Capture(args.capture, args.intf, job=args.job)
    stop = []
    # SIGTERM / SIGINT end the capture cleanly: the report is still written.
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    try:
        announce(args.ready_file, "ready")
        report = run_receiver(receiver, capture, duration=args.duration, idle_timeout=args.idle_timeout,
                              until=lambda: bool(stop))
    finally:
        capture.close()
    emit_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
