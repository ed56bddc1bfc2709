"""No input makes the P4 loader raise anything but P4LoadError with file:line, or stall.

Covers the frontend items of issue 10 (non-UTF-8 bytes, huge literals, deep nesting, a
self-include with its line, errors located in the P4 source instead of generated code,
``testbed p4 check`` printing one line with exit status 1) and the device-config items:
``#include`` confined to the config's sources and the target's include directory, and
``#if`` arithmetic bounded to the C preprocessor's 64-bit integers.
"""
import time

import pytest

from testbed.cli import main
from testbed.errors import P4LoadError
from testbed.p4.loader import load_program, load_program_from_sources

STALL_BOUND_SECONDS = 60  # a stall takes minutes; a loaded 2-core machine still loads these in seconds

HEAD = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
"""
TAIL = """
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"""


def _program(apply_body, locals_=""):
    return HEAD + "control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n" + \
        locals_ + "\napply {\n" + apply_body + "\n}\n}\n" + TAIL


def _load_error(sources, main_file="main.p4"):
    started = time.monotonic()
    with pytest.raises(P4LoadError) as caught:
        load_program_from_sources(main_file, sources)
    assert time.monotonic() - started < STALL_BOUND_SECONDS
    return caught.value


def _line_of(source, fragment):
    return source[:source.index(fragment)].count("\n") + 1


# ------------------------------------------------------------------------------------ bytes and literals
def test_non_utf8_bytes_are_a_load_error_at_their_line(tmp_path):
    path = tmp_path / "bad.p4"
    path.write_bytes(HEAD.encode() + b"// caf\xe9\n")
    with pytest.raises(P4LoadError) as caught:
        load_program(str(path))
    assert caught.value.line == HEAD.count("\n") + 1
    assert "UTF-8" in str(caught.value)
    error = _load_error({"main.p4": HEAD.encode() + b"\xff\xfe"})
    assert (error.filename, error.line) == ("main.p4", HEAD.count("\n") + 1)


def test_integer_literals_of_thousands_of_digits_are_refused_quickly():
    source = _program("meta.x = (bit<8>)" + "9" * 5000 + ";")
    error = _load_error({"main.p4": source})
    assert error.line == _line_of(source, "9999") and "more than 8192 bits" in str(error)
    source = _program("meta.x = 0x" + "f" * 100000 + ";")
    assert "8192 bits" in str(_load_error({"main.p4": source}))
    source = _program("bit<8> y = 100000w5;")
    assert "width" in str(_load_error({"main.p4": source}))


# ------------------------------------------------------------------------------------ nesting
@pytest.mark.parametrize("depth_body", [
    "meta.x = " + "(meta.x + " * 3000 + "1" + ")" * 3000 + ";",
    "meta.x = 1" + " + 1" * 5000 + ";",
    "{" * 2000 + "}" * 2000,
    "if (true) " * 1500 + "{ }",
    "meta.x = " + "-" * 3000 + "1;",
])
def test_deep_nesting_is_a_load_error_not_a_recursion_error(depth_body):
    source = _program(depth_body)
    error = _load_error({"main.p4": source})
    assert error.filename == "main.p4" and error.line == _line_of(source, depth_body[:8])
    assert "nest" in str(error)


def test_moderate_nesting_still_loads():
    body = "meta.x = " + "(" * 60 + "meta.x" + " + 1)" * 60 + ";\n" + "if (meta.x == 1) { meta.x = 2; } else " * 60 \
        + "{ meta.x = 3; }"
    load_program_from_sources("main.p4", {"main.p4": _program(body)})


# ------------------------------------------------------------------------------------ includes
def test_a_self_include_carries_its_line():
    source = HEAD + '\n#include "main.p4"\n'
    error = _load_error({"main.p4": source})
    assert (error.filename, error.line) == ("main.p4", HEAD.count("\n") + 2)
    assert "recursive #include" in str(error)


@pytest.mark.parametrize("include", [
    '#include "/etc/hostname"', '#include "../../../../../../../../etc/hostname"',
    "#include </etc/hostname>", "#include <../../../../../../../../../etc/hostname>",
    '#include "/etc/passwd"', "#include <../v1model/device.py>",
])
def test_a_device_config_cannot_include_files_of_the_machine(include):
    # issue 10: includes resolve only within the config's sources and the target's include directory,
    # and an error never shows the content of another file
    source = include + "\n" + HEAD
    error = _load_error({"main.p4": source})
    assert (error.filename, error.line) == ("main.p4", 1)
    assert "not found" in str(error)
    with open("/etc/hostname", encoding="utf-8", errors="replace") as handle:
        hostname = handle.read().strip()
    if hostname:
        assert hostname not in str(error)


def test_includes_within_the_sources_and_the_target_directory_work():
    sources = {"main.p4": '#include "lib/defs.p4"\n' + _program("meta.x = WIDTH;"),
               "lib/defs.p4": '#include "../more/w.p4"\n', "more/w.p4": "#define WIDTH 8\n"}
    load_program_from_sources("main.p4", sources)


# ------------------------------------------------------------------------------------ preprocessor arithmetic
@pytest.mark.parametrize("condition, message", [
    ("9**9**8", "#if condition not understood"),
    ("99999999999999999999999999", "too large"),
    ("1 / 0", "division by zero"),
    ("(" * 500 + "1" + ")" * 500, "nested"),
])
def test_if_conditions_are_bounded_c_arithmetic(condition, message):
    source = f"#if {condition}\n#endif\n" + HEAD
    error = _load_error({"main.p4": source})
    assert (error.filename, error.line) == ("main.p4", 1) and message in str(error)


@pytest.mark.parametrize("condition, expected", [
    ("(1 << 63) < 0", True),  # 64-bit signed wrap-around, as in C's intmax_t
    ("0x7fffffffffffffff + 1 < 0", True),
    ("-7 / 2 == -3 && -7 % 2 == -1", True),  # C truncates towards zero
    ("defined(A) && !defined B", True),
    ("A * 3 == 6 && UNDEFINED_NAME == 0", True),
    ("1 ? 0 : 1", False),
])
def test_if_conditions_follow_c_preprocessor_semantics(condition, expected):
    source = f"#define A 2\n#if {condition}\n#define RESULT 1\n#else\n#define RESULT 0\n#endif\n" + \
        _program("meta.x = RESULT;")
    program = load_program_from_sources("main.p4", {"main.p4": source})
    assert ("meta.x = 1" in "\n".join(line.text for line in program.model.lines)) is expected


def test_a_macro_bomb_is_stopped():
    defines = "".join(f"#define X{i + 1} X{i} X{i}\n" for i in range(40))
    source = "#define X0 1\n" + defines + _program("meta.x = X40;")
    error = _load_error({"main.p4": source})
    assert error.line == _line_of(source, "meta.x = X40") and "macro expansion" in str(error)


# ------------------------------------------------------------------------------------ the CLI
@pytest.mark.parametrize("content", [
    b"\xff\xfe\x00garbage",
    (HEAD + "control I(").encode(),
    ("meta.x = " + "(" * 3000).encode(),
    b'#include "/no/such/dir/x.p4"\n',
    ("#if 9**9**8\n#endif\n").encode(),
])
def test_p4_check_prints_one_line_and_exits_1(tmp_path, capsys, content):
    path = tmp_path / "bad.p4"
    path.write_bytes(content)
    assert main(["p4", "check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(str(path))
    assert "Traceback" not in captured.err


def test_p4_check_refuses_a_malformed_define(tmp_path, capsys):
    path = tmp_path / "ok.p4"
    path.write_text(_program(""))
    assert main(["p4", "check", "-D", "1BAD=2", str(path)]) == 1
    assert "-D" in capsys.readouterr().err


def test_an_error_python_reports_in_generated_code_is_shown_at_the_p4_line():
    # 25 nested loops exceed Python's limit of 20 nested blocks in the generated code; the error names the
    # P4 source line, not a line of the generated module
    loops = "".join(f"for (bit<8> i{k} = 0; i{k} < 1; i{k} = i{k} + 1) {{\n" for k in range(25))
    source = _program(loops + "meta.x = 1;\n" + "}\n" * 25)
    error = _load_error({"main.p4": source})
    assert error.filename == "main.p4"
    assert _line_of(source, "for (bit<8> i0") <= error.line <= _line_of(source, "meta.x = 1;")
    assert "nested too deeply" in str(error)
