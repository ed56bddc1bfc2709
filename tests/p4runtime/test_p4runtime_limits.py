"""Documented limits of the P4Runtime server (testbed/p4runtime/limits.py), and large requests.

* Selector weights: a weight is realized as copies of the member (as PI does for
  BMv2), so group and selector weights are capped: RESOURCE_EXHAUSTED naming the
  limit (spec "Rules on Setting max_size": a target limit is RESOURCE_EXHAUSTED).
* Extern arrays: sizes are checked before commit: INVALID_ARGUMENT naming the limit
  (spec "SetForwardingPipelineConfig RPC": a config the target cannot realize).
* Reads are streamed and do not hold the lock writes need for their whole length.
* Write batches of every size return one p4.Error per update (spec "Write RPC",
  "Error Reporting"), and the project's client reports them.
"""
import resource
import threading
import time

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from testbed.errors import ParameterError
from testbed.p4.program import ActionCall, ActionRef, Counter, MatchField, Table
from testbed.p4runtime import limits
from testbed.p4runtime.client import CHANNEL_OPTIONS, P4RuntimeClient, P4RuntimeClientError

from p4runtime_helpers import DEVICE_ID, demo_info, device_config, running_server, small_program

BIG_COUNTER = "MyIngress.big_counter"
SELECTOR = "MyIngress.ecmp_selector"
BIG_COUNTER_CELLS = 100_000
HOSTS = "MyIngress.hosts"


def big_info():
    """demo_info() plus a counter of 100,000 cells and an exact table of 20,000 entries; its selector's
    size is above the target's weight limits, so that they are what a large group meets."""
    info = demo_info()
    info.action_profiles[SELECTOR].size = 2 * limits.MAX_SELECTOR_WEIGHT
    info.counters[BIG_COUNTER] = Counter(BIG_COUNTER, BIG_COUNTER_CELLS)
    info.tables[HOSTS] = Table(HOSTS, [MatchField("hdr.ipv4.dstAddr", 32, "exact")],
                               [ActionRef("MyIngress.set_port"), ActionRef("NoAction")], size=20_000,
                               default_action=ActionCall("NoAction"))
    return info


@pytest.fixture
def switch():
    """A running server for big_info() and its primary controller."""
    with running_server(big_info()) as (target, _server, address):
        client = P4RuntimeClient(address, device_id=DEVICE_ID, election_id=(0, 10), timeout=60)
        try:
            yield target, address, client
        finally:
            client.close()


def _expect(code, call):
    with pytest.raises(P4RuntimeClientError) as excinfo:
        call()
    assert excinfo.value.code == code, excinfo.value
    return excinfo.value


# ---- selector weights -------------------------------------------------------------------------


def test_a_huge_member_weight_is_refused_naming_the_limit(switch):
    target, _address, client = switch
    client.insert_member(SELECTOR, 1, "MyIngress.set_port", {"port": 1})
    client.insert_member(SELECTOR, 2, "MyIngress.set_port", {"port": 2})
    for weight in (1 << 24, (1 << 31) - 1):
        started = time.monotonic()
        error = _expect("RESOURCE_EXHAUSTED", lambda: client.insert_group(SELECTOR, 5, [(1, weight), (2, 1)]))
        assert "MAX_GROUP_WEIGHT" in error.message and str(limits.MAX_GROUP_WEIGHT) in error.message
        assert time.monotonic() - started < 10  # refused before anything is expanded
    assert target.state.action_profiles[SELECTOR].groups() == []
    _expect("RESOURCE_EXHAUSTED", lambda: client.insert_group(SELECTOR, 5, [1], max_size=limits.MAX_GROUP_WEIGHT + 1))
    client.insert_group(SELECTOR, 5, [(1, 3), (2, limits.MAX_GROUP_WEIGHT - 3)])  # at the limit: fine
    assert client.read_groups(SELECTOR) == {5: [(1, 3), (2, limits.MAX_GROUP_WEIGHT - 3)]}
    _expect("RESOURCE_EXHAUSTED", lambda: client.modify_group(SELECTOR, 5, [(1, 4), (2, limits.MAX_GROUP_WEIGHT - 3)]))
    assert client.read_groups(SELECTOR) == {5: [(1, 3), (2, limits.MAX_GROUP_WEIGHT - 3)]}


