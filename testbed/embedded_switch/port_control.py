"""Run-time control of the embedded switch's per-port link impairments (loss, delay).

Impairments are properties of the links, not P4 state, so they are not set
over P4Runtime but over a small Unix datagram socket the switch process
(:mod:`testbed.embedded_switch.switchd`, ``--control-socket PATH``) listens on.  Each
request is one JSON object, each answer one JSON object:

* ``{"port": 1, "loss": 0.3, "delay_ms": 2.0}`` sets port 1's impairment
  (frames *leaving* the port are dropped with probability ``loss`` and held
  back ``delay_ms``); ``loss`` and ``delay_ms`` default to 0, so
  ``{"port": 1}`` clears it.  Answer: ``{"ok": true}``.
* ``{"command": "status"}`` answers ``{"ok": true, "ports": {"1": {"loss": ..,
  "delay_ms": .., "drops": .., "tx_errors": .., "socket_drops": ..}, ...},
  "packet_generator": {...}}`` (``drops``: frames dropped by the impairment
  since the start; ``tx_errors``: frames the port could not send, e.g. into a
  link that is down; ``socket_drops``: frames the kernel dropped because the
  switch process did not read its socket fast enough (an emulator loss);
  ``receive_lag``: how long the oldest frame of each read batch had waited in
  the socket, as a cumulative histogram, testbed.packet_sockets.ReceiveLag); the packet
  generator's applications with their counters; ``clock_origin_ns``: the
  CLOCK_MONOTONIC time at which the pipeline's timestamps are 0, so the
  switch's own timestamps can be put on the host's clock).
* ``{"command": "pktgen", "app": 0, "port": 510, "period_us": 10000,
  "template": "<hex of an Ethernet frame>"}`` starts (or changes) application
  ``app`` of the switch's packet generator
  (:mod:`testbed.p4.v1model.packet_generator`): the template enters the
  ingress pipeline on internal port ``port`` every ``period_us``;
  ``{"command": "pktgen", "app": 0, "stop": true}`` stops it.
* ``{"command": "queue", "port": 1, "rate_pps": 500, "rate_bps": null,
  "depth_packets": 64, "priorities": 8}`` configures port 1's egress queues
  (:meth:`testbed.p4.v1model.traffic_manager.TrafficManager.set_queue`; omitted
  fields take its defaults), for this and later pipelines.
* ``{"command": "pfc", "lossless": [3], "buffer_packets": 256, "xoff_packets": 32,
  "xon_packets": 16, "headroom_packets": 64, "pause_quanta": 65535}`` turns
  priority flow control on (:class:`testbed.p4.v1model.pfc.PfcConfig`;
  omitted fields take its defaults); ``{"command": "pfc", "off": true}`` turns it off.
* ``{"command": "pfc_status"}`` answers ``{"ok": true, "now_ns": ..., "pfc": {settings} or null,
  "ports": {"1": {"pause_sent": [8 counts], "paused": [...], "queued": [...], ...,
  "queue": {...}, "pipeline_drops": n}}}`` (:meth:`~testbed.p4.v1model.traffic_manager.TrafficManager.pfc_stats`
  of every port, with its queue's ``stats`` and the packets the program dropped that came in on it).
* ``{"command": "dsf_history", "names": ["dsf_voq_enqueued", ...], "start_ns": ..., "period_us": 2000,
  "capacity": 4000}`` has the DSF traffic manager note those counters at ``start_ns + k * period_us``
  (CLOCK_MONOTONIC; :mod:`testbed.p4.v1model.dsf.history`); ``{"command": "dsf_history", "read": true}``
  answers ``{"ok": true, "notes": [[time_ns, {name: {index: [packets, bytes]}}], ...], "more": bool,
  "overflows": n}`` (the notes are removed; ``more``: the answer was full, read again).

A bad request is answered ``{"error": "FIELD: reason", "field": FIELD,
"allowed": "..."}`` naming the field and its allowed values.

Used by :class:`testbed.emulation.p4switch.EmbeddedP4Switch` and the
experiment runner's ``lossy_link`` failure where the kernel has no netem.  The
socket is a file of the switch's machine: for a switch on another server every
client function takes ``via=``, a relay that makes the request there: a
:class:`ControlRelay` (this module's ``--serve`` running there, one kept
connection).
"""
import argparse
import itertools
import json
import math
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

from testbed.errors import EmulationError, ParameterError

