"""The P4Runtime server on a real SwitchState, driven over gRPC on localhost.

Most tests use a hand-made ProgramInfo (control plane only); the last ones load the
real p4src/l3_ecmp.p4 through the embedded compiler when it is available.
"""
import os
import time

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.p4runtime.client import P4RuntimeClient, P4RuntimeClientError

from p4runtime_helpers import DEVICE_ID, demo_info, running_server
from repo_paths import REPO



@pytest.fixture
def switch():
    """A running server for demo_info(); yields (target, server, address)."""
    with running_server(demo_info()) as running:
        yield running


@pytest.fixture
def client(switch):
    """The primary controller of ``switch``."""
    _target, _server, address = switch
    c = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 10), timeout=5)
    try:
        yield c
    finally:
        c.close()


def raw_write(address, updates, election_id=(0, 10), device_id=DEVICE_ID):
    """A Write with a raw stub; returns (status code, [(code name, message)] per update)."""
    channel = grpc.insecure_channel(address)
    try:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        request = p4runtime_pb2.WriteRequest(device_id=device_id)
        request.election_id.high, request.election_id.low = election_id
        request.updates.extend(updates)
        try:
            stub.Write(request, timeout=5)
            return grpc.StatusCode.OK, []
        except grpc.RpcError as exc:
            details = []
            for key, value in exc.trailing_metadata() or ():
                if key == "grpc-status-details-bin":
                    status = status_pb2.Status()
                    status.ParseFromString(value)
                    for any_error in status.details:
                        error = p4runtime_pb2.Error()
                        assert any_error.Unpack(error)
                        details.append((code_pb2.Code.Name(error.canonical_code), error.message))
            return exc.code(), details
    finally:
        channel.close()


def lpm_update(client, kind, prefix, plen, port, table_id=None):
    entry = client.table_entry_message("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (prefix, plen)},
                                       "MyIngress.set_nhop", {"dmac": "00:00:00:00:00:01", "port": port})
    if table_id is not None:
        entry.table_id = table_id
    update = p4runtime_pb2.Update(type=getattr(p4runtime_pb2.Update, kind))
    update.entity.table_entry.CopyFrom(entry)
    return update


def still_serving(client):
    """The server answers a Read after an error."""
    assert isinstance(client.read_table_entries("MyIngress.ipv4_lpm"), list)


# ---- arbitration ------------------------------------------------------------------------------

def _wait(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_arbitration_primary_backup_and_takeover(switch):
    _target, server, address = switch
    first = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 5), timeout=5)
    backup = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 3), timeout=5)
    try:
        assert first.is_primary
        assert first.arbitration.status.code == code_pb2.OK
        assert not backup.is_primary
        assert backup.arbitration.status.code == code_pb2.ALREADY_EXISTS
        assert backup.arbitration.election_id.low == 5  # the highest id seen (the primary's)
        with pytest.raises(P4RuntimeClientError) as excinfo:
            backup.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)},
                                      "MyIngress.drop")
        assert excinfo.value.code == "PERMISSION_DENIED"
        with pytest.raises(P4RuntimeClientError) as excinfo:
            P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 5), timeout=5)
        assert excinfo.value.code == "INVALID_ARGUMENT"
        # a higher election id takes over; the old primary is told it is a backup now
        backup.send_arbitration((1, 0))
        assert _wait(lambda: backup.is_primary and first.arbitration.status.code == code_pb2.ALREADY_EXISTS)
        assert not first.is_primary and first.arbitration.election_id.high == 1
        backup.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)},
                                  "MyIngress.drop")
        # when the primary leaves nobody is promoted: the backups hear NOT_FOUND ...
        backup.close()
        assert _wait(lambda: first.arbitration.status.code == code_pb2.NOT_FOUND)
        assert server.arbiter.primary() is None
        # ... until one sends an election id >= the highest ever seen
        first.send_arbitration((0, 9))
        time.sleep(0.1)
        assert not first.is_primary
        first.send_arbitration((1, 0))
        assert _wait(lambda: first.is_primary)
    finally:
        first.close()
        backup.close()


def test_a_primary_that_vanishes_is_noticed(switch):
    _target, server, address = switch
    watcher = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 2), timeout=5)
    primary = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 8), timeout=5)
    try:
        assert primary.is_primary and not watcher.is_primary
        primary.channel.close()  # no goodbye: the connection just goes away
        assert _wait(lambda: watcher.arbitration.status.code == code_pb2.NOT_FOUND)
        assert server.arbiter.primary() is None
        watcher.send_arbitration((0, 8))  # equal to the highest seen: primary again
        assert _wait(lambda: watcher.is_primary)
        watcher.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)},
                                   "MyIngress.drop")
    finally:
        primary.close()
        watcher.close()


