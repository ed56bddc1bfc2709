"""Malformed requests get the status the P4Runtime specification gives, never INTERNAL.

Each test names the section of the specification (P4Runtime 1.4) it follows.
"""
import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from testbed.p4.device_config import parse_device_config
from testbed.p4.loader import load_program_from_sources
from testbed.p4runtime.client import P4RuntimeClient, P4RuntimeClientError
from testbed.p4runtime.p4info import build_p4info

from p4runtime_helpers import DEVICE_ID, demo_info, device_config, running_server, small_program

_Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
_Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
SMALL_PROGRAM = small_program("""
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { hdr.h.f : exact; } actions = { fwd; NoAction; } }
    apply { t.apply(); }""")


@pytest.fixture
def switch():
    """A server for demo_info() and its primary controller."""
    with running_server(demo_info()) as (target, _server, address):
        client = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 10), timeout=30)
        try:
            yield target, client
        finally:
            client.close()


def _code(call):
    """The gRPC status of a call (OK when it returns), as a name."""
    try:
        result = call()
        if hasattr(result, "__next__"):
            list(result)
    except grpc.RpcError as exc:
        return exc.code().name
    return "OK"


def _update_codes(client, *updates):
    """Write the updates; the status names of the per-update p4.Error details."""
    request = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, updates=updates)
    request.election_id.low = 10
    try:
        client.stub.Write(request, timeout=30)
        return ["OK"] * len(updates)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNKNOWN, exc
        for key, value in exc.trailing_metadata():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status()
                status.ParseFromString(value)
                codes = []
                for detail in status.details:
                    error = p4runtime_pb2.Error()
                    detail.Unpack(error)
                    codes.append(code_pb2.Code.Name(error.canonical_code))
                return codes
    raise AssertionError("no error details")


def _set_config(client, device_config, p4info=None, action=_Set.VERIFY):
    request = _Set(device_id=DEVICE_ID, action=action)
    request.election_id.low = 10
    request.config.p4_device_config = device_config
    if p4info is not None:
        request.config.p4info.CopyFrom(p4info)
    return lambda: client.stub.SetForwardingPipelineConfig(request, timeout=60)


# ---- SetForwardingPipelineConfig -------------------------------------------------------------
# Spec "SetForwardingPipelineConfig RPC": VERIFY (and the other actions) return
# INVALID_ARGUMENT "if the provided config cannot be realized".

@pytest.mark.parametrize("source", [7, None, ["a"], {"nested": "x"}, 1.5])
def test_a_device_config_source_that_is_not_a_string_is_invalid_argument(switch, source):
    _target, client = switch
    assert _code(_set_config(client, device_config({"p.p4": source}))) == "INVALID_ARGUMENT"
    assert _code(_set_config(client, device_config({"p.p4": SMALL_PROGRAM, "other.p4": source}))) == \
        "INVALID_ARGUMENT"


def test_deeply_nested_json_in_a_device_config_is_invalid_argument(switch):
    _target, client = switch
    for depth in (5_000, 200_000):
        assert _code(_set_config(client, b"[" * depth + b"]" * depth)) == "INVALID_ARGUMENT"
        nested = b'{"format": "testbed-embedded-v1", "main": "p.p4", "sources": {"p.p4": ' + \
            b"[" * depth + b"]" * depth + b"}}"
        assert _code(_set_config(client, nested)) == "INVALID_ARGUMENT"


def test_a_p4info_with_duplicate_tables_is_invalid_argument(switch):
    """Spec "ID Allocation for P4Info Objects": ids are unique in the P4Info; such a
    P4Info describes no realizable config."""
    target, client = switch
    config = device_config({"p.p4": SMALL_PROGRAM})
    _p4info = _p4info_of(config)
    duplicate = p4info_pb2.P4Info()
    duplicate.CopyFrom(_p4info)
    duplicate.tables.add().CopyFrom(duplicate.tables[0])
    assert _code(_set_config(client, config, duplicate)) == "INVALID_ARGUMENT"
    same_id = p4info_pb2.P4Info()
    same_id.CopyFrom(_p4info)
    same_id.actions[0].preamble.id = same_id.tables[0].preamble.id
    assert _code(_set_config(client, config, same_id)) == "INVALID_ARGUMENT"
    assert _code(_set_config(client, config, _p4info)) == "OK"  # the P4Info as built is fine


def _p4info_of(config):
    """The P4Info of the program in a device config."""
    main, sources = parse_device_config(config)
    return build_p4info(load_program_from_sources(main, sources).info)


