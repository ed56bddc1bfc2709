"""The P4Runtime gRPC server of one embedded switch.

    server = P4RuntimeServer(EmbeddedTarget(cpu_port=510), device_id=1, address="127.0.0.1:9560")
    server.start()          # returns once listening; server.port is the bound port
    ...
    server.stop()

Behaviour follows the P4Runtime specification 1.x:

* Arbitration on StreamChannel (see :mod:`testbed.p4runtime.arbitration`); only the
  primary of a role may Write or SetForwardingPipelineConfig (PERMISSION_DENIED).
* Request-level errors are returned as the gRPC status of the call: unknown device id
  NOT_FOUND, no pipeline FAILED_PRECONDITION, unsupported atomicity UNIMPLEMENTED, ...
* A Write batch is processed CONTINUE_ON_ERROR.  If any update fails, the call ends
  with status UNKNOWN and a ``google.rpc.Status`` in the ``grpc-status-details-bin``
  trailer whose ``details`` hold one ``p4.v1.Error`` per update, in order (OK, with
  no other field, for the ones that succeeded), each with the canonical code
  (NOT_FOUND, INVALID_ARGUMENT, ALREADY_EXISTS, ...) and a message naming the
  object and field.  This is what the spec requires and what p4runtime-shell and
  the client of this package decode; the gRPC metadata limits are raised so that
  it holds for every batch size (see :mod:`testbed.p4runtime.limits`).
* Read errors (unknown ids, malformed keys) end the Read with that status.  Reads
  are streamed in chunks, and hold the lock writes need only while the selected
  values are copied (see :mod:`testbed.p4runtime.reader`).
* Documented limits (selector weights, extern array sizes, batch size) are in
  :mod:`testbed.p4runtime.limits`.
* Stream errors (a PacketOut from a backup, bad metadata, an unknown digest ack) are
  reported with a StreamError message; the stream stays open.
* SetForwardingPipelineConfig: VERIFY loads and checks the program; VERIFY_AND_COMMIT
  installs it with empty forwarding state; VERIFY_AND_SAVE keeps it for a later COMMIT
  (reads and writes go to the running pipeline until then; nothing is replayed);
  RECONCILE_AND_COMMIT is accepted only for the running program (state kept, cookie
  and P4Info updated), otherwise INVALID_ARGUMENT.  A controller P4Info must agree
  with the program's (ids, fields) on every object both have.
* Not implemented (UNIMPLEMENTED): ROLLBACK_ON_ERROR/DATAPLANE_ATOMIC, one-shot action
  sets, value sets, extern entries, direct resources of default entries.
* The server never dies from a bad request: unexpected exceptions become INTERNAL.
"""
import collections
import contextlib
import queue
import threading
from concurrent import futures

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.p4runtime import convert, limits
from testbed.p4runtime.arbitration import Arbiter, Connection
from testbed.p4runtime.digests import DigestConfig, DigestEngine
from testbed.p4runtime.errors import P4RuntimeError, error_code, error_message, require
from testbed.p4runtime.idle_timeout import IdleTimeoutWatcher
from testbed.p4runtime.p4info_index import P4InfoLookupError
from testbed.p4runtime.reader import INDEXED, Reader, index_list