def test_wrong_device_id_is_not_found(switch):
    _target, _server, address = switch
    with pytest.raises(P4RuntimeClientError) as excinfo:
        P4RuntimeClient(address, device_id=99, election_id=(0, 1), timeout=5)
    assert excinfo.value.code == "NOT_FOUND"
    code, _ = raw_write(address, [], device_id=99)
    assert code == grpc.StatusCode.NOT_FOUND


def test_capabilities_and_get_pipeline_response_types(client):
    assert client.api_version().startswith("1.")
    p4info, device_config, cookie = client.get_pipeline()
    assert any(t.preamble.name == "MyIngress.ipv4_lpm" for t in p4info.tables)
    stub = client.stub
    Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    only_cookie = stub.GetForwardingPipelineConfig(Get(device_id=DEVICE_ID, response_type=Get.COOKIE_ONLY))
    assert not only_cookie.config.HasField("p4info")
    with_info = stub.GetForwardingPipelineConfig(Get(device_id=DEVICE_ID, response_type=Get.P4INFO_AND_COOKIE))
    assert with_info.config.p4info.tables


# ---- tables -----------------------------------------------------------------------------------

def test_insert_read_modify_delete_lpm_entries(client):
    client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)},
                              "MyIngress.set_nhop", {"dmac": "00:00:00:00:01:01", "port": 1})
    client.insert_table_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.2.2/32"},
                              "set_nhop", {"dmac": 0x020202020202, "port": 2})
    entries = client.read_table_entries("MyIngress.ipv4_lpm")
    assert [(e.match, e.action, e.params) for e in entries] == [
        ({"hdr.ipv4.dstAddr": (0x0A000100, 24)}, "MyIngress.set_nhop", {"dmac": 0x000000000101, "port": 1}),
        ({"hdr.ipv4.dstAddr": (0x0A000202, 32)}, "MyIngress.set_nhop", {"dmac": 0x020202020202, "port": 2}),
    ]
    one = client.read_table_entries("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.2", 32)})
    assert len(one) == 1 and one[0].params["port"] == 2
    client.modify_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}, "MyIngress.drop")
    assert client.read_table_entries("MyIngress.ipv4_lpm")[0].action == "MyIngress.drop"
    client.delete_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)})
    assert len(client.read_table_entries("MyIngress.ipv4_lpm")) == 1
    every = client.read_table_entries()  # wildcard over all tables (const entry included)
    tables = sorted({e.table for e in every})
    assert tables == ["MyEgress.fixed", "MyIngress.ipv4_lpm"]
    assert [e.is_const for e in every if e.table == "MyEgress.fixed"] == [True]


def test_default_action_set_reset_and_const_default(client):
    default = client.read_table_entries("MyIngress.ipv4_lpm", default=True)
    assert default[0].is_default and default[0].action == "MyIngress.drop"
    client.set_default_action("MyIngress.ipv4_lpm", "MyIngress.set_nhop", {"dmac": 1, "port": 3})
    assert client.read_table_entries("MyIngress.ipv4_lpm", default=True)[0].params == {"dmac": 1, "port": 3}
    client.reset_default_action("MyIngress.ipv4_lpm")
    assert client.read_table_entries("MyIngress.ipv4_lpm", default=True)[0].action == "MyIngress.drop"
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.set_default_action("MyEgress.fixed", "MyIngress.drop")
    assert excinfo.value.code == "PERMISSION_DENIED"
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_table_entry("MyEgress.fixed", {"standard_metadata.egress_port": 2}, "MyIngress.drop")
    assert excinfo.value.code == "PERMISSION_DENIED"
    still_serving(client)


def test_ternary_range_optional_entries_need_priorities(client):
    client.insert_table_entry("MyIngress.acl", {"hdr.ipv4.srcAddr": ("10.0.0.0", "255.0.0.0"),
                                                "hdr.tcp.dstPort": (80, 90)}, "MyIngress.drop", priority=10)
    client.insert_table_entry("MyIngress.acl", {"hdr.ipv4.protocol": 6}, "MyIngress.drop", priority=5)
    entries = client.read_table_entries("MyIngress.acl")
    assert [(e.match, e.priority) for e in entries] == [
        ({"hdr.ipv4.srcAddr": (0x0A000000, 0xFF000000), "hdr.tcp.dstPort": (80, 90)}, 10),
        ({"hdr.ipv4.protocol": 6}, 5)]
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_table_entry("MyIngress.acl", {"hdr.ipv4.protocol": 17}, "MyIngress.drop")
    assert excinfo.value.code == "INVALID_ARGUMENT" and "priority" in excinfo.value.message
    # same match, different priority: a different entry; same match and priority: duplicate
    client.insert_table_entry("MyIngress.acl", {"hdr.ipv4.protocol": 6}, "MyIngress.drop", priority=6)
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_table_entry("MyIngress.acl", {"hdr.ipv4.protocol": 6}, "NoAction", priority=6)
    assert excinfo.value.code == "ALREADY_EXISTS"


