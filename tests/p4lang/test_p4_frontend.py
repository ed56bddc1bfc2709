"""Frontend of the embedded P4 target: preprocessor, lexer, grammar, checker and the ProgramInfo names."""
import os

import pytest

from testbed.errors import P4LoadError
from testbed.p4.frontend.lexer import Lexer, parse_integer
from testbed.p4.frontend.preprocessor import Preprocessor, SourceLine, SourceProvider, strip_comments
from testbed.p4.loader import load_program, load_program_from_sources

from repo_paths import REPO

PIPELINE_TAIL = """
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), V(), MyIngress(), E(), C(), D()) main;
"""

PRELUDE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
"""


def _ingress_program(body):
    return PRELUDE + "control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n" \
        + body + "\n}\n" + PIPELINE_TAIL


def _load(source, name="main.p4", extra=None):
    sources = {name: source}
    sources.update(extra or {})
    return load_program_from_sources(name, sources)


# ------------------------------------------------------------------------------ preprocessor
def test_strip_comments_keeps_line_numbers():
    text = 'a /* one\ntwo */ b // three\n"s // not a comment"\n'
    stripped = strip_comments(text, "f")
    assert stripped.count("\n") == text.count("\n")
    assert "one" not in stripped and "three" not in stripped and '"s // not a comment"' in stripped


def test_preprocessor_defines_conditionals_and_includes_keep_origins():
    sources = {
        "main.p4": '#define WIDTH 16\n#include "inc/defs.p4"\n#ifdef WIDTH\nyes WIDTH\n#else\nno\n#endif\n'
                   '#if WIDTH > 8 && !defined(NOPE)\nbig\n#elif 1\nsmall\n#endif\n',
        "inc/defs.p4": "\n\ndefined_in_include\n",
    }
    provider = SourceProvider(sources)
    preprocessor = Preprocessor(provider)
    lines = [line for line in preprocessor.run("main.p4") if line.text.strip()]
    assert [(line.text.strip(), line.filename, line.line) for line in lines] == [
        ("defined_in_include", "inc/defs.p4", 3),
        ("yes 16", "main.p4", 4),
        ("big", "main.p4", 9),
    ]
    assert preprocessor.macros["WIDTH"].body == "16"
    assert set(provider.used) == {"main.p4", "inc/defs.p4"}


def test_preprocessor_errors_name_the_file_and_line():
    with pytest.raises(P4LoadError) as caught:
        Preprocessor(SourceProvider({"m.p4": '\n#include "missing.p4"\n'})).run("m.p4")
    assert (caught.value.filename, caught.value.line) == ("m.p4", 2)
    with pytest.raises(P4LoadError, match="takes 1 argument") as caught:
        Preprocessor(SourceProvider({"m.p4": "#define F(x) x\n\nF(1, 2)\n"})).run("m.p4")
    assert caught.value.line == 3
    with pytest.raises(P4LoadError, match="#endif"):
        Preprocessor(SourceProvider({"m.p4": "#ifdef X\n"})).run("m.p4")


# ------------------------------------------------------------------------------ lexer
def test_integer_literals():
    assert parse_integer("8w5") == (5, 8, False)
    assert parse_integer("16s0x10") == (16, 16, True)
    assert parse_integer("0b1010_1010") == (0xAA, None, False)
    assert parse_integer("1_000") == (1000, None, False)


def test_lexer_tells_generic_brackets_from_shifts_and_type_names():
    lines = [SourceLine("extern register<T> { } register<bit<32>>(4) r; x = a >> 2; y = a < b;", "f", 1)]
    kinds = [t.kind for t in Lexer(lines).tokenize()]
    assert kinds[:7] == ["extern", "TYPE_IDENT", "DLT", "TYPE_IDENT", "TGT", "{", "}"]
    assert kinds[7:13] == ["TYPE_IDENT", "TLT", "bit", "TLT", "INTEGER", "TGT"]
    assert kinds[13] == "TGT"  # '>>' closing two generic lists was split
    assert ">>" in kinds and "<" in kinds


# ------------------------------------------------------------------------------ ProgramInfo names
def test_program_info_names_follow_p4c():
    body = """
    @name("renamed_counter") counter(8, CounterType.packets) c;
    direct_counter(CounterType.bytes) dc;
    action a(bit<9> port, bit<16> value) { sm.egress_spec = port; }
    @name(".global_b") action b() { }
    table t {
        key = { hdr.eth.dst: exact @name("dst_mac"); hdr.eth.type & 0xff00: ternary; meta.x: range; }
        actions = { a; @defaultonly b; @tableonly NoAction; }
        default_action = b();
        counters = dc;
        size = 64;
    }
    apply { t.apply(); c.count(0); }
    """
    info = _load(_ingress_program(body)).info
    table = info.tables["MyIngress.t"]
    assert [(k.name, k.bitwidth, k.match_type) for k in table.match_fields] == [
        ("dst_mac", 48, "exact"), ("hdr.eth.type & 0xff00", 16, "ternary"), ("meta.x", 8, "range")]
    assert [(r.name, r.scope) for r in table.action_refs] == [
        ("MyIngress.a", "TABLE_AND_DEFAULT"), ("global_b", "DEFAULT_ONLY"), ("NoAction", "TABLE_ONLY")]
    assert table.size == 64 and table.default_action.action == "global_b"
    assert table.direct_counter == "MyIngress.dc" and table.needs_priority
    assert "MyIngress.renamed_counter" in info.counters
    assert info.counters["MyIngress.renamed_counter"].unit == "PACKETS"
    assert info.direct_counters["MyIngress.dc"].unit == "BYTES"
    assert [(p.name, p.bitwidth) for p in info.actions["MyIngress.a"].params] == [("port", 9), ("value", 16)]
    assert set(info.actions) == {"MyIngress.a", "global_b", "NoAction"}


def test_program_info_registers_meters_profiles_and_lpm_const_entries():
    body = """
    register<bit<24>>(100) r;
    meter(16, MeterType.bytes) m;
    action_profile(128) prof;
    action set(bit<8> v) { meta.x = v; }
    table with_profile { key = { hdr.eth.type: exact; } actions = { set; } implementation = prof; }
    table routes {
        key = { hdr.eth.dst: lpm; }
        actions = { set; NoAction; }
        const entries = {
            0x0a0000000000 &&& 0xff0000000000: set(1);
            0x0a0b00000000 &&& 0xffff00000000: set(2);
            _: set(3);
        }
    }
    apply { with_profile.apply(); routes.apply(); }
    """
    info = _load(_ingress_program(body)).info
    assert (info.registers["MyIngress.r"].bitwidth, info.registers["MyIngress.r"].size) == (24, 100)
    assert info.meters["MyIngress.m"].unit == "BYTES" and info.meters["MyIngress.m"].size == 16
    profile = info.action_profiles["MyIngress.prof"]
    assert not profile.with_selector and profile.size == 128 and profile.table_names == ["MyIngress.with_profile"]
    entries = info.tables["MyIngress.routes"].const_entries
    assert [(e.matches[0].value, e.matches[0].prefix_len, e.action.args) for e in entries] == [
        (0x0A0000000000, 8, (1,)), (0x0A0B00000000, 16, (2,)), (0, 0, (3,))]
    assert all(e.priority is None for e in entries)
    # no default_action: NoAction, added as @defaultonly like p4c does
    refs = info.tables["MyIngress.with_profile"].action_refs
    assert [(r.name, r.scope) for r in refs] == [("MyIngress.set", "TABLE_AND_DEFAULT"), ("NoAction", "DEFAULT_ONLY")]


def test_controller_headers_and_sources_of_l3_ecmp():
    path = os.path.join(REPO, "p4src", "l3_ecmp.p4")
    program = load_program(path)
    assert set(program.info.controller_packet_metadata) == {"packet_in", "packet_out"}
    assert program.main_file == "l3_ecmp.p4"
    assert set(program.sources) == {"l3_ecmp.p4", "include/headers.p4", "include/parsers.p4"}
    again = load_program_from_sources(program.main_file, program.sources)
    assert again.info.tables.keys() == program.info.tables.keys()
    assert again.info.actions.keys() == program.info.actions.keys()
    table, same = program.info.tables["MyIngress.ipv4_lpm"], again.info.tables["MyIngress.ipv4_lpm"]
    assert table.match_fields == same.match_fields and table.action_refs == same.action_refs
    assert same.location.filename == "l3_ecmp.p4" and table.location.filename == os.path.normpath(path)


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("body, fragment, message", [
    ("action a() { meta.x = meta.nope; } apply { a(); }", "meta.nope", "no field"),
    ("apply { undefined_thing.apply(); }", "undefined_thing", "unknown name"),
    ("table t { key = { hdr.eth.dst: fancy; } actions = { NoAction; } } apply { t.apply(); }", "fancy",
     "unknown match kind"),
    ("apply { meta.x = hdr.eth.type; }", "hdr.eth.type;", "cannot assign bit<16> to bit<8>"),
    ("apply { bit<8> y = 1; y[9:2] = 0; }", "y[9:2]", "bad slice"),
    ("value_set<bit<8>>(4) vs; apply { }", "value_set", "value_set"),
    ("apply { Checksum16() c; }", "Checksum16", "syntax error"),
])
def test_load_errors_point_at_the_construct(body, fragment, message):
    source = _ingress_program(body)
    with pytest.raises(P4LoadError) as caught:
        _load(source)
    expected_line = source[:source.index(fragment)].count("\n") + 1
    assert caught.value.filename == "main.p4"
    assert caught.value.line == expected_line, str(caught.value)
    assert message in str(caught.value)


def test_error_in_an_included_file_names_that_file():
    include = "header bad_t { bit<7> x; }\n"
    source = '#include <core.p4>\n#include <v1model.p4>\n#include "lib/bad.p4"\n'
    with pytest.raises(P4LoadError) as caught:
        _load(source, extra={"lib/bad.p4": include})
    assert (caught.value.filename, caught.value.line) == ("lib/bad.p4", 1)
    assert "whole number of bytes" in str(caught.value)


def test_missing_main_is_reported():
    with pytest.raises(P4LoadError, match="main"):
        _load("#include <v1model.p4>\n")


def test_cli_check_lists_tables_and_reports_errors(tmp_path, capsys):
    from testbed.cli import main

    assert main(["p4", "check", os.path.join(REPO, "p4src", "l3_ecmp.p4")]) == 0
    out = capsys.readouterr().out
    assert "table MyIngress.ipv4_lpm" in out and "key hdr.ipv4.dstAddr: lpm bit<32>" in out
    assert "action MyIngress.set_nhop(bit<48> dmac, bit<48> smac, bit<9> port)" in out
    bad = tmp_path / "bad.p4"
    bad.write_text(_ingress_program("apply { meta.x = 1 }"))
    assert main(["p4", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:") and "syntax error" in err and err.count("\n") == 1


def test_self_referential_macro_is_expanded_once():
    source = "#define meta meta.x + meta.x\n" + _ingress_program("apply { meta.x = 1; }").replace(
        "apply { meta.x = 1; }", "apply { bit<8> y = 0; y = 1; }")
    with pytest.raises(P4LoadError):  # 'meta' now expands to an expression in declarations: an error, not a hang
        _load(source)


def test_constant_shift_overflow_is_rejected_not_computed():
    with pytest.raises(P4LoadError, match="too large"):
        _load(_ingress_program("const int BIG = 1 << 100000000; apply { }"))


def test_unknown_type_name_is_named_in_the_syntax_error():
    source = _ingress_program("apply { }").replace("struct meta_t { bit<8> x; }", "struct meta_t { ethrnet_t e; }")
    with pytest.raises(P4LoadError) as caught:
        _load(source)
    assert "ethrnet_t is not a known type" in str(caught.value)
    assert caught.value.line == source[:source.index("ethrnet_t")].count("\n") + 1