API_VERSION = "1.4.1"
_Update = p4runtime_pb2.Update
_SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
_GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest
_GRPC_OPTIONS = (("grpc.max_receive_message_length", limits.MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", limits.MAX_MESSAGE_BYTES),
                 ("grpc.max_metadata_size", limits.MAX_METADATA_BYTES),
                 ("grpc.absolute_max_metadata_size", limits.MAX_METADATA_BYTES))
_OK_ERROR = any_pb2.Any()
_OK_ERROR.Pack(p4runtime_pb2.Error())  # an OK p4.Error carries the code only (spec "Write RPC")


class _RichStatus(collections.namedtuple("_RichStatus", ("code", "details", "trailing_metadata")),
                  grpc.Status):
    """A grpc.Status carrying a google.rpc.Status in the trailing metadata."""


def _status_code(name):
    try:
        return grpc.StatusCode[name]
    except KeyError:
        return grpc.StatusCode.INTERNAL


def _enum_name(enum, value):
    """The name of an enum value, or the number for a value the enum does not define."""
    return enum.Name(value) if value in enum.values() else str(value)


def _canonical(name):
    return code_pb2.Code.Value(name) if name in code_pb2.Code.keys() else code_pb2.INTERNAL


class _Abort(Exception):
    """Internal: end the current RPC with this status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class _Malformed:
    """A request whose bytes do not parse as the message its method takes.

    gRPC would answer INTERNAL for it; the handlers answer INVALID_ARGUMENT instead.
    """

    def __init__(self, message_class, error):
        self.message = (f"the request is not a valid {message_class.DESCRIPTOR.full_name} message: "
                        f"{error}")


def _parser(message_class):
    """A request deserializer that returns a :class:`_Malformed` for bytes that do not parse."""
    def parse(data):
        try:
            return message_class.FromString(data)
        except Exception as exc:  # DecodeError, or anything else the protobuf runtime raises
            return _Malformed(message_class, exc)
    return parse


def _refuse_malformed(method, streaming):
    """Wrap a unary-request servicer method: a malformed request ends the call with INVALID_ARGUMENT."""
    if streaming:
        def handler(request, context):
            if isinstance(request, _Malformed):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            yield from method(request, context)
    else:
        def handler(request, context):
            if isinstance(request, _Malformed):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            return method(request, context)
    return handler


def _service_handlers(service):
    """The gRPC handler of the P4Runtime service (as the generated code registers it, but
    requests that do not parse are INVALID_ARGUMENT instead of gRPC's INTERNAL)."""
    pb = p4runtime_pb2
    unary = (("Write", pb.WriteRequest, pb.WriteResponse),
             ("SetForwardingPipelineConfig", pb.SetForwardingPipelineConfigRequest,
              pb.SetForwardingPipelineConfigResponse),
             ("GetForwardingPipelineConfig", pb.GetForwardingPipelineConfigRequest,
              pb.GetForwardingPipelineConfigResponse),
             ("Capabilities", pb.CapabilitiesRequest, pb.CapabilitiesResponse))
    handlers = {name: grpc.unary_unary_rpc_method_handler(
        _refuse_malformed(getattr(service, name), False), request_deserializer=_parser(request),
        response_serializer=response.SerializeToString) for name, request, response in unary}
    handlers["Read"] = grpc.unary_stream_rpc_method_handler(
        _refuse_malformed(service.Read, True), request_deserializer=_parser(pb.ReadRequest),
        response_serializer=pb.ReadResponse.SerializeToString)
    handlers["StreamChannel"] = grpc.stream_stream_rpc_method_handler(
        service.StreamChannel, request_deserializer=_parser(pb.StreamMessageRequest),
        response_serializer=pb.StreamMessageResponse.SerializeToString)
    return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", handlers)


def _known_errors():
    from testbed.p4.state.errors import StateError

    return (P4RuntimeError, StateError, P4InfoLookupError)


class P4RuntimeServer:
    """A P4Runtime gRPC server for one :class:`~testbed.embedded_switch.p4runtime_target.EmbeddedTarget`.

    Args:
        target: the EmbeddedTarget.
        device_id: the P4Runtime device id of the switch.
        address: "host:port" to listen on (port 0 picks a free port).
        max_workers: gRPC worker threads (each open StreamChannel holds one).
    """

    def __init__(self, target, device_id=1, address="127.0.0.1:9559", max_workers=64):
        self.target = target
        self.device_id = device_id
        self.address = address
        self.max_workers = max_workers
        self.port = None
        self.arbiter = Arbiter(device_id)
        self.digests = DigestEngine(self._send_to_primary)
        self.idle_timeouts = IdleTimeoutWatcher(target, self._send_to_primary)
        self._grpc = None
        self.service = _P4RuntimeService(self)
        target.add_packet_in_listener(self._on_packet_in)
        target.add_digest_listener(self._on_digest)
        target.add_pipeline_listener(self.digests.reset)
        target.add_pipeline_listener(self.idle_timeouts.reset)

    def start(self):
        """Listen and serve (in background threads).

        Returns:
            int: the bound port.

        Raises:
            RuntimeError: the address cannot be bound.
        """
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=self.max_workers,
                                                            thread_name_prefix="p4rt"),
                                 options=_GRPC_OPTIONS)
        self._grpc.add_generic_rpc_handlers((_service_handlers(self.service),))
        self.port = self._grpc.add_insecure_port(self.address)
        if not self.port:
            raise RuntimeError(f"P4Runtime server cannot listen on {self.address}")
        self._grpc.start()
        self.digests.start()
        self.idle_timeouts.start()
        return self.port

    def stop(self, grace=0.5):
        """Stop serving and close every stream."""
        self.digests.stop()
        self.idle_timeouts.stop()
        self.service.close_streams()
        if self._grpc is not None:
            self._grpc.stop(grace).wait(grace + 1)
            self._grpc = None
        self.target.remove_packet_in_listener(self._on_packet_in)
        self.target.remove_digest_listener(self._on_digest)

    # ---- notifications to the primary ----------------------------------------------------
    def _send_to_primary(self, message):
        primary = self.arbiter.primary("")
        if primary is None:
            return False
        primary.send(message)
        return True

    def _on_packet_in(self, payload, metadata):
        index = self.target.index
        response = p4runtime_pb2.StreamMessageResponse()
        response.packet.payload = payload
        header = index.packet_metadata("packet_in") if index is not None else None
        if header is not None:
            for field in header.metadata:
                item = response.packet.metadata.add()
                item.metadata_id = field.id
                item.value = convert.encode(metadata.get(field.name, 0))
        self._send_to_primary(response)

    def _on_digest(self, name, values):
        index = self.target.index
        if index is None:
            return
        try:
            digest_id = index.id_of("digests", name)
        except KeyError:
            return
        self.digests.offer(digest_id, values)


