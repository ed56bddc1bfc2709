"""The backend option of the embedded target: device factory, switch process, fabric, specs, P4Runtime.

The pipeline's equality with the Python backend is test_native_differential.py's; here the
option is checked where it is given, and the P4Runtime server is shown to work unchanged on a
native device (writes through a real gRPC client, counters read back).
"""
import os
import re

import pytest

from testbed.embedded_switch.p4runtime_target import EmbeddedTarget
from testbed.emulation.p4switch import EmbeddedP4Switch
from testbed.errors import ParameterError
from testbed.experiment.spec import SpecError, parse_spec
from testbed.p4.native import BACKENDS, check_backend, default_backend
from testbed.p4.native.build import compiler
from testbed.p4runtime.client import P4RuntimeClient
from testbed.p4runtime.server import P4RuntimeServer
from testbed.p4src import program_path

BASE_SPEC = {
    "name": "unit", "seed": 5,
    "topology": {"kind": "clos", "params": {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}},
    "traffic": [{"pattern": "stream", "hosts": ["h1", "h3"], "rate_mbps": 5, "duration_s": 2}],
    "duration_s": 3,
}


def test_backend_names_are_checked():
    assert BACKENDS == ("python", "native", "auto")
    with pytest.raises(ParameterError) as caught:
        check_backend("fast")
    assert "backend" in str(caught.value) and "python / native / auto" in str(caught.value)


def test_default_backend_follows_the_environment(monkeypatch):
    monkeypatch.delenv("TESTBED_BACKEND", raising=False)
    assert default_backend() == "auto"  # native when a compiler and cffi are present
    monkeypatch.setenv("TESTBED_BACKEND", "python")
    assert default_backend() == "python"
    monkeypatch.setenv("TESTBED_BACKEND", "native")
    assert default_backend() == "native"
    monkeypatch.setenv("TESTBED_BACKEND", "nope")
    with pytest.raises(ParameterError, match="TESTBED_BACKEND"):
        default_backend()


def test_spec_backend_is_validated_and_recorded(monkeypatch):
    monkeypatch.delenv("TESTBED_BACKEND", raising=False)
    assert parse_spec(dict(BASE_SPEC), check_machine=False).backend == "auto"
    spec = parse_spec(dict(BASE_SPEC, backend="native"), check_machine=False)
    assert spec.backend == "native" and spec.to_dict()["backend"] == "native"
    with pytest.raises(SpecError, match="backend"):
        parse_spec(dict(BASE_SPEC, backend="c"), check_machine=False)


def test_switch_process_gets_the_backend(tmp_path):
    switch = EmbeddedP4Switch("s1", log_dir=str(tmp_path), backend="native", program=program_path("ecmp"))
    args = switch.switchd_args()
    assert args[args.index("--backend") + 1] == "native"
    assert "--backend" not in EmbeddedP4Switch("s2", log_dir=str(tmp_path), program=program_path("ecmp")).switchd_args()


@pytest.mark.skipif(compiler() is None, reason="no C compiler")
@pytest.mark.parametrize("backend", ["python", "native"])
def test_p4runtime_server_programs_a_native_device_unchanged(backend):
    """The same P4Runtime writes and reads on both backends: entries, members, groups, counters."""
    target = EmbeddedTarget(cpu_port=255, backend=backend)
    server = P4RuntimeServer(target, device_id=1, address="127.0.0.1:0")
    server.start()
    try:
        with P4RuntimeClient(f"127.0.0.1:{server.port}", device_id=1, election_id=(0, 1), timeout=10) as client:
            client.set_pipeline(program_path("l3_ecmp"))
            assert target.device.backend == backend
            for member in (1, 2):
                client.insert_member("MyIngress.ecmp_selector", member, "MyIngress.set_nhop",
                                     {"dmac": f"02:00:00:00:00:0{member}", "smac": "02:00:00:00:00:99",
                                      "port": member})
            client.insert_group("MyIngress.ecmp_selector", 10, [(1, 1), (2, 3)])
            client.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)}, group_id=10)
            frame = bytes.fromhex("020000000001" "020000000002" "0800"
                                  "4500001c000100004011" "0000" "0a000001" "0a000002" "04d2162e00080000")
            outputs = target.device.process(3, frame)
            assert len(outputs) == 1 and outputs[0][0] in (1, 2)
            packets, _ = client.read_counter("MyIngress.ingress_port_counter", 3)
            assert packets == 1
            client.delete_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.0", 8)})
            assert target.device.process(3, frame) == []  # the route is gone: dropped
            assert client.read_counter("MyIngress.ingress_port_counter", 3)[0] == 2
    finally:
        server.stop()
        target.close()


