"""The embedded P4 target behaves like BMv2 ``simple_switch_grpc``, frame for frame.

For every p4src program BMv2 can load (and four of the p4lang tutorials'), one seeded script
(:mod:`diff_harness`) of P4Runtime
writes (members, weighted groups, entries, default actions and parameter tables, changed
three times during the run) and of frames (valid IPv4/UDP/TCP and RoCEv2 frames built to hit
the installed entries, misses, TTL 0/1/2, bad checksums, IPv4 options, fragments, bad IHL,
version and length, truncated frames, IPv6, ARP, VLAN, unknown EtherTypes, F10's and DSF's
own headers, PacketOuts) runs through both targets' real switch processes on veth ports.
Every frame each port sent, every PacketIn, every counter and every register that holds
neither times nor queue depths (BMv2's read over Thrift) must be the same, and so must the
set of writes each target refused (the script makes some that both must refuse).

Each program prints one line: frames sent, frames out (ports and PacketIns, markers not
counted), frames that produced nothing, mismatches and the seconds each target took.
Needs root (a network namespace with veth pairs), BMv2 and p4c; skipped with the reason otherwise.
"""
import os

import pytest

from diff_harness import (MARKER_TAG, Batch, ScriptBuilder, compare_runs, harness, leftovers, run_script,
                          status_differences)

from repo_paths import REPO

SEED = int(os.environ.get("TESTBED_DIFF_SEED", "20261126"))  # another seed explores other states and frames
FRAMES = 1200  # frames and PacketOuts per program; at least 1000 of them are frames on the wire
PROGRAMS = [os.path.join("p4src", f"{name}.p4") for name in
            ("l3_ecmp", "ecmp", "eecmp", "spray", "flowlet", "pinning", "te", "f10", "dsf_fabric")]
# p4lang tutorials' programs whose outputs depend on neither time nor queue depths (not ecn, mri, link_monitor)
# and need no frames or replication state the harness does not build (not calc, source_routing, multicast)
PROGRAMS += [os.path.join("tests", "p4lang", "programs", f"{name}.p4")
             for name in ("basic", "qos", "firewall", "basic_tunnel")]

pytestmark = [
    pytest.mark.bmv2,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a network namespace with veth pairs"),
]


@pytest.fixture(scope="module")
def wires():
    """The namespace, its veths and the harness's sockets, shared by the programs; nothing left after."""
    before = leftovers()
    with harness() as created:
        yield created
    assert leftovers() == before


def _outputs(run):
    """(frames out of the ports, PacketIns), markers not counted."""
    ports = sum(1 for frames in run.outputs.values() for _batch, frame in frames if MARKER_TAG not in frame)
    packet_ins = sum(1 for _batch, _metadata, payload in run.packet_ins if MARKER_TAG not in payload)
    return ports, packet_ins


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_embedded_target_matches_bmv2(program, wires):
    namespace, wire, folder = wires
    script = ScriptBuilder(os.path.join(REPO, program), SEED, FRAMES).build()
    wire_frames = sum(len(step.frames) for step in script.steps if isinstance(step, Batch))
    assert wire_frames >= 1000
    embedded = run_script("embedded", script, namespace, wire, folder)
    bmv2 = run_script("bmv2", script, namespace, wire, folder)
    differences = compare_runs(embedded, bmv2, script)
    ports, packet_ins = _outputs(bmv2)
    out = ports + packet_ins
    print(f"\n{program}: seed {SEED}, {script.frames} frames sent ({wire_frames} into ports, "
          f"{script.frames - wire_frames} PacketOuts), {out} out ({ports} from ports, {packet_ins} PacketIns), "
          f"{max(0, script.frames - out)} dropped, {len(differences)} mismatches; "
          f"embedded {embedded.seconds:.1f} s, BMv2 {bmv2.seconds:.1f} s")
    # refused writes: both targets must refuse the same ones (compare_runs); where the codes differ the
    # embedded server follows the P4Runtime specification and PI does not always (see status_differences)
    for (method, code_embedded, code_bmv2), count in sorted(status_differences(embedded, bmv2, script).items()):
        print(f"  note: {count} refused {method}: embedded {code_embedded}, BMv2 {code_bmv2}")
    # the script must have made both targets forward: a run where nothing came out proves nothing
    assert min(out, sum(_outputs(embedded))) > script.frames // 10
    assert not differences, f"{program} (seed {SEED}): the embedded target differs from BMv2:\n" + \
        "\n".join(differences)