def test_action_profile_members_groups_and_indirect_entries(client):
    for member_id, port in ((1, 11), (2, 12), (3, 13)):
        client.insert_member("MyIngress.ecmp_selector", member_id, "MyIngress.set_port", {"port": port})
    client.insert_group("MyIngress.ecmp_selector", 100, [1, (2, 2), 3])
    client.insert_table_entry("MyIngress.ecmp", {"meta.nhop_group": 7}, group_id=100)
    client.insert_table_entry("MyIngress.ecmp", {"meta.nhop_group": 8}, member_id=3)
    assert client.read_members("MyIngress.ecmp_selector")[2] == ("MyIngress.set_port", {"port": 12})
    assert client.read_groups("MyIngress.ecmp_selector") == {100: [(1, 1), (2, 2), (3, 1)]}
    entries = {e.match["meta.nhop_group"]: (e.group_id, e.member_id)
               for e in client.read_table_entries("MyIngress.ecmp")}
    assert entries == {7: (100, None), 8: (None, 3)}
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.delete_member("MyIngress.ecmp_selector", 1)  # used by group 100
    assert excinfo.value.code == "FAILED_PRECONDITION"
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_table_entry("MyIngress.ecmp", {"meta.nhop_group": 9}, group_id=555)
    assert excinfo.value.code == "NOT_FOUND"
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_table_entry("MyIngress.ecmp", {"meta.nhop_group": 9}, "MyIngress.set_port", {"port": 1})
    assert excinfo.value.code == "INVALID_ARGUMENT"
    client.modify_group("MyIngress.ecmp_selector", 100, [2])
    assert client.read_groups("MyIngress.ecmp_selector") == {100: [(2, 1)]}


# ---- errors -----------------------------------------------------------------------------------

def test_unknown_table_id_is_not_found_per_update(switch, client):
    _target, _server, address = switch
    code, details = raw_write(address, [lpm_update(client, "INSERT", "10.0.0.0", 8, 1, table_id=0x02ABCDEF)])
    assert code == grpc.StatusCode.UNKNOWN
    assert details[0][0] == "NOT_FOUND" and str(0x02ABCDEF) in details[0][1]
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=0x02ABCDEF))])
    assert excinfo.value.code == "NOT_FOUND"
    still_serving(client)


def test_wrong_width_and_bad_bytes_are_invalid_argument_naming_the_field(switch, client):
    _target, _server, address = switch
    update = lpm_update(client, "INSERT", "10.0.0.0", 8, 1)
    update.entity.table_entry.action.action.params[1].value = b"\x02\x00"  # port is bit<9>: 512 too wide
    code, details = raw_write(address, [update])
    assert code == grpc.StatusCode.UNKNOWN
    assert details[0][0] == "INVALID_ARGUMENT" and "port" in details[0][1]
    update = lpm_update(client, "INSERT", "10.0.0.0", 8, 1)
    update.entity.table_entry.match[0].lpm.value = b"\x01\x0a\x00\x00\x00"  # 33 bits for a bit<32>
    code, details = raw_write(address, [update])
    assert details[0][0] == "INVALID_ARGUMENT" and "hdr.ipv4.dstAddr" in details[0][1]
    update = lpm_update(client, "INSERT", "10.0.0.0", 8, 1)
    update.entity.table_entry.match[0].lpm.value = b""  # empty byte string
    code, details = raw_write(address, [update])
    assert details[0][0] == "INVALID_ARGUMENT" and "hdr.ipv4.dstAddr" in details[0][1]
    update = lpm_update(client, "INSERT", "10.0.0.0", 8, 1)
    update.entity.table_entry.match[0].lpm.value = b"\x0a\x00\x00\x01"  # bits beyond the prefix
    code, details = raw_write(address, [update])
    assert details[0][0] == "INVALID_ARGUMENT" and "prefix" in details[0][1]
    # a padded but fitting value is accepted (non-canonical input)
    update = lpm_update(client, "INSERT", "10.0.0.0", 8, 1)
    update.entity.table_entry.match[0].lpm.value = b"\x00\x00\x0a\x00\x00\x00"
    assert raw_write(address, [update])[0] == grpc.StatusCode.OK
    entry = client.read_table_entries("MyIngress.ipv4_lpm")[0]
    assert entry.match == {"hdr.ipv4.dstAddr": (0x0A000000, 8)}
    # a ternary match with mask 0 must be omitted
    acl = client.table_entry_message("MyIngress.acl", {"hdr.ipv4.protocol": 6}, "MyIngress.drop", priority=1)
    fm = acl.match.add(field_id=1)
    fm.ternary.value, fm.ternary.mask = b"\x00", b"\x00"
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    update.entity.table_entry.CopyFrom(acl)
    code, details = raw_write(address, [update])
    assert details[0][0] == "INVALID_ARGUMENT" and "hdr.ipv4.srcAddr" in details[0][1]
    still_serving(client)


