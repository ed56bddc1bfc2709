"""Arbitration per role: only the primary of the role a request names may write.

P4Runtime specification, "Write RPC" and "SetForwardingPipelineConfig RPC" (check 2:
"If the client is not the primary for (device_id, role) according to the
election_id value, the server must return a PERMISSION_DENIED error") and "Client
Arbitration and Controller Replication" (the server identifies the writer by all
three of device_id, role and election_id).  Reads need no election id, so backups
may read ("Read RPC").
"""
import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.p4runtime.client import P4RuntimeClient

from p4runtime_helpers import DEVICE_ID, demo_info, running_server

_Set = p4runtime_pb2.SetForwardingPipelineConfigRequest


@pytest.fixture
def switch():
    """A running server for demo_info() with a primary controller of the default role."""
    with running_server(demo_info()) as (target, server, address):
        primary = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 10), timeout=5)
        try:
            assert primary.is_primary
            yield target, address, primary
        finally:
            primary.close()


def _entry_update(client, prefix):
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    update.entity.table_entry.CopyFrom(client.table_entry_message(
        "MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (prefix, 24)}, "MyIngress.drop"))
    return update


def _write(stub, updates, role="", election_id=None):
    request = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, role=role, updates=updates)
    if election_id is not None:
        request.election_id.high, request.election_id.low = election_id
    return stub.Write(request, timeout=5)


def _status(call):
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def _entries(target):
    return target.state.tables["MyIngress.ipv4_lpm"].entries()


def test_write_naming_another_role_without_election_id_is_denied(switch):
    target, _address, primary = switch
    stub = primary.stub
    update = _entry_update(primary, "10.0.1.0")
    assert _status(lambda: _write(stub, [update], role="other")) == grpc.StatusCode.PERMISSION_DENIED
    assert _status(lambda: _write(stub, [update], role="other", election_id=(0, 10))) == \
        grpc.StatusCode.PERMISSION_DENIED  # the default role's primary is not the primary of "other"
    assert _status(lambda: _write(stub, [update])) == grpc.StatusCode.PERMISSION_DENIED  # no election id
    assert _entries(target) == []
    _write(stub, [update], election_id=(0, 10))  # the primary of the default role may
    assert len(_entries(target)) == 1


def test_set_pipeline_naming_another_role_is_denied_and_keeps_the_state(switch):
    target, _address, primary = switch
    primary.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "MyIngress.drop")
    _p4info, device_config, _cookie = primary.get_pipeline()
    request = _Set(device_id=DEVICE_ID, role="other", action=_Set.VERIFY_AND_COMMIT)
    request.config.p4info.CopyFrom(target.p4info)
    request.config.p4_device_config = device_config or b"{}"
    assert _status(lambda: primary.stub.SetForwardingPipelineConfig(request, timeout=5)) == \
        grpc.StatusCode.PERMISSION_DENIED
    request.role = ""
    assert _status(lambda: primary.stub.SetForwardingPipelineConfig(request, timeout=5)) == \
        grpc.StatusCode.PERMISSION_DENIED  # no election id
    assert len(_entries(target)) == 1  # nothing was wiped


def test_each_role_has_its_own_primary(switch):
    target, address, primary = switch
    other = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 3), role="other", timeout=5)
    other_backup = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 2), role="other", timeout=5)
    try:
        assert other.is_primary and primary.is_primary and not other_backup.is_primary
        stub = primary.stub
        assert _status(lambda: _write(stub, [_entry_update(primary, "10.0.2.0")], role="other",
                                      election_id=(0, 3))) == grpc.StatusCode.OK
        assert _status(lambda: _write(stub, [_entry_update(primary, "10.0.3.0")], role="other",
                                      election_id=(0, 2))) == grpc.StatusCode.PERMISSION_DENIED
        assert _status(lambda: _write(stub, [_entry_update(primary, "10.0.4.0")],
                                      election_id=(0, 3))) == grpc.StatusCode.PERMISSION_DENIED
        # the backup reads what the primaries wrote
        assert [e.match for e in other_backup.read_table_entries("MyIngress.ipv4_lpm")] == \
            [{"hdr.ipv4.dstAddr": (0x0A000200, 24)}]
        # when the primary of "other" leaves, the role has no primary: nobody may write for it
        other.close()
        assert _wait_no_primary(target, other_backup)
        assert _status(lambda: _write(stub, [_entry_update(primary, "10.0.5.0")], role="other",
                                      election_id=(0, 3))) == grpc.StatusCode.PERMISSION_DENIED
        assert _status(lambda: _write(stub, [_entry_update(primary, "10.0.5.0")], role="other",
                                      election_id=(0, 2))) == grpc.StatusCode.PERMISSION_DENIED
        assert len(_entries(target)) == 1
    finally:
        other.close()
        other_backup.close()


def _wait_no_primary(target, backup, timeout=5.0):
    import time

    from google.rpc import code_pb2

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if backup.arbitration is not None and backup.arbitration.status.code == code_pb2.NOT_FOUND:
            return True
        time.sleep(0.01)
    return False


def test_writes_without_any_stream_are_denied():
    """Without a StreamChannel there is no primary, so no Write is accepted (reads are)."""
    with running_server(demo_info()) as (target, _server, address):
        with P4RuntimeClient(address, device_id=DEVICE_ID, election_id=None, timeout=5) as reader:
            update = _entry_update(reader, "10.0.1.0")  # built from the switch's P4Info
        channel = grpc.insecure_channel(address)
        try:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            assert _status(lambda: _write(stub, [update])) == grpc.StatusCode.PERMISSION_DENIED
            assert _status(lambda: _write(stub, [update], election_id=(0, 1))) == \
                grpc.StatusCode.PERMISSION_DENIED
            request = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID)
            request.entities.add().table_entry.table_id = update.entity.table_entry.table_id
            assert [list(r.entities) for r in stub.Read(request, timeout=5)] == [[]]  # reads need no election id
            assert _entries(target) == []
        finally:
            channel.close()
