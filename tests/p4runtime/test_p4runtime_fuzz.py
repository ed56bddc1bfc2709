"""A seeded, bounded fuzz test of the P4Runtime server, against a real switch process.

A switch process (``python -m testbed.embedded_switch.switchd``, no ports) runs the
program below, set by a primary controller.  Then :data:`REQUESTS` requests are
generated from the P4Info with a seeded random generator: valid ones, ones with
wrong ids, widths, indexes, weights, update types, roles and election ids, and ones
whose serialized bytes are mutated (so the server also gets protobuf it cannot
parse).  They cover every RPC: Write, Read, Get/SetForwardingPipelineConfig,
Capabilities and StreamChannel (arbitration, PacketOut, digest acks).

The test asserts what issue 10 asks of the server under attack:

* no answer is INTERNAL (not the status of a call, not a per-update ``p4.Error``,
  not a StreamError, not the status a stream ends with);
* no answer takes longer than :data:`RESPONSE_BOUND_S` (generous: the machine may
  be a loaded 2-core one; a Read or Write here takes milliseconds);
* the switch process is alive at the end and still answers;
* its stdout and stderr hold no Python traceback.

The sequence of requests depends only on the seed (``P4RT_FUZZ_SEED`` in the
environment overrides :data:`SEED`), so a failure can be replayed.
"""
import collections
import json
import os
import queue
import random
import socket
import subprocess
import sys
import threading
import time

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from testbed.p4.device_config import device_config_for
from testbed.p4.loader import load_program_from_sources
from testbed.p4runtime.client import CHANNEL_OPTIONS, P4RuntimeClient
from testbed.p4runtime.p4info import build_p4info

from repo_paths import REPO

SEED = 20240611
REQUESTS = 3000
RESPONSE_BOUND_S = 15.0
PRIMARY_ELECTION = (1 << 40, 0)  # far above the election ids the fuzzed streams use
CPU_PORT = 255

