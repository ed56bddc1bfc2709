"""RoCEv2-like sender: prebuilt frames through a raw AF_PACKET socket.

Run inside a Mininet host::

    python -m testbed.traffic.sender --intf h1-eth0 --dst-ip 10.0.0.2 \\
        --dst-mac 00:00:00:00:00:02 --size 1048576 --qps 4 --rate-mbps 200 --json out.json

or call :func:`run_sender` with a :class:`SenderConfig`.

Frames are built with Scapy once per (destination, QP, payload length) as
templates (:class:`testbed.traffic.roce.FramePatcher`); each packet only
patches opcode, PSN and the payload header (sequence, transmit time) and
recomputes the ICRC, then goes out with one ``send`` on a raw socket.  A
token-bucket-like pacer holds the target rate (counted in frame bytes on the
wire, without preamble/FCS); on/off bursts alternate ``on_ms`` of sending with
``off_ms`` of silence.
"""
import argparse
import errno
import math
import random
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

from testbed.errors import ParameterError
from testbed.traffic import qp as qp_module
from testbed.traffic import roce
from testbed.traffic.json_report import DEFAULT_BIN_MS, announce, emit_report
from testbed.traffic.pause import PauseGate


def open_raw_socket(intf, sndbuf=4 * 1024 * 1024):
    """Open an AF_PACKET raw socket bound to ``intf`` for sending frames.

    Returns:
        tuple[socket.socket, str]: the socket and the interface MAC address.

    Raises:
        OSError: if the interface does not exist or raw sockets are not allowed.
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        sock.bind((intf, 0))
        try:
            sock.setsockopt(socket.SOL_SOCKET, 32, sndbuf)  # SO_SNDBUFFORCE (root)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        mac = sock.getsockname()[4]
    except BaseException:
        sock.close()
        raise
    return sock, ":".join(f"{b:02x}" for b in mac[:6])


def interface_ipv4(intf):
    """IPv4 address of ``intf`` in the current network namespace (SIOCGIFADDR)."""
    import fcntl
    import struct

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        answer = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", intf.encode()[:15]))
    finally:
        probe.close()
    return socket.inet_ntoa(answer[20:24])


@dataclass
class Endpoint:
    """A host as a traffic endpoint.

    Attributes:
        rank: index of the host in its group (used for QP numbers).
        ip: IPv4 address.
        mac: MAC address of its fabric interface.
    """

    rank: int
    ip: str
    mac: str


class Transfer:
    """Bytes one host sends to one peer as RDMA WRITE messages over its QPs.

    Args:
        src: the sending :class:`Endpoint`.
        dst: the receiving :class:`Endpoint`.
        queue_pairs: the QPs of this NIC pair (from :func:`qp.make_queue_pairs`).
        stream: stream id written into every packet (the receiver groups bytes by it).
        message_sizes: sizes of the messages to post.
        strategy: QP-scaling strategy (``roundrobin`` or ``split``).
        mtu: path MTU.
        first_qp: QP that takes the first message under round-robin.
    """

    def __init__(self, src, dst, queue_pairs, stream, message_sizes, strategy="roundrobin",
                 mtu=roce.DEFAULT_MTU, first_qp=0):
        self.src = src
        self.dst = dst
        self.queue_pairs = queue_pairs
        self.stream = stream
        self.mtu = mtu
        self.total_bytes = sum(message_sizes)
        self.per_qp_messages = qp_module.assign_messages(message_sizes, len(queue_pairs), strategy, mtu,
                                                         first_qp=first_qp)

    def packet_queues(self):
        """Per-QP packet lists (consumes PSNs of the QPs)."""
        queues = []
        for queue_pair, sizes in zip(self.queue_pairs, self.per_qp_messages):
            packets = []
            for size in sizes:
                packets.extend(qp_module.message_packets(queue_pair, size, self.mtu, tag=self))
            queues.append(packets)
        return queues


class FrameFactory:
    """Caches one Scapy-built template per (destination, QP, payload length)."""

    def __init__(self, src_mac, src_ip, dscp=roce.DSCP_DATA):
        self.src_mac = src_mac
        self.src_ip = src_ip
        self.dscp = dscp
        self._patchers = {}
        self.templates_built = 0

    def patcher(self, dst_mac, dst_ip, queue_pair, payload_length, opcode=roce.OP_RDMA_WRITE_MIDDLE):
        """Return the :class:`roce.FramePatcher` for this packet shape.

        Args:
            dst_mac, dst_ip: destination.
            queue_pair: the QP (source port, destination QP).
            payload_length: RDMA payload bytes.
            opcode: the packet's opcode (decides whether the frame has a RETH).
        """
        extension = roce.extension_length(opcode)
        key = (dst_ip, queue_pair.local_qpn, queue_pair.remote_qpn, payload_length, extension)
        patcher = self._patchers.get(key)
        if patcher is None:
            template = roce.build_frame(self.src_mac, dst_mac, self.src_ip, dst_ip, queue_pair.udp_sport,
                                        queue_pair.remote_qpn, queue_pair.next_psn, opcode,
                                        bytes(extension + payload_length), dscp=self.dscp)
            patcher = roce.FramePatcher(template, extension)
            self._patchers[key] = patcher
            self.templates_built += 1
        return patcher


#: lateness thresholds (ms) of the pacing report's ``late_frames``
LATE_MS = (1, 10)
PACING_RULES = ("even", "poisson", "lognormal")  # how a paced sender spaces its frames (Pacer)
#: largest log-scale spread of a log-normal draw (gaps, on/off periods, failure traces): draws stay
#: finite (exp(4 * 9) times the median at the most extreme) and within a factor of about 2,900 of the
#: median for 95 % of them (exp(2 * 4))
MAX_SIGMA = 4.0


class Pacer:
    """Holds a target bit rate and on/off bursts for a stream of frames.

    Args:
        rate_mbps: target rate in Mbit/s; None or 0 sends as fast as possible.
        on_ms: length of an on period (0: always on); with ``on_sigma`` the median of log-normal lengths.
        off_ms: length of an off period; with ``off_sigma`` the median of log-normal lengths.
        burst_bytes: how far the sender may fall behind before it stops catching up.
        pacing: one of :data:`PACING_RULES`: ``even`` gaps of the rate's spacing, ``poisson``
            exponential gaps of that mean, ``lognormal`` log-normal gaps of that mean and log-scale
            spread ``gap_sigma`` (F10's workload model, seed 002 section 7.2).
        gap_sigma: the log-normal gaps' spread (0..MAX_SIGMA).
        on_sigma, off_sigma: the on and off periods' log-normal spreads (0: fixed lengths, on and off
            periods alternate from the start).
        seed: seeds every draw.
    """

    def __init__(self, rate_mbps=None, on_ms=0.0, off_ms=0.0, burst_bytes=64 * 1024, pacing="even", gap_sigma=1.0,
                 on_sigma=0.0, off_sigma=0.0, seed=0):
        self.ns_per_byte = (8000.0 / rate_mbps) if rate_mbps else 0.0
        # poisson: exponential gaps of the same mean (the rate holds on average), so a flow's idle gaps
        # span every length a flowlet interval may have; lognormal: heavier-tailed gaps of that mean
        self.random = random.Random(seed)
        self.pacing = pacing
        # log-normal gaps as multiples of the rate's spacing: mu = -sigma^2 / 2 makes their mean 1
        self.gap_sigma = gap_sigma
        self.on_ns = int(on_ms * 1e6)
        self.off_ns = int(off_ms * 1e6)
        self.on_sigma, self.off_sigma = on_sigma, off_sigma
        self.slack_ns = burst_bytes * self.ns_per_byte
        self.origin = time.perf_counter_ns()
        self.next_ns = self.origin
        self.lag_max_ns = 0  # the furthest behind its schedule the sender fell (a busy machine)
        # frames sent at least LATE_MS[i] behind their schedule: a late frame goes out in a catch-up
        # burst, closer to its neighbours than the rate spaces them (a flowlet gap that never was)
        self.late_frames = [0] * len(LATE_MS)
        self.frames = 0
        self.drawn_periods = False  # on/off periods of drawn lengths (else fixed, in phase with the start)
        if self.on_ns and self.off_ns and (on_sigma or off_sigma):
            self.drawn_periods = True
            self.on_until_ns = self.origin + self._draw(self.on_ns, on_sigma)

    def _draw(self, median_ns, sigma):
        """A log-normal length of ``median_ns`` and spread ``sigma`` (exactly the median when sigma is 0)."""
        return int(self.random.lognormvariate(math.log(median_ns), sigma)) if sigma else median_ns

    def wait(self, frame_bytes, deadline_ns=None):
        """Block until a frame of ``frame_bytes`` may go out: its time in the rate's schedule, moved to the
        start of the next on period when it falls in an off period (the schedule restarts there).

        Returns:
            bool: True; False at once, without waiting, when that time falls after ``deadline_ns``
            (``time.time_ns``), as the start of an on period after the run's end may.
        """
        now = time.perf_counter_ns()
        at = max(now, self.next_ns) if self.ns_per_byte else now
        resume = self._in_on_period(at)
        if deadline_ns is not None and time.time_ns() + (resume - now) > deadline_ns:
            return False
        if self.ns_per_byte:
            self.frames += 1
            if now > self.next_ns:
                self.lag_max_ns = max(self.lag_max_ns, now - self.next_ns)
                for index, limit_ms in enumerate(LATE_MS):
                    if now - self.next_ns >= limit_ms * 1_000_000:
                        self.late_frames[index] += 1
            if self.next_ns < now - self.slack_ns:
                self.next_ns = now  # at is now already: too far behind to catch up, start again from here
        if resume > at:
            self.next_ns = resume
        if resume > now:
            self._sleep_until(resume)
        if self.ns_per_byte:
            spacing_ns = frame_bytes * self.ns_per_byte
            if self.pacing == "poisson":
                spacing_ns = self.random.expovariate(1.0 / spacing_ns)
            elif self.pacing == "lognormal":
                spacing_ns *= self.random.lognormvariate(-self.gap_sigma ** 2 / 2, self.gap_sigma)
            self.next_ns += spacing_ns
        return True

    def _in_on_period(self, at):
        """``at``, or the start of the first on period after it when it falls in an off period."""
        if self.drawn_periods:
            while at >= self.on_until_ns:  # draw off and on periods until one holds ``at``
                on_start = self.on_until_ns + self._draw(self.off_ns, self.off_sigma)
                self.on_until_ns = on_start + self._draw(self.on_ns, self.on_sigma)
                at = max(at, on_start)
        elif self.on_ns and self.off_ns:
            period = self.on_ns + self.off_ns
            phase = (at - self.origin) % period
            if phase >= self.on_ns:
                at += period - phase
        return at

    @staticmethod
    def _sleep_until(target_ns):
        # sleep, never spin: on an emulated fabric the switches need the cores more than the
        # sender needs microsecond pacing (a late wake-up is caught up by the next frames)
        remaining = target_ns - time.perf_counter_ns()
        if remaining > 0:
            time.sleep(remaining / 1e9)


@dataclass
class SendStats:
    """Counters of one sender run.

    Attributes:
        packets: frames sent.
        bytes: frame bytes sent.
        data_bytes: message bytes sent.
        errors: frames the socket refused after retries.
        per_qp: per destination QP: packets, first/last PSN, messages, ``last_tx_ns`` (its last frame's
            send time: with on/off periods a QP may fall silent long before the sender ends).
        sent_bins: packets sent per transmit-time bin (absolute index tx_ns // bin_ns).
    """

    bin_ns: int = int(DEFAULT_BIN_MS * 1e6)
    packets: int = 0
    bytes: int = 0
    data_bytes: int = 0
    errors: int = 0
    start_ns: int = 0
    end_ns: int = 0
    per_qp: dict = field(default_factory=dict)
    sent_bins: dict = field(default_factory=dict)

    def as_dict(self):
        """JSON-ready dict of the counters."""
        seconds = max(1e-9, (self.end_ns - self.start_ns) / 1e9)
        return {
            "packets": self.packets, "bytes": self.bytes, "data_bytes": self.data_bytes,
            "errors": self.errors, "start_ns": self.start_ns, "end_ns": self.end_ns,
            "seconds": seconds, "rate_mbps": self.bytes * 8 / seconds / 1e6,
            "pps": self.packets / seconds, "bin_ns": self.bin_ns,
            "per_qp": self.per_qp,
            "sent_bins": {str(k): v for k, v in sorted(self.sent_bins.items())},
        }


def send_frame(sock, frame, retries=200):
    """Send one frame, retrying briefly when the socket buffer is full.

    Returns:
        bool: True if sent.
    """
    for _ in range(retries):
        try:
            sock.send(frame)
            return True
        except OSError as error:
            if error.errno not in (errno.ENOBUFS, errno.EAGAIN):
                raise
            time.sleep(0.0001)
    return False


def transmit(sock, packets, factory, pacer=None, stats=None, deadline_ns=None, kind=roce.KIND_DATA, gate=None):
    """Send packet specs in order as frames.

    Args:
        sock: raw socket from :func:`open_raw_socket`.
        packets: iterable of :class:`qp.PacketSpec` whose ``tag`` is a :class:`Transfer`.
        factory: the :class:`FrameFactory`.
        pacer: optional :class:`Pacer`.
        stats: :class:`SendStats` to update (created if None).
        deadline_ns: stop once ``time.time_ns()`` passes this.
        kind: payload header kind.
        gate: a :class:`~testbed.traffic.pause.PauseGate`: each frame waits while the ToR pauses
            the sender's class (the pacer's schedule restarts after a pause), or None.

    Returns:
        SendStats
    """
    stats = stats or SendStats()
    if not stats.start_ns:
        stats.start_ns = time.time_ns()
    bin_ns = stats.bin_ns
    sent_bins = stats.sent_bins
    per_qp = stats.per_qp
    time_ns = time.time_ns
    pack = roce.pack_header
    pack_reth = roce.pack_reth
    for spec in packets:
        transfer = spec.tag
        queue_pair = spec.qp
        opcode = spec.opcode
        patcher = factory.patcher(transfer.dst.mac, transfer.dst.ip, queue_pair, spec.payload_length, opcode)
        if gate is not None and gate.wait(deadline_ns) and pacer is not None:
            pacer.next_ns = time.perf_counter_ns()   # held by PFC, not behind its schedule
        if pacer is not None and not pacer.wait(patcher.length, deadline_ns):
            break  # its time comes after the end (an off period running past it)
        now = time_ns()
        if deadline_ns is not None and now >= deadline_ns:
            break
        frame = patcher.frame(opcode, spec.psn,
                              pack(kind, transfer.stream, spec.msg_id, spec.seq, now, spec.msg_bytes,
                                   spec.offset),
                              spec.ackreq,
                              pack_reth(queue_pair.remote_qpn, spec.msg_bytes) if patcher.with_reth else None)
        if not send_frame(sock, frame):
            stats.errors += 1
            continue
        stats.packets += 1
        stats.bytes += patcher.length
        stats.data_bytes += roce.data_bytes(spec.payload_length, spec.msg_bytes, spec.offset)
        index = now // bin_ns
        sent_bins[index] = sent_bins.get(index, 0) + 1
        key = f"{transfer.dst.ip}/{queue_pair.remote_qpn}"
        entry = per_qp.get(key)
        if entry is None:
            entry = per_qp[key] = {"dst": transfer.dst.ip, "dqpn": queue_pair.remote_qpn,
                                   "sport": queue_pair.udp_sport, "packets": 0, "first_psn": spec.psn,
                                   "first_seq": spec.seq, "messages": 0}
        entry["packets"] += 1
        entry["last_psn"] = spec.psn
        entry["last_seq"] = spec.seq
        entry["last_tx_ns"] = now
        if spec.ackreq:
            entry["messages"] += 1
    stats.end_ns = time_ns()
    return stats


@dataclass
class SenderConfig:
    """What one standalone sender does.

    Attributes:
        intf: interface to send on.
        dst_ip / dst_mac: destination host.
        src_ip: source IP (default: the interface's address).
        src_rank / dst_rank: ranks for QP numbering.
        size: message size in bytes.
        messages: number of messages (default: one per QP); with ``duration`` the
            messages repeat until the time is up.
        qps: number of queue pairs.
        qp_scaling: ``roundrobin`` or ``split``.
        rate_mbps: target rate (None: as fast as possible).
        duration: seconds to keep sending (None: send the messages once).
        on_ms / off_ms: on/off bursts.
        mtu: path MTU.
        stream: stream id in the packets.
        bin_ms: bin of the sent-packet timeline.
        start_psn: force the start PSN of every QP (tests of the wrap).
        seed: varies the start PSNs.
        job: traffic job number (0..255): the top byte of the QP numbers.
        udp_sport: UDP source-port rule, ``per_qp`` or ``per_nic_pair``
            (:data:`testbed.traffic.qp.UDP_SPORT_RULES`).
        start_at_ns: wall-clock time (ns since the epoch) of the first packet: the sender
            prepares (socket, QPs, frames), tells ``on_ready``, then waits for it; None: at once.
        pfc: honour PFC PAUSE frames from the ToR for class :data:`testbed.traffic.pause.DATA_PRIORITY`.
        pacing: ``even`` (frames evenly spaced at the rate), ``poisson`` (exponential gaps of the
            same mean) or ``lognormal`` (log-normal gaps of that mean and spread ``gap_sigma``), seeded
            by ``seed``.
        gap_sigma: log-scale spread of ``lognormal`` gaps (0..MAX_SIGMA).
        on_sigma, off_sigma: log-scale spreads of the on and off periods, whose medians are ``on_ms``
            and ``off_ms`` (0: fixed lengths).
    """

    intf: str
    dst_ip: str
    dst_mac: str
    src_ip: Optional[str] = None
    src_rank: int = 0
    dst_rank: int = 1
    size: int = 1 << 20
    messages: Optional[int] = None
    qps: int = 1
    qp_scaling: str = "roundrobin"
    rate_mbps: Optional[float] = None
    duration: Optional[float] = None
    on_ms: float = 0.0
    off_ms: float = 0.0
    mtu: int = roce.DEFAULT_MTU
    stream: int = 0
    bin_ms: float = DEFAULT_BIN_MS
    start_psn: Optional[int] = None
    seed: int = 0
    job: int = 0
    udp_sport: str = qp_module.UDP_SPORT_PER_QP
    start_at_ns: Optional[int] = None
    pfc: bool = True
    pacing: str = "even"
    gap_sigma: float = 1.0
    on_sigma: float = 0.0
    off_sigma: float = 0.0


def run_sender(config, on_ready=None, start_time=None):
    """Run a sender as configured and return its JSON-ready report.

    Args:
        config: the :class:`SenderConfig`.
        on_ready: optional callable run once the socket is open, just before the first packet
            (before waiting for ``config.start_at_ns``).
        start_time: optional callable run after ``on_ready`` that blocks until the start time is
            known and returns it (wall-clock ns; it replaces ``config.start_at_ns``).

    Raises:
        ParameterError: on impossible settings (size < 1, qps out of range, rate <= 0,
            job out of range), naming the option.
    """
    if config.size < 1:
        raise ParameterError("--size", config.size, "an integer >= 1 (bytes)")
    if not 1 <= config.qps < qp_module.MAX_QPS:
        raise ParameterError("--qps", config.qps, f"an integer in 1..{qp_module.MAX_QPS - 1}")
    if config.rate_mbps is not None and not config.rate_mbps > 0:
        raise ParameterError("--rate-mbps", config.rate_mbps, "a number > 0 (Mbit/s)")
    if not 0 <= config.job <= qp_module.MAX_JOB:
        raise ParameterError("--job", config.job, f"an integer in 0..{qp_module.MAX_JOB}")
    if config.qp_scaling not in qp_module.QP_SCALING_STRATEGIES:
        raise ParameterError("--qp-scaling", config.qp_scaling, ", ".join(qp_module.QP_SCALING_STRATEGIES))
    if config.udp_sport not in qp_module.UDP_SPORT_RULES:
        raise ParameterError("--udp-sport", config.udp_sport, ", ".join(qp_module.UDP_SPORT_RULES))
    if config.pacing not in PACING_RULES:
        raise ParameterError("--pacing", config.pacing, ", ".join(PACING_RULES))
    for option, sigma in (("--gap-sigma", config.gap_sigma), ("--on-sigma", config.on_sigma),
                          ("--off-sigma", config.off_sigma)):
        if not 0 <= sigma <= MAX_SIGMA:
            raise ParameterError(option, sigma, f"a number in [0, {MAX_SIGMA}] (log-scale spread)")
    sock, src_mac = open_raw_socket(config.intf)
    gate = None
    try:
        if config.pfc:
            gate = PauseGate(config.intf)
        src_ip = config.src_ip or interface_ipv4(config.intf)
        src = Endpoint(config.src_rank, src_ip, src_mac)
        dst = Endpoint(config.dst_rank, config.dst_ip, config.dst_mac)
        queue_pairs = qp_module.make_queue_pairs(src.rank, dst.rank, config.qps, seed=config.seed,
                                                 start_psn=config.start_psn, job=config.job,
                                                 udp_sport=config.udp_sport)
        factory = FrameFactory(src_mac, src_ip)
        stats = SendStats(bin_ns=int(config.bin_ms * 1e6))
        count = config.messages or config.qps
        if on_ready is not None:
            on_ready()
        start_at_ns = start_time() if start_time is not None else config.start_at_ns
        if start_at_ns is not None:
            wait_s = (start_at_ns - time.time_ns()) / 1e9
            if wait_s > 0:
                time.sleep(wait_s)
        pacer = Pacer(config.rate_mbps, config.on_ms, config.off_ms, pacing=config.pacing, gap_sigma=config.gap_sigma,
                      on_sigma=config.on_sigma, off_sigma=config.off_sigma, seed=config.seed)  # its schedule starts now
        deadline = None if config.duration is None else time.time_ns() + int(config.duration * 1e9)
        rounds = 0
        rr_next = 0
        while True:
            transfer = Transfer(src, dst, queue_pairs, config.stream, [config.size] * count,
                                config.qp_scaling, config.mtu, first_qp=rr_next)
            rr_next = (rr_next + count) % config.qps
            transmit(sock, qp_module.interleave(transfer.packet_queues()), factory, pacer, stats, deadline,
                     gate=gate)
            rounds += 1
            if deadline is None or time.time_ns() >= deadline:
                break
        report = {"role": "sender", "job": config.job, "src_ip": src_ip, "src_mac": src_mac, "dst_ip": config.dst_ip,
                  "intf": config.intf, "qps": config.qps, "qp_scaling": config.qp_scaling,
                  "udp_sport": config.udp_sport, "message_bytes": config.size, "rounds": rounds,
                  "templates_built": factory.templates_built,
                  # how far behind its schedule the sender fell at worst (it was starved of CPU)
                  "pacing_lag_max_ms": pacer.lag_max_ns / 1e6,
                  # paced frames, and those sent at least 1 / 10 ms behind their schedule
                  "paced_frames": pacer.frames,
                  "late_frames": {str(limit): count for limit, count in zip(LATE_MS, pacer.late_frames)}}
        report.update(stats.as_dict())
        if gate is not None:
            report.update(gate.report())
        return report
    finally:
        if gate is not None:
            gate.close()
        sock.close()


def build_argument_parser():
    """Argument parser of ``python -m testbed.traffic.sender``."""
    parser = argparse.ArgumentParser(prog="python -m testbed.traffic.sender", description=__doc__.split("\n")[0])
    parser.add_argument("--intf", required=True)
    parser.add_argument("--dst-ip", required=True)
    parser.add_argument("--dst-mac", required=True)
    parser.add_argument("--src-ip")
    parser.add_argument("--src-rank", type=int, default=0)
    parser.add_argument("--dst-rank", type=int, default=1)
    parser.add_argument("--size", type=int, default=1 << 20, help="message size in bytes")
    parser.add_argument("--messages", type=int, help="messages to post (default: one per QP)")
    parser.add_argument("--qps", type=int, default=1)
    parser.add_argument("--qp-scaling", choices=qp_module.QP_SCALING_STRATEGIES, default="roundrobin")
    parser.add_argument("--rate-mbps", type=float)
    parser.add_argument("--duration", type=float, help="seconds to keep sending")
    parser.add_argument("--on-ms", type=float, default=0.0)
    parser.add_argument("--off-ms", type=float, default=0.0)
    parser.add_argument("--mtu", type=int, default=roce.DEFAULT_MTU)
    parser.add_argument("--stream", type=int, default=0)
    parser.add_argument("--bin-ms", type=float, default=DEFAULT_BIN_MS)
    parser.add_argument("--start-psn", type=int)
    parser.add_argument("--job", type=int, default=0, help="traffic job number 0..255 (top byte of the QP numbers)")
    parser.add_argument("--udp-sport", choices=qp_module.UDP_SPORT_RULES, default=qp_module.UDP_SPORT_PER_QP,
                        help="UDP source port: per_qp (default, from the QP numbers) or per_nic_pair "
                             "(one port for all QPs between two NICs)")
    parser.add_argument("--pacing", choices=PACING_RULES, default="even",
                        help="even (default), poisson (exponential gaps of the rate's mean spacing) or lognormal "
                             "(log-normal gaps of that mean, spread --gap-sigma)")
    parser.add_argument("--gap-sigma", type=float, default=1.0, help="log-scale spread of lognormal gaps")
    parser.add_argument("--on-sigma", type=float, default=0.0,
                        help="log-scale spread of the on periods (median --on-ms; 0: fixed)")
    parser.add_argument("--off-sigma", type=float, default=0.0,
                        help="log-scale spread of the off periods (median --off-ms; 0: fixed)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the start PSNs and the drawn gaps and periods")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before sending")
    parser.add_argument("--start-at-ns", type=int, help="wall-clock time (ns since the epoch) of the first packet")
    parser.add_argument("--start-at-stdin", action="store_true",
                        help="once ready, read the wall-clock time (ns since the epoch) of the first packet "
                             "from a line on stdin (a run that starts many senders sets it when all are ready)")
    parser.add_argument("--ready-file", help="write 'sending' into this file when ready to send (before waiting "
                        "for the start; -: a line on stdout, before the report)")
    parser.add_argument("--json", help="write the report here (default: stdout)")
    return parser


def read_start_time(stream=None):
    """The start time (ns) from the next line of ``stream`` (stdin).

    Raises:
        ParameterError: the line is not an integer, or the stream ended (the run was aborted).
    """
    line = (stream or sys.stdin).readline()
    if not line.strip():
        raise ParameterError("--start-at-stdin", "end of input", "a line with the start time in ns")
    try:
        return int(line)
    except ValueError:
        raise ParameterError("--start-at-stdin", line.strip(), "an integer (ns since the epoch)") from None


def main(argv=None):
    """Command-line entry point; returns the exit status."""
    args = build_argument_parser().parse_args(argv)
    if args.delay:
        time.sleep(args.delay)
    config = SenderConfig(intf=args.intf, dst_ip=args.dst_ip, dst_mac=args.dst_mac, src_ip=args.src_ip,
                          src_rank=args.src_rank, dst_rank=args.dst_rank, size=args.size,
                          messages=args.messages, qps=args.qps, qp_scaling=args.qp_scaling,
                          rate_mbps=args.rate_mbps, duration=args.duration, on_ms=args.on_ms,
                          off_ms=args.off_ms, mtu=args.mtu, stream=args.stream, bin_ms=args.bin_ms,
                          start_psn=args.start_psn, job=args.job, udp_sport=args.udp_sport,
                          start_at_ns=args.start_at_ns, pacing=args.pacing, gap_sigma=args.gap_sigma,
                          on_sigma=args.on_sigma, off_sigma=args.off_sigma, seed=args.seed)
    try:
        report = run_sender(config, on_ready=lambda: announce(args.ready_file, "sending"),
                            start_time=read_start_time if args.start_at_stdin else None)
    except ParameterError as error:
        print(f"sender: error: {error}", file=sys.stderr)
        return 2
    emit_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