def test_duplicate_is_already_exists_and_missing_delete_is_not_found(client):
    client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.1.0.0", 16)}, "MyIngress.drop")
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.1.0.0", 16)},
                                  "MyIngress.drop")
    assert excinfo.value.code == "ALREADY_EXISTS"
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.delete_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.9.0.0", 16)})
    assert excinfo.value.code == "NOT_FOUND"
    still_serving(client)


def test_non_primary_writer_is_permission_denied(switch, client):
    _target, _server, address = switch
    code, details = raw_write(address, [lpm_update(client, "INSERT", "10.0.0.0", 8, 1)], election_id=(0, 3))
    assert code == grpc.StatusCode.PERMISSION_DENIED and details == []
    assert client.read_table_entries("MyIngress.ipv4_lpm") == []
    client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)}, "MyIngress.drop")


def test_batch_continues_on_error_with_one_error_per_update(switch, client):
    _target, _server, address = switch
    updates = [lpm_update(client, "INSERT", "10.0.1.0", 24, 1),
               lpm_update(client, "INSERT", "10.0.1.0", 24, 2),  # duplicate of the first
               lpm_update(client, "INSERT", "10.0.3.0", 24, 3)]
    code, details = raw_write(address, updates)
    assert code == grpc.StatusCode.UNKNOWN
    assert [d[0] for d in details] == ["OK", "ALREADY_EXISTS", "OK"]
    assert len(client.read_table_entries("MyIngress.ipv4_lpm")) == 2
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.write(updates)
    assert excinfo.value.code == "ALREADY_EXISTS"
    assert [e[0] for e in excinfo.value.errors] == [0, 1, 2]


def test_client_batch_sends_one_write(switch, client):
    with client.batch():
        for i in range(50):
            client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (f"10.{i}.0.0", 16)},
                                      "MyIngress.drop")
        assert client.read_table_entries("MyIngress.ipv4_lpm") == []  # nothing sent yet
    assert len(client.read_table_entries("MyIngress.ipv4_lpm")) == 50
    with pytest.raises(P4RuntimeClientError) as excinfo:
        with client.batch():
            client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("11.0.0.0", 8)},
                                      "MyIngress.drop")
            client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.3.0.0", 16)},
                                      "MyIngress.drop")
    assert [(i, code) for i, code, _ in excinfo.value.errors] == [(1, "ALREADY_EXISTS")]
    assert len(client.read_table_entries("MyIngress.ipv4_lpm")) == 51


def test_a_batch_belongs_to_its_thread_and_other_threads_write_meanwhile(switch, client):
    """Two controller parts sharing a session (F10's pushback and rescheduler): a batch one
    thread collects neither swallows nor sends another thread's writes."""
    import threading

    def other_thread():
        client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("12.0.0.0", 8)}, "MyIngress.drop")

    with client.batch():
        client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("11.0.0.0", 8)}, "MyIngress.drop")
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=10)
        seen = [entry.match["hdr.ipv4.dstAddr"] for entry in client.read_table_entries("MyIngress.ipv4_lpm")]
        assert len(seen) == 1   # the other thread's entry went out at once; this batch has not yet
    assert len(client.read_table_entries("MyIngress.ipv4_lpm")) == 2


# ---- counters, meters, registers, PRE, digests -----------------------------------------------

def test_counters_registers_and_meters(switch, client):
    target, _server, _address = switch
    target.state.counters["MyIngress.port_counter"].count(3, 100)
    target.state.counters["MyIngress.port_counter"].count(3, 50)
    assert client.read_counter("MyIngress.port_counter", 3) == (2, 150)
    cells = client.read_counter("MyIngress.port_counter")
    assert len(cells) == 8 and cells[0] == (0, 0)
    client.write_counter("MyIngress.port_counter", 3, 0, 0)
    assert client.read_counter("MyIngress.port_counter", 3) == (0, 0)
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.read_counter("MyIngress.port_counter", 8)
    assert excinfo.value.code == "OUT_OF_RANGE"

    client.write_register("MyIngress.reg", 5, 0xDEADBEEF)
    assert client.read_register("MyIngress.reg", 5) == 0xDEADBEEF
    assert target.state.registers["MyIngress.reg"].values[5] == 0xDEADBEEF
    assert len(client.read_register("MyIngress.reg")) == 16
    with pytest.raises(Exception):
        client.write_register("MyIngress.reg", 5, 1 << 32)

    assert client.read_meter("MyIngress.port_meter", 1) is None
    client.set_meter("MyIngress.port_meter", 1, 100, 10, 200, 20)
    assert client.read_meter("MyIngress.port_meter", 1) == (100, 10, 200, 20)
    client.reset_meter("MyIngress.port_meter", 1)
    assert client.read_meter("MyIngress.port_meter", 1) is None


