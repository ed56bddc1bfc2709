"""Per-host agent that executes one rank's steps of a collective.

Started by :func:`testbed.traffic.collectives.run_collective` inside a host::

    python -m testbed.traffic.agent --plan -

Protocol on stdin/stdout: the agent reads its plan (one JSON line; or from a
file with ``--plan PATH``), opens its sockets and prints ``READY``; it reads
``GO <start_ns>``, waits for that instant (hosts share the clock), runs its
steps and prints ``DONE``; it keeps receiving (and acknowledging
retransmissions) until it reads ``EXIT``, then prints its JSON report (one
line) and exits.

A receiver thread captures RoCEv2 packets (raw socket, kernel-filtered on
the run's traffic job, see :mod:`testbed.traffic.qp`) and accounts them
(:class:`testbed.traffic.receiver.RoceReceiver`); the main thread sends.  A
step ends when everything it sends is sent and every byte it expects has
arrived - or when nothing arrived for ``step_timeout`` seconds, in which case
the step (and the rank) is marked incomplete; without retransmission the next
step starts anyway, with it the rank gives the collective up (``aborted``),
as a collective library does when a queue pair fails.

Reliable connection (``retransmit=True``, the default), at message
granularity: the receiver sends an ACKNOWLEDGE packet (BTH opcode 0x11 + AETH
syndrome 0, DSCP :data:`testbed.traffic.roce.DSCP_CONTROL`) for every
completed message, and a NAK (AETH syndrome 0x60, PSN sequence error) naming
the missing packets whenever an arrival opens a PSN gap.  The sender keeps
each message until it is acknowledged; it sends a message again, with the
same PSNs, at once when a NAK names one of its packets, or when its ACK timer
expires (``ack_timeout``, doubling per retry up to 4x, at most ``retry_count`` retries
- the NIC's local ACK timeout and retry count; any ACK on the same QP
restarts the timer, so a slow but progressing receiver causes no
retransmission).  The receiver then counts the packets it already had as
duplicates and the missing ones as late, as an RDMA NIC does.  The sender
counts ``local_ack_timeouts`` (seed 004 6.3.1), NAKs and retransmitted
packets.  Retransmissions are serviced every few new data packets too, so a
rank busy posting new steps still resends a NAK'd message at once; the
report's ``events`` lists when NAKs arrived and messages were resent.

Receiver-driven admission: every chunk (``chunk_bytes`` of a step's transfer
to a peer) waits for a clear-to-send control packet from its receiver; a
receiver grants ``channels`` chunks ahead per peer and one more each time a
chunk completes; a grant that brings no data within ``ack_timeout`` is sent
again (a CTS can be lost like any packet).
"""
import argparse
import itertools
import json
import select
import sys
import threading
import time

from testbed.traffic import qp as qp_module
from testbed.traffic import roce
from testbed.traffic.collectives import STEP_SHIFT
from testbed.traffic.pause import PauseGate
from testbed.traffic.receiver import Capture, RoceReceiver
from testbed.traffic.sender import Endpoint, FrameFactory, Pacer, SendStats, Transfer, open_raw_socket, send_frame, \
    transmit

CONTROL_QP_INDEX = qp_module.MAX_QPS - 1
"""QP index used for control packets (CTS) between two hosts."""
RETRANSMIT_CHECK_PACKETS = 16
"""New data packets sent between two looks at the retransmission queue."""
MAX_EVENTS = 2000
"""Reliability events kept per agent (report ``events``)."""


def chunk_sizes(amount, chunk_bytes):
    """Split ``amount`` bytes into chunks of at most ``chunk_bytes``."""
    full, rest = divmod(amount, chunk_bytes)
    return [chunk_bytes] * full + ([rest] if rest else [])