FUZZ_PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct headers_t { packet_out_t packet_out; packet_in_t packet_in; ethernet_t ethernet; ipv4_t ipv4; }
struct learn_t { bit<48> srcAddr; bit<9> port; }
struct metadata_t { bit<16> group; bit<32> color; }

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            255: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out { packet.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    meter(16, MeterType.packets) port_meter;
    register<bit<32>>(32) reg;
    direct_counter(CounterType.packets_and_bytes) lpm_counter;
    direct_meter<bit<32>>(MeterType.bytes) acl_meter;
    action_selector(HashAlgorithm.crc32, 32w128, 32w14) ecmp_selector;

    action drop() { mark_to_drop(standard_metadata); }
    action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
    action set_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        lpm_counter.count();
    }
    action lpm_drop() { lpm_counter.count(); mark_to_drop(standard_metadata); }
    action acl_drop() { acl_meter.read(meta.color); mark_to_drop(standard_metadata); }
    action acl_pass() { acl_meter.read(meta.color); }
    action learn() { digest<learn_t>(1, {hdr.ethernet.srcAddr, standard_metadata.ingress_port}); }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr : lpm; }
        actions = { set_nhop; lpm_drop; }
        default_action = lpm_drop();
        counters = lpm_counter;
        size = 256;
    }
    table acl {
        key = { hdr.ipv4.srcAddr : ternary; hdr.ipv4.protocol : range; hdr.ethernet.etherType : optional; }
        actions = { acl_drop; acl_pass; }
        default_action = acl_pass();
        meters = acl_meter;
        size = 64;
    }
    table ecmp {
        key = { meta.group : exact; hdr.ipv4.srcAddr : selector; hdr.ipv4.dstAddr : selector; }
        actions = { set_port; drop; }
        implementation = ecmp_selector;
        size = 64;
    }
    table smac {
        key = { hdr.ethernet.srcAddr : exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        support_timeout = true;
        size = 128;
    }
    table fixed {
        key = { standard_metadata.ingress_port : exact; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        const entries = { 9w7 : drop(); }
    }

    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.color);
        reg.write(0, meta.color);
        fixed.apply();
        smac.apply();
        if (hdr.ipv4.isValid()) {
            acl.apply();
            ipv4_lpm.apply();
            ecmp.apply();
        } else {
            standard_metadata.egress_spec = 255;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == 255) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply { packet.emit(hdr.packet_in); packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
"""

_METHODS = {  # name -> (request class, streaming response)
    "Write": (p4runtime_pb2.WriteRequest, False),
    "Read": (p4runtime_pb2.ReadRequest, True),
    "SetForwardingPipelineConfig": (p4runtime_pb2.SetForwardingPipelineConfigRequest, False),
    "GetForwardingPipelineConfig": (p4runtime_pb2.GetForwardingPipelineConfigRequest, False),
    "Capabilities": (p4runtime_pb2.CapabilitiesRequest, False),
}
_Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
pytestmark = pytest.mark.timeout(900)  # a hang fails in minutes, not at CI's limit


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fuzz_switch(tmp_path):
    """A switch process with the fuzz program set by a primary controller.

    Yields:
        (process, address, primary client, p4info, device config bytes, output files)
    """
    address = f"127.0.0.1:{_free_port()}"
    ready = tmp_path / "ready"
    stdout, stderr = tmp_path / "switch.out", tmp_path / "switch.err"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "fuzz", "--device-id", "1",
             "--grpc-addr", address, "--cpu-port", str(CPU_PORT), "--ready-file", str(ready)],
            cwd=REPO, stdout=out, stderr=err)
    primary = None
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"switch did not start:\n{stderr.read_text()}"
        program = load_program_from_sources("fuzz.p4", {"fuzz.p4": FUZZ_PROGRAM})
        p4info, device_config = build_p4info(program.info), device_config_for(program)
        primary = P4RuntimeClient(address, device_id=1, election_id=PRIMARY_ELECTION, timeout=RESPONSE_BOUND_S)
        primary.set_pipeline(p4info=p4info, device_config=device_config)
        yield process, address, primary, p4info, device_config, (stdout, stderr)
    finally:
        if primary is not None:
            primary.close()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


class _Generator:
    """Random P4Runtime requests from a P4Info, mostly well-formed, often not."""

    def __init__(self, rng, p4info, device_config):
        self.rng = rng
        self.p4info = p4info
        self.device_config = device_config

    # -- values
    def chance(self, p):
        return self.rng.random() < p

    def value_bytes(self, bitwidth):
        """A byte string for a field: mostly a valid value, sometimes empty, too wide or junk."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.8:
            value = rng.getrandbits(max(1, bitwidth)) if rng.random() < 0.7 else rng.choice((0, 1, (1 << bitwidth) - 1))
            return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
        if roll < 0.85:
            return b""
        if roll < 0.93:
            return (1 << bitwidth).to_bytes(bitwidth // 8 + 1, "big")
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 24)))

    def number(self, typical, kind="i64"):
        """An int for a field of ``kind`` (u32, u64, i32, i64): mostly one of ``typical``,
        sometimes 0, -1, the extremes of the type, or random."""
        rng = self.rng
        bits = int(kind[1:])
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if kind[0] == "i" else (0, (1 << bits) - 1)
        if rng.random() < 0.75:
            return rng.choice(typical)
        return rng.choice([value for value in (0, -1, low, high, rng.randint(-1000, 1 << 20)) if low <= value <= high])

    def object_id(self, kind):
        """An id of a P4Info object of ``kind``: mostly a real one, sometimes 0, another kind's, or random."""
        objects = getattr(self.p4info, kind)
        roll = self.rng.random()
        if objects and roll < 0.85:
            return self.rng.choice(objects).preamble.id
        if roll < 0.9:
            return 0
        if roll < 0.95:
            return self.rng.choice(self.p4info.tables).preamble.id
        return self.rng.getrandbits(32)

    # -- entities
    def action(self, out, action_ids):
        action_id = self.rng.choice(action_ids) if action_ids and self.chance(0.9) else self.object_id("actions")
        out.action_id = action_id
        info = next((a for a in self.p4info.actions if a.preamble.id == action_id), None)
        params = list(info.params) if info is not None else []
        if self.chance(0.1) and params:
            params = params[:-1]
        for param in params:
            out.params.add(param_id=param.id if self.chance(0.95) else self.rng.randint(0, 9),
                           value=self.value_bytes(param.bitwidth))

    def table_entry(self, out, for_read=False):
        rng = self.rng
        table = rng.choice(self.p4info.tables)
        out.table_id = table.preamble.id if self.chance(0.92) else self.object_id("tables")
        if for_read and self.chance(0.4):
            if self.chance(0.2):
                out.table_id = 0
            return
        for field in table.match_fields:
            if field.match_type != p4info_pb2.MatchField.EXACT and self.chance(0.4):
                continue
            fm = out.match.add(field_id=field.id if self.chance(0.95) else rng.randint(0, 9))
            width = field.bitwidth
            kind = field.match_type if self.chance(0.93) else rng.choice(range(1, 6))
            if kind == p4info_pb2.MatchField.EXACT:
                fm.exact.value = self.value_bytes(width)
            elif kind == p4info_pb2.MatchField.LPM:
                fm.lpm.value = self.value_bytes(width)
                fm.lpm.prefix_len = self.number((width, width // 2, 8, 24), "i32")
            elif kind == p4info_pb2.MatchField.TERNARY:
                fm.ternary.value = self.value_bytes(width)
                fm.ternary.mask = self.value_bytes(width)
            elif kind == p4info_pb2.MatchField.RANGE:
                fm.range.low = self.value_bytes(width)
                fm.range.high = self.value_bytes(width)
            else:
                fm.optional.value = self.value_bytes(width)
        needs_priority = any(f.match_type in (p4info_pb2.MatchField.TERNARY, p4info_pb2.MatchField.RANGE,
                                              p4info_pb2.MatchField.OPTIONAL) for f in table.match_fields)
        if needs_priority or self.chance(0.05):
            out.priority = self.number((1, 5, 100), "i32")
        if self.chance(0.05):
            out.is_default_action = True
        if not for_read or self.chance(0.1):
            roll = rng.random()
            if table.implementation_id and roll < 0.7:
                if self.chance(0.5):
                    out.action.action_profile_member_id = self.number((1, 2, 3), "u32")
                else:
                    out.action.action_profile_group_id = self.number((1, 2, 3), "u32")
            elif roll < 0.97:
                self.action(out.action.action, [ref.id for ref in table.action_refs])
            else:
                out.action.action_profile_action_set.action_profile_actions.add(weight=1)
        if self.chance(0.1):
            out.idle_timeout_ns = self.number((10 ** 9, 10 ** 6, 1))
        if self.chance(0.1):
            out.controller_metadata = rng.getrandbits(64)
        if self.chance(0.1):
            out.metadata = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 8)))
        if self.chance(0.1):
            out.counter_data.packet_count = self.number((0, 5))
            out.counter_data.byte_count = self.number((0, 500))
        if self.chance(0.1):
            out.meter_config.cir, out.meter_config.cburst = self.number((100, 1000)), self.number((10,))
            out.meter_config.pir, out.meter_config.pburst = self.number((1000, 100)), self.number((10,))
        if self.chance(0.05):
            out.time_since_last_hit.SetInParent()
        if self.chance(0.02):
            out.is_const = True

    def entity(self, out, for_read=False):
        rng = self.rng
        kind = rng.choice(("table_entry", "table_entry", "table_entry", "action_profile_member",
                           "action_profile_group", "counter_entry", "meter_entry", "register_entry",
                           "direct_counter_entry", "direct_meter_entry", "multicast", "clone", "digest_entry",
                           "value_set_entry", "extern_entry", "empty"))
        if kind == "table_entry":
            self.table_entry(out.table_entry, for_read)
        elif kind == "action_profile_member":
            member = out.action_profile_member
            member.action_profile_id = self.object_id("action_profiles")
            member.member_id = self.number((1, 2, 3, 4), "u32")
            if not for_read and self.chance(0.9):
                profile = self.p4info.action_profiles[0]
                table = next((t for t in self.p4info.tables if t.preamble.id in profile.table_ids), None)
                self.action(member.action, [ref.id for ref in table.action_refs] if table else [])
        elif kind == "action_profile_group":
            group = out.action_profile_group
            group.action_profile_id = self.object_id("action_profiles")
            group.group_id = self.number((1, 2, 3), "u32")
            if not for_read:
                for _ in range(rng.randint(0, 4)):
                    group.members.add(member_id=self.number((1, 2, 3, 4), "u32"),
                                      weight=self.number((1, 1, 2, 3, 1 << 16, (1 << 31) - 1), "i32"))
                if self.chance(0.2):
                    group.max_size = self.number((4, 128, 1 << 20), "i32")
        elif kind in ("counter_entry", "meter_entry", "register_entry"):
            message = getattr(out, kind)
            collection = {"counter_entry": "counters", "meter_entry": "meters", "register_entry": "registers"}[kind]
            setattr(message, kind.split("_")[0] + "_id", self.object_id(collection))
            if not for_read or self.chance(0.7):
                message.index.index = self.number((0, 1, 3, 15, 31, 63, 64, 1 << 40))
            if kind == "counter_entry":
                message.data.packet_count, message.data.byte_count = self.number((0, 7)), self.number((0, 700))
            elif kind == "meter_entry" and self.chance(0.8):
                message.config.cir, message.config.cburst = self.number((10, 100)), self.number((5,))
                message.config.pir, message.config.pburst = self.number((100, 10)), self.number((5,))
            elif kind == "register_entry":
                if self.chance(0.9):
                    message.data.bitstring = self.value_bytes(32)
                else:
                    message.data.bool = True
        elif kind in ("direct_counter_entry", "direct_meter_entry"):
            message = getattr(out, kind)
            self.table_entry(message.table_entry, for_read=True)
            message.table_entry.ClearField("action")
            if kind == "direct_counter_entry":
                message.data.packet_count = self.number((0, 3))
            elif self.chance(0.8):
                message.config.cir, message.config.cburst = self.number((10,)), self.number((5,))
                message.config.pir, message.config.pburst = self.number((100,)), self.number((5,))
        elif kind == "multicast":
            group = out.packet_replication_engine_entry.multicast_group_entry
            group.multicast_group_id = self.number((1, 2, 3), "u32")
            for _ in range(rng.randint(0, 4)):
                replica = group.replicas.add(instance=self.number((0, 1, 2), "u32"))
                if self.chance(0.5):
                    replica.egress_port = self.number((1, 2, 3, 511), "u32")
                else:
                    replica.port = self.value_bytes(32)
        elif kind == "clone":
            session = out.packet_replication_engine_entry.clone_session_entry
            session.session_id = self.number((1, 2, 3), "u32")
            for _ in range(rng.randint(0, 3)):
                session.replicas.add(egress_port=self.number((1, 2, 255), "u32"), instance=self.number((0, 1), "u32"))
            session.class_of_service = self.number((0, 1, 7), "u32")
            session.packet_length_bytes = self.number((0, 64, 128), "i32")
        elif kind == "digest_entry":
            digest = out.digest_entry
            digest.digest_id = self.object_id("digests")
            if not for_read:
                digest.config.max_timeout_ns = self.number((0, 10 ** 6))
                digest.config.max_list_size = self.number((0, 1, 10), "i32")
                digest.config.ack_timeout_ns = self.number((0, 10 ** 9))
        elif kind == "value_set_entry":
            out.value_set_entry.value_set_id = self.rng.getrandbits(32)
        elif kind == "extern_entry":
            out.extern_entry.extern_type_id = self.rng.getrandbits(8)
        # "empty": no field set

    # -- requests
    def election(self, request):
        roll = self.rng.random()
        if roll < 0.8:
            request.election_id.high, request.election_id.low = PRIMARY_ELECTION
        elif roll < 0.9:
            request.election_id.low = self.rng.getrandbits(16)
        if self.chance(0.05):
            request.role = self.rng.choice(("other", "", "x" * 300))

    def device_id(self):
        return 1 if self.chance(0.95) else self.rng.choice((0, 2, (1 << 64) - 1))

    def write(self):
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id())
        self.election(request)
        if self.chance(0.03):
            request.atomicity = self.rng.choice((1, 2, 9))
        for _ in range(self.rng.randint(1, 12)):
            update = request.updates.add(type=self.rng.choice((1, 1, 2, 3)) if self.chance(0.97)
                                         else self.rng.choice((0, 4, 99)))
            self.entity(update.entity)
        return "Write", request

    def read(self):
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id())
        if self.chance(0.05):
            request.role = "other"
        for _ in range(self.rng.randint(1, 3)):
            self.entity(request.entities.add(), for_read=True)
        return "Read", request

    def get_config(self):
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id())
        request.response_type = self.rng.choice((0, 1, 2, 3)) if self.chance(0.8) else self.rng.choice((4, 77, -1))
        return "GetForwardingPipelineConfig", request

    def device_config_variant(self):
        """Device config bytes: junk, malformed JSON documents, or the real one with a broken source."""
        rng = self.rng
        document = json.loads(self.device_config)
        roll = rng.random()
        if roll < 0.15:
            return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        if roll < 0.25:
            depth = rng.choice((50, 5000, 200000))
            return ("[" * depth + "]" * depth).encode()
        if roll < 0.4:
            document["sources"][document["main"]] = rng.choice((None, 7, ["x"], {"a": 1}, 1.5))
        elif roll < 0.5:
            document["sources"] = rng.choice(([], "x", None, {"other.p4": "x"}))
        elif roll < 0.6:
            document["main"] = rng.choice((None, 3, "missing.p4", ""))
        elif roll < 0.7:
            document["format"] = "something-else"
        elif roll < 0.85:
            text = document["sources"][document["main"]]
            cut = rng.randint(0, len(text))
            document["sources"][document["main"]] = text[:cut] + rng.choice(("@", "{", "}", "#if 1\n", "\x00",
                                                                              "9" * 4000))
        else:
            return json.dumps(document).encode()[: rng.randint(0, 200)]
        return json.dumps(document).encode()

    def p4info_variant(self):
        """The program's P4Info, sometimes with duplicated, renumbered or removed objects."""
        p4info = p4info_pb2.P4Info()
        p4info.CopyFrom(self.p4info)
        roll = self.rng.random()
        if roll < 0.2:
            p4info.tables.add().CopyFrom(p4info.tables[0])
        elif roll < 0.3:
            p4info.actions[0].preamble.id = p4info.tables[0].preamble.id
        elif roll < 0.4:
            p4info.tables[0].preamble.id = 0
        elif roll < 0.5:
            p4info.tables[0].action_refs.add(id=self.rng.getrandbits(32))
        elif roll < 0.6:
            del p4info.actions[:]
        return p4info

    def set_config(self):
        rng = self.rng
        request = _Set(device_id=self.device_id())
        self.election(request)
        request.action = rng.choice((_Set.VERIFY, _Set.VERIFY, _Set.VERIFY_AND_SAVE, _Set.COMMIT, _Set.UNSPECIFIED,
                                     _Set.RECONCILE_AND_COMMIT, 17))
        if request.action != _Set.COMMIT or self.chance(0.3):
            request.config.p4_device_config = self.device_config_variant()
            if self.chance(0.9):
                request.config.p4info.CopyFrom(self.p4info_variant())
        if self.chance(0.3):
            request.config.cookie.cookie = rng.getrandbits(64)
        return "SetForwardingPipelineConfig", request

    def mutate(self, request):
        """The request's bytes with a few bytes changed, inserted or cut (they may no longer parse)."""
        data = bytearray(request.SerializeToString())
        rng = self.rng
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            if roll < 0.5 and data:
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            elif roll < 0.75:
                data.insert(rng.randint(0, len(data)), rng.getrandbits(8))
            elif data:
                del data[rng.randrange(len(data)):rng.randrange(len(data)) + rng.randint(1, 8)]
        return bytes(data)

    def stream_messages(self):
        """A list of StreamMessageRequest messages (or raw bytes) for one StreamChannel."""
        rng = self.rng
        messages = []
        for _ in range(rng.randint(1, 6)):
            message = p4runtime_pb2.StreamMessageRequest()
            roll = rng.random()
            if roll < 0.4:
                arbitration = message.arbitration
                arbitration.device_id = self.device_id()
                if self.chance(0.3):
                    arbitration.role.name = rng.choice(("", "other", "fuzz"))
                if self.chance(0.9):
                    arbitration.election_id.low = rng.getrandbits(8)
            elif roll < 0.7:
                message.packet.payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 80)))
                for _ in range(rng.randint(0, 3)):
                    message.packet.metadata.add(metadata_id=rng.choice((1, 2, 3, 99)),
                                                value=self.value_bytes(rng.choice((7, 9, 16))))
            elif roll < 0.85:
                message.digest_ack.digest_id = self.object_id("digests")
                message.digest_ack.list_id = rng.getrandbits(16)
            elif roll < 0.9:
                message.other.Pack(p4runtime_pb2.Uint128(low=1))
            # else: an empty message
            messages.append(self.mutate(message) if self.chance(0.1) else message.SerializeToString())
        return messages