class _P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The gRPC servicer; all state lives in the owning :class:`P4RuntimeServer`."""

    def __init__(self, server):
        self.server = server
        self._streams = set()
        self._streams_lock = threading.Lock()

    @property
    def target(self):
        return self.server.target

    # ---- helpers --------------------------------------------------------------------------
    def _check_device(self, device_id):
        if device_id != self.server.device_id:
            raise _Abort("NOT_FOUND", f"device id {device_id} not found (this switch is device "
                                      f"{self.server.device_id})")

    def _check_pipeline(self):
        if self.target.index is None:
            raise _Abort("FAILED_PRECONDITION", "no forwarding pipeline config set; send "
                                                "SetForwardingPipelineConfig first")

    def _check_primary(self, request, what):
        try:
            self.server.arbiter.check_primary(request.role, request.election_id,
                                              request.HasField("election_id"), what)
        except P4RuntimeError as exc:
            raise _Abort(exc.code, exc.message) from None

    @staticmethod
    def _abort(context, exc):
        context.abort(_status_code(exc.code), exc.message)

    @contextlib.contextmanager
    def _errors_end_rpc(self, context):
        """End the RPC with the status of an error raised in the block (INTERNAL for a bug)."""
        try:
            yield
        except _Abort as exc:
            self._abort(context, exc)
        except _known_errors() as exc:
            context.abort(_status_code(error_code(exc)), error_message(exc))
        except Exception as exc:  # a bug must not take the server down
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")

    def close_streams(self):
        """End every open StreamChannel (server shutdown)."""
        with self._streams_lock:
            streams = list(self._streams)
        for outbox in streams:
            outbox.put(None)

    # ---- Capabilities ---------------------------------------------------------------------
    def Capabilities(self, request, context):
        """The P4Runtime API version implemented."""
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ---- pipeline config ------------------------------------------------------------------
    def SetForwardingPipelineConfig(self, request, context):
        """VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT and RECONCILE_AND_COMMIT."""
        with self._errors_end_rpc(context):
            self._check_device(request.device_id)
            self._check_primary(request, "SetForwardingPipelineConfig")
            self._set_pipeline(request)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _set_pipeline(self, request):
        target = self.target
        action = request.action
        has_config = request.HasField("config") and (
            request.config.p4_device_config or request.config.HasField("p4info"))
        cookie = request.config.cookie.cookie if request.config.HasField("cookie") else None
        if action == _SetAction.COMMIT:
            if has_config:
                raise _Abort("INVALID_ARGUMENT", "COMMIT takes no config (it commits the saved one)")
            if target.saved is None:
                raise _Abort("FAILED_PRECONDITION", "COMMIT: no config was saved with VERIFY_AND_SAVE")
            prepared, saved_cookie = target.saved
            target.saved = None
            target.commit(prepared, saved_cookie)
            return
        if action not in (_SetAction.VERIFY, _SetAction.VERIFY_AND_SAVE, _SetAction.VERIFY_AND_COMMIT,
                          _SetAction.RECONCILE_AND_COMMIT):
            raise _Abort("INVALID_ARGUMENT", f"action {_enum_name(_SetAction.Action, action)} is not one of "
                                             f"VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT, "
                                             f"RECONCILE_AND_COMMIT")
        if not has_config or not request.config.p4_device_config:
            raise _Abort("INVALID_ARGUMENT", "no config (p4info and p4_device_config) given")
        p4info = request.config.p4info if request.config.HasField("p4info") else None
        if action == _SetAction.RECONCILE_AND_COMMIT:
            if target.device_config is None or bytes(request.config.p4_device_config) != target.device_config:
                raise _Abort("INVALID_ARGUMENT", "RECONCILE_AND_COMMIT: the forwarding state cannot "
                                                 "be preserved across a program change; use "
                                                 "VERIFY_AND_COMMIT")
            prepared = target.prepare(p4info, request.config.p4_device_config)
            with target.lock:
                target.client_p4info = prepared["client_p4info"]
                target.cookie = cookie
            return
        prepared = target.prepare(p4info, request.config.p4_device_config)
        if action == _SetAction.VERIFY_AND_SAVE:
            target.saved = (prepared, cookie)
        elif action == _SetAction.VERIFY_AND_COMMIT:
            target.commit(prepared, cookie)

    def GetForwardingPipelineConfig(self, request, context):
        """The current config; ``response_type`` selects the fields."""
        try:
            self._check_device(request.device_id)
            self._check_pipeline()
            kind = request.response_type
            if kind not in _GetType.ResponseType.values():
                raise _Abort("INVALID_ARGUMENT", f"response_type {kind} is not one of "
                                                 f"{', '.join(_GetType.ResponseType.keys())}")
        except _Abort as exc:
            self._abort(context, exc)
        target = self.target
        response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        config = response.config
        if kind in (_GetType.ALL, _GetType.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(target.client_p4info)
        if kind in (_GetType.ALL, _GetType.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = target.device_config
        if target.cookie is not None:
            config.cookie.cookie = target.cookie
        return response

    # ---- StreamChannel --------------------------------------------------------------------
    def StreamChannel(self, request_iterator, context):
        """Arbitration, PacketOut/PacketIn, digests and stream errors of one controller."""
        outbox = queue.Queue()
        conn = Connection(outbox.put)
        with self._streams_lock:
            self._streams.add(outbox)
        context.add_callback(lambda: outbox.put(None))
        reader = threading.Thread(target=self._read_stream, args=(request_iterator, conn, outbox),
                                  name="p4rt-stream-reader", daemon=True)
        reader.start()
        try:
            while True:
                item = outbox.get()
                if item is None:
                    break
                if isinstance(item, _Abort):
                    context.abort(_status_code(item.code), item.message)
                yield item
        finally:
            self.server.arbiter.remove(conn)
            with self._streams_lock:
                self._streams.discard(outbox)

    def _read_stream(self, request_iterator, conn, outbox):
        try:
            for request in request_iterator:
                if isinstance(request, _Malformed):
                    outbox.put(_Abort("INVALID_ARGUMENT", request.message))
                    return
                which = request.WhichOneof("update")
                if which == "arbitration":
                    try:
                        self.server.arbiter.update(conn, request.arbitration)
                    except P4RuntimeError as exc:
                        outbox.put(_Abort(exc.code, exc.message))
                        return
                elif not conn.arbitrated:
                    self._stream_error(outbox, "FAILED_PRECONDITION",
                                       "send a MasterArbitrationUpdate before other stream messages",
                                       request)
                elif which == "packet":
                    self._packet_out(conn, outbox, request)
                elif which == "digest_ack":
                    ack = request.digest_ack
                    if not self.server.digests.ack(ack.digest_id, ack.list_id):
                        pass  # an ack after the ack timeout, or of an untracked list: harmless
                else:
                    self._stream_error(outbox, "UNIMPLEMENTED", f"stream message {which} is not supported",
                                       request)
        except grpc.RpcError:
            pass  # the client went away
        except Exception as exc:  # never let a reader thread die silently with the stream open
            outbox.put(_Abort("INTERNAL", f"stream reader failed: {exc}"))
            return
        outbox.put(None)

    def _packet_out(self, conn, outbox, request):
        primary = self.server.arbiter.primary(conn.role)
        if primary is not conn:
            self._stream_error(outbox, "PERMISSION_DENIED",
                               "PacketOut from a backup controller dropped; only the primary may send",
                               request)
            return
        packet = request.packet
        try:
            index = self.target.index
            if index is None:
                raise P4RuntimeError("FAILED_PRECONDITION", "no forwarding pipeline config set")
            header = index.packet_metadata("packet_out")
            values = {}
            for item in packet.metadata:
                field = None
                if header is not None:
                    field = next((f for f in header.metadata if f.id == item.metadata_id), None)
                if field is None:
                    raise P4RuntimeError("INVALID_ARGUMENT",
                                         f"packet_out: unknown metadata id {item.metadata_id}")
                if field.name in values:  # which of two values would be meant is not for the server to guess
                    raise P4RuntimeError("INVALID_ARGUMENT", f"packet_out: metadata id {item.metadata_id} "
                                                             f"({field.name}) given more than once")
                values[field.name] = convert.decode(item.value, field.bitwidth,
                                                    f"packet_out metadata {field.name}")
            self.target.packet_out(packet.payload, values)
        except _known_errors() as exc:
            self._stream_error(outbox, error_code(exc), error_message(exc), request)

    @staticmethod
    def _stream_error(outbox, code, message, request):
        response = p4runtime_pb2.StreamMessageResponse()
        error = response.error
        error.canonical_code = _canonical(code)
        error.message = message
        which = request.WhichOneof("update")
        if which == "packet":
            error.packet_out.packet_out.CopyFrom(request.packet)
        elif which == "digest_ack":
            error.digest_list_ack.digest_list_ack.CopyFrom(request.digest_ack)
        else:
            error.other.SetInParent()
        outbox.put(response)

    # ---- Write ----------------------------------------------------------------------------
    def Write(self, request, context):
        """Apply a batch of updates (CONTINUE_ON_ERROR), reporting per-update errors."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request, "Write")
            self._check_pipeline()
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise _Abort("UNIMPLEMENTED", "only CONTINUE_ON_ERROR atomicity is supported")
            if len(request.updates) > limits.MAX_WRITE_UPDATES:
                raise _Abort("RESOURCE_EXHAUSTED",
                             f"a WriteRequest may hold at most {limits.MAX_WRITE_UPDATES} updates "
                             f"(MAX_WRITE_UPDATES), got {len(request.updates)}; nothing was applied, "
                             f"split the batch")
        except _Abort as exc:
            self._abort(context, exc)
        writer = _Writer(self.server)
        failures = []
        known = _known_errors()
        with self.target.lock:
            for number, update in enumerate(request.updates):
                try:
                    writer.apply(update)
                except known as exc:
                    failures.append((number, error_code(exc), error_message(exc)))
                except Exception as exc:  # a bug must not take the server down
                    failures.append((number, "INTERNAL", f"internal error: {type(exc).__name__}: {exc}"))
        self.target.writes_applied()
        if failures:
            context.abort_with_status(_write_failure_status(len(request.updates), failures))
        return p4runtime_pb2.WriteResponse()

    # ---- Read -----------------------------------------------------------------------------
    def Read(self, request, context):
        """Stream the requested entities (wildcards expanded) in chunks.

        The values are copied with the target lock held (writes wait only for that);
        the messages are built and sent without it (see :mod:`testbed.p4runtime.reader`).
        """
        parts = []
        with self._errors_end_rpc(context):
            self._check_device(request.device_id)
            self._check_pipeline()
            reader = Reader(self.target, self.server.digests)
            with self.target.lock:
                for entity in request.entities:
                    parts.extend(reader.snapshot(entity))
        response = p4runtime_pb2.ReadResponse()
        sent = False
        with self._errors_end_rpc(context):
            for render in parts:
                for entity in render():
                    response.entities.append(entity)
                    if len(response.entities) >= limits.READ_CHUNK_ENTITIES:
                        yield response
                        sent = True
                        response = p4runtime_pb2.ReadResponse()
        if response.entities or not sent:
            yield response