def test_weight_zero_is_invalid_argument(switch):
    """Spec "Action Profile Group Programming": 0 is not a valid weight value."""
    _target, _address, client = switch
    client.insert_member(SELECTOR, 1, "MyIngress.set_port", {"port": 1})
    _expect("INVALID_ARGUMENT", lambda: client.insert_group(SELECTOR, 5, [(1, 0)]))
    _expect("INVALID_ARGUMENT", lambda: client.insert_group(SELECTOR, 5, [(1, -3)]))


def test_the_groups_of_one_selector_share_a_weight_budget(switch):
    target, _address, client = switch
    client.insert_member(SELECTOR, 1, "MyIngress.set_port", {"port": 1})
    groups = limits.MAX_SELECTOR_WEIGHT // limits.MAX_GROUP_WEIGHT
    with client.batch():
        for group_id in range(1, groups + 1):
            client.insert_group(SELECTOR, group_id, [(1, limits.MAX_GROUP_WEIGHT)])
    error = _expect("RESOURCE_EXHAUSTED", lambda: client.insert_group(SELECTOR, groups + 1, [(1, 1)]))
    assert "MAX_SELECTOR_WEIGHT" in error.message
    # the budget is counted across a batch too, and freed by deletes and smaller groups
    error = _expect("RESOURCE_EXHAUSTED", lambda: client.write_batch([
        _group_update(client, "DELETE", 1, []), _group_update(client, "INSERT", 100, [(1, limits.MAX_GROUP_WEIGHT)]),
        _group_update(client, "INSERT", 101, [(1, 1)])]))
    assert [(index, code) for index, code, _ in error.errors] == [(2, "RESOURCE_EXHAUSTED")]
    client.modify_group(SELECTOR, 2, [(1, 1)])
    client.insert_group(SELECTOR, 101, [(1, limits.MAX_GROUP_WEIGHT - 1)])
    assert len(target.state.action_profiles[SELECTOR].groups()) == groups + 1


def _group_update(client, kind, group_id, members):
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(kind))
    group = update.entity.action_profile_group
    group.action_profile_id = client.index.id_of("action_profiles", SELECTOR)
    group.group_id = group_id
    for member_id, weight in members:
        group.members.add(member_id=member_id, weight=weight)
    return update


# ---- extern array sizes -----------------------------------------------------------------------

def _set_program(client, arrays):
    """SetForwardingPipelineConfig(VERIFY_AND_COMMIT) of a program with these declarations (P4Info from it)."""
    source = small_program(arrays + " apply { sm.egress_spec = 1; }")
    client.set_pipeline(p4info=p4info_pb2.P4Info(), device_config=device_config({"p.p4": source}))


def _max_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("arrays, limit", [
    ("register<bit<32>>(32w67108864) r;", "MAX_EXTERN_CELLS"),
    ("counter(32w67108864, CounterType.packets) c;", "MAX_EXTERN_CELLS"),
    ("meter(32w67108864, MeterType.packets) m;", "MAX_EXTERN_CELLS"),
    ("register<bit<8>>(32w1048576) r1; register<bit<8>>(32w1048576) r2; counter(32w1048576, CounterType.packets) c;"
     "meter(32w1048576, MeterType.bytes) m; register<bit<8>>(32w8) r3;", "MAX_TOTAL_EXTERN_CELLS"),
])
def test_extern_arrays_over_the_limits_are_refused_before_allocating(switch, arrays, limit):
    target, _address, client = switch
    before = _max_rss_mb()
    error = _expect("INVALID_ARGUMENT", lambda: _set_program(client, arrays))
    assert limit in error.message
    assert _max_rss_mb() - before < 200  # nothing of the 2^26 cells was allocated
    assert HOSTS in target.state.tables  # the running pipeline is untouched


def _constants(count):
    return "".join(f"const bit<8> c{i} = 8w1;\n" for i in range(count))