class _Checker:
    """Collects violations: INTERNAL answers, slow answers."""

    def __init__(self):
        self.problems = []
        self.calls = 0
        self.slowest = (0.0, None)
        self.codes = collections.Counter()  # (method, status name) -> answers; "update:CODE" per p4.Error

    def timed(self, what, elapsed):
        self.calls += 1
        if elapsed > self.slowest[0]:
            self.slowest = (elapsed, what)
        if elapsed > RESPONSE_BOUND_S:
            self.problems.append(f"{what}: answered after {elapsed:.1f} s (bound {RESPONSE_BOUND_S} s)")

    def status(self, what, code, details, trailing_metadata):
        self.codes[what, code.name if code is not None else "?"] += 1
        if code == grpc.StatusCode.INTERNAL:
            self.problems.append(f"{what}: INTERNAL: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            self.problems.append(f"{what}: no answer within {RESPONSE_BOUND_S} s")
        if code == grpc.StatusCode.UNAVAILABLE:
            self.problems.append(f"{what}: UNAVAILABLE (server gone?): {details}")
        for key, value in trailing_metadata or ():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status()
                status.ParseFromString(value)
                for number, detail in enumerate(status.details):
                    error = p4runtime_pb2.Error()
                    if not detail.Unpack(error):
                        continue
                    self.codes[what, "update:" + code_pb2.Code.Name(error.canonical_code)] += 1
                    if error.canonical_code == code_pb2.INTERNAL:
                        self.problems.append(f"{what}: update {number}: INTERNAL: {error.message}")


def _unary(channel, checker, method, payload):
    """Send one request (message or raw bytes) and check the answer."""
    request_class, streaming = _METHODS[method]
    path = f"/p4.v1.P4Runtime/{method}"
    serialize = (lambda data: data) if isinstance(payload, bytes) else request_class.SerializeToString
    start = time.monotonic()
    try:
        if streaming:
            call = channel.unary_stream(path, request_serializer=serialize, response_deserializer=lambda b: b)
            for _ in call(payload, timeout=RESPONSE_BOUND_S):
                pass
        else:
            call = channel.unary_unary(path, request_serializer=serialize, response_deserializer=lambda b: b)
            call(payload, timeout=RESPONSE_BOUND_S)
        checker.codes[method, "OK"] += 1
    except grpc.RpcError as exc:
        checker.status(method, exc.code(), exc.details(), exc.trailing_metadata())
    checker.timed(method, time.monotonic() - start)


def _stream(channel, checker, messages):
    """Open a StreamChannel, send the messages, read what comes back for a moment, close."""
    call = channel.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=lambda data: data,
                                 response_deserializer=p4runtime_pb2.StreamMessageResponse.FromString)
    outbox = queue.Queue()
    for message in messages:
        outbox.put(message)
    start = time.monotonic()
    responses = call(iter(outbox.get, None), timeout=RESPONSE_BOUND_S)
    done = threading.Event()

    def close_soon():
        done.wait(0.05 + 0.01 * len(messages))
        outbox.put(None)
        responses.cancel()
    closer = threading.Thread(target=close_soon, daemon=True)
    closer.start()
    try:
        for response in responses:
            if response.WhichOneof("update") == "error" and response.error.canonical_code == code_pb2.INTERNAL:
                checker.problems.append(f"StreamChannel: StreamError INTERNAL: {response.error.message}")
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.CANCELLED:
            checker.status("StreamChannel", exc.code(), exc.details(), exc.trailing_metadata())
    finally:
        done.set()
        outbox.put(None)
        closer.join(5)
    checker.timed("StreamChannel", time.monotonic() - start)