def test_direct_counters_and_meters(switch, client):
    target, _server, _address = switch
    match = {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)}
    client.insert_table_entry("MyIngress.ipv4_lpm", match, "MyIngress.drop")
    table = target.state.tables["MyIngress.ipv4_lpm"]
    table.direct_counter.count(table.entries()[0], 64)
    assert client.read_direct_counter("MyIngress.ipv4_lpm", match) == (1, 64)
    assert client.read_table_entries("MyIngress.ipv4_lpm", counter_data=True)[0].counter == (1, 64)
    client.write_direct_counter("MyIngress.ipv4_lpm", match, 10, 1000)
    assert client.read_direct_counter("MyIngress.ipv4_lpm")[0][1] == (10, 1000)
    acl_match = {"hdr.ipv4.protocol": 17}
    client.insert_table_entry("MyIngress.acl", acl_match, "MyIngress.drop", priority=1)
    client.set_direct_meter("MyIngress.acl", acl_match, 1000, 100, 2000, 200, priority=1)
    assert client.read_direct_meter("MyIngress.acl", acl_match, priority=1) == (1000, 100, 2000, 200)
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.read_direct_counter("MyIngress.acl", acl_match, priority=1)  # the acl has no direct counter
    assert excinfo.value.code == "INVALID_ARGUMENT"


def test_multicast_groups_and_clone_sessions(switch, client):
    target, _server, _address = switch
    client.insert_multicast_group(1, [1, 2, (3, 7)])
    assert client.read_multicast_groups() == {1: [(1, 0), (2, 0), (3, 7)]}
    assert list(target.state.multicast_groups.replicas(1)) == [(1, 0), (2, 0), (3, 7)]
    client.modify_multicast_group(1, [4])
    assert client.read_multicast_groups() == {1: [(4, 0)]}
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.insert_multicast_group(1, [5])
    assert excinfo.value.code == "ALREADY_EXISTS"
    client.delete_multicast_group(1)
    assert client.read_multicast_groups() == {}
    client.insert_clone_session(5, [9], class_of_service=1, packet_length_bytes=64)
    assert client.read_clone_sessions() == {5: ([(9, 0)], 1, 64)}
    assert target.state.clone_sessions.get(5).packet_length_bytes == 64
    client.delete_clone_session(5)
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.delete_clone_session(5)
    assert excinfo.value.code == "NOT_FOUND"


def test_digests_are_streamed_only_when_configured_and_acked(switch, client):
    target, server, _address = switch
    target._on_digest("mac_learn_t", (0x001122334455, 3))  # not configured yet: dropped
    assert client.get_digest(timeout=0.2) is None
    client.enable_digest("mac_learn_t", max_timeout_ns=0, max_list_size=1, ack_timeout_ns=10 ** 9)
    target._on_digest("mac_learn_t", (0x001122334455, 3))
    digest = client.get_digest(timeout=2)
    assert digest.name == "mac_learn_t"
    assert digest.data == [{"srcAddr": 0x001122334455, "port": 3}]
    # batching: up to 3 entries or 50 ms
    client.enable_digest("mac_learn_t", max_timeout_ns=50_000_000, max_list_size=3, modify=True)
    for port in (4, 5, 6, 7):
        target._on_digest("mac_learn_t", (0xAA, port))
    first = client.get_digest(timeout=2)
    assert [d["port"] for d in first.data] == [4, 5, 6]
    second = client.get_digest(timeout=2)
    assert [d["port"] for d in second.data] == [7]
    entities = client.read([p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry())])
    assert entities[0].digest_entry.config.max_list_size == 3


def test_idle_timeout_notifications(switch, client):
    target, _server, _address = switch
    client.insert_table_entry("MyIngress.flows", {"meta.flow_id": 7}, "NoAction", idle_timeout_ns=100_000_000)
    client.insert_table_entry("MyIngress.flows", {"meta.flow_id": 8}, "NoAction")  # no timeout
    with pytest.raises(P4RuntimeClientError) as excinfo:  # the lpm table has no idle timeout
        client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)},
                                  "MyIngress.drop", idle_timeout_ns=1000)
    assert excinfo.value.code == "INVALID_ARGUMENT"
    expired = client.get_idle_timeouts(timeout=3)
    assert [e.match for e in expired] == [{"meta.flow_id": 7}]
    assert client.get_idle_timeouts(timeout=0.3) is None  # reported once per expiry
    table = target.state.tables["MyIngress.flows"]
    table.record_hit(table.entries()[0], time.monotonic_ns())  # the data plane saw traffic
    assert [e.match for e in client.get_idle_timeouts(timeout=3)] == [{"meta.flow_id": 7}]


