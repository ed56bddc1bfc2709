"""A P4Runtime client for controllers and tests that works with names, not ids.

Works against the embedded target and BMv2 (``simple_switch_grpc``) alike::

    from testbed.p4runtime.client import P4RuntimeClient

    with P4RuntimeClient("127.0.0.1:50001", device_id=1, election_id=(0, 1)) as sw:
        sw.set_pipeline("p4src/l3_ecmp.p4")                       # embedded target
        # sw.set_pipeline(p4info="build/x.p4info.txt", device_config="build/x.json", target="bmv2")
        sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)},
                              "MyIngress.set_nhop", {"port": 1, "dmac": "00:00:00:00:01:01"})
        for entry in sw.read_table_entries("MyIngress.ipv4_lpm"):
            print(entry.match, entry.action, entry.params)
        sw.packet_out(b"...", egress_port=2)
        packet = sw.get_packet_in(timeout=1.0)                    # PacketIn or None

Values may be ints, bytes, IPv4/IPv6/MAC strings; match specs per kind are described
in :mod:`testbed.p4runtime.values`.

Arbitration follows the P4Runtime spec: a controller is primary (``is_primary``) when
its election id is >= the highest the switch has ever seen for the role, so a
controller that reconnects must reuse (or exceed) its old election id; nobody is
promoted when the primary leaves.  Every failing RPC raises
:class:`P4RuntimeClientError` with the gRPC status name in ``code`` and, for a Write,
the per-update ``errors`` (index, code, message), which its message lists.

Many updates are best sent in few Writes: inside ``with sw.batch():`` the write
methods only collect their updates, which are sent at the end of the block in
Writes of up to ``batch_size`` updates (:meth:`P4RuntimeClient.write_batch`).  The
channel raises gRPC's metadata limit so that the per-update errors of a batch of
any size arrive (see :mod:`testbed.p4runtime.limits`).
"""
import contextlib
import dataclasses
import queue
import threading
import time
from typing import Dict, List, Optional, Tuple

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.errors import ParameterError, TestbedError
from testbed.p4runtime import limits
from testbed.p4runtime.convert import decode, encode
from testbed.p4runtime.p4info import MATCH_KIND_NAMES
from testbed.p4runtime.p4info_index import P4InfoIndex
from testbed.p4runtime.values import match_from_spec, parse_value