def _write_failure_status(count, failures):
    """The grpc.Status of a Write batch in which some updates failed (spec "Write RPC", "Error Reporting").

    Code UNKNOWN; the ``grpc-status-details-bin`` trailer holds a ``google.rpc.Status``
    with one ``p4.v1.Error`` per update, in order (its position is the update's
    index): OK ones carry the code only, failed ones their code and message
    (shortened when needed so that the details fit :data:`limits.MAX_ERROR_DETAILS_BYTES`).

    Args:
        count: the number of updates in the batch.
        failures: list of (update index, status name, message), in index order.
    """
    first_number, first_code, first_message = failures[0]
    summary = (f"{len(failures)} of {count} update(s) failed; first: update {first_number}: "
               f"{first_code}: {first_message}")[:1024]
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message=summary)
    budget = limits.MAX_ERROR_DETAILS_BYTES - count * (_OK_ERROR.ByteSize() + 4)
    per_message = max(64, min(1024, budget // len(failures) - 64))
    failed = {number: (code, message) for number, code, message in failures}
    for number in range(count):
        if number not in failed:
            status.details.append(_OK_ERROR)
            continue
        code, text = failed[number]
        if len(text) > per_message:
            text = text[:per_message - 3] + "..."
        status.details.add().Pack(p4runtime_pb2.Error(canonical_code=_canonical(code), message=text))
    return _RichStatus(grpc.StatusCode.UNKNOWN, summary,
                       (("grpc-status-details-bin", status.SerializeToString()),))


class _Writer:
    """Applies single Updates to the target's state (the caller holds the target lock)."""

    def __init__(self, server):
        self.server = server
        self.target = server.target
        self.index = server.target.index
        self.state = server.target.state
        self._selector_weights = {}  # selector name -> sum of the weights of its groups

    def apply(self, update):
        kind = update.type
        require(kind in (_Update.INSERT, _Update.MODIFY, _Update.DELETE), "INVALID_ARGUMENT",
                "update type must be INSERT, MODIFY or DELETE")
        which = update.entity.WhichOneof("entity")
        require(which is not None, "INVALID_ARGUMENT",
                "update with an empty Entity: set one of its fields (table_entry, counter_entry, ...)")
        handler = getattr(self, "_" + str(which), None)
        if handler is None:
            raise P4RuntimeError("UNIMPLEMENTED", f"writing {which} entities is not supported")
        handler(kind, getattr(update.entity, which))

    def _only_modify(self, kind, what):
        require(kind == _Update.MODIFY, "INVALID_ARGUMENT",
                f"{what}: only MODIFY is allowed (cells always exist)")

    # -- tables
    def _table_entry(self, kind, proto):
        from testbed.p4.state import TableEntry

        index = self.index
        table_info = index.by_id("tables", proto.table_id)
        name = table_info.preamble.name
        table = self.state.tables[name]
        if proto.is_default_action:
            require(kind == _Update.MODIFY, "INVALID_ARGUMENT",
                    f"table {name}: the default entry can only be modified (not inserted or deleted)")
            require(not proto.match, "INVALID_ARGUMENT",
                    f"table {name}: a default entry has no match fields")
            if proto.HasField("action"):
                require(proto.action.WhichOneof("type") == "action", "INVALID_ARGUMENT",
                        f"table {name}: the default action must be a direct action")
                table.set_default(convert.action_from_proto(index, proto.action.action,
                                                            f"table {name} default action"))
            else:
                table.reset_default()
            return
        if kind == _Update.DELETE:
            _, entry = convert.table_entry_from_proto(index, proto, TableEntry, key_only=True)
            table.delete(entry)
            return
        _, entry = convert.table_entry_from_proto(index, proto, TableEntry)
        if proto.HasField("counter_data"):
            require(table.direct_counter is not None, "INVALID_ARGUMENT",
                    f"table {name}: counter_data given but the table has no direct counter")
        if proto.HasField("meter_config"):
            require(table.direct_meter is not None, "INVALID_ARGUMENT",
                    f"table {name}: meter_config given but the table has no direct meter")
        if kind == _Update.INSERT:
            stored = table.insert(entry)
        else:
            stored = table.modify(entry)
            if table.direct_meter is not None and not proto.HasField("meter_config"):
                table.direct_meter.reset_config(stored)
        if proto.HasField("counter_data"):
            table.direct_counter.write(stored, proto.counter_data.packet_count, proto.counter_data.byte_count)
        if proto.HasField("meter_config"):
            _configure_meter(table.direct_meter, stored, proto.meter_config)

    # -- action profiles
    def _profile(self, profile_id):
        info = self.index.by_id("action_profiles", profile_id)
        return info, self.state.action_profiles[info.preamble.name]

    def _action_profile_member(self, kind, proto):
        info, profile = self._profile(proto.action_profile_id)
        if kind == _Update.DELETE:
            profile.delete_member(proto.member_id)
            return
        require(proto.HasField("action"), "INVALID_ARGUMENT",
                f"action profile {info.preamble.name}: member {proto.member_id} has no action")
        call = convert.action_from_proto(self.index, proto.action,
                                         f"action profile {info.preamble.name} member {proto.member_id}")
        if kind == _Update.INSERT:
            profile.insert_member(proto.member_id, call)
        else:
            profile.modify_member(proto.member_id, call)

    def _action_profile_group(self, kind, proto):
        """Insert, modify or delete a selector group within the weight limits of :mod:`limits`.

        Raises:
            P4RuntimeError: INVALID_ARGUMENT for a weight < 1 (spec "Action Profile
                Group Programming": 0 is not a valid weight); RESOURCE_EXHAUSTED when
                the group's total weight or ``max_size`` exceeds MAX_GROUP_WEIGHT, or
                the selector's total weight would exceed MAX_SELECTOR_WEIGHT.
        """
        info, profile = self._profile(proto.action_profile_id)
        where = f"action profile {info.preamble.name} group {proto.group_id}"
        old = profile.get_group(proto.group_id)
        old_weight = sum(weight for _, weight in old.members) if old is not None else 0
        if kind == _Update.DELETE:
            total = self._selector_weight(profile) - old_weight
            profile.delete_group(proto.group_id)
            self._selector_weights[profile.info.name] = total
            return
        members = []
        for member in proto.members:
            require(member.weight >= 1, "INVALID_ARGUMENT",
                    f"{where}: member {member.member_id} weight {member.weight} must be >= 1")
            members.append((member.member_id, member.weight))
        weight = sum(weight for _, weight in members)
        require(weight <= limits.MAX_GROUP_WEIGHT, "RESOURCE_EXHAUSTED",
                f"{where}: total member weight {weight} exceeds this target's limit of "
                f"{limits.MAX_GROUP_WEIGHT} per group (MAX_GROUP_WEIGHT)")
        static_max = info.max_group_size
        require(proto.max_size <= limits.MAX_GROUP_WEIGHT or (static_max and proto.max_size > static_max),
                "RESOURCE_EXHAUSTED", f"{where}: max_size {proto.max_size} exceeds this target's limit of "
                                      f"{limits.MAX_GROUP_WEIGHT} (MAX_GROUP_WEIGHT)")
        total = self._selector_weight(profile) - (old_weight if kind == _Update.MODIFY else 0) + weight
        require(total <= limits.MAX_SELECTOR_WEIGHT, "RESOURCE_EXHAUSTED",
                f"{where}: the groups of this selector would weigh {total} in total, over this target's "
                f"limit of {limits.MAX_SELECTOR_WEIGHT} per selector (MAX_SELECTOR_WEIGHT)")
        if kind == _Update.INSERT:
            profile.insert_group(proto.group_id, members, proto.max_size)
        else:
            profile.modify_group(proto.group_id, members, proto.max_size or None)
        self._selector_weights[profile.info.name] = total

    def _selector_weight(self, profile):
        """The sum of the member weights of all groups of a selector (computed once per batch)."""
        name = profile.info.name
        if name not in self._selector_weights:
            self._selector_weights[name] = sum(weight for group in profile.groups()
                                               for _, weight in group.members)
        return self._selector_weights[name]

    # -- counters, meters, registers
    def _indexed_target(self, entity_field, kind, proto):
        """(P4Info entry, state object, label) of a counter/meter/register write; only MODIFY is allowed."""
        collection, id_field, label = INDEXED[entity_field]
        info = self.index.by_id(collection, getattr(proto, id_field))
        name = info.preamble.name
        where = f"{label} {name}"
        self._only_modify(kind, where)
        return info, getattr(self.state, collection)[name], where

    def _counter_entry(self, kind, proto):
        info, counter, where = self._indexed_target("counter_entry", kind, proto)
        for i in index_list(proto, info.size, where):
            counter.write(i, proto.data.packet_count, proto.data.byte_count)

    def _meter_entry(self, kind, proto):
        info, meter, where = self._indexed_target("meter_entry", kind, proto)
        for i in index_list(proto, info.size, where):
            _configure_meter(meter, i, proto.config if proto.HasField("config") else None)

    def _register_entry(self, kind, proto):
        info, register, where = self._indexed_target("register_entry", kind, proto)
        value = convert.p4data_bits(proto.data, info.type_spec.bitstring.bit.bitwidth, where)
        for i in index_list(proto, info.size, where):
            register.write(i, value)

    def _direct_target(self, kind, proto, attribute):
        """(resource, stored entry key) of a direct counter/meter write; only MODIFY of a non-default entry.

        Args:
            attribute: the table attribute, ``"direct_counter"`` or ``"direct_meter"``.
        """
        from testbed.p4.state import TableEntry

        what = attribute.replace("_", " ")
        self._only_modify(kind, f"{what} entry")
        require(not proto.table_entry.is_default_action, "UNIMPLEMENTED",
                f"{what}s of default entries are not supported")
        table_info, entry = convert.table_entry_from_proto(self.index, proto.table_entry, TableEntry,
                                                           key_only=True)
        resource = getattr(self.state.tables[table_info.preamble.name], attribute)
        require(resource is not None, "INVALID_ARGUMENT", f"table {table_info.preamble.name} has no {what}")
        return resource, entry

    def _direct_counter_entry(self, kind, proto):
        counter, entry = self._direct_target(kind, proto, "direct_counter")
        counter.write(entry, proto.data.packet_count, proto.data.byte_count)

    def _direct_meter_entry(self, kind, proto):
        meter, entry = self._direct_target(kind, proto, "direct_meter")
        _configure_meter(meter, entry, proto.config if proto.HasField("config") else None)

    # -- packet replication engine
    def _packet_replication_engine_entry(self, kind, proto):
        which = proto.WhichOneof("type")
        if which == "multicast_group_entry":
            entry = proto.multicast_group_entry
            _write_pre(self.state.multicast_groups, kind, entry.multicast_group_id, entry.replicas)
        elif which == "clone_session_entry":
            entry = proto.clone_session_entry
            _write_pre(self.state.clone_sessions, kind, entry.session_id, entry.replicas,
                       entry.class_of_service, entry.packet_length_bytes)
        else:
            raise P4RuntimeError("INVALID_ARGUMENT", "packet replication engine entry without a type")

    # -- digests
    def _digest_entry(self, kind, proto):
        info = self.index.by_id("digests", proto.digest_id)
        engine = self.server.digests
        configured = proto.digest_id in engine.configs
        name = info.preamble.name
        if kind == _Update.DELETE:
            require(configured, "NOT_FOUND", f"digest {name} is not configured")
            engine.configure(proto.digest_id, None)
            return
        if kind == _Update.INSERT:
            require(not configured, "ALREADY_EXISTS", f"digest {name} is already configured")
        else:
            require(configured, "NOT_FOUND", f"digest {name} is not configured")
        c = proto.config
        require(c.max_timeout_ns >= 0 and c.ack_timeout_ns >= 0, "INVALID_ARGUMENT",
                f"digest {name}: timeouts must be >= 0")
        require(c.max_list_size >= 0, "INVALID_ARGUMENT",
                f"digest {name}: max_list_size {c.max_list_size} must be >= 0 (0: no limit)")
        engine.configure(proto.digest_id, DigestConfig(c.max_timeout_ns, c.max_list_size, c.ack_timeout_ns))


def _configure_meter(meter, cell, config):
    """Set a meter cell (index or table entry) from a MeterConfig message, or unconfigure it for None."""
    if config is None:
        meter.reset_config(cell)
    else:
        meter.set_config(cell, config.cir, config.cburst, config.pir, config.pburst)


def _write_pre(collection, kind, key, replica_protos, *settings):
    """Insert, modify or delete a multicast group or clone session (``settings`` follow the replicas)."""
    if kind == _Update.DELETE:
        collection.delete(key)
        return
    replicas = [(convert.port_from_replica(r), r.instance) for r in replica_protos]
    (collection.insert if kind == _Update.INSERT else collection.modify)(key, replicas, *settings)