def test_packet_out_without_a_data_plane_is_a_stream_error(client):
    client.packet_out(b"\x00" * 60, egress_port=1)
    error = client.get_stream_error(timeout=2)
    assert error is not None and error.canonical_code == code_pb2.FAILED_PRECONDITION
    assert error.HasField("packet_out")
    still_serving(client)


def test_packet_out_with_a_metadata_id_twice_is_invalid_argument(client):
    """A PacketOut names each metadata field at most once (as a table entry each match field): a second value
    of the same id is a StreamError INVALID_ARGUMENT naming it, and the packet is not sent."""
    request = p4runtime_pb2.StreamMessageRequest()
    request.packet.payload = b"\x00" * 60
    for port in (b"\x01", b"\x02"):
        request.packet.metadata.add(metadata_id=1, value=port)
    client._outbox.put(request)
    error = client.get_stream_error(timeout=2)
    assert error is not None and error.canonical_code == code_pb2.INVALID_ARGUMENT, error
    assert "metadata id 1 (egress_port) given more than once" in error.message
    still_serving(client)


def test_set_pipeline_errors(switch, client):
    _target, _server, address = switch
    Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
    request = Set(device_id=DEVICE_ID, action=Set.VERIFY)
    request.election_id.low = 10
    request.config.p4_device_config = b"not json"
    with pytest.raises(grpc.RpcError) as excinfo:
        client.stub.SetForwardingPipelineConfig(request)
    assert excinfo.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    commit = Set(device_id=DEVICE_ID, action=Set.COMMIT)
    commit.election_id.low = 10
    with pytest.raises(grpc.RpcError) as excinfo:
        client.stub.SetForwardingPipelineConfig(commit)
    assert excinfo.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    backup = Set(device_id=DEVICE_ID, action=Set.VERIFY)
    backup.election_id.low = 2
    with pytest.raises(grpc.RpcError) as excinfo:
        client.stub.SetForwardingPipelineConfig(backup)
    assert excinfo.value.code() == grpc.StatusCode.PERMISSION_DENIED
    still_serving(client)


# ---- the real program ------------------------------------------------------------------------

@pytest.fixture
def real_switch():
    """An empty switch (no pipeline), as switchd starts it; CPU port = the programs' CPU_PORT (255)."""
    with running_server(cpu_port=255) as (target, _server, address):
        yield target, address


def test_l3_ecmp_pipeline_entries_and_packet_io(real_switch):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    target, address = real_switch
    with P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 1), timeout=10) as sw:
        assert sw.index is None  # no pipeline yet
        sw.set_pipeline(os.path.join(REPO, "p4src", "l3_ecmp.p4"), cookie=42)
        assert target.cookie == 42 and target.device is not None
        sw.insert_member("MyIngress.ecmp_selector", 1, "MyIngress.set_nhop",
                         {"dmac": "00:00:00:00:00:02", "smac": "00:00:00:00:00:aa", "port": 2})
        sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)}, member_id=1)
        assert sw.read_table_entries("MyIngress.ipv4_lpm")[0].member_id == 1
        # PacketOut: the program sends it out of the port in the packet_out header
        frame = bytes(Ether(dst="00:00:00:00:00:02") / IP(dst="10.0.2.1") / UDP())
        sw.packet_out(frame, egress_port=3)
        outputs = []
        deadline = time.monotonic() + 5
        while not outputs and time.monotonic() < deadline:
            outputs = target.pump()
            time.sleep(0.01)
        assert outputs and outputs[0][0] == 3 and outputs[0][1] == frame
        # PacketIn: a non-IPv4 frame goes to the CPU port with its ingress port
        arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", type=0x0806) / (b"\x00" * 28))
        target.device.receive(4, arp)
        packet = None
        deadline = time.monotonic() + 5
        while packet is None and time.monotonic() < deadline:
            target.pump()
            packet = sw.get_packet_in(timeout=0.05)
        assert packet is not None and packet.payload == arp
        assert packet.metadata["ingress_port"] == 4
        ingress = sw.read_counter("MyIngress.ingress_port_counter", 4)
        assert ingress[0] == 1


# ---- conversions (no server) ------------------------------------------------------------------

def test_byte_strings_are_canonical_out_and_checked_in():
    from testbed.p4runtime.convert import decode, encode
    from testbed.p4runtime.errors import P4RuntimeError

    assert encode(0) == b"\x00"
    assert encode(0x0A000001) == b"\x0a\x00\x00\x01"
    assert encode(0x1FF, 9) == b"\x01\xff"
    with pytest.raises(P4RuntimeError) as excinfo:
        encode(0x200, 9)
    assert excinfo.value.code == "INVALID_ARGUMENT"
    assert decode(b"\x00\x00\x01\xff", 9, "f") == 0x1FF  # padded input accepted
    for bad in (b"", b"\x02\x00"):
        with pytest.raises(P4RuntimeError) as excinfo:
            decode(bad, 9, "table T: field F")
        assert excinfo.value.code == "INVALID_ARGUMENT" and "field F" in excinfo.value.message