@pytest.mark.skipif(compiler() is None, reason="no C compiler")
def test_a_switch_takes_the_preloaded_program_when_its_device_config_comes(monkeypatch):
    """What a fork server preloads is what its switches run (shared), for that program only."""
    from testbed.embedded_switch import p4runtime_target

    monkeypatch.setattr(p4runtime_target, "_PRELOADED", {})
    preloaded = p4runtime_target.preload_program(program_path("l3_ecmp"), backend="native")
    target = EmbeddedTarget(cpu_port=255, backend="native")
    server = P4RuntimeServer(target, device_id=1, address="127.0.0.1:0")
    server.start()
    try:
        with P4RuntimeClient(f"127.0.0.1:{server.port}", device_id=1, election_id=(0, 1), timeout=10) as client:
            client.set_pipeline(program_path("l3_ecmp"))
            assert target.program is preloaded
            assert target.device.library is preloaded._native_library.library  # built once, before the fork
            client.set_pipeline(program_path("ecmp"))
            assert target.program is not preloaded and target.program.main_file == "ecmp.p4"
    finally:
        server.stop()
        target.close()


def _type_strings(path):
    """The C type strings a module's source hands to an ffi (new, cast, from_buffer, typeof, sizeof,
    an allocator's call), both arms of a conditional included."""
    with open(path) as handle:
        text = handle.read()
    call = r'(?:ffi\.(?:new|cast|from_buffer|typeof|sizeof)|ffi\.new_allocator\([^)]*\))\(\s*'
    found = set()
    for first, other in re.findall(call + r'"([^"]+)"(?:\s+if\s[^,]+?\selse\s+"([^"]+)")?', text):
        found.update(filter(None, (first, other)))
    return found


def test_a_switch_forked_after_the_libraries_load_parses_no_c_type(monkeypatch):
    """Every type string the Python side hands to the loop's or a pipeline's ffi is parsed when the
    library loads (in the fork server): a switch never runs pycparser, which would copy the parser's
    tables into its memory."""
    import pycparser

    from testbed.embedded_switch import native_io
    from testbed.p4.loader import load_program
    from testbed.p4.native import build as native_build

    package = os.path.dirname(native_build.__file__)
    pipeline_used = set().union(*(_type_strings(os.path.join(package, name))
                                  for name in ("device.py", "state.py", "dsf.py")))
    loop_used = _type_strings(native_io.__file__)
    assert {"uint64_t[]", "tb_packet_t *", "int32_t[]"} <= pipeline_used  # the scan finds them
    assert pipeline_used <= set(native_build.PIPELINE_TYPES)
    assert loop_used <= set(native_io.LOOP_TYPES)

    loop_ffi, _ = native_io.load()
    pipeline_ffi = native_build.build(load_program(program_path("l3_ecmp"))).ffi

    def parse(*_args, **_kwargs):
        raise AssertionError("pycparser ran")

    monkeypatch.setattr(pycparser.CParser, "parse", parse)
    for cdecl in native_build.PIPELINE_TYPES:
        pipeline_ffi.typeof(cdecl)
    for cdecl in native_io.LOOP_TYPES:
        loop_ffi.typeof(cdecl)
    with pytest.raises(AssertionError, match="pycparser ran"):  # a string not parsed before does parse
        loop_ffi.typeof("int16_t[]")


def test_without_a_compiler_native_fails_and_auto_falls_back(monkeypatch):
    from testbed.errors import NativeBackendError
    from testbed.p4.loader import load_program
    from testbed.p4.native import make_device
    from testbed.p4.state import SwitchState

    monkeypatch.setenv("TESTBED_CC", "no-such-compiler-anywhere")
    program = load_program(program_path("l3_ecmp"))
    with pytest.raises(NativeBackendError, match="no C compiler"):
        make_device(program, SwitchState(program.info), backend="native")
    warnings = []
    device = make_device(program, SwitchState(program.info), backend="auto", warn=warnings.append)
    assert device.backend == "python"
    assert len(warnings) == 1 and warnings[0].startswith("warning: backend auto:") and "no C compiler" in warnings[0]


def test_temporary_build_folder_is_one_testbed_cleanup_removes():
    from testbed.emulation.cleanup import TEMP_PATTERN
    from testbed.p4.native.build import _temp_cache

    folder = _temp_cache()
    try:
        match = TEMP_PATTERN.match(os.path.basename(folder))
        assert match and int(match.group(1)) == os.getpid()
    finally:
        os.rmdir(folder)
        _temp_cache.cache_clear()


@pytest.mark.skipif(compiler() is None, reason="no C compiler")
def test_a_program_calling_the_targets_own_externs_runs_in_the_native_loop_with_the_c_dsf_manager():
    """DSF's externs are served in the native loop by the DSF traffic manager in C; a device told to use
    the Python DSF traffic manager keeps the Python packet loop (the native loop cannot call Python)."""
    from testbed.embedded_switch.native_io.daemon import native_loop_applies
    from testbed.p4.loader import load_program
    from testbed.p4.native import make_device
    from testbed.p4.state import SwitchState

    devices = {}
    for name in ("dsf_rdsw", "l3_ecmp"):
        program = load_program(program_path(name))
        devices[name] = make_device(program, SwitchState(program.info), backend="native")
        assert devices[name].backend == "native"
    assert native_loop_applies(devices["dsf_rdsw"], None)
    assert native_loop_applies(devices["l3_ecmp"], None)
    devices["dsf_rdsw"].dsf_engine = "python"
    assert not native_loop_applies(devices["dsf_rdsw"], None)