MAX_DELAY_MS = 10000.0
MAX_MESSAGE = 65536
REQUEST_FIELDS = ("port", "loss", "delay_ms")
PKTGEN_FIELDS = ("command", "app", "port", "period_us", "template", "stop")
QUEUE_FIELDS = ("command", "port", "rate_pps", "rate_bps", "depth_packets", "priorities")
PFC_FIELDS = ("command", "off", "lossless", "buffer_packets", "xoff_packets", "xon_packets",
              "headroom_packets", "pause_quanta")
DSF_HISTORY_FIELDS = ("command", "names", "start_ns", "period_us", "capacity", "read")
DSF_HISTORY_PERIOD_US = (100, 1_000_000)  # the grid's spacing: from 0.1 ms to 1 s
DSF_HISTORY_CAPACITY = (1, 100_000)  # notes held between reads
_CLIENT_NUMBERS = itertools.count()


class ControlRequestError(ValueError):
    """A control request with a bad field.

    Args:
        field: the request field (``"port"``, ``"loss"``, ``"delay_ms"``, ``"command"``, ``"message"``).
        problem: what is wrong with it.
        allowed: the allowed values.
    """

    def __init__(self, field, problem, allowed):
        self.field = field
        self.problem = problem
        self.allowed = allowed
        super().__init__(f"{field}: {problem}; allowed: {allowed}")

    def answer(self):
        """The JSON answer for this error."""
        return {"error": str(self), "field": self.field, "allowed": self.allowed}


def parse_request(data, ports):
    """Validate one control request (the switch side).

    Args:
        data: the datagram's bytes.
        ports: the switch's data port numbers.

    Returns:
        dict: ``{"command": "status"}`` or ``{"command": "set", "port": int,
        "loss": float, "delay_ms": float}``.

    Raises:
        ControlRequestError: naming the first bad field.
    """
    try:
        message = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        message = None
    if not isinstance(message, dict):
        raise ControlRequestError("message", "not a JSON object", "a JSON object")
    if "command" in message:
        if message["command"] == "pktgen":
            return _parse_pktgen(message)
        if message["command"] in ("queue", "pfc"):
            return _parse_settings(message, ports)
        if message["command"] == "dsf_history":
            return _parse_dsf_history(message)
        if message["command"] not in ("status", "pfc_status") or len(message) != 1:
            raise ControlRequestError("command", f"{message['command']!r} is not a command "
                                      "(or it came with other fields)",
                                      "status or pfc_status (alone), pktgen, queue, pfc, dsf_history")
        return {"command": message["command"]}
    for field in message:
        if field not in REQUEST_FIELDS:
            raise ControlRequestError(field, "unknown field", "fields " + ", ".join(REQUEST_FIELDS))
    port_list = ", ".join(str(p) for p in sorted(ports))
    if "port" not in message:
        raise ControlRequestError("port", "is required", "one of " + port_list)
    port = message["port"]
    if isinstance(port, bool) or not isinstance(port, int) or port not in ports:
        raise ControlRequestError("port", f"{port!r} is not a data port of this switch", "one of " + port_list)
    loss = _number(message.get("loss", 0.0), "loss", 0.0, 1.0)
    delay_ms = _number(message.get("delay_ms", 0.0), "delay_ms", 0.0, MAX_DELAY_MS)
    return {"command": "set", "port": port, "loss": loss, "delay_ms": delay_ms}


def _parse_pktgen(message):
    """``{"command": "pktgen", "app", "stop"}`` or ``{... "port", "period_us", "template": bytes}``."""
    for field in message:
        if field not in PKTGEN_FIELDS:
            raise ControlRequestError(field, "unknown field", "fields " + ", ".join(PKTGEN_FIELDS))
    app = message.get("app", 0)
    if isinstance(app, bool) or not isinstance(app, int) or not 0 <= app < 8:
        raise ControlRequestError("app", f"{app!r} is not an application number", "an integer 0..7")
    if message.get("stop"):
        return {"command": "pktgen", "app": app, "stop": True}
    port = message.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 511:
        raise ControlRequestError("port", f"{port!r} is not a port number", "an integer 0..511")
    period_us = _number(message.get("period_us"), "period_us", 100.0, 60e6)
    try:
        template = bytes.fromhex(message.get("template") or "")
    except (TypeError, ValueError):
        raise ControlRequestError("template", "not hexadecimal", "an Ethernet frame as hex digits") from None
    if not 14 <= len(template) <= 1514:
        raise ControlRequestError("template", f"{len(template)} bytes", "an Ethernet frame of 14 to 1514 bytes")
    return {"command": "pktgen", "app": app, "stop": False, "port": port, "period_ns": int(period_us * 1000),
            "template": template}