@pytest.mark.parametrize("declarations, limit", [
    (_constants(170_000), "MAX_DEVICE_CONFIG_BYTES"),  # 4.6 MB: refused before it is decoded
    ("#define X8 x x x x x x x x\n#define X64 X8 X8 X8 X8 X8 X8 X8 X8\n#define X512 X64 X64 X64 X64 X64 X64 X64 X64\n"
     + "X512\n" * 1000, "MAX_PROGRAM_CHARS"),  # 60 KB of source, 1 MB after macro expansion
    (_constants(30_000), "MAX_PROGRAM_CHARS"),  # 800 KB
    (_constants(12_000), "MAX_PROGRAM_TOKENS"),  # 310 KB, 108,000 tokens
], ids=["config bytes", "macro expansion", "program chars", "tokens"])
def test_a_device_config_beyond_the_loader_bounds_is_refused_early(switch, declarations, limit):
    """A config's cost is bounded before the program is parsed (a 4.6 MB config of 170,000 constants once
    took 22 s and 957 MB before it was refused): INVALID_ARGUMENT naming the bound, the pipeline untouched."""
    target, _address, client = switch
    source = small_program(" apply { sm.egress_spec = 1; }").replace("header h_t", declarations + "header h_t")
    before, started = _max_rss_mb(), time.monotonic()
    error = _expect("INVALID_ARGUMENT", lambda: client.set_pipeline(p4info=p4info_pb2.P4Info(),
                                                                    device_config=device_config({"p.p4": source})))
    assert limit in error.message
    assert limit == "MAX_DEVICE_CONFIG_BYTES" or "p.p4:" in error.message  # the line where the bound was crossed
    assert time.monotonic() - started < 30 and _max_rss_mb() - before < 300
    assert HOSTS in target.state.tables


def test_extern_arrays_at_the_limit_are_accepted(switch):
    target, _address, client = switch
    _set_program(client, f"register<bit<8>>(32w{limits.MAX_EXTERN_CELLS}) r;")
    assert len(target.state.registers["I.r"].values) == limits.MAX_EXTERN_CELLS


# ---- large reads ------------------------------------------------------------------------------

def _read_all_cells(stub, counter_id, record):
    """Read every cell of a counter; record (monotonic time, entities) of each ReadResponse."""
    request = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID)
    request.entities.add().counter_entry.counter_id = counter_id
    record.append((time.monotonic(), 0))
    for response in stub.Read(request, timeout=120):
        record.append((time.monotonic(), len(response.entities)))


def test_a_large_read_is_streamed_and_writes_complete_while_it_is_in_progress(switch):
    """A Read of 100,000 counter cells comes in chunks, the first one early, and does not
    hold the lock writes need for its duration: writes keep completing meanwhile."""
    target, address, client = switch
    counter_id = client.index.id_of("counters", BIG_COUNTER)
    target.state.counters[BIG_COUNTER].count(BIG_COUNTER_CELLS - 1, 99)
    request = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID)  # the primary's, on a channel of its own
    request.election_id.low = 10
    update = request.updates.add(type=p4runtime_pb2.Update.MODIFY)
    update.entity.register_entry.register_id = client.index.id_of("registers", "MyIngress.reg")
    update.entity.register_entry.index.index = 1
    record, latencies, stop = [], [], threading.Event()
    channel = grpc.insecure_channel(address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    def write_continuously():
        value = 0
        while not stop.is_set():
            value += 1
            update.entity.register_entry.data.bitstring = value.to_bytes(4, "big")
            started = time.monotonic()
            stub.Write(request, timeout=120)
            latencies.append((started, time.monotonic()))

    thread = threading.Thread(target=write_continuously)
    thread.start()
    try:
        while len(latencies) < 3:  # the writer is up to speed
            time.sleep(0.01)
        _read_all_cells(client.stub, counter_id, record)
    finally:
        stop.set()
        thread.join(120)
        channel.close()
    sizes = [n for _, n in record[1:]]
    assert sum(sizes) == BIG_COUNTER_CELLS
    assert max(sizes) <= limits.READ_CHUNK_ENTITIES and len(sizes) >= BIG_COUNTER_CELLS // limits.READ_CHUNK_ENTITIES
    start, first, end = record[0][0], record[1][0], record[-1][0]
    # streamed: the first chunk arrives early, not once the whole answer is built
    assert first - start < 0.25 * (end - start), (first - start, end - start)
    # a write waits for the copy of the values at most, never for the whole read
    during = [(s, e) for s, e in latencies if s >= start and e <= end]
    longest = max(e - s for s, e in latencies if s < end and e > start)
    assert len(during) >= 3, "no writes completed while the read was in progress"
    assert longest < 0.25 * (end - start), (longest, end - start)
    assert target.state.registers["MyIngress.reg"].values[1] == len(latencies)
    assert client.read_counter(BIG_COUNTER, BIG_COUNTER_CELLS - 1) == (1, 99)


# ---- write batches ----------------------------------------------------------------------------

def _host_updates(client, count, duplicate_at=None):
    """INSERTs of ``count`` hosts entries; the one at ``duplicate_at`` repeats entry 0."""
    table_id = client.index.id_of("tables", HOSTS)
    action_id = client.index.id_of("actions", "MyIngress.set_port")
    updates = []
    for number in range(count):
        key = 0 if number == duplicate_at else number
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        entry = update.entity.table_entry
        entry.table_id = table_id
        entry.match.add(field_id=1).exact.value = key.to_bytes(4, "big")
        action = entry.action.action
        action.action_id = action_id
        action.params.add(param_id=1, value=b"\x01")
        updates.append(update)
    return updates


def _raw_write(address, updates):
    """Write with a raw stub (gRPC metadata limit raised); (status code, [p4.Error])."""
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        request = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, updates=updates)
        request.election_id.low = 10
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(channel).Write(request, timeout=120)
            return grpc.StatusCode.OK, []
        except grpc.RpcError as exc:
            errors = []
            for key, value in exc.trailing_metadata() or ():
                if key == "grpc-status-details-bin":
                    status = status_pb2.Status()
                    status.ParseFromString(value)
                    for detail in status.details:
                        error = p4runtime_pb2.Error()
                        assert detail.Unpack(error)
                        errors.append(error)
            return exc.code(), errors
    finally:
        channel.close()


