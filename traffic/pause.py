"""A host honouring PFC PAUSE frames from its ToR (IEEE 802.1Qbb), as a RoCE NIC does.

The ToR classifies the host's RoCE data into lossless class
:data:`DATA_PRIORITY` (p4src/fcplus.p4's ``classify`` table) and, when the
host's ingress buffer reaches XOFF, sends PAUSE frames for that class out of
the host's port.  :class:`PauseGate` reads them on the host interface with a
packet socket of ethertype 0x8808 (a thread blocks on it) and
:meth:`PauseGate.wait` holds the sender until the pause ends: its quanta
expire (512 bit times each, at 1 Gb/s as the switch counts on a port without
a bit rate) or a PAUSE with quanta 0 resumes it.
"""
import socket
import threading
import time

from testbed.p4.v1model.pfc import PFC_ETHERTYPE, parse_pause, quantum_ns

#: the PFC class the ToR puts the hosts' RoCE data in (p4src/fcplus.p4, controllers/fcplus/programming.py)
DATA_PRIORITY = 1
_POLL_S = 0.0005   # how often a held sender looks again (a resume wakes it within this)


class PauseGate:
    """Holds sending while the ToR pauses ``priority`` on ``intf``.

    Args:
        intf: the host interface.
        priority: the PFC class the host's data is in.

    Attributes:
        pauses: PAUSE frames for the class with quanta > 0 received.
        resumes: those with quanta 0.
        held_ns: how long :meth:`wait` held the sender in all.

    Raises:
        OSError: no such interface, or packet sockets not allowed.
    """

    def __init__(self, intf, priority=DATA_PRIORITY):
        self.priority = priority
        self.paused_until = 0
        self.pauses = 0
        self.resumes = 0
        self.held_ns = 0
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(PFC_ETHERTYPE))
        self._sock.bind((intf, PFC_ETHERTYPE))
        self._sock.settimeout(0.2)
        self._quantum_ns = quantum_ns(None)
        self._running = True
        self._thread = threading.Thread(target=self._listen, name="pfc-pause-listener", daemon=True)
        self._thread.start()

    def _listen(self):
        while self._running:
            try:
                frame = self._sock.recv(128)
            except socket.timeout:
                continue
            except OSError:
                return
            self.receive(frame, time.monotonic_ns())

    def receive(self, frame, now_ns):
        """Apply one received frame (ignored unless a PFC PAUSE for the class)."""
        for priority, quanta in parse_pause(frame) or ():
            if priority != self.priority:
                continue
            self.paused_until = now_ns + int(quanta * self._quantum_ns)
            if quanta:
                self.pauses += 1
            else:
                self.resumes += 1

    def paused(self, now_ns=None):
        """True while the class is paused."""
        return (time.monotonic_ns() if now_ns is None else now_ns) < self.paused_until

    def wait(self, deadline_ns=None):
        """Block while the class is paused, at most until ``deadline_ns`` (wall clock); True when it held."""
        start = time.monotonic_ns()
        if start >= self.paused_until:
            return False
        while time.monotonic_ns() < self.paused_until:
            if deadline_ns is not None and time.time_ns() >= deadline_ns:
                break   # a sender paused for good (a deadlock) still ends on time
            time.sleep(_POLL_S)
        self.held_ns += time.monotonic_ns() - start
        return True

    def report(self):
        """``{"pfc_pauses", "pfc_resumes", "pfc_held_ms"}`` for the sender's report."""
        return {"pfc_pauses": self.pauses, "pfc_resumes": self.resumes, "pfc_held_ms": self.held_ns / 1e6}

    def close(self):
        """Stop listening (safe to call twice)."""
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=1)
            self._thread = None
        self._sock.close()