def _parse_settings(message, ports):
    """``queue`` and ``pfc`` requests: the fields checked by name; their values are checked where used."""
    allowed = QUEUE_FIELDS if message["command"] == "queue" else PFC_FIELDS
    for field in message:
        if field not in allowed:
            raise ControlRequestError(field, "unknown field", "fields " + ", ".join(allowed))
    if message["command"] == "queue":
        port = message.get("port")
        port_list = ", ".join(str(p) for p in sorted(ports))
        if isinstance(port, bool) or not isinstance(port, int) or port not in ports:
            raise ControlRequestError("port", f"{port!r} is not a data port of this switch", "one of " + port_list)
    return dict(message)


def _parse_dsf_history(message):
    """``{"command": "dsf_history", "read": True}`` or the start request with its fields checked."""
    for field in message:
        if field not in DSF_HISTORY_FIELDS:
            raise ControlRequestError(field, "unknown field", "fields " + ", ".join(DSF_HISTORY_FIELDS))
    if message.get("read"):
        if len(message) != 2:
            raise ControlRequestError("read", "came with other fields", "command and read alone")
        return {"command": "dsf_history", "read": True}
    names = message.get("names")
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise ControlRequestError("names", f"{names!r} is not a list of counter names",
                                  "a non-empty list of counter names")
    start_ns = message.get("start_ns")
    if isinstance(start_ns, bool) or not isinstance(start_ns, int) or start_ns < 0:
        raise ControlRequestError("start_ns", f"{start_ns!r} is not a time", "an integer >= 0 (CLOCK_MONOTONIC ns)")
    period_us = _number(message.get("period_us"), "period_us", *DSF_HISTORY_PERIOD_US)
    capacity = message.get("capacity")
    low, high = DSF_HISTORY_CAPACITY
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not low <= capacity <= high:
        raise ControlRequestError("capacity", f"{capacity!r} is out of range", f"an integer in [{low}, {high}]")
    return {"command": "dsf_history", "read": False, "names": names, "start_ns": start_ns,
            "period_ns": int(period_us * 1000), "capacity": capacity}


def set_packet_generator(control_path, app, port=None, period_us=None, template=None, stop=False, timeout=2.0,
                         via=None):
    """Start, change or stop an application of a running embedded switch's packet generator.

    Args:
        control_path: the switch's control socket.
        app: application number 0..7.
        port: the internal ingress port of the frames.
        period_us: the timer period in microseconds.
        template: the frame (bytes, Ethernet header first).
        stop: stop the application instead.

    Returns:
        dict: the switch's answer.

    Raises:
        ParameterError: the switch refused a field (named).
        EmulationError: the switch could not be reached.
    """
    message = {"command": "pktgen", "app": app}
    if stop:
        message["stop"] = True
    else:
        message.update(port=port, period_us=period_us, template=bytes(template).hex())
    answer = request(control_path, message, timeout=timeout, via=via)
    if "error" in answer:
        field = answer.get("field", "message")
        raise ParameterError(field, message.get(field), answer.get("allowed", "see the switch log"),
                             f"switch control socket {control_path}")
    return answer


def configure(control_path, message, timeout=2.0, via=None):
    """Send a ``queue`` or ``pfc`` request; return the answer.

    Raises:
        ParameterError: the switch refused a field (named, with the allowed values).
        EmulationError: the switch could not be reached.
    """
    answer = request(control_path, message, timeout=timeout, via=via)
    if "error" in answer:
        field = answer.get("field", "message")
        raise ParameterError(field, message.get(field), answer.get("allowed", "see the switch log"),
                             f"switch control socket {control_path}")
    return answer


def record_dsf_history(control_path, names, start_ns, period_us, capacity, timeout=2.0, via=None):
    """Have a running switch's DSF traffic manager note counters ``names`` every ``period_us`` from ``start_ns``.

    Raises:
        ParameterError: the switch refused a field (named, with the allowed values).
        EmulationError: the switch could not be reached.
    """
    return configure(control_path, {"command": "dsf_history", "names": list(names), "start_ns": int(start_ns),
                                    "period_us": period_us, "capacity": capacity}, timeout=timeout, via=via)


def read_dsf_history(control_path, timeout=2.0, via=None):
    """``(notes, overflows)``: every DSF counter note a running switch took since the last read (removed
    there), oldest first, as ``[(time_ns, {name: {index: [packets, bytes]}})]``.

    Raises:
        EmulationError: the switch could not be reached or answered an error.
    """
    notes, overflows = [], 0
    while True:
        answer = request(control_path, {"command": "dsf_history", "read": True}, timeout=timeout, via=via)
        if "error" in answer:
            raise EmulationError(f"switch control socket {control_path}: {answer['error']}")
        notes.extend((time_ns, {name: {int(index): cell for index, cell in cells.items()}
                                for name, cells in counters.items()})
                     for time_ns, counters in answer["notes"])
        overflows = answer["overflows"]
        if not answer["more"]:
            return notes, overflows


