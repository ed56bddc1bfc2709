"""The P4Runtime gRPC server of one embedded switch.

    server = P4RuntimeServer(EmbeddedTarget(cpu_port=510), device_id=1, address="127.0.0.1:50001")
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
  trailer whose ``details`` hold one ``p4.v1.Error`` per update, in order (OK for the
  ones that succeeded), each with the canonical code (NOT_FOUND, INVALID_ARGUMENT,
  ALREADY_EXISTS, ...) and a message naming the object and field.  This is what the
  spec requires and what p4runtime-shell and the client of this package decode.
* Read errors (unknown ids, malformed keys) end the Read with that status.
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
import time
from concurrent import futures

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.p4runtime import convert
from testbed.p4runtime.arbitration import Arbiter, Connection
from testbed.p4runtime.digests import DigestConfig, DigestEngine
from testbed.p4runtime.errors import P4RuntimeError, error_code, error_message
from testbed.p4runtime.idle_timeout import IdleTimeoutWatcher
from testbed.p4runtime.p4info_index import P4InfoLookupError

API_VERSION = "1.4.1"
_Update = p4runtime_pb2.Update
_SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
_GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest
_READ_CHUNK = 512  # entities per ReadResponse


class _RichStatus(collections.namedtuple("_RichStatus", ("code", "details", "trailing_metadata")),
                  grpc.Status):
    """A grpc.Status carrying a google.rpc.Status in the trailing metadata."""


def _status_code(name):
    try:
        return grpc.StatusCode[name]
    except KeyError:
        return grpc.StatusCode.INTERNAL


def _canonical(name):
    return code_pb2.Code.Value(name) if name in code_pb2.Code.keys() else code_pb2.INTERNAL


class _Abort(Exception):
    """Internal: end the current RPC with this status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


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
                                                            thread_name_prefix="p4rt"))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.service, self._grpc)
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
            raise _Abort("INVALID_ARGUMENT", f"action {_SetAction.Action.Name(action)} is not valid")
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
        except _Abort as exc:
            self._abort(context, exc)
        target = self.target
        response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        config = response.config
        kind = request.response_type
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
        except _Abort as exc:
            self._abort(context, exc)
        writer = _Writer(self.server)
        errors = []
        failed = 0
        known = _known_errors()
        with self.target.lock:
            for number, update in enumerate(request.updates):
                error = p4runtime_pb2.Error(canonical_code=code_pb2.OK)
                try:
                    writer.apply(update)
                except known as exc:
                    error.canonical_code = _canonical(error_code(exc))
                    error.message = error_message(exc)
                except Exception as exc:  # a bug must not take the server down
                    error.canonical_code = code_pb2.INTERNAL
                    error.message = f"internal error: {type(exc).__name__}: {exc}"
                if error.canonical_code != code_pb2.OK:
                    failed += 1
                    error.message = f"update {number}: {error.message}"
                errors.append(error)
        if failed:
            first = next(e for e in errors if e.canonical_code != code_pb2.OK)
            summary = (f"{failed} of {len(errors)} update(s) failed; first: "
                       f"{code_pb2.Code.Name(first.canonical_code)}: {first.message}")
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message=summary)
            for error in errors:
                detail = any_pb2.Any()
                detail.Pack(error)
                status.details.append(detail)
            context.abort_with_status(_RichStatus(
                grpc.StatusCode.UNKNOWN, summary,
                (("grpc-status-details-bin", status.SerializeToString()),)))
        return p4runtime_pb2.WriteResponse()

    # ---- Read -----------------------------------------------------------------------------
    def Read(self, request, context):
        """Stream the requested entities (wildcards expanded)."""
        with self._errors_end_rpc(context):
            self._check_device(request.device_id)
            self._check_pipeline()
            reader = _Reader(self.server)
            entities = []
            with self.target.lock:
                for entity in request.entities:
                    entities.extend(reader.read(entity))
        for start in range(0, max(len(entities), 1), _READ_CHUNK):
            response = p4runtime_pb2.ReadResponse()
            response.entities.extend(entities[start:start + _READ_CHUNK])
            yield response


def _require(condition, code, message):
    if not condition:
        raise P4RuntimeError(code, message)