def test_user_values_and_match_specs():
    from testbed.errors import ParameterError
    from testbed.p4runtime.values import match_from_spec, parse_value

    assert parse_value("10.0.0.1", 32, "f") == 0x0A000001
    assert parse_value("00:11:22:33:44:55", 48, "f") == 0x001122334455
    assert parse_value("2001:db8::1", 128, "f") == 0x20010DB8000000000000000000000001
    assert parse_value("0x1f", 8, "f") == 31 and parse_value(b"\x01\x00", 16, "f") == 256
    with pytest.raises(ParameterError, match="f"):
        parse_value(512, 9, "f")
    assert match_from_spec("lpm", "10.0.0.0/8", 32, "f") == {"value": 0x0A000000, "prefix_len": 8}
    assert match_from_spec("lpm", ("10.1.2.3", 16), 32, "f") == {"value": 0x0A010000, "prefix_len": 16}
    assert match_from_spec("lpm", ("0.0.0.0", 0), 32, "f") is None
    assert match_from_spec("ternary", "0x0a&&&0x0f", 8, "f") == {"value": 0x0A, "mask": 0x0F}
    assert match_from_spec("ternary", 5, 8, "f") == {"value": 5, "mask": 0xFF}
    assert match_from_spec("range", (10, 20), 16, "f") == {"low": 10, "high": 20}
    assert match_from_spec("range", (0, 0xFFFF), 16, "f") is None
    assert match_from_spec("optional", None, 8, "f") is None
    with pytest.raises(ParameterError):
        match_from_spec("exact", None, 8, "f")


def test_controller_headers_pack_and_unpack():
    from testbed.p4runtime.errors import P4RuntimeError
    from testbed.embedded_switch.p4runtime_target import pack_header, unpack_header

    fields = [("egress_port", 9), ("_pad", 7)]
    assert pack_header(fields, {"egress_port": 3}, "packet_out") == b"\x01\x80"
    assert unpack_header(fields, b"\x01\x80payload") == ({"egress_port": 3, "_pad": 0}, b"payload")
    with pytest.raises(P4RuntimeError, match="does not fit"):
        pack_header(fields, {"egress_port": 512}, "packet_out")
    with pytest.raises(P4RuntimeError, match="unknown metadata field"):
        pack_header(fields, {"port": 1}, "packet_out")


def test_verify_loads_the_program_and_checks_the_p4info(switch, client):
    from testbed.p4runtime.client import embedded_pipeline

    p4info, device_config = embedded_pipeline(os.path.join(REPO, "p4src", "l3_ecmp.p4"))
    client.set_pipeline(p4info=p4info, device_config=device_config, action="VERIFY")
    assert client.index.by_name("tables", "MyIngress.acl")  # VERIFY changed nothing
    wrong = type(p4info)()
    wrong.CopyFrom(p4info)
    wrong.tables[0].preamble.id += 1
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.set_pipeline(p4info=wrong, device_config=device_config, action="VERIFY")
    assert excinfo.value.code == "INVALID_ARGUMENT" and "MyIngress.ipv4_lpm" in excinfo.value.message
    import json

    document = json.loads(device_config)
    document["sources"][document["main"]] += "\nthis is not P4 at all;\n"
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.set_pipeline(p4info=p4info, device_config=json.dumps(document).encode(), action="VERIFY")
    assert excinfo.value.code == "INVALID_ARGUMENT" and "l3_ecmp.p4:" in excinfo.value.message
    still_serving(client)


def test_l3_ecmp_forwarding_over_a_selector_group_programmed_over_p4runtime(real_switch):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    target, address = real_switch
    with P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 1), timeout=10) as sw:
        sw.set_pipeline(os.path.join(REPO, "p4src", "l3_ecmp.p4"))
        with sw.batch():
            for member_id, port in ((1, 1), (2, 2), (3, 3)):
                sw.insert_member("MyIngress.ecmp_selector", member_id, "MyIngress.set_nhop",
                                 {"dmac": f"00:00:00:00:00:0{port}", "smac": "00:00:00:00:00:aa", "port": port})
            sw.insert_group("MyIngress.ecmp_selector", 10, [1, 2, 3])
            sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.9.0", 24)}, group_id=10)
        ports = {}
        for sport in range(1000, 1060):
            frame = bytes(Ether(dst="00:00:00:00:00:aa") / IP(src="10.0.1.1", dst="10.0.9.9", ttl=64)
                          / UDP(sport=sport, dport=4791))
            out = target.device.process(4, frame)
            assert len(out) == 1
            port, data = out[0]
            ports[port] = ports.get(port, 0) + 1
            packet = Ether(data)
            assert packet[IP].ttl == 63 and packet.dst == f"00:00:00:00:00:0{port}"
        assert set(ports) == {1, 2, 3}  # 60 flows spread over every member
        assert sw.read_counter("MyIngress.ingress_port_counter", 4)[0] == 60
        egress = sw.read_counter("MyEgress.egress_port_counter")
        assert sum(egress[p][0] for p in (1, 2, 3)) == 60
        # a miss is dropped; deleting the route makes the same flow miss
        sw.delete_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.9.0", 24)})
        frame = bytes(Ether() / IP(dst="10.0.9.9") / UDP())
        assert target.device.process(4, frame) == []