CHANNEL_OPTIONS = (("grpc.max_receive_message_length", limits.MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", limits.MAX_MESSAGE_BYTES),
                   ("grpc.max_metadata_size", limits.MAX_METADATA_BYTES),
                   ("grpc.absolute_max_metadata_size", limits.MAX_METADATA_BYTES))
"""gRPC options of the client's channel: per-update Write errors of large batches fit."""

DEFAULT_BATCH_SIZE = 1000
"""Updates per Write when :meth:`P4RuntimeClient.write_batch` splits a batch."""


class P4RuntimeClientError(TestbedError):
    """A P4Runtime call failed.

    Attributes:
        code: gRPC status name ("NOT_FOUND", ...); for a failed Write batch the code of
            the first failing update (the call status itself is UNKNOWN, per the spec).
        message: the server's message; for a failed Write batch, the failed updates
            (index, code and message of the first few, and how many in all).
        errors: for a Write, list of (update index, code name, message) of every
            failed update (the index counts from 0 in the batch given to the client).
    """

    def __init__(self, code, message, errors=None):
        self.code = code
        self.message = message
        self.errors = errors or []
        super().__init__(f"{code}: {message}")


def describe_failures(errors, count, shown=5):
    """A one-line account of the failed updates of a Write batch.

    Args:
        errors: list of (update index, code name, message).
        count: the number of updates in the batch.
        shown: how many failures to spell out.

    Returns:
        str: e.g. ``"2 of 600 updates failed: update 17: ALREADY_EXISTS: ...; update 40: ..."``.
    """
    listed = "; ".join(f"update {index}: {code}: {message}" for index, code, message in errors[:shown])
    more = f"; and {len(errors) - shown} more" if len(errors) > shown else ""
    return f"{len(errors)} of {count} updates failed: {listed}{more}"


def _write_errors(trailing_metadata):
    """(number of p4.Error details, [(index, code name, message) of the failed ones]) of a status trailer."""
    for key, value in trailing_metadata or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            errors = []
            for number, detail in enumerate(status.details):
                error = p4runtime_pb2.Error()
                if detail.Unpack(error) and error.canonical_code != code_pb2.OK:
                    errors.append((number, code_pb2.Code.Name(error.canonical_code), error.message))
            return len(status.details), errors
    return 0, []


def _rpc_error(exc):
    """P4RuntimeClientError of a grpc.RpcError (decoding Write error details)."""
    code = exc.code().name if exc.code() is not None else "UNKNOWN"
    details = exc.details() or ""
    count, errors = _write_errors(exc.trailing_metadata())
    if code == "UNKNOWN" and errors:
        return P4RuntimeClientError(errors[0][1], describe_failures(errors, count), errors)
    return P4RuntimeClientError(code, details, errors)


@dataclasses.dataclass
class TableEntryView:
    """A table entry as read, with names.

    Attributes:
        table: table name.
        match: {field name: int (exact/optional), (value, prefix_len), (value, mask) or
            (low, high)}; wildcard fields are absent.
        action: action name (direct action or default entry), or None.
        params: {param name: int}.
        priority: int or None.
        member_id / group_id: action profile reference, or None.
        is_default: True for the default entry.
        counter: (packets, bytes) when read with ``counter_data=True``.
        is_const: True for const entries.
    """

    table: str
    match: Dict[str, object]
    action: Optional[str] = None
    params: Dict[str, int] = dataclasses.field(default_factory=dict)
    priority: Optional[int] = None
    member_id: Optional[int] = None
    group_id: Optional[int] = None
    is_default: bool = False
    counter: Optional[Tuple[int, int]] = None
    is_const: bool = False
    metadata: bytes = b""


@dataclasses.dataclass
class PacketIn:
    """A received PacketIn: payload and {metadata name: int}."""

    payload: bytes
    metadata: Dict[str, int]


@dataclasses.dataclass
class DigestList:
    """A received DigestList: digest name, list id, and one {field: int} dict per digest."""

    name: str
    list_id: int
    data: List[Dict[str, int]]


class P4RuntimeClient:
    """A P4Runtime session with one switch.

    Args:
        address: "host:port" of the switch's P4Runtime server.
        device_id: the switch's device id.
        election_id: (high, low) election id, or None to connect as a backup.
        role: role name, or None for the default role.
        timeout: seconds to wait for the arbitration reply (and per unary RPC).
        connect: open the stream and arbitrate now.
        auto_ack_digests: ack every DigestList as it arrives.

    Raises:
        P4RuntimeClientError: UNAVAILABLE when the server cannot be reached, or the
            status the server closed the stream with (e.g. INVALID_ARGUMENT for an
            election id another controller uses).
    """

    def __init__(self, address, device_id=1, election_id=(0, 1), role=None, timeout=10.0,
                 connect=True, auto_ack_digests=True):
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.role = role
        self.timeout = timeout
        self.auto_ack_digests = auto_ack_digests
        self.channel = None
        self.stub = None
        self.index = None
        self.is_primary = False
        self.arbitration = None
        self._outbox = None
        self._reader = None
        self._stream = None
        self._arbitration_q = queue.Queue()
        self._packet_q = queue.Queue()
        self._digest_q = queue.Queue()
        self._error_q = queue.Queue()
        self._idle_q = queue.Queue()
        self._local = threading.local()  # the batch being collected belongs to the thread collecting it
        self.stream_status = None
        if connect:
            self.connect()

    # ---- session --------------------------------------------------------------------------
    def connect(self):
        """Open the channel and the stream, arbitrate, and fetch the P4Info if one is set."""
        self.channel = grpc.insecure_channel(self.address, options=CHANNEL_OPTIONS)
        try:
            grpc.channel_ready_future(self.channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise P4RuntimeClientError("UNAVAILABLE", f"cannot reach P4Runtime server at {self.address}") \
                from None
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._outbox = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._outbox.get, None))
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-client-stream", daemon=True)
        self._reader.start()
        self.send_arbitration()
        reply = self._wait_arbitration(self.timeout)
        self.is_primary = reply.status.code == code_pb2.OK
        self.load_p4info()

    def send_arbitration(self, election_id=None):
        """Send a MasterArbitrationUpdate (optionally with a new election id)."""
        if election_id is not None:
            self.election_id = election_id
        request = p4runtime_pb2.StreamMessageRequest()
        arbitration = request.arbitration
        arbitration.device_id = self.device_id
        if self.role:
            arbitration.role.name = self.role
        if self.election_id is not None:
            arbitration.election_id.high, arbitration.election_id.low = self.election_id
        self._outbox.put(request)

    def _wait_arbitration(self, timeout):
        try:
            reply = self._arbitration_q.get(timeout=timeout)
        except queue.Empty:
            raise P4RuntimeClientError("DEADLINE_EXCEEDED", "no arbitration reply from the switch") from None
        if reply is None:
            status = self.stream_status
            self.close()
            if status is not None:
                raise status
            raise P4RuntimeClientError("UNAVAILABLE", "the switch closed the stream")
        return reply

    def _read_stream(self):
        try:
            for response in self._stream:
                which = response.WhichOneof("update")
                if which == "arbitration":
                    self.arbitration = response.arbitration
                    self.is_primary = response.arbitration.status.code == code_pb2.OK
                    self._arbitration_q.put(response.arbitration)
                elif which == "packet":
                    self._packet_q.put(response.packet)
                elif which == "digest":
                    self._digest_q.put(response.digest)
                    if self.auto_ack_digests:
                        ack = p4runtime_pb2.StreamMessageRequest()
                        ack.digest_ack.digest_id = response.digest.digest_id
                        ack.digest_ack.list_id = response.digest.list_id
                        self._outbox.put(ack)
                elif which == "error":
                    self._error_q.put(response.error)
                elif which == "idle_timeout_notification":
                    self._idle_q.put(response.idle_timeout_notification)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.stream_status = _rpc_error(exc)
        finally:
            self.is_primary = False
            for q in (self._arbitration_q, self._packet_q, self._digest_q, self._idle_q):
                q.put(None)

    def close(self):
        """End the stream and close the channel (idempotent)."""
        if self._outbox is not None:
            self._outbox.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=5)
        if self.channel is not None:
            self.channel.close()
        self._outbox = self._stream = self._reader = self.channel = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None

    def _election(self, request):
        request.device_id = self.device_id
        if self.role:
            request.role = self.role
        if self.election_id is not None:
            request.election_id.high, request.election_id.low = self.election_id

    def api_version(self):
        """The server's P4Runtime API version string."""
        return self._call(self.stub.Capabilities, p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version

    # ---- pipeline -------------------------------------------------------------------------
    def load_p4info(self):
        """Fetch the switch's P4Info (None when no pipeline is set); returns the P4Info."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            response = self._call(self.stub.GetForwardingPipelineConfig, request)
        except P4RuntimeClientError as exc:
            if exc.code == "FAILED_PRECONDITION":
                self.index = None
                return None
            raise
        if response.config.HasField("p4info") and (response.config.p4info.tables
                                                   or response.config.p4info.actions):
            self.index = P4InfoIndex(response.config.p4info)
        else:
            self.index = None
        return response.config.p4info

    def get_pipeline(self):
        """(P4Info, device config bytes, cookie or None) of the switch."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id)
        config = self._call(self.stub.GetForwardingPipelineConfig, request).config
        return config.p4info, config.p4_device_config, (config.cookie.cookie if config.HasField("cookie")
                                                         else None)

    def set_pipeline(self, program=None, p4info=None, device_config=None, target="embedded",
                     cookie=None, action="VERIFY_AND_COMMIT"):
        """Set the forwarding pipeline.

        Args:
            program: embedded target: path of a .p4 file (loaded here to build P4Info
                and the device config), or a loaded program object; or, for either
                target, a ``(p4info, device_config)`` pair (same forms as below).
            p4info: a P4Info message, its text, or the path of a p4info.txt file
                (BMv2: as p4c wrote it; embedded: optional, generated otherwise).
            device_config: bytes, or the path of a file (BMv2: the JSON p4c wrote).
            target: "embedded" or "bmv2".
            cookie: optional int stored with the config.
            action: a SetForwardingPipelineConfigRequest.Action name.

        Raises:
            ParameterError: missing or contradictory arguments.
            P4RuntimeClientError: the switch refused the config.
        """
        if target not in ("embedded", "bmv2"):
            raise ParameterError("target", target, "embedded or bmv2")
        if isinstance(program, tuple):
            if len(program) != 2:
                raise ParameterError("program", program, "a .p4 path or a (p4info, device_config) pair")
            program, p4info, device_config = None, program[0], program[1]
        if program is not None:
            if target != "embedded":
                raise ParameterError("program", program, "None for target bmv2 (give p4info and "
                                                         "device_config files from p4c)")
            built_p4info, built_config = embedded_pipeline(program)
            p4info = built_p4info if p4info is None else p4info
            device_config = built_config if device_config is None else device_config
        if p4info is None or device_config is None:
            raise ParameterError("p4info/device_config", (p4info, device_config),
                                 "both given (or a program for the embedded target)")
        p4info = _load_p4info(p4info)
        if isinstance(device_config, str):
            with open(device_config, "rb") as handle:
                device_config = handle.read()
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        self._election(request)
        request.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.Action.Value(action)
        request.config.p4info.CopyFrom(p4info)
        request.config.p4_device_config = bytes(device_config)
        if cookie is not None:
            request.config.cookie.cookie = cookie
        self._call(self.stub.SetForwardingPipelineConfig, request)
        if action in ("VERIFY_AND_COMMIT", "VERIFY_AND_SAVE", "RECONCILE_AND_COMMIT"):
            self.index = P4InfoIndex(p4info)

    def _idx(self):
        if self.index is None:
            self.load_p4info()
        if self.index is None:
            raise P4RuntimeClientError("FAILED_PRECONDITION", "the switch has no pipeline; call set_pipeline")
        return self.index

    def _lookup(self, kind, name):
        try:
            return self._idx().by_name(kind, name)
        except KeyError as exc:
            raise P4RuntimeClientError("NOT_FOUND", str(exc)) from None

    # ---- write helpers --------------------------------------------------------------------
    def write(self, updates):
        """Send one Write batch of ``p4.v1.Update`` messages.

        Raises:
            P4RuntimeClientError: with ``errors`` listing every failed update (the
                others were applied).
        """
        request = p4runtime_pb2.WriteRequest()
        self._election(request)
        request.updates.extend(updates)
        self._call(self.stub.Write, request)

    def write_batch(self, updates, batch_size=DEFAULT_BATCH_SIZE):
        """Send many updates in Writes of up to ``batch_size`` updates each, in order.

        Every Write is sent even when an earlier one had failed updates (as within a
        single CONTINUE_ON_ERROR batch); each Write completes before the next is sent.

        Args:
            updates: the ``p4.v1.Update`` messages.
            batch_size: the most updates in one Write (1..limits.MAX_WRITE_UPDATES).

        Raises:
            ParameterError: a batch size out of range.
            P4RuntimeClientError: at the end, with ``errors`` listing every failed update
                by its index in ``updates``; or at once when a Write fails as a whole
                (e.g. PERMISSION_DENIED), saying how many updates were sent before.
        """
        if not isinstance(batch_size, int) or not 1 <= batch_size <= limits.MAX_WRITE_UPDATES:
            raise ParameterError("batch_size", batch_size, f"an int in 1..{limits.MAX_WRITE_UPDATES}")
        updates = list(updates)
        errors = []
        for start in range(0, len(updates), batch_size):
            try:
                self.write(updates[start:start + batch_size])
            except P4RuntimeClientError as exc:
                if not exc.errors:
                    raise P4RuntimeClientError(exc.code, f"{exc.message} (the first {start} of "
                                                         f"{len(updates)} updates were applied before)") \
                        from None
                errors.extend((start + index, code, message) for index, code, message in exc.errors)
        if errors:
            raise P4RuntimeClientError(errors[0][1], describe_failures(errors, len(updates)), errors)

    def _write_one(self, kind, entity_setter):
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(kind))
        entity_setter(update.entity)
        if self._batch is not None:
            self._batch.append(update)
        else:
            self.write([update])

    @property
    def _batch(self):
        return getattr(self._local, "batch", None)

    @_batch.setter
    def _batch(self, updates):
        self._local.batch = updates

    @contextlib.contextmanager
    def batch(self, batch_size=DEFAULT_BATCH_SIZE):
        """Collect the writes made inside the ``with`` block and send them at its end.

        They go out with :meth:`write_batch`: in Writes of up to ``batch_size``
        updates, in the order they were made.  Nothing is sent if the block raises.  A batch
        belongs to the thread that opened it: other threads' writes on the same client
        meanwhile go out on their own (gRPC calls are thread-safe).

        Example::

            with sw.batch():
                for prefix, port in routes:
                    sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": prefix},
                                          "MyIngress.set_nhop", {...})

        Raises:
            P4RuntimeClientError: at the end of the block, with ``errors`` naming the
                failed updates by their position in the batch (the others were applied).
        """
        if self._batch is not None:
            yield self  # nested: part of the outer batch
            return
        self._batch = []
        try:
            yield self
            updates, self._batch = self._batch, None
            if updates:
                self.write_batch(updates, batch_size)
        finally:
            self._batch = None

    def read(self, entities):
        """Read ``p4.v1.Entity`` requests; returns the list of result entities."""
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        if self.role:
            request.role = self.role
        request.entities.extend(entities)
        results = []
        try:
            for response in self.stub.Read(request, timeout=self.timeout):
                results.extend(response.entities)
        except grpc.RpcError as exc:
            raise _rpc_error(exc) from None
        return results

    # ---- tables ---------------------------------------------------------------------------
    def _action_msg(self, action, params, out):
        info = self._lookup("actions", action)
        out.action_id = info.preamble.id
        params = dict(params or {})
        for param in info.params:
            if param.name not in params:
                raise ParameterError(f"{action}.{param.name}", None, f"a value of {param.bitwidth} bits",
                                     reason="missing action parameter")
            value = parse_value(params.pop(param.name), param.bitwidth, f"{action}.{param.name}")
            out.params.add(param_id=param.id, value=encode(value))
        if params:
            raise ParameterError(f"{action} params", sorted(params),
                                 ", ".join(p.name for p in info.params) or "no parameters")

    def table_entry_message(self, table, match=None, action=None, params=None, priority=None,
                            member_id=None, group_id=None, idle_timeout_ns=0, metadata=b""):
        """Build a ``p4.v1.TableEntry`` from names (see :meth:`insert_table_entry`)."""
        info = self._lookup("tables", table)
        entry = p4runtime_pb2.TableEntry(table_id=info.preamble.id)
        match = dict(match or {})
        for field in info.match_fields:
            kind = MATCH_KIND_NAMES.get(field.match_type, "exact")
            spec = match.pop(field.name, None)
            parsed = match_from_spec(kind, spec, field.bitwidth, f"{table}: {field.name}")
            if parsed is None:
                continue
            fm = entry.match.add(field_id=field.id)
            if kind == "exact":
                fm.exact.value = encode(parsed["value"])
            elif kind == "optional":
                fm.optional.value = encode(parsed["value"])
            elif kind == "lpm":
                fm.lpm.value = encode(parsed["value"])
                fm.lpm.prefix_len = parsed["prefix_len"]
            elif kind == "ternary":
                fm.ternary.value = encode(parsed["value"])
                fm.ternary.mask = encode(parsed["mask"])
            else:
                fm.range.low = encode(parsed["low"])
                fm.range.high = encode(parsed["high"])
        if match:
            raise ParameterError(f"{table} match", sorted(match),
                                 ", ".join(f.name for f in info.match_fields) or "no match fields")
        if priority:
            entry.priority = priority
        if action is not None:
            self._action_msg(action, params, entry.action.action)
        elif member_id is not None:
            entry.action.action_profile_member_id = member_id
        elif group_id is not None:
            entry.action.action_profile_group_id = group_id
        if idle_timeout_ns:
            entry.idle_timeout_ns = idle_timeout_ns
        if metadata:
            entry.metadata = metadata
        return entry

    def insert_table_entry(self, table, match=None, action=None, params=None, priority=None,
                           member_id=None, group_id=None, idle_timeout_ns=0, metadata=b""):
        """Insert an entry.

        Args:
            table: table name (or alias).
            match: {field name: match spec}; omitted non-exact fields are wildcards.
            action: action name, with ``params`` {param name: value}; or
            member_id / group_id: for tables with an action profile / selector.
            priority: for tables with ternary, range or optional fields (larger wins).
        """
        entry = self.table_entry_message(table, match, action, params, priority, member_id, group_id,
                                         idle_timeout_ns, metadata)
        self._write_one("INSERT", lambda e: e.table_entry.CopyFrom(entry))

    def modify_table_entry(self, table, match=None, action=None, params=None, priority=None,
                           member_id=None, group_id=None, idle_timeout_ns=0, metadata=b""):
        """Change the action of an existing entry (same arguments as insert)."""
        entry = self.table_entry_message(table, match, action, params, priority, member_id, group_id,
                                         idle_timeout_ns, metadata)
        self._write_one("MODIFY", lambda e: e.table_entry.CopyFrom(entry))

    def delete_table_entry(self, table, match=None, priority=None):
        """Delete the entry with this match (and priority)."""
        entry = self.table_entry_message(table, match, priority=priority)
        self._write_one("DELETE", lambda e: e.table_entry.CopyFrom(entry))

    def set_default_action(self, table, action, params=None):
        """Set the action a table runs on a miss."""
        info = self._lookup("tables", table)
        entry = p4runtime_pb2.TableEntry(table_id=info.preamble.id, is_default_action=True)
        self._action_msg(action, params, entry.action.action)
        self._write_one("MODIFY", lambda e: e.table_entry.CopyFrom(entry))

    def reset_default_action(self, table):
        """Restore the program's default action of a table."""
        info = self._lookup("tables", table)
        entry = p4runtime_pb2.TableEntry(table_id=info.preamble.id, is_default_action=True)
        self._write_one("MODIFY", lambda e: e.table_entry.CopyFrom(entry))

    def _view(self, proto, counter=False):
        index = self._idx()
        info = index.by_id("tables", proto.table_id)
        fields = {f.id: f for f in info.match_fields}
        match = {}
        for fm in proto.match:
            field = fields[fm.field_id]
            which = fm.WhichOneof("field_match_type")
            width = field.bitwidth
            if which == "exact":
                match[field.name] = decode(fm.exact.value, width, field.name)
            elif which == "optional":
                match[field.name] = decode(fm.optional.value, width, field.name)
            elif which == "lpm":
                match[field.name] = (decode(fm.lpm.value, width, field.name), fm.lpm.prefix_len)
            elif which == "ternary":
                match[field.name] = (decode(fm.ternary.value, width, field.name),
                                     decode(fm.ternary.mask, width, field.name))
            elif which == "range":
                match[field.name] = (decode(fm.range.low, width, field.name),
                                     decode(fm.range.high, width, field.name))
        view = TableEntryView(info.preamble.name, match, priority=proto.priority or None,
                              is_default=proto.is_default_action, is_const=proto.is_const,
                              metadata=proto.metadata)
        which = proto.action.WhichOneof("type") if proto.HasField("action") else None
        if which == "action":
            view.action, view.params = self._action_view(proto.action.action)
        elif which == "action_profile_member_id":
            view.member_id = proto.action.action_profile_member_id
        elif which == "action_profile_group_id":
            view.group_id = proto.action.action_profile_group_id
        if counter and proto.HasField("counter_data"):
            view.counter = (proto.counter_data.packet_count, proto.counter_data.byte_count)
        return view

    def _action_view(self, action_msg):
        info = self._idx().by_id("actions", action_msg.action_id)
        params = {p.id: p for p in info.params}
        return info.preamble.name, {params[p.param_id].name: decode(p.value, params[p.param_id].bitwidth,
                                                                    params[p.param_id].name)
                                    for p in action_msg.params}

    def read_table_entries(self, table=None, match=None, priority=None, counter_data=False,
                           default=False):
        """Read entries as :class:`TableEntryView` objects.

        Args:
            table: table name, or None for all tables.
            match: read only the entry with this match (and ``priority``).
            counter_data: also read direct counters (``view.counter``).
            default: read the default entry (entries) instead.
        """
        entity = p4runtime_pb2.Entity()
        if table is not None:
            entity.table_entry.CopyFrom(self.table_entry_message(table, match, priority=priority)
                                        if match else
                                        p4runtime_pb2.TableEntry(table_id=self._lookup("tables", table)
                                                                 .preamble.id))
        else:
            entity.table_entry.SetInParent()
        if counter_data:
            entity.table_entry.counter_data.SetInParent()
        if default:
            entity.table_entry.is_default_action = True
        return [self._view(e.table_entry, counter_data) for e in self.read([entity])]

    # ---- action profiles ------------------------------------------------------------------
    def _member(self, kind, profile, member_id, action=None, params=None):
        info = self._lookup("action_profiles", profile)

        def fill(entity):
            member = entity.action_profile_member
            member.action_profile_id = info.preamble.id
            member.member_id = member_id
            if action is not None:
                self._action_msg(action, params, member.action)
        self._write_one(kind, fill)

    def insert_member(self, profile, member_id, action, params=None):
        """Add an action profile member running ``action(params)``."""
        self._member("INSERT", profile, member_id, action, params)

    def modify_member(self, profile, member_id, action, params=None):
        """Change a member's action."""
        self._member("MODIFY", profile, member_id, action, params)

    def delete_member(self, profile, member_id):
        """Remove a member."""
        self._member("DELETE", profile, member_id)

    def _group(self, kind, profile, group_id, members=(), max_size=0):
        info = self._lookup("action_profiles", profile)

        def fill(entity):
            group = entity.action_profile_group
            group.action_profile_id = info.preamble.id
            group.group_id = group_id
            for member in members:
                member_id, weight = member if isinstance(member, (tuple, list)) else (member, 1)
                group.members.add(member_id=member_id, weight=weight)
            if max_size:
                group.max_size = max_size
        self._write_one(kind, fill)

    def insert_group(self, profile, group_id, members, max_size=0):
        """Add a selector group; ``members`` are member ids or (member_id, weight)."""
        self._group("INSERT", profile, group_id, members, max_size)

    def modify_group(self, profile, group_id, members):
        """Replace a group's members."""
        self._group("MODIFY", profile, group_id, members)

    def delete_group(self, profile, group_id):
        """Remove a group."""
        self._group("DELETE", profile, group_id)

    def read_members(self, profile):
        """{member_id: (action name, {param: int})} of a profile."""
        info = self._lookup("action_profiles", profile)
        entity = p4runtime_pb2.Entity()
        entity.action_profile_member.action_profile_id = info.preamble.id
        return {e.action_profile_member.member_id: self._action_view(e.action_profile_member.action)
                for e in self.read([entity])}

    def read_groups(self, profile):
        """{group_id: [(member_id, weight), ...]} of a selector."""
        info = self._lookup("action_profiles", profile)
        entity = p4runtime_pb2.Entity()
        entity.action_profile_group.action_profile_id = info.preamble.id
        return {e.action_profile_group.group_id: [(m.member_id, m.weight)
                                                  for m in e.action_profile_group.members]
                for e in self.read([entity])}

    # ---- counters, registers, meters ------------------------------------------------------
    def read_counter(self, name, index=None):
        """(packets, bytes) of one cell, or {index: (packets, bytes)} of all cells."""
        info = self._lookup("counters", name)
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = info.preamble.id
        if index is not None:
            entity.counter_entry.index.index = index
        cells = {e.counter_entry.index.index: (e.counter_entry.data.packet_count,
                                               e.counter_entry.data.byte_count)
                 for e in self.read([entity])}
        return cells[index] if index is not None else cells

    def write_counter(self, name, index, packets=0, nbytes=0):
        """Set one counter cell (``index`` None: every cell)."""
        info = self._lookup("counters", name)

        def fill(entity):
            entity.counter_entry.counter_id = info.preamble.id
            if index is not None:
                entity.counter_entry.index.index = index
            entity.counter_entry.data.packet_count = packets
            entity.counter_entry.data.byte_count = nbytes
        self._write_one("MODIFY", fill)

    def read_direct_counter(self, table, match=None, priority=None):
        """(packets, bytes) of one entry, or [(TableEntryView, (packets, bytes))] of all entries."""
        entity = p4runtime_pb2.Entity()
        if match is not None:
            entity.direct_counter_entry.table_entry.CopyFrom(self.table_entry_message(table, match,
                                                                                      priority=priority))
        else:
            entity.direct_counter_entry.table_entry.table_id = self._lookup("tables", table).preamble.id
        results = [(self._view(e.direct_counter_entry.table_entry),
                    (e.direct_counter_entry.data.packet_count, e.direct_counter_entry.data.byte_count))
                   for e in self.read([entity])]
        if match is not None:
            if not results:
                raise P4RuntimeClientError("NOT_FOUND", f"table {table}: no entry with this match")
            return results[0][1]
        return results

    def write_direct_counter(self, table, match, packets=0, nbytes=0, priority=None):
        """Set the direct counter of one entry."""
        entry = self.table_entry_message(table, match, priority=priority)

        def fill(entity):
            entity.direct_counter_entry.table_entry.CopyFrom(entry)
            entity.direct_counter_entry.data.packet_count = packets
            entity.direct_counter_entry.data.byte_count = nbytes
        self._write_one("MODIFY", fill)

    def read_register(self, name, index=None):
        """The value of one cell, or the list of all cells."""
        info = self._lookup("registers", name)
        entity = p4runtime_pb2.Entity()
        entity.register_entry.register_id = info.preamble.id
        if index is not None:
            entity.register_entry.index.index = index
        width = info.type_spec.bitstring.bit.bitwidth
        cells = {e.register_entry.index.index: decode(e.register_entry.data.bitstring, width, name)
                 for e in self.read([entity])}
        return cells[index] if index is not None else [cells[i] for i in sorted(cells)]

    def write_register(self, name, index, value):
        """Set one register cell (``index`` None: every cell)."""
        info = self._lookup("registers", name)
        width = info.type_spec.bitstring.bit.bitwidth
        number = parse_value(value, width, f"{name}[{index}]")

        def fill(entity):
            entity.register_entry.register_id = info.preamble.id
            if index is not None:
                entity.register_entry.index.index = index
            entity.register_entry.data.bitstring = encode(number)
        self._write_one("MODIFY", fill)

    def set_meter(self, name, index, cir, cburst, pir, pburst):
        """Configure a meter cell (rates in units/s, bursts in units)."""
        info = self._lookup("meters", name)

        def fill(entity):
            entity.meter_entry.meter_id = info.preamble.id
            if index is not None:
                entity.meter_entry.index.index = index
            entity.meter_entry.config.cir, entity.meter_entry.config.cburst = cir, cburst
            entity.meter_entry.config.pir, entity.meter_entry.config.pburst = pir, pburst
        self._write_one("MODIFY", fill)

    def reset_meter(self, name, index):
        """Unconfigure a meter cell (every packet GREEN)."""
        info = self._lookup("meters", name)

        def fill(entity):
            entity.meter_entry.meter_id = info.preamble.id
            if index is not None:
                entity.meter_entry.index.index = index
        self._write_one("MODIFY", fill)

    def read_meter(self, name, index):
        """(cir, cburst, pir, pburst) of a meter cell, or None when unconfigured."""
        info = self._lookup("meters", name)
        entity = p4runtime_pb2.Entity()
        entity.meter_entry.meter_id = info.preamble.id
        entity.meter_entry.index.index = index
        for e in self.read([entity]):
            if e.meter_entry.HasField("config"):
                c = e.meter_entry.config
                return c.cir, c.cburst, c.pir, c.pburst
        return None

    def set_direct_meter(self, table, match, cir, cburst, pir, pburst, priority=None):
        """Configure the direct meter of one entry."""
        entry = self.table_entry_message(table, match, priority=priority)

        def fill(entity):
            entity.direct_meter_entry.table_entry.CopyFrom(entry)
            config = entity.direct_meter_entry.config
            config.cir, config.cburst, config.pir, config.pburst = cir, cburst, pir, pburst
        self._write_one("MODIFY", fill)

    def read_direct_meter(self, table, match, priority=None):
        """(cir, cburst, pir, pburst) of an entry's direct meter, or None when unconfigured."""
        entity = p4runtime_pb2.Entity()
        entity.direct_meter_entry.table_entry.CopyFrom(self.table_entry_message(table, match,
                                                                                priority=priority))
        for e in self.read([entity]):
            if e.direct_meter_entry.HasField("config"):
                c = e.direct_meter_entry.config
                return c.cir, c.cburst, c.pir, c.pburst
        return None

    # ---- packet replication engine --------------------------------------------------------
    @staticmethod
    def _replicas(out, replicas):
        for replica in replicas:
            port, instance = replica if isinstance(replica, (tuple, list)) else (replica, 0)
            out.add(egress_port=port, instance=instance)

    def _mcast(self, kind, group_id, replicas=()):
        def fill(entity):
            group = entity.packet_replication_engine_entry.multicast_group_entry
            group.multicast_group_id = group_id
            self._replicas(group.replicas, replicas)
        self._write_one(kind, fill)

    def insert_multicast_group(self, group_id, replicas):
        """Create a multicast group; ``replicas`` are ports or (port, instance) pairs."""
        self._mcast("INSERT", group_id, replicas)

    def modify_multicast_group(self, group_id, replicas):
        """Replace a multicast group's replicas."""
        self._mcast("MODIFY", group_id, replicas)

    def delete_multicast_group(self, group_id):
        """Delete a multicast group."""
        self._mcast("DELETE", group_id)

    def read_multicast_groups(self):
        """{group_id: [(port, instance), ...]}."""
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.SetInParent()
        result = {}
        for e in self.read([entity]):
            group = e.packet_replication_engine_entry.multicast_group_entry
            result[group.multicast_group_id] = [(_replica_port(r), r.instance) for r in group.replicas]
        return result

    def _clone(self, kind, session_id, replicas=(), class_of_service=0, packet_length_bytes=0):
        def fill(entity):
            session = entity.packet_replication_engine_entry.clone_session_entry
            session.session_id = session_id
            self._replicas(session.replicas, replicas)
            session.class_of_service = class_of_service
            session.packet_length_bytes = packet_length_bytes
        self._write_one(kind, fill)

    def insert_clone_session(self, session_id, replicas, class_of_service=0, packet_length_bytes=0):
        """Create a clone session (``packet_length_bytes`` > 0 truncates clones)."""
        self._clone("INSERT", session_id, replicas, class_of_service, packet_length_bytes)

    def modify_clone_session(self, session_id, replicas, class_of_service=0, packet_length_bytes=0):
        """Replace a clone session."""
        self._clone("MODIFY", session_id, replicas, class_of_service, packet_length_bytes)

    def delete_clone_session(self, session_id):
        """Delete a clone session."""
        self._clone("DELETE", session_id)

    def read_clone_sessions(self):
        """{session_id: ([(port, instance)], class_of_service, packet_length_bytes)}."""
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.clone_session_entry.SetInParent()
        result = {}
        for e in self.read([entity]):
            s = e.packet_replication_engine_entry.clone_session_entry
            result[s.session_id] = ([(_replica_port(r), r.instance) for r in s.replicas],
                                    s.class_of_service, s.packet_length_bytes)
        return result

    # ---- digests --------------------------------------------------------------------------
    def enable_digest(self, name, max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0, modify=False):
        """Configure a digest so the switch streams it (DigestEntry INSERT or MODIFY)."""
        info = self._lookup("digests", name)

        def fill(entity):
            entity.digest_entry.digest_id = info.preamble.id
            config = entity.digest_entry.config
            config.max_timeout_ns, config.max_list_size = max_timeout_ns, max_list_size
            config.ack_timeout_ns = ack_timeout_ns
        self._write_one("MODIFY" if modify else "INSERT", fill)

    def disable_digest(self, name):
        """Stop a digest (DigestEntry DELETE)."""
        info = self._lookup("digests", name)
        self._write_one("DELETE", lambda e: setattr(e.digest_entry, "digest_id", info.preamble.id))

    def get_digest(self, timeout=1.0):
        """The next :class:`DigestList`, or None after ``timeout`` seconds (or a closed stream)."""
        try:
            message = self._digest_q.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            self._digest_q.put(None)
            return None
        info = self._idx().by_id("digests", message.digest_id)
        struct = self._idx().p4info.type_info.structs.get(info.type_spec.struct.name)
        names = [m.name for m in struct.members] if struct is not None else []
        data = []
        for item in message.data:
            values = [int.from_bytes(m.bitstring, "big") for m in item.struct.members]
            data.append(dict(zip(names, values)) if names else {str(i): v for i, v in enumerate(values)})
        return DigestList(info.preamble.name, message.list_id, data)

    def ack_digest(self, name, list_id):
        """Acknowledge a DigestList (when ``auto_ack_digests`` is off)."""
        request = p4runtime_pb2.StreamMessageRequest()
        request.digest_ack.digest_id = self._lookup("digests", name).preamble.id
        request.digest_ack.list_id = list_id
        self._outbox.put(request)

    # ---- packet I/O -----------------------------------------------------------------------
    def packet_out(self, payload, **metadata):
        """Send a PacketOut; ``metadata`` names the packet_out header fields (e.g. egress_port=2)."""
        index = self._idx()
        request = p4runtime_pb2.StreamMessageRequest()
        request.packet.payload = bytes(payload)
        header = index.packet_metadata("packet_out")
        for name, value in metadata.items():
            if header is None:
                raise ParameterError(name, value, "no metadata (the program has no packet_out header)")
            field = next((f for f in header.metadata if f.name == name), None)
            if field is None:
                raise ParameterError(name, value, ", ".join(f.name for f in header.metadata))
            request.packet.metadata.add(metadata_id=field.id,
                                        value=encode(parse_value(value, field.bitwidth, name)))
        self._outbox.put(request)

    def get_packet_in(self, timeout=1.0):
        """The next :class:`PacketIn`, or None after ``timeout`` seconds (or a closed stream)."""
        try:
            message = self._packet_q.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            self._packet_q.put(None)
            return None
        header = self._idx().packet_metadata("packet_in")
        fields = {f.id: f for f in header.metadata} if header is not None else {}
        metadata = {}
        for item in message.metadata:
            field = fields.get(item.metadata_id)
            name = field.name if field is not None else str(item.metadata_id)
            metadata[name] = int.from_bytes(item.value, "big")
        return PacketIn(bytes(message.payload), metadata)

    def get_idle_timeouts(self, timeout=1.0):
        """The entries of the next IdleTimeoutNotification (list of TableEntryView), or None."""
        try:
            message = self._idle_q.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            self._idle_q.put(None)
            return None
        return [self._view(entry) for entry in message.table_entry]

    def get_stream_error(self, timeout=1.0):
        """The next StreamError message from the switch, or None."""
        try:
            return self._error_q.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_primary(self, timeout=5.0):
        """Wait until this client is primary; returns the final state."""
        deadline = time.monotonic() + timeout
        while not self.is_primary and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.is_primary