def test_an_unknown_set_pipeline_action_is_invalid_argument(switch):
    _target, client = switch
    request = _Set(device_id=DEVICE_ID, action=17)
    request.election_id.low = 10
    request.config.p4_device_config = device_config({"p.p4": SMALL_PROGRAM})
    assert _code(lambda: client.stub.SetForwardingPipelineConfig(request, timeout=60)) == "INVALID_ARGUMENT"


# ---- GetForwardingPipelineConfig -------------------------------------------------------------

def test_an_unknown_get_pipeline_response_type_is_invalid_argument(switch):
    """Spec "GetForwardingPipelineConfig RPC": response_type is one of ALL, COOKIE_ONLY,
    P4INFO_AND_COOKIE, DEVICE_CONFIG_AND_COOKIE; another value is an invalid argument."""
    _target, client = switch
    for response_type in (4, 99, -1):
        request = _Get(device_id=DEVICE_ID, response_type=response_type)
        assert _code(lambda: client.stub.GetForwardingPipelineConfig(request, timeout=30)) == "INVALID_ARGUMENT"
    assert _code(lambda: client.stub.GetForwardingPipelineConfig(_Get(device_id=DEVICE_ID), timeout=30)) == "OK"


# ---- Write -----------------------------------------------------------------------------------

def test_an_empty_entity_in_a_write_is_invalid_argument(switch):
    """Spec "Write RPC": a malformed entity is INVALID_ARGUMENT; "Wildcard Reads": the
    entity oneof must always be set."""
    _target, client = switch
    assert _update_codes(client, p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)) == ["INVALID_ARGUMENT"]


def test_a_negative_digest_max_list_size_is_invalid_argument(switch):
    """Spec "DigestEntry": max_list_size is a number of digests (0: no limit); a negative
    one is a malformed entity, INVALID_ARGUMENT ("Write RPC")."""
    target, client = switch
    with pytest.raises(P4RuntimeClientError) as excinfo:
        client.enable_digest("mac_learn_t", max_list_size=-1)
    assert excinfo.value.code == "INVALID_ARGUMENT" and "max_list_size" in excinfo.value.message
    client.enable_digest("mac_learn_t", max_list_size=0)  # 0: no limit


def test_an_unknown_action_id_is_invalid_argument_wherever_it_appears(switch):
    """Spec "Action Specification": the action_id must be one of the table's actions, or
    the server must return INVALID_ARGUMENT."""
    _target, client = switch
    unknown = 0x01ABCDEF
    entry = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    entry.entity.table_entry.CopyFrom(client.table_entry_message(
        "MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)}, "MyIngress.drop"))
    entry.entity.table_entry.action.action.action_id = unknown
    default = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    default.entity.table_entry.table_id = client.index.id_of("tables", "MyIngress.ipv4_lpm")
    default.entity.table_entry.is_default_action = True
    default.entity.table_entry.action.action.action_id = unknown
    member = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    member.entity.action_profile_member.action_profile_id = client.index.id_of("action_profiles",
                                                                               "MyIngress.ecmp_selector")
    member.entity.action_profile_member.member_id = 1
    member.entity.action_profile_member.action.action_id = unknown
    assert _update_codes(client, entry, default, member) == ["INVALID_ARGUMENT"] * 3


# ---- Read ------------------------------------------------------------------------------------

def _read(client, *entities):
    request = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID, entities=entities)
    return lambda: client.stub.Read(request, timeout=30)


def test_an_empty_entity_in_a_read_is_invalid_argument(switch):
    """Spec "Wildcard Reads": "The entity oneof field in the Entity message must always be
    set, or the server must return an INVALID_ARGUMENT error"."""
    _target, client = switch
    assert _code(_read(client, p4runtime_pb2.Entity())) == "INVALID_ARGUMENT"


def test_a_read_of_all_tables_with_a_filter_is_invalid_argument(switch):
    """Spec TableEntry "Wildcard Reads": with table_id 0 "entries from all tables ... will be
    selected and no other filter can be used"."""
    _target, client = switch
    client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)}, "MyIngress.drop")
    with_match = p4runtime_pb2.Entity()
    with_match.table_entry.CopyFrom(client.table_entry_message("MyIngress.ipv4_lpm",
                                                               {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)}))
    with_match.table_entry.table_id = 0
    assert _code(_read(client, with_match)) == "INVALID_ARGUMENT"
    for name, value in (("priority", 3), ("controller_metadata", 9), ("metadata", b"x"), ("is_default_action", True)):
        entity = p4runtime_pb2.Entity()
        setattr(entity.table_entry, name, value)
        assert _code(_read(client, entity)) == "INVALID_ARGUMENT", name
    every = p4runtime_pb2.Entity()
    every.table_entry.SetInParent()
    assert _code(_read(client, every)) == "OK"