def test_fuzzed_requests_get_clean_statuses_fast_and_the_switch_survives(fuzz_switch):
    process, address, primary, p4info, device_config, (stdout, stderr) = fuzz_switch
    seed = int(os.environ.get("P4RT_FUZZ_SEED", SEED))
    rng = random.Random(seed)
    generate = _Generator(rng, p4info, device_config)
    checker = _Checker()
    kinds = (["write"] * 45 + ["read"] * 25 + ["stream"] * 8 + ["get"] * 6 + ["set"] * 2
             + ["capabilities"] * 2 + ["raw"] * 12)
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        for number in range(REQUESTS):
            kind = rng.choice(kinds)
            if kind == "stream":
                _stream(channel, checker, generate.stream_messages())
            elif kind == "capabilities":
                _unary(channel, checker, "Capabilities", p4runtime_pb2.CapabilitiesRequest())
            elif kind == "raw":
                method, request = rng.choice((generate.write, generate.read, generate.get_config))()
                _unary(channel, checker, method, generate.mutate(request))
            else:
                method, request = {"write": generate.write, "read": generate.read,
                                   "get": generate.get_config, "set": generate.set_config}[kind]()
                _unary(channel, checker, method, request)
            assert process.poll() is None, f"the switch died at request {number} (seed {seed}):\n" \
                                           f"{stderr.read_text()[-3000:]}"
            assert not checker.problems, f"seed {seed}, request {number}: " + "\n".join(checker.problems[:10])
        assert primary.api_version().startswith("1.")  # still answering
        assert isinstance(primary.read_counter("MyIngress.port_counter"), dict)
    finally:
        channel.close()
    assert checker.calls == REQUESTS
    print(f"seed {seed}: {checker.calls} requests, slowest {checker.slowest[0]:.2f} s ({checker.slowest[1]})")
    for (method, code), count in sorted(checker.codes.items()):
        print(f"  {method:28} {code:28} {count}")
    output = stdout.read_text(errors="replace") + stderr.read_text(errors="replace")
    assert "Traceback" not in output, output[-5000:]