class Agent:
    """Runs the steps of one rank (see module docstring).

    Args:
        spec: the plan dict written by ``run_collective``.
    """

    def __init__(self, spec):
        self.spec = spec
        self.rank = spec["rank"]
        self.peers = [Endpoint(p["rank"], p["ip"], p["mac"]) for p in spec["peers"]]
        self.rank_of_ip = {p.ip: p.rank for p in self.peers}
        self.me = self.peers[self.rank]
        self.admission = bool(spec.get("admission"))
        self.channels = max(1, int(spec.get("channels", 2)))
        self.chunk_bytes = int(spec.get("chunk_bytes", 65536))
        self.mtu = int(spec.get("mtu", roce.DEFAULT_MTU))
        self.qps = int(spec.get("qps", 1))
        self.strategy = spec.get("qp_scaling", "roundrobin")
        self.udp_sport = spec.get("udp_sport", qp_module.UDP_SPORT_PER_QP)
        self.step_timeout = float(spec.get("step_timeout", 3.0))
        self.job = int(spec.get("job", 0))
        self.retransmit = bool(spec.get("retransmit", True))
        self.ack_timeout_ns = int(float(spec.get("ack_timeout", 0.5)) * 1e9)
        self.retry_count = int(spec.get("retry_count", 7))
        self.cond = threading.Condition()
        self.stop_event = threading.Event()
        self.granted = set()  # (peer rank, stream) this rank may send
        self.expected_chunks = {}  # (src ip, stream) -> (size, src rank) for admission
        self.pending_grants = {}  # src rank -> list of streams still to grant, in order
        self.completed_chunks = set()
        self.grant_times = {}  # (src rank, stream) -> when its CTS was (last) sent
        # (peer rank, local qpn, msg_id) -> [packets, deadline_ns or None, retries, first_seq, end_seq, nak'd]
        self.outstanding = {}
        self.last_ack_ns = {}  # (peer rank, local qpn) -> when an ACK last arrived for that QP
        self.counters = {"cts_sent": 0, "acks_sent": 0, "acks_received": 0, "naks_sent": 0, "naks_received": 0,
                         "local_ack_timeouts": 0, "retransmitted_packets": 0, "retry_exhausted": 0,
                         "cts_resent": 0}
        # reliability events for diagnosis: [time_ns, event, peer, qpn, msg_id or first seq, retries or count]
        self.events = []
        self.queue_pairs = {}
        self.control_qps = {}
        self.rr_next = {}
        self.sock = None
        self.gate = None
        self.capture = None
        self.thread = None
        self.receiver = RoceReceiver(bin_ms=float(spec.get("bin_ms", 10.0)),
                                     loss_timeout=float(spec.get("loss_timeout", 0.2)),
                                     on_control=self._on_control,
                                     on_data=self._on_data if self.admission else None,
                                     on_ack_request=self._on_ack_request if self.retransmit else None,
                                     on_sequence_error=self._on_sequence_error if self.retransmit else None)
        self.stats = SendStats(bin_ns=self.receiver.bin_ns)
        self.pacer = Pacer(spec.get("rate_mbps"))
        self.control_lock = threading.Lock()

    # -- setup -------------------------------------------------------------
    def open(self):
        """Open the sockets and start the receiver thread."""
        self.sock, mac = open_raw_socket(self.spec["intf"])
        self.gate = PauseGate(self.spec["intf"])   # the ToR's PFC PAUSE frames hold data sending
        self.data_frames = FrameFactory(mac, self.me.ip, roce.DSCP_DATA)
        self.control_frames = FrameFactory(mac, self.me.ip, roce.DSCP_CONTROL)
        # raw capture with a kernel filter on this job: other jobs may run in the same host
        self.capture = Capture("raw", self.spec["intf"], job=self.job)
        self.thread = threading.Thread(target=self._receive_loop, name="receiver", daemon=True)
        self.thread.start()

    def close(self):
        """Stop the receiver thread and close the sockets."""
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=2)
        if self.capture is not None:
            self.capture.close()
        if self.sock is not None:
            self.sock.close()
        if self.gate is not None:
            self.gate.close()

    def _receive_loop(self):
        last_expire = time.monotonic()
        sock = self.capture.sock
        while not self.stop_event.is_set():
            ready, _, _ = select.select([sock], [], [], 0.01)
            with self.cond:
                if ready:
                    self.capture.pump(self.receiver, timeout=0)
                now = time.monotonic()
                if now - last_expire > 0.01:
                    self.receiver.expire()
                    last_expire = now
                self.cond.notify_all()

    # -- queue pairs ---------------------------------------------------------
    def _data_qps(self, peer):
        pairs = self.queue_pairs.get(peer)
        if pairs is None:
            pairs = self.queue_pairs[peer] = qp_module.make_queue_pairs(self.rank, peer, self.qps,
                                                                        seed=int(self.spec.get("seed", 0)),
                                                                        job=self.job, udp_sport=self.udp_sport)
        return pairs

    def _control_qp(self, peer):
        pair = self.control_qps.get(peer)
        if pair is None:
            pair = self.control_qps[peer] = qp_module.QueuePair(
                local_qpn=qp_module.queue_pair_number(self.rank, peer, CONTROL_QP_INDEX, self.job),
                remote_qpn=qp_module.queue_pair_number(peer, self.rank, CONTROL_QP_INDEX, self.job),
                index=CONTROL_QP_INDEX)
        return pair

    # -- control -------------------------------------------------------------
    def _on_control(self, src_ip, kind, fields):
        """Receiver-thread callback (lock held): CTS grants and ACKs."""
        peer = self.rank_of_ip.get(src_ip)
        if peer is None:
            return
        if kind == roce.KIND_CTS:
            self.granted.add((peer, fields[3]))
        elif kind == roce.KIND_ACK:
            # an ACK names the acknowledged message: msg_bytes carries our local QPN, msg_id the message
            self.counters["acks_received"] += 1
            self.outstanding.pop((peer, fields[7], fields[4]), None)
            self.last_ack_ns[(peer, fields[7])] = time.time_ns()
        elif kind == roce.KIND_NAK:
            # a NAK names our QP (msg_bytes) and the missing sequences [stream, stream + offset)
            self.counters["naks_received"] += 1
            qpn, first, end = fields[7], fields[3], fields[3] + fields[8]
            self._event("nak_received", peer, qpn, first, end - first)
            for key, entry in self.outstanding.items():
                if key[0] == peer and key[1] == qpn and entry[3] < end and first < entry[4]:
                    entry[5] = True

    def _on_data(self, src_ip, stream, progress):
        """Receiver-thread callback (lock held): grant the next chunk when one completes."""
        key = (src_ip, stream)
        expected = self.expected_chunks.get(key)
        if expected is None or key in self.completed_chunks or progress.bytes < expected[0]:
            return
        self.completed_chunks.add(key)
        self._grant_next(expected[1])

    def _grant_next(self, peer):
        """Send the next clear-to-send owed to ``peer``, if any (lock held)."""
        queue = self.pending_grants.get(peer)
        if queue:
            stream = queue.pop(0)
            self.grant_times[(peer, stream)] = time.time_ns()
            self._send_control(peer, roce.KIND_CTS, stream)

    def _service_grants(self):
        """Grant again every chunk whose clear-to-send brought no data within the ACK timeout.

        A CTS can be lost like any packet; the sender treats a repeated grant as the same one.
        """
        if not self.admission:
            return
        now = time.time_ns()
        with self.cond:
            for (peer, stream), granted_at in list(self.grant_times.items()):
                key = (self.peers[peer].ip, stream)
                if key in self.completed_chunks or self.receiver.stream_bytes(*key) > 0:
                    del self.grant_times[(peer, stream)]
                elif now - granted_at > self.ack_timeout_ns:
                    self.grant_times[(peer, stream)] = now
                    self.counters["cts_resent"] += 1
                    self._send_control(peer, roce.KIND_CTS, stream)

    def _on_ack_request(self, src_ip, dqpn, msg_id, duplicate):
        """Receiver-thread callback (lock held): acknowledge a completed message."""
        peer = self.rank_of_ip.get(src_ip)
        if peer is None:
            return
        # our QPN dqpn = BASE + peer * MAX + j; the sender's QPN is BASE + rank * MAX + j
        index = (dqpn - qp_module.QPN_BASE) % qp_module.MAX_QPS
        sender_qpn = qp_module.queue_pair_number(peer, self.rank, index, self.job)
        self._send_control(peer, roce.KIND_ACK, 0, msg_id=msg_id, acked_qpn=sender_qpn)

    def _on_sequence_error(self, src_ip, dqpn, first_seq, end_seq):
        """Receiver-thread callback (lock held): NAK a PSN gap to its sender."""
        peer = self.rank_of_ip.get(src_ip)
        if peer is None:
            return
        index = (dqpn - qp_module.QPN_BASE) % qp_module.MAX_QPS
        sender_qpn = qp_module.queue_pair_number(peer, self.rank, index, self.job)
        self._send_control(peer, roce.KIND_NAK, first_seq, acked_qpn=sender_qpn, count=end_seq - first_seq)

    def _send_control(self, peer, kind, stream, msg_id=0, acked_qpn=0, count=0):
        """Send a CTS (SEND ONLY) or an ACK / NAK (ACKNOWLEDGE + AETH) to ``peer`` on the control class."""
        with self.control_lock:  # both threads send control packets; frame buffers are shared
            if kind in (roce.KIND_ACK, roce.KIND_NAK):
                pair = qp_module.QueuePair(local_qpn=qp_module.queue_pair_number(self.rank, peer, 0, self.job),
                                           remote_qpn=acked_qpn)
                opcode = roce.OP_ACKNOWLEDGE
                syndrome = roce.AETH_SYNDROME_ACK if kind == roce.KIND_ACK else \
                    roce.AETH_SYNDROME_NAK_PSN_SEQUENCE_ERROR
                extension = roce.pack_aeth(msg_id, syndrome)
            else:
                pair = self._control_qp(peer)
                opcode = roce.OP_SEND_ONLY
                extension = None
            dst = self.peers[peer]
            patcher = self.control_frames.patcher(dst.mac, dst.ip, pair, roce.HEADER.size, opcode)
            psn = self._control_qp(peer).take_psns(1)
            header = roce.pack_header(kind, stream, msg_id, self._control_qp(peer).next_seq - 1, time.time_ns(),
                                      acked_qpn, count)
            send_frame(self.sock, patcher.frame(opcode, psn, header, False, extension))
            self.counters[{roce.KIND_ACK: "acks_sent", roce.KIND_NAK: "naks_sent"}.get(kind, "cts_sent")] += 1

    # -- sending and retransmission ------------------------------------------
    def _send_chunks(self, chunks):
        """Send chunks ``[(peer, stream, size)]`` interleaved over all peers' QPs."""
        # one queue per (peer, QP): a QP sends its messages in posting order, the NIC
        # interleaves packets of different QPs
        per_qp = {}
        messages = {}
        for peer, stream, size in chunks:
            pairs = self._data_qps(peer)
            first = self.rr_next.get(peer, 0)
            transfer = Transfer(self.me, self.peers[peer], pairs, stream, [size], self.strategy, self.mtu,
                                first_qp=first)
            self.rr_next[peer] = (first + 1) % len(pairs)
            for queue in transfer.packet_queues():
                for packet in queue:
                    per_qp.setdefault((peer, packet.qp.local_qpn), []).append(packet)
                    messages.setdefault((peer, packet.qp.local_qpn, packet.msg_id), []).append(packet)
        queues = list(per_qp.values())
        if self.retransmit:
            with self.cond:
                for key, packets in messages.items():
                    self.outstanding[key] = [packets, None, 0, packets[0].seq, packets[-1].seq + 1, False]
        # no lock around the data path: packet-socket sends are atomic
        packets = qp_module.interleave(queues)
        if not self.retransmit:
            transmit(self.sock, packets, self.data_frames, self.pacer, self.stats, gate=self.gate)
            return
        # A NIC resends NAK'd or timed-out messages while it keeps sending new ones; a paced
        # step takes long (128 KiB at 4 Mbit/s: 0.26 s, and a rank whose input is ready runs its
        # steps back to back), so look at the retransmission queue every few packets instead
        # of only when the rank waits for data.
        while True:
            burst = list(itertools.islice(packets, RETRANSMIT_CHECK_PACKETS))
            if not burst:
                break
            transmit(self.sock, burst, self.data_frames, self.pacer, self.stats, gate=self.gate)
            self._service_retransmissions()
        self._arm(messages, 0)

    def _timeout_ns(self, retries):
        """ACK timeout after ``retries`` retransmissions: doubling, capped at 4x."""
        return self.ack_timeout_ns << min(retries, 2)

    def _arm(self, keys, retries):
        """Start the ACK timers of messages just (re)sent."""
        deadline = time.time_ns() + self._timeout_ns(retries)
        with self.cond:
            for key in keys:
                entry = self.outstanding.get(key)
                if entry is not None:
                    entry[1] = deadline

    def _service_retransmissions(self):
        """Resend every NAK'd message and every message whose ACK timer expired (lock not held)."""
        if not self.retransmit:
            return
        now = time.time_ns()
        due = []
        with self.cond:
            for key, entry in list(self.outstanding.items()):
                if entry[1] is None:
                    continue  # being sent right now
                if entry[5]:  # NAK'd: resend at once, no timeout counted
                    entry[5] = False
                    reason = "resend_nak"
                else:
                    last_ack = self.last_ack_ns.get((key[0], key[1]), 0)
                    if max(entry[1], last_ack + self._timeout_ns(entry[2])) > now:
                        continue
                    self.counters["local_ack_timeouts"] += 1
                    if entry[2] >= self.retry_count:
                        self.counters["retry_exhausted"] += 1
                        self._event("retry_exhausted", key[0], key[1], key[2], entry[2])
                        del self.outstanding[key]
                        continue
                    entry[2] += 1
                    reason = "resend_timeout"
                entry[1] = None
                self._event(reason, key[0], key[1], key[2], entry[2])
                due.append((key, entry[0], entry[2]))
        for key, packets, retries in due:
            self.counters["retransmitted_packets"] += len(packets)
            transmit(self.sock, packets, self.data_frames, self.pacer, self.stats, gate=self.gate)
            self._arm([key], retries)

    def _event(self, kind, peer, qpn, first, value):
        """Record a reliability event (NAK received, resend) for the report; the first MAX_EVENTS only."""
        if len(self.events) < MAX_EVENTS:
            self.events.append([time.time_ns(), kind, peer, qpn, first, value])

    # -- steps ---------------------------------------------------------------
    def run_step(self, index, step):
        """Run one step; return its record."""
        record = {"step": index, "start_ns": time.time_ns(), "complete": True}
        self._service_retransmissions()  # the previous step may have ended without waiting
        recv_streams = []
        with self.cond:
            for src, amount in step["recvs"]:
                sizes = chunk_sizes(amount, self.chunk_bytes)
                streams = [(index << STEP_SHIFT) | number for number in range(len(sizes))]
                for stream, size in zip(streams, sizes):
                    recv_streams.append((self.peers[src].ip, stream))
                    if self.admission:
                        self.expected_chunks[(self.peers[src].ip, stream)] = (size, src)
                if self.admission:
                    self.pending_grants[src] = list(streams)
        if self.admission:
            for src, _ in step["recvs"]:
                for _ in range(self.channels):
                    with self.cond:
                        self._grant_next(src)
        to_send = []
        for dst, amount in step["sends"]:
            for number, size in enumerate(chunk_sizes(amount, self.chunk_bytes)):
                to_send.append((dst, (index << STEP_SHIFT) | number, size))
        expected = sum(amount for _, amount in step["recvs"])
        record["expected_bytes"] = expected
        record["sent_bytes"] = sum(size for _, _, size in to_send)
        if not self.admission:
            self._send_chunks(to_send)
        else:
            waiting = list(to_send)
            last_progress = time.monotonic()
            while waiting:
                with self.cond:
                    ready = [c for c in waiting if (c[0], c[1]) in self.granted]
                    if not ready:
                        if time.monotonic() - last_progress > self.step_timeout:
                            record["complete"] = False
                            record["unsent_chunks"] = len(waiting)
                            break
                        self.cond.wait(0.02)
                if not ready:
                    self._service_retransmissions()
                    self._service_grants()
                    continue
                waiting = [c for c in waiting if c not in ready]
                self._send_chunks(ready)
                last_progress = time.monotonic()
        record["sent_ns"] = time.time_ns()
        received = self._wait_for(recv_streams, expected)
        record["received_bytes"] = received
        if received < expected:
            record["complete"] = False
        record["done_ns"] = time.time_ns()
        return record

    def _wait_for(self, streams, expected):
        """Wait until ``expected`` bytes arrived on ``streams`` or progress stalls; return bytes."""
        last_total = -1
        last_change = time.monotonic()
        while True:
            with self.cond:
                total = sum(self.receiver.stream_bytes(src, stream) for src, stream in streams)
                if total >= expected:
                    return total
                now = time.monotonic()
                if total != last_total:
                    last_total = total
                    last_change = now
                elif now - last_change > self.step_timeout:
                    return total
                self.cond.wait(0.02)
            self._service_retransmissions()
            self._service_grants()

    def drain(self, timeout):
        """Keep retransmitting until every sent message is acknowledged (or ``timeout`` s pass)."""
        end = time.monotonic() + timeout
        while self.retransmit and time.monotonic() < end:
            with self.cond:
                if not self.outstanding:
                    return True
                self.cond.wait(0.02)
            self._service_retransmissions()
            self._service_grants()
        return not self.outstanding

    def run(self, start_ns):
        """Wait for ``start_ns`` then run every step; return the report (without the receiver part)."""
        delay = (start_ns - time.time_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        self.stats.start_ns = time.time_ns()
        steps = []
        aborted = None
        for index, step in enumerate(self.spec["steps"]):
            steps.append(self.run_step(index, step))
            if self.retransmit and not steps[-1]["complete"]:
                # a reliable connection that made no progress for step_timeout is broken:
                # like a collective library on a QP error, give the collective up
                aborted = f"step {index} made no progress for {self.step_timeout} s"
                break
        end_ns = time.time_ns()
        max_backoff = sum(self._timeout_ns(retry) for retry in range(self.retry_count + 1)) / 1e9
        acked = self.drain(0.0 if aborted else max_backoff + 1.0)
        return {"rank": self.rank, "start_ns": start_ns, "end_ns": end_ns, "aborted": aborted,
                "complete": aborted is None and all(step["complete"] for step in steps) and acked,
                "all_acked": acked, "steps": steps}

    def final_report(self, report):
        """Add sender, receiver and control counters to ``report`` once the run is over."""
        with self.cond:
            self.receiver.finish()
            report["receiver"] = self.receiver.report()
            report["sender"] = self.stats.as_dict()
            report.update(self.counters)
            report["unacked_messages"] = len(self.outstanding)
            report["events"] = list(self.events)
        return report


def main(argv=None):
    """Entry point: run one rank's plan under the READY / GO / DONE / EXIT protocol."""
    parser = argparse.ArgumentParser(prog="python -m testbed.traffic.agent", description=__doc__.split("\n")[0])
    parser.add_argument("--plan", required=True, help="the plan (JSON), or - for one line of stdin")
    args = parser.parse_args(argv)
    if args.plan == "-":
        spec = json.loads(sys.stdin.readline())
    else:
        with open(args.plan) as handle:
            spec = json.load(handle)
    sys.setswitchinterval(0.0005)
    agent = Agent(spec)
    try:
        agent.open()
        print("READY", flush=True)
        line = sys.stdin.readline().split()
        if len(line) != 2 or line[0] != "GO":
            print("ERROR expected GO", flush=True)
            return 1
        report = agent.run(int(line[1]))
        print("DONE", flush=True)
        # keep acknowledging peers' retransmissions until everyone is done
        while True:
            ready, _, _ = select.select([sys.stdin], [], [], 0.02)
            if ready:
                command = sys.stdin.readline().strip()
                if command in ("EXIT", ""):
                    break
            agent._service_retransmissions()
        report = agent.final_report(report)
    finally:
        agent.close()
    print(json.dumps(report), flush=True)  # the report, after DONE, on the same pipe
    return 0


if __name__ == "__main__":
    sys.exit(main())