_PIPELINE_CACHE = {}
_PIPELINE_CACHE_LOCK = threading.Lock()


def embedded_pipeline(program):
    """(P4Info, device config bytes) of a program for the embedded target.

    Args:
        program: path of a .p4 file, or a loaded program (``testbed.p4.loader``).

    Paths are cached by absolute path and the modification times of the files, so
    programming many switches with one program loads it once in this process.

    Raises:
        P4LoadError: the program does not load (file:line).
    """
    from testbed.p4runtime.p4info import build_p4info
    from testbed.p4.device_config import device_config_for

    if not isinstance(program, str):
        return build_p4info(program.info), device_config_for(program)
    import os

    from testbed.p4.loader import load_program

    path = os.path.abspath(program)
    with _PIPELINE_CACHE_LOCK:
        cached = _PIPELINE_CACHE.get(path)
        if cached is not None:
            stamps, result = cached
            if all(os.path.exists(f) and os.path.getmtime(f) == t for f, t in stamps):
                return result
        loaded = load_program(path)
        base = os.path.dirname(path)
        files = [os.path.join(base, name) for name in loaded.sources]
        stamps = [(f, os.path.getmtime(f)) for f in files if os.path.exists(f)] or [(path, os.path.getmtime(path))]
        result = (build_p4info(loaded.info), device_config_for(loaded))
        _PIPELINE_CACHE[path] = (stamps, result)
        return result


def _replica_port(replica):
    if replica.WhichOneof("port_kind") == "port":
        return int.from_bytes(replica.port, "big")
    return replica.egress_port


def _load_p4info(p4info):
    """A P4Info message from a message, text, or a path to a text/binary file."""
    import os

    from testbed.p4runtime.p4info import p4info_from_text

    if isinstance(p4info, p4info_pb2.P4Info):
        return p4info
    if isinstance(p4info, str) and os.path.exists(p4info):
        with open(p4info, "rb") as handle:
            data = handle.read()
        if p4info.endswith((".bin", ".pb")):
            message = p4info_pb2.P4Info()
            message.ParseFromString(data)
            return message
        return p4info_from_text(data.decode())
    if isinstance(p4info, (bytes, bytearray)):
        message = p4info_pb2.P4Info()
        message.ParseFromString(bytes(p4info))
        return message
    return p4info_from_text(p4info)