@pytest.mark.parametrize("count", [600, 5000])
def test_every_batch_size_returns_one_error_per_update(switch, count):
    target, address, _client = switch
    with P4RuntimeClient(address, device_id=DEVICE_ID, election_id=None, timeout=60) as reader:
        updates = _host_updates(reader, count, duplicate_at=count // 2)
    code, errors = _raw_write(address, updates)
    assert code == grpc.StatusCode.UNKNOWN
    assert len(errors) == count
    failed = [(n, e) for n, e in enumerate(errors) if e.canonical_code != code_pb2.OK]
    assert [(n, e.canonical_code) for n, e in failed] == [(count // 2, code_pb2.ALREADY_EXISTS)]
    assert HOSTS in failed[0][1].message
    assert all(e.ByteSize() == 0 for n, e in enumerate(errors) if n != count // 2)  # OK: the code only
    assert len(target.state.tables[HOSTS].entries()) == count - 1


def test_a_batch_in_which_every_update_fails_reports_them_all(switch):
    target, address, client = switch
    client.write_batch(_host_updates(client, 2000))
    code, errors = _raw_write(address, _host_updates(client, 2000))
    assert code == grpc.StatusCode.UNKNOWN
    assert [e.canonical_code for e in errors] == [code_pb2.ALREADY_EXISTS] * 2000
    assert all(HOSTS in e.message for e in errors)


def test_a_batch_over_the_update_limit_is_refused_whole(switch, monkeypatch):
    target, address, client = switch
    monkeypatch.setattr(limits, "MAX_WRITE_UPDATES", 100)  # the server reads it per request
    code, errors = _raw_write(address, _host_updates(client, 101))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and errors == []
    assert target.state.tables[HOSTS].entries() == []


def test_the_client_reports_which_updates_of_a_large_write_failed(switch):
    target, _address, client = switch
    updates = _host_updates(client, 600, duplicate_at=599)
    error = _expect("ALREADY_EXISTS", lambda: client.write(updates))
    assert [(index, code) for index, code, _ in error.errors] == [(599, "ALREADY_EXISTS")]
    assert "1 of 600 updates failed: update 599: ALREADY_EXISTS" in str(error)
    assert len(target.state.tables[HOSTS].entries()) == 599


def test_client_batch_of_thousands_of_updates_reports_per_update_errors(switch):
    target, _address, client = switch
    client.insert_table_entry(HOSTS, {"hdr.ipv4.dstAddr": 7}, "MyIngress.set_port", {"port": 1})
    with pytest.raises(P4RuntimeClientError) as excinfo:
        with client.batch(batch_size=1000):
            for number in range(2500):
                key = 7 if number in (1200, 2400) else 100_000 + number
                client.insert_table_entry(HOSTS, {"hdr.ipv4.dstAddr": key}, "MyIngress.set_port", {"port": 2})
            assert len(target.state.tables[HOSTS].entries()) == 1  # nothing sent inside the block
    error = excinfo.value
    assert error.code == "ALREADY_EXISTS"
    assert [(index, code) for index, code, _ in error.errors] == [(1200, "ALREADY_EXISTS"), (2400, "ALREADY_EXISTS")]
    assert "2 of 2500 updates failed: update 1200: ALREADY_EXISTS" in error.message
    assert len(target.state.tables[HOSTS].entries()) == 1 + 2498
    with pytest.raises(ParameterError):
        client.write_batch([], batch_size=0)
