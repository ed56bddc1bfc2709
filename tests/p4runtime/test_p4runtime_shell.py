"""p4runtime-shell (the p4lang tool) against our P4Runtime server.

The shell keeps global state and may ``sys.exit`` on connection problems, so it runs
in a subprocess; the server runs in this process.  The subprocess prints JSON that
the test checks, and exits non-zero if it cannot connect, which fails the test.

p4runtime-shell pins protobuf 3.20 while the testbed runs protobuf 6, so the shell
runs in its own virtual environment: ``$TESTBED_P4RUNTIME_SHELL_VENV`` (default
/opt/p4runtime-shell-venv, made by scripts/install.sh).  When it is missing the
test builds it with scripts/install_p4runtime_shell.sh, and skips, printing pip's
error, only when that fails (for example without access to PyPI).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from testbed.p4runtime.client import P4RuntimeClient

from p4runtime_helpers import demo_info, running_server
from repo_paths import REPO

SHELL_VENV = os.environ.get("TESTBED_P4RUNTIME_SHELL_VENV", "/opt/p4runtime-shell-venv")
SHELL_PYTHON = os.path.join(SHELL_VENV, "bin", "python")

SHELL_SCRIPT = textwrap.dedent("""
    import json, sys
    import p4runtime_sh.shell as sh

    address, election_low, table, write = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
    sh.setup(device_id=1, grpc_addr=address, election_id=(0, election_low), verbose=False)
    try:
        rows = []
        names = {f.id: f.name for f in sh.context.get_table(table).match_fields}
        for entry in sh.TableEntry(table).read():
            message = entry.msg()
            rows.append({
                "table_id": message.table_id,
                "match": {names[fm.field_id]: [getattr(fm, fm.WhichOneof("field_match_type")).value.hex(),
                                               fm.lpm.prefix_len] for fm in message.match},
                "action": sh.context.get_name_from_id(message.action.action.action_id)
                          if message.action.HasField("action") else None,
                "params": {p.param_id: p.value.hex() for p in message.action.action.params},
                "text": str(entry),
            })
        result = {"entries": rows, "tables": sorted(t.preamble.name for t in sh.context.p4info.tables)}
        if write:
            te = sh.TableEntry(table)(action="MyIngress.drop")
            te.match["hdr.ipv4.dstAddr"] = "10.9.9.0/24"
            te.insert()
            result["wrote"] = True
        print("RESULT " + json.dumps(result))
    finally:
        sh.teardown()
""")


@pytest.fixture(scope="module")
def shell_python():
    """The interpreter of p4runtime-shell's own environment (built if missing, else skip)."""
    def importable():
        return os.path.exists(SHELL_PYTHON) and subprocess.run(
            [SHELL_PYTHON, "-c", "import p4runtime_sh.shell"], capture_output=True).returncode == 0

    if not importable():
        build = subprocess.run(["bash", os.path.join(REPO, "scripts", "install_p4runtime_shell.sh")],
                               env=dict(os.environ, P4RUNTIME_SHELL_VENV=SHELL_VENV),
                               capture_output=True, text=True, timeout=900)
        if build.returncode != 0 or not importable():
            reason = (f"p4runtime-shell's environment {SHELL_VENV} cannot be built: "
                      + (build.stdout + build.stderr).strip()[-2000:])
            print(reason, file=sys.stderr)
            pytest.skip(reason)
    return SHELL_PYTHON


def run_shell(python, address, election_low, table, write=False):
    """Run the shell script with ``python``; returns its JSON result (fails the test if it cannot connect)."""
    proc = subprocess.run([python, "-c", SHELL_SCRIPT, address, str(election_low), table,
                           "1" if write else "0"],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, f"p4runtime-shell failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result from p4runtime-shell:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture
def switch():
    """A server for demo_info() on a free port; yields (target, address)."""
    with running_server(demo_info()) as (target, _server, address):
        yield target, address


def test_shell_reads_entries_our_client_wrote_and_writes_entries_we_read(switch, shell_python):
    target, address = switch
    with P4RuntimeClient(address, device_id=1, election_id=(0, 5), timeout=5) as controller:
        controller.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.1.0", 24)},
                                      "MyIngress.set_nhop", {"dmac": "00:00:00:00:01:01", "port": 1})
        controller.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.2", 32)},
                                      "MyIngress.set_nhop", {"dmac": "00:00:00:00:02:02", "port": 2})
        # the shell connects as a backup (election id 1 < 5) and reads
        result = run_shell(shell_python, address, 1, "MyIngress.ipv4_lpm")
    assert "MyIngress.ipv4_lpm" in result["tables"]
    entries = result["entries"]
    assert len(entries) == 2
    assert all(e["action"] == "MyIngress.set_nhop" for e in entries)
    assert entries[0]["match"]["hdr.ipv4.dstAddr"] == ["0a000100", 24]
    assert entries[1]["params"] == {"1": "0202", "2": "02"}  # canonical (shortest) byte strings
    assert 'MyIngress.set_nhop' in entries[0]["text"]

    # with our controller gone, the shell (election id 6 > 5, the highest seen) is primary
    # and can write; we read what it wrote
    result = run_shell(shell_python, address, 6, "MyIngress.ipv4_lpm", write=True)
    assert result["wrote"]
    with P4RuntimeClient(address, device_id=1, election_id=(0, 7), timeout=5) as controller:
        matches = [e.match["hdr.ipv4.dstAddr"] for e in controller.read_table_entries("MyIngress.ipv4_lpm")]
    assert (0x0A090900, 24) in matches


def test_shell_with_the_real_l3_ecmp_program(shell_python):
    with running_server() as (_target, _server, address):
        with P4RuntimeClient(address, device_id=1, election_id=(0, 5), timeout=10) as controller:
            controller.set_pipeline(os.path.join(REPO, "p4src", "l3_ecmp.p4"))
            controller.insert_member("MyIngress.ecmp_selector", 1, "MyIngress.set_nhop",
                                     {"dmac": "00:00:00:00:00:02", "smac": "00:00:00:00:00:01", "port": 2})
            controller.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)},
                                          member_id=1)
            result = run_shell(shell_python, address, 1, "MyIngress.ipv4_lpm")
        assert len(result["entries"]) == 1
        assert result["entries"][0]["match"]["hdr.ipv4.dstAddr"] == ["0a000200", 24]
        assert "member_id: 1" in result["entries"][0]["text"].replace("action_profile_member_id", "member_id")