def _number(value, field, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ControlRequestError(field, f"{value!r} is out of range", f"a number in [{low:g}, {high:g}]")
    return float(value)


def check_impairment(loss, delay_ms):
    """Validate an impairment on the caller's side.

    Raises:
        ParameterError: ``loss`` outside [0, 1] or ``delay_ms`` outside [0, MAX_DELAY_MS].
    """
    for field, value, high in (("loss", loss, 1.0), ("delay_ms", delay_ms, MAX_DELAY_MS)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 <= value <= high:
            raise ParameterError(field, value, f"a number in [0, {high:g}]")


def request(control_path, message, timeout=2.0, via=None):
    """Send one JSON request to a switch's control socket and return its JSON answer.

    Args:
        control_path: the switch's ``--control-socket`` path.
        message: a JSON-able dict.
        timeout: seconds to wait for the answer.
        via: for a switch on another server (its socket is in that server's files): the
            :class:`ControlRelay` that makes the request there; None: this machine.

    Returns:
        dict: the answer (``{"ok": true, ...}`` or ``{"error": "..."}``).

    Raises:
        EmulationError: the socket does not exist, refuses, or does not answer in time (or the
            server could not be asked).
    """
    if via is not None:
        return via.request(control_path, message, timeout)
    # The answer comes to a file-system address: abstract ones belong to a network
    # namespace, and the switch may run in another one.
    reply_path = os.path.join(tempfile.gettempdir(), f"testbed-ctl-{os.getpid()}-{threading.get_ident()}-"
                                                     f"{next(_CLIENT_NUMBERS)}.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        if os.path.exists(reply_path):
            os.remove(reply_path)
        sock.bind(reply_path)
        sock.settimeout(timeout)
        try:
            sock.sendto(json.dumps(message).encode(), control_path)
            answer, _address = sock.recvfrom(MAX_MESSAGE)
        except socket.timeout:
            raise EmulationError(f"switch control socket {control_path}: no answer within {timeout:g} s") from None
        except OSError as error:
            raise EmulationError(f"switch control socket {control_path}: {error.strerror or error}") from None
    finally:
        sock.close()
        try:
            os.remove(reply_path)
        except OSError:
            pass
    try:
        return json.loads(answer.decode())
    except ValueError:
        raise EmulationError(f"switch control socket {control_path}: answer is not JSON: {answer[:80]!r}") from None


#: seconds a request made on another server may take beyond its own timeout (ssh, starting Python)
REMOTE_SLACK_S = 20.0


class KeptProcess:
    """A process kept for a run's requests, a line each way over its stdin and stdout (through ssh for one on
    another server); it ends when its stdin closes (:meth:`close`, or the run's end).  One request at a
    time: hold :attr:`lock` around a :meth:`send` and its :meth:`read_line` calls.

    Args:
        argv: the command that starts it.
    """

    def __init__(self, argv):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, process_group=0)
        self.lock = threading.Lock()
        self._buffer = b""

    def send(self, data):
        """Write ``data`` (bytes) to its stdin; False when the process is gone."""
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def read_line(self, deadline):
        """The next line of its stdout (bytes, without the newline), or None at its end or at ``deadline``
        (monotonic seconds)."""
        if self.process.stdout.closed:
            return None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def close(self):
        """End the process (safe to call twice)."""
        with self.lock:
            if not self.process.stdin.closed:
                self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process.stdout.close()


class ControlRelay(KeptProcess):
    """Makes requests through one ``python -m testbed.embedded_switch.port_control --serve`` kept running
    (on a switch's server, through ssh): a request is a line each way, about a millisecond, instead of
    an ssh login and a Python start (a third of a second) each.

    Args:
        argv: the command that starts the serving process.
        where: what to call its place in messages (``on server tb-srv1``).
    """

    def __init__(self, argv, where):
        super().__init__(argv)
        self.where = where

    def request(self, control_path, message, timeout):
        """:func:`request` made through the serving process."""
        line = json.dumps({"path": control_path, "message": message, "timeout": timeout}).encode() + b"\n"
        with self.lock:
            reply = self.read_line(time.monotonic() + timeout + REMOTE_SLACK_S) if self.send(line) else None
            if reply is None:
                raise EmulationError(f"switch control socket {control_path} ({self.where}): the relay's "
                                     f"connection ended or did not answer (status {self.process.poll()})")
        answer = json.loads(reply)
        if "error" in answer and "answer" not in answer:
            raise EmulationError(f"switch control socket {control_path} ({self.where}): {answer['error']}")
        return answer["answer"]


def serve(lines, out):
    """The relay's far end: answer each request line (``{"path", "message", "timeout"}``) of ``lines`` with
    one line on ``out``: ``{"answer": ...}``, or ``{"error": "..."}`` when the socket could not be asked."""
    for line in lines:
        if not line.strip():
            continue
        try:
            asked = json.loads(line)
            reply = {"answer": request(asked["path"], asked["message"], timeout=float(asked.get("timeout", 2.0)))}
        except (EmulationError, ValueError, KeyError, TypeError) as error:
            reply = {"error": str(error)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv=None):
    """``python -m testbed.embedded_switch.port_control PATH JSON [--timeout S]``: one request to the control
    socket at PATH on this machine; prints the answer (JSON), or the error on stderr with status 1.
    ``--serve``: answer request lines on stdin instead (the far end of a :class:`ControlRelay`)."""
    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?")
    parser.add_argument("message", nargs="?", help="the request, a JSON object")
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--serve", action="store_true", help="answer JSON request lines on stdin, one line each")
    args = parser.parse_args(argv)
    if args.serve:
        serve(sys.stdin, sys.stdout)
        return 0
    if args.path is None or args.message is None:
        parser.error("PATH and JSON are needed (or --serve)")
    try:
        message = json.loads(args.message)
    except ValueError as error:
        parser.error(f"message: not JSON ({error})")
    try:
        answer = request(args.path, message, timeout=args.timeout)
    except EmulationError as error:
        print(error, file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0


def set_port_impairment(control_path, port, loss=0.0, delay_ms=0.0, timeout=2.0, via=None):
    """Set the loss probability and added delay of frames leaving ``port`` of a running switch.

    Args:
        control_path: the switch's control socket.
        port: the switch port number.
        loss: drop probability in [0, 1] (0 clears loss).
        delay_ms: fixed added delay in milliseconds (0 for none).
        timeout: seconds to wait for the answer.

    Returns:
        dict: the switch's answer ``{"ok": true}``.

    Raises:
        ParameterError: the switch refused a field (named in the error).
        EmulationError: the switch could not be reached.
    """
    answer = request(control_path, {"port": port, "loss": loss, "delay_ms": delay_ms}, timeout=timeout, via=via)
    if "error" in answer:
        field = answer.get("field", "message")
        value = {"port": port, "loss": loss, "delay_ms": delay_ms}.get(field)
        raise ParameterError(field, value, answer.get("allowed", "see the switch log"),
                             f"switch control socket {control_path}")
    return answer


def switch_status(control_path, timeout=2.0, via=None):
    """The whole ``status`` answer of a running switch (see the module docstring).

    Raises:
        EmulationError: the switch could not be reached or answered an error.
    """
    answer = request(control_path, {"command": "status"}, timeout=timeout, via=via)
    if "error" in answer:
        raise EmulationError(f"switch control socket {control_path}: {answer['error']}")
    return answer


def port_status(control_path, timeout=2.0, via=None):
    """Return ``{port: {"loss", "delay_ms", "drops"}}`` of a running switch (ports as ints).

    Raises:
        EmulationError: the switch could not be reached or answered an error.
    """
    answer = switch_status(control_path, timeout, via)
    return {int(port): entry for port, entry in answer.get("ports", {}).items()}


class ControlSocket:
    """The switch side: a non-blocking Unix datagram socket at ``path`` (removed by :meth:`close`).

    Args:
        path: where to bind; a stale file left there by a killed switch is replaced.
    """

    def __init__(self, path):
        self.path = path
        if os.path.exists(path):
            os.remove(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.sock.bind(path)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)

    def fileno(self):
        """The socket's file descriptor (for poll)."""
        return self.sock.fileno()

    def serve(self, handler):
        """Answer every pending request with ``handler(data) -> dict`` (never blocks)."""
        while True:
            try:
                data, address = self.sock.recvfrom(MAX_MESSAGE)
            except (BlockingIOError, InterruptedError):
                return
            answer = handler(data)
            if address:
                try:
                    self.sock.sendto(json.dumps(answer).encode(), address)
                except OSError:
                    pass  # the client went away; nothing to do

    def close(self):
        """Close the socket and remove its file."""
        self.sock.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    sys.exit(main())