def test_read_filters_select_by_priority_action_and_metadata(switch):
    """Spec TableEntry "Wildcard Reads": priority, action, controller_metadata and metadata
    filter the entries of the named table."""
    _target, client = switch
    for priority, protocol in ((10, 6), (20, 17), (30, 1)):
        client.insert_table_entry("MyIngress.acl", {"hdr.ipv4.protocol": protocol},
                                  "MyIngress.drop" if priority != 30 else "NoAction", priority=priority,
                                  metadata=b"m%d" % priority)
    table_id = client.index.id_of("tables", "MyIngress.acl")

    def read(**filters):
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = table_id
        for name, value in filters.items():
            if name == "action":
                entity.table_entry.action.action.action_id = client.index.id_of("actions", value)
            else:
                setattr(entity.table_entry, name, value)
        return sorted(e.table_entry.priority for e in client.read([entity]))

    assert read() == [10, 20, 30]
    assert read(priority=20) == [20]
    assert read(action="MyIngress.drop") == [10, 20]
    assert read(metadata=b"m30") == [30]
    assert read(priority=20, action="NoAction") == []


INDEXED = [("counter_entry", "counters", "MyIngress.port_counter", 8),
           ("meter_entry", "meters", "MyIngress.port_meter", 4),
           ("register_entry", "registers", "MyIngress.reg", 16)]


@pytest.mark.parametrize("field,kind,name,size", INDEXED, ids=[kind for _, kind, _, _ in INDEXED])
def test_indexes_negative_and_past_the_end_in_reads_and_writes(switch, field, kind, name, size):
    """Spec "CounterEntry", "MeterEntry" (and RegisterEntry alike): INVALID_ARGUMENT for a negative index,
    OUT_OF_RANGE for one past the end, in reads and in MODIFY writes.  PI answers INVALID_ARGUMENT for a
    negative index too, and UNKNOWN (the target's error) past the end."""
    _target, client = switch
    for index, code in ((-1, "INVALID_ARGUMENT"), (-(1 << 62), "INVALID_ARGUMENT"), (size, "OUT_OF_RANGE"),
                        ((1 << 62), "OUT_OF_RANGE")):
        entity = p4runtime_pb2.Entity()
        entry = getattr(entity, field)
        setattr(entry, f"{kind[:-1]}_id", client.index.id_of(kind, name))
        entry.index.index = index
        assert _code(_read(client, entity)) == code, (kind, index)
        if field == "register_entry":
            entry.data.bitstring = b"\x01"
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=entity)
        assert _update_codes(client, update) == [code], (kind, index)


def test_a_direct_counter_read_of_a_missing_entry_is_not_found(switch):
    """Spec "DirectCounterEntry": "If no such entry is found, the server returns the error
    code NOT_FOUND"."""
    _target, client = switch
    entity = p4runtime_pb2.Entity()
    entity.direct_counter_entry.table_entry.CopyFrom(client.table_entry_message(
        "MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.9.0.0", 16)}))
    assert _code(_read(client, entity)) == "NOT_FOUND"


# ---- requests that are not protobuf ----------------------------------------------------------

@pytest.mark.parametrize("method", ["Write", "Read", "GetForwardingPipelineConfig", "SetForwardingPipelineConfig",
                                    "Capabilities"])
def test_bytes_that_are_not_the_request_message_are_invalid_argument(switch, method):
    """gRPC itself answers INTERNAL ("Exception deserializing request"); the request is the
    client's mistake, so the server answers INVALID_ARGUMENT."""
    _target, client = switch
    call = client.channel.unary_unary(f"/p4.v1.P4Runtime/{method}", request_serializer=lambda data: data,
                                      response_deserializer=lambda data: data)
    if method == "Read":
        call = client.channel.unary_stream(f"/p4.v1.P4Runtime/{method}", request_serializer=lambda data: data,
                                           response_deserializer=lambda data: data)
    assert _code(lambda: call(b"\x0a\xff\xff\xff\xff\x0f", timeout=30)) == "INVALID_ARGUMENT"


def test_a_stream_message_that_is_not_protobuf_closes_the_stream_with_invalid_argument(switch):
    _target, client = switch
    call = client.channel.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=lambda data: data,
                                        response_deserializer=p4runtime_pb2.StreamMessageResponse.FromString)
    assert _code(lambda: call(iter([b"\x0a\xff\xff\xff\xff\x0f"]), timeout=30)) == "INVALID_ARGUMENT"
