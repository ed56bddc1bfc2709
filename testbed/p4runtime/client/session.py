"""The transport of a P4Runtime client: channel, stream, arbitration, and the Read/Write plumbing.

:class:`Session` opens the gRPC channel and the StreamChannel, whose reader thread
sorts what the switch streams into queues (arbitration replies, PacketIns, digest
lists, stream errors, idle-timeout notifications); sends unary RPCs with the
session's timeout, raising :class:`~testbed.p4runtime.client.errors.P4RuntimeClientError`
for any failure; and sends Write updates one at a time or collected in batches.
The per-entity parts of :class:`~testbed.p4runtime.client.P4RuntimeClient` build
their updates and reads on it.
"""
import contextlib
import queue
import threading
import time

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.errors import ParameterError
from testbed.p4runtime import limits
from testbed.p4runtime.client.errors import P4RuntimeClientError, describe_failures, rpc_error

CHANNEL_OPTIONS = (("grpc.max_receive_message_length", limits.MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", limits.MAX_MESSAGE_BYTES),
                   ("grpc.max_metadata_size", limits.MAX_METADATA_BYTES),
                   ("grpc.absolute_max_metadata_size", limits.MAX_METADATA_BYTES))
"""gRPC options of the client's channel: per-update Write errors of large batches fit."""

DEFAULT_BATCH_SIZE = 1000
"""Updates per Write when :meth:`Session.write_batch` splits a batch."""


class Session:
    """The transport part of :class:`~testbed.p4runtime.client.P4RuntimeClient` (its constructor
    arguments are documented there).

    :meth:`connect` ends by fetching the switch's P4Info with ``load_p4info``, which the
    client's pipeline part provides.
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

    # ---- stream and arbitration -----------------------------------------------------------
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
                self.stream_status = rpc_error(exc)
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

    def wait_primary(self, timeout=5.0):
        """Wait until this client is primary; returns the final state."""
        deadline = time.monotonic() + timeout
        while not self.is_primary and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.is_primary

    def get_stream_error(self, timeout=1.0):
        """The next StreamError message from the switch, or None."""
        try:
            return self._error_q.get(timeout=timeout)
        except queue.Empty:
            return None

    # ---- unary RPCs -----------------------------------------------------------------------
    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise rpc_error(exc) from None

    def _election(self, request):
        request.device_id = self.device_id
        if self.role:
            request.role = self.role
        if self.election_id is not None:
            request.election_id.high, request.election_id.low = self.election_id

    def api_version(self):
        """The server's P4Runtime API version string."""
        return self._call(self.stub.Capabilities, p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version

    # ---- writes and reads -----------------------------------------------------------------
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
            raise rpc_error(exc) from None
        return results