def _index_list(proto, size, what):
    """Cells addressed by the optional ``index`` of a counter/meter/register entry (all cells when unset)."""
    if not proto.HasField("index"):
        return range(size)
    value = proto.index.index
    _require(0 <= value < size, "OUT_OF_RANGE", f"{what}: index {value} outside 0..{size - 1}")
    return [value]


# Entity field of an indexed (non-direct) resource -> (P4Info/SwitchState collection, id field, label)
_INDEXED = {
    "counter_entry": ("counters", "counter_id", "counter"),
    "meter_entry": ("meters", "meter_id", "meter"),
    "register_entry": ("registers", "register_id", "register"),
}


class _Writer:
    """Applies single Updates to the target's state (the caller holds the target lock)."""

    def __init__(self, server):
        self.server = server
        self.target = server.target
        self.index = server.target.index
        self.state = server.target.state

    def apply(self, update):
        kind = update.type
        _require(kind in (_Update.INSERT, _Update.MODIFY, _Update.DELETE), "INVALID_ARGUMENT",
                 "update type must be INSERT, MODIFY or DELETE")
        which = update.entity.WhichOneof("entity")
        handler = getattr(self, "_" + str(which), None)
        if handler is None:
            raise P4RuntimeError("UNIMPLEMENTED", f"writing {which} entities is not supported")
        handler(kind, getattr(update.entity, which))

    def _only_modify(self, kind, what):
        _require(kind == _Update.MODIFY, "INVALID_ARGUMENT",
                 f"{what}: only MODIFY is allowed (cells always exist)")

    # -- tables
    def _table_entry(self, kind, proto):
        from testbed.p4.state import TableEntry

        index = self.index
        table_info = index.by_id("tables", proto.table_id)
        name = table_info.preamble.name
        table = self.state.tables[name]
        if proto.is_default_action:
            _require(kind == _Update.MODIFY, "INVALID_ARGUMENT",
                     f"table {name}: the default entry can only be modified (not inserted or deleted)")
            _require(not proto.match, "INVALID_ARGUMENT",
                     f"table {name}: a default entry has no match fields")
            if proto.HasField("action"):
                _require(proto.action.WhichOneof("type") == "action", "INVALID_ARGUMENT",
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
            _require(table.direct_counter is not None, "INVALID_ARGUMENT",
                     f"table {name}: counter_data given but the table has no direct counter")
        if proto.HasField("meter_config"):
            _require(table.direct_meter is not None, "INVALID_ARGUMENT",
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
        _require(proto.HasField("action"), "INVALID_ARGUMENT",
                 f"action profile {info.preamble.name}: member {proto.member_id} has no action")
        call = convert.action_from_proto(self.index, proto.action,
                                         f"action profile {info.preamble.name} member {proto.member_id}")
        if kind == _Update.INSERT:
            profile.insert_member(proto.member_id, call)
        else:
            profile.modify_member(proto.member_id, call)

    def _action_profile_group(self, kind, proto):
        info, profile = self._profile(proto.action_profile_id)
        if kind == _Update.DELETE:
            profile.delete_group(proto.group_id)
            return
        members = []
        for member in proto.members:
            _require(member.weight >= 0, "INVALID_ARGUMENT",
                     f"action profile {info.preamble.name} group {proto.group_id}: member "
                     f"{member.member_id} weight {member.weight} is negative")
            members.append((member.member_id, member.weight or 1))  # unset weight means 1
        if kind == _Update.INSERT:
            profile.insert_group(proto.group_id, members, proto.max_size)
        else:
            profile.modify_group(proto.group_id, members, proto.max_size or None)

    # -- counters, meters, registers
    def _indexed_target(self, entity_field, kind, proto):
        """(P4Info entry, state object, label) of a counter/meter/register write; only MODIFY is allowed."""
        collection, id_field, label = _INDEXED[entity_field]
        info = self.index.by_id(collection, getattr(proto, id_field))
        name = info.preamble.name
        where = f"{label} {name}"
        self._only_modify(kind, where)
        return info, getattr(self.state, collection)[name], where

    def _counter_entry(self, kind, proto):
        info, counter, where = self._indexed_target("counter_entry", kind, proto)
        for i in _index_list(proto, info.size, where):
            counter.write(i, proto.data.packet_count, proto.data.byte_count)

    def _meter_entry(self, kind, proto):
        info, meter, where = self._indexed_target("meter_entry", kind, proto)
        for i in _index_list(proto, info.size, where):
            _configure_meter(meter, i, proto.config if proto.HasField("config") else None)

    def _register_entry(self, kind, proto):
        info, register, where = self._indexed_target("register_entry", kind, proto)
        value = convert.p4data_bits(proto.data, info.type_spec.bitstring.bit.bitwidth, where)
        for i in _index_list(proto, info.size, where):
            register.write(i, value)

    def _direct_target(self, kind, proto, attribute):
        """(resource, stored entry key) of a direct counter/meter write; only MODIFY of a non-default entry.

        Args:
            attribute: the table attribute, ``"direct_counter"`` or ``"direct_meter"``.
        """
        from testbed.p4.state import TableEntry

        what = attribute.replace("_", " ")
        self._only_modify(kind, f"{what} entry")
        _require(not proto.table_entry.is_default_action, "UNIMPLEMENTED",
                 f"{what}s of default entries are not supported")
        table_info, entry = convert.table_entry_from_proto(self.index, proto.table_entry, TableEntry,
                                                           key_only=True)
        resource = getattr(self.state.tables[table_info.preamble.name], attribute)
        _require(resource is not None, "INVALID_ARGUMENT", f"table {table_info.preamble.name} has no {what}")
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
            _require(configured, "NOT_FOUND", f"digest {name} is not configured")
            engine.configure(proto.digest_id, None)
            return
        if kind == _Update.INSERT:
            _require(not configured, "ALREADY_EXISTS", f"digest {name} is already configured")
        else:
            _require(configured, "NOT_FOUND", f"digest {name} is not configured")
        c = proto.config
        _require(c.max_timeout_ns >= 0 and c.ack_timeout_ns >= 0, "INVALID_ARGUMENT",
                 f"digest {name}: timeouts must be >= 0")
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


def _new_entity(field):
    """A new Entity and its ``field`` message (``"counter_entry"``, ...), which selects that oneof once set."""
    entity = p4runtime_pb2.Entity()
    return entity, getattr(entity, field)


class _Reader:
    """Expands Read request entities into result entities (the caller holds the target lock)."""

    def __init__(self, server):
        self.server = server
        self.index = server.target.index
        self.state = server.target.state

    def read(self, entity):
        which = entity.WhichOneof("entity")
        handler = getattr(self, "_" + str(which), None)
        if handler is None:
            raise P4RuntimeError("UNIMPLEMENTED", f"reading {which} entities is not supported")
        return handler(getattr(entity, which))

    def _infos(self, collection, object_id):
        """P4Info entries a read selects: every one of ``collection`` for id 0 (wildcard), else that id's."""
        if object_id == 0:
            return self.index.all(collection)
        return [self.index.by_id(collection, object_id)]

    def _selected_entries(self, table_info, request):
        """The stored entries of a table a request's match/priority selects."""
        from testbed.p4.state import TableEntry

        table = self.state.tables[table_info.preamble.name]
        if not request.match and request.table_id and request.priority == 0:
            return table, table.entries()
        if not request.table_id:
            return table, table.entries()
        _, key = convert.table_entry_from_proto(self.index, request, TableEntry, key_only=True)
        stored = table.find(key.matches, key.priority)
        return table, [stored] if stored is not None else []

    def _table_entry(self, request):
        results = []
        for table_info in self._infos("tables", request.table_id):
            name = table_info.preamble.name
            table = self.state.tables[name]
            const_table = table_info.is_const_table
            if request.is_default_action:
                entity, out = _new_entity("table_entry")
                out.table_id = table_info.preamble.id
                out.is_default_action = True
                convert.action_to_proto(self.index, table.default_action, out.action.action)
                if table_info.const_default_action_id:
                    out.is_const = True
                results.append(entity)
                continue
            _, entries = self._selected_entries(table_info, request)
            for stored in entries:
                entity, out = _new_entity("table_entry")
                convert.table_entry_to_proto(self.index, table_info, stored, out)
                if stored.controller_metadata:
                    out.controller_metadata = stored.controller_metadata
                if stored.metadata:
                    out.metadata = stored.metadata
                if stored.idle_timeout_ns:
                    out.idle_timeout_ns = stored.idle_timeout_ns
                if request.HasField("time_since_last_hit") and table.info.idle_timeout:
                    last = stored.last_hit_ns
                    out.time_since_last_hit.elapsed_ns = 0 if last is None else max(0, time.monotonic_ns() - last)
                if const_table or stored.is_const:
                    out.is_const = True
                if request.HasField("counter_data") and table.direct_counter is not None:
                    out.counter_data.packet_count = stored.counter_packets
                    out.counter_data.byte_count = stored.counter_bytes
                if request.HasField("meter_config") and table.direct_meter is not None:
                    _meter_config_to_proto(table.direct_meter.get_config(stored), out.meter_config)
                results.append(entity)
        return results

    def _profile_items(self, request, entity_field, items, id_field):
        """The members (or groups) of action profiles a read selects.

        Args:
            request: the ActionProfileMember/ActionProfileGroup of the read.
            entity_field: ``"action_profile_member"`` or ``"action_profile_group"``.
            items: the profile method listing them, ``"members"`` or ``"groups"``.
            id_field: ``"member_id"`` or ``"group_id"`` (0 in the request: all).

        Yields:
            (entity, out, item): ``out`` is the entity's ``entity_field`` message with the
            profile id and the item id set.
        """
        wanted = getattr(request, id_field)
        for info in self._infos("action_profiles", request.action_profile_id):
            profile = self.state.action_profiles[info.preamble.name]
            for item in getattr(profile, items)():
                item_id = getattr(item, id_field)
                if wanted and item_id != wanted:
                    continue
                entity, out = _new_entity(entity_field)
                out.action_profile_id = info.preamble.id
                setattr(out, id_field, item_id)
                yield entity, out, item

    def _action_profile_member(self, request):
        from testbed.p4.program import ActionCall

        results = []
        for entity, out, member in self._profile_items(request, "action_profile_member", "members", "member_id"):
            convert.action_to_proto(self.index, ActionCall(member.action, tuple(member.args)), out.action)
            results.append(entity)
        return results

    def _action_profile_group(self, request):
        results = []
        for entity, out, group in self._profile_items(request, "action_profile_group", "groups", "group_id"):
            for member_id, weight in group.members:
                out.members.add(member_id=member_id, weight=weight)
            if group.max_size:
                out.max_size = group.max_size
            results.append(entity)
        return results

    def _indexed_cells(self, entity_field, request):
        """The cells of counters, meters or registers a read selects.

        Yields:
            (entity, out, state object, index): ``out`` is the entity's ``entity_field``
            message with the object id and the index set.
        """
        collection, id_field, label = _INDEXED[entity_field]
        for info in self._infos(collection, getattr(request, id_field)):
            name = info.preamble.name
            resource = getattr(self.state, collection)[name]
            for i in _index_list(request, info.size, f"{label} {name}"):
                entity, out = _new_entity(entity_field)
                setattr(out, id_field, info.preamble.id)
                out.index.index = i
                yield entity, out, resource, i

    def _counter_entry(self, request):
        results = []
        for entity, out, counter, i in self._indexed_cells("counter_entry", request):
            out.data.packet_count, out.data.byte_count = counter.read(i)
            results.append(entity)
        return results

    def _meter_entry(self, request):
        results = []
        for entity, out, meter, i in self._indexed_cells("meter_entry", request):
            _meter_config_to_proto(meter.get_config(i), out.config)
            results.append(entity)
        return results

    def _register_entry(self, request):
        results = []
        for entity, out, register, i in self._indexed_cells("register_entry", request):
            out.data.bitstring = convert.encode(register.read(i))
            results.append(entity)
        return results

    def _direct_entries(self, entity_field, attribute, table_entry):
        """The table entries of a direct counter/meter read (tables without one are skipped for a wildcard).

        Args:
            entity_field: ``"direct_counter_entry"`` or ``"direct_meter_entry"``.
            attribute: the table attribute, ``"direct_counter"`` or ``"direct_meter"``.
            table_entry: the request's TableEntry.

        Raises:
            P4RuntimeError: INVALID_ARGUMENT when the named table has no such resource.

        Yields:
            (entity, out, resource, stored entry): ``out`` is the entity's ``entity_field``
            message with its table entry (without action) set.
        """
        for table_info in self._infos("tables", table_entry.table_id):
            resource = getattr(self.state.tables[table_info.preamble.name], attribute)
            if resource is None:
                if table_entry.table_id:
                    raise P4RuntimeError("INVALID_ARGUMENT", f"table {table_info.preamble.name} has no "
                                                             f"{attribute.replace('_', ' ')}")
                continue
            _, entries = self._selected_entries(table_info, table_entry)
            for stored in entries:
                entity, out = _new_entity(entity_field)
                convert.table_entry_to_proto(self.index, table_info, stored, out.table_entry)
                out.table_entry.ClearField("action")
                yield entity, out, resource, stored

    def _direct_counter_entry(self, request):
        results = []
        for entity, out, _counter, stored in self._direct_entries("direct_counter_entry", "direct_counter",
                                                                 request.table_entry):
            out.data.packet_count = stored.counter_packets
            out.data.byte_count = stored.counter_bytes
            results.append(entity)
        return results

    def _direct_meter_entry(self, request):
        results = []
        for entity, out, meter, stored in self._direct_entries("direct_meter_entry", "direct_meter",
                                                               request.table_entry):
            _meter_config_to_proto(meter.get_config(stored), out.config)
            results.append(entity)
        return results

    @staticmethod
    def _pre_entries(request, which, collection, id_field):
        """The multicast groups (or clone sessions) a read selects.

        Args:
            request: the PacketReplicationEngineEntry of the read.
            which: ``"multicast_group_entry"`` or ``"clone_session_entry"``.
            collection: the state's multicast groups or clone sessions.
            id_field: ``"multicast_group_id"`` or ``"session_id"`` (0 in the request: all).

        Yields:
            (entity, out, value): ``out`` is the entity's ``which`` message with the id set;
            ``value`` is what :func:`_pre_items` pairs with the id.
        """
        wanted = getattr(getattr(request, which), id_field)
        for key, value in _pre_items(collection):
            if wanted and key != wanted:
                continue
            entity = p4runtime_pb2.Entity()
            out = getattr(entity.packet_replication_engine_entry, which)
            setattr(out, id_field, key)
            yield entity, out, value

    def _packet_replication_engine_entry(self, request):
        results = []
        which = request.WhichOneof("type")
        if which == "multicast_group_entry":
            for entity, out, replicas in self._pre_entries(request, which, self.state.multicast_groups,
                                                           "multicast_group_id"):
                _replicas_to_proto(replicas, out)
                results.append(entity)
        elif which == "clone_session_entry":
            for entity, out, session in self._pre_entries(request, which, self.state.clone_sessions, "session_id"):
                _replicas_to_proto(session.replicas, out)
                out.class_of_service = session.class_of_service
                out.packet_length_bytes = session.packet_length_bytes
                results.append(entity)
        else:
            raise P4RuntimeError("INVALID_ARGUMENT", "packet replication engine entry without a type")
        return results

    def _digest_entry(self, request):
        results = []
        engine = self.server.digests
        for info in self.index.all("digests"):
            digest_id = info.preamble.id
            if request.digest_id and digest_id != request.digest_id:
                continue
            config = engine.configs.get(digest_id)
            if config is None:
                continue
            entity, out = _new_entity("digest_entry")
            out.digest_id = digest_id
            out.config.max_timeout_ns = config.max_timeout_ns
            out.config.max_list_size = config.max_list_size
            out.config.ack_timeout_ns = config.ack_timeout_ns
            results.append(entity)
        if request.digest_id and not results:
            self.index.by_id("digests", request.digest_id)  # NOT_FOUND for an unknown id
        return results


def _pre_items(collection):
    """(id, value) pairs of a PRE collection's ``entries()`` (dict or list of pairs/objects)."""
    entries = collection.entries()
    if isinstance(entries, dict):
        return sorted(entries.items())
    items = []
    for item in entries:
        if isinstance(item, tuple) and len(item) == 2:
            items.append(item)
        else:
            key = getattr(item, "group_id", None)
            if key is None:
                key = getattr(item, "session_id")
            value = getattr(item, "replicas") if hasattr(item, "group_id") else item
            items.append((key, value))
    return items


def _replicas_to_proto(replicas, out):
    """Add (port, instance) pairs as the ``replicas`` of a multicast group or clone session message."""
    for port, rid in replicas:
        out.replicas.add(egress_port=port, instance=rid)


def _meter_config_to_proto(config, out):
    """Copy a MeterConfig into a p4.v1.MeterConfig message (leave it unset for None: unconfigured)."""
    if config is None:
        return
    out.cir = config.cir
    out.cburst = config.cburst
    out.pir = config.pir
    out.pburst = config.pburst