def test_save_commit_reconcile_and_get_device_config(real_switch):
    import json

    from testbed.p4runtime.client import embedded_pipeline

    target, address = real_switch
    p4info, device_config = embedded_pipeline(os.path.join(REPO, "p4src", "l3_ecmp.p4"))
    with P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 1), timeout=10) as sw:
        sw.set_pipeline(p4info=p4info, device_config=device_config, action="VERIFY_AND_SAVE", cookie=7)
        assert target.device is None  # saved, not yet realized
        sw.stub.SetForwardingPipelineConfig(_commit_request())  # COMMIT carries no config
        assert target.device is not None and target.cookie == 7
        sw.load_p4info()
        sw.insert_member("MyIngress.ecmp_selector", 1, "MyIngress.set_nhop",
                         {"dmac": 2, "smac": 1, "port": 2})
        # reconciling with the same program keeps the forwarding state
        sw.set_pipeline(p4info=p4info, device_config=device_config, action="RECONCILE_AND_COMMIT", cookie=8)
        assert sw.read_members("MyIngress.ecmp_selector") == {1: ("MyIngress.set_nhop",
                                                                  {"dmac": 2, "smac": 1, "port": 2})}
        # committing again clears it
        sw.set_pipeline(p4info=p4info, device_config=device_config)
        assert sw.read_members("MyIngress.ecmp_selector") == {}
        Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
        config = sw.stub.GetForwardingPipelineConfig(
            Get(device_id=DEVICE_ID, response_type=Get.DEVICE_CONFIG_AND_COOKIE)).config
        assert not config.HasField("p4info")
        document = json.loads(config.p4_device_config)
        assert document["format"] == "testbed-embedded-v1" and document["main"] == "l3_ecmp.p4"


def _commit_request():
    Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
    request = Set(device_id=DEVICE_ID, action=Set.COMMIT)
    request.election_id.low = 1
    return request


def _free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.mininet
def test_packet_in_and_out_through_a_switch_process_on_a_veth(tmp_path):
    """switchd + server + client: frames from a real interface reach the controller and back."""
    import socket
    import subprocess
    import sys

    switch_if, host_if = f"p4rt{os.getpid() % 100000}a", f"p4rt{os.getpid() % 100000}b"
    subprocess.run(["ip", "link", "add", switch_if, "type", "veth", "peer", "name", host_if], check=True)
    proc = sock = None
    try:
        for name in (switch_if, host_if):
            subprocess.run(["ip", "link", "set", name, "up"], check=True)
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=False)
        port, ready = _free_port(), tmp_path / "ready"
        proc = subprocess.Popen([sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "p4rt-test",
                                 "--device-id", "1", "--grpc-addr", f"127.0.0.1:{port}", "--port", f"1={switch_if}",
                                 "--cpu-port", "255", "--program", os.path.join(REPO, "p4src", "l3_ecmp.p4"),
                                 "--ready-file", str(ready)])
        assert _wait(lambda: ready.exists() or proc.poll() is not None, timeout=60) and proc.poll() is None
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        sock.bind((host_if, 0))
        sock.settimeout(2)
        with P4RuntimeClient(f"127.0.0.1:{port}", device_id=1, election_id=(0, 1), timeout=10) as sw:
            arp = bytes.fromhex("ffffffffffff020000000001" "0806") + b"\x00" * 28
            sock.send(arp)
            packet = sw.get_packet_in(timeout=5)
            assert packet is not None and packet.payload == arp and packet.metadata["ingress_port"] == 1
            frame = bytes.fromhex("020000000002020000000003" "88b5") + b"hello" * 10
            sw.packet_out(frame, egress_port=1)
            deadline = time.monotonic() + 5
            received = None
            while received is None and time.monotonic() < deadline:
                data = sock.recv(2048)
                if data.startswith(frame):
                    received = data
            assert received is not None
    finally:
        if sock is not None:
            sock.close()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["ip", "link", "del", switch_if], check=False)
