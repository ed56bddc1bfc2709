"""Which P4 target runs a program, and the pipeline config each target needs.

Two targets run the same p4src programs:

* ``embedded``: the project's own v1model interpreter (always available).
  Its device config is the program's sources (see
  :mod:`testbed.embedded_switch.p4runtime_target`); P4Info is generated from the program.
* ``bmv2``: BMv2 ``simple_switch_grpc``, when it and ``p4c`` are on PATH.
  Programs are compiled with ``p4c --target bmv2 --arch v1model`` into a
  BMv2 JSON and a P4Info, cached by the content hash of the sources.

``auto`` picks BMv2 when installed, unless the run needs something only the
embedded target has (:func:`embedded_only_needs`: the DSF traffic manager's
externs, lossy links on a kernel without netem); then it picks the embedded
target and says why.  ``bmv2`` asked for such a run is refused before anything
starts, naming what BMv2 lacks.
"""
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from testbed.errors import ParameterError, TestbedError

TARGETS = ("auto", "embedded", "bmv2")
P4C_CACHE_DIR = os.environ.get("TESTBED_P4C_CACHE", os.path.expanduser("~/.cache/testbed/p4c"))
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


@dataclass
class PipelineConfig:
    """What SetForwardingPipelineConfig sends: P4Info and the target's device config."""

    target: str
    p4info: object  # p4.config.v1.p4info_pb2.P4Info
    device_config: bytes
    program_path: str


def bmv2_available():
    """True when ``simple_switch_grpc`` and ``p4c`` are both on PATH."""
    return shutil.which("simple_switch_grpc") is not None and shutil.which("p4c") is not None


#: features of the embedded target's traffic manager a mode may need (:attr:`Mode.target_features
#: <testbed.mechanisms.base.Mode>`), and what BMv2 lacks
EMBEDDED_FEATURES = {
    "pfc": "priority flow control (IEEE 802.1Qbb PAUSE frames and lossless queues), which BMv2's traffic "
           "manager does not have",
}


def embedded_only_needs(program=None, lossy_links=False, features=()):
    """What a run needs that only the embedded target has, one sentence each (empty: BMv2 can run it).

    Args:
        program: the P4 program; its ``@embedded_only`` externs count (:mod:`testbed.p4.embedded_only`).
        lossy_links: the run makes links lossy; on a kernel without netem only the
            embedded switches' ports can drop frames.
        features: names of :data:`EMBEDDED_FEATURES` the run uses.

    Raises:
        P4LoadError: the program does not parse (file:line).
    """
    from testbed.emulation.netem import netem_available
    from testbed.p4.embedded_only import embedded_only_calls

    needs = []
    if program:
        calls = embedded_only_calls(program)
        if calls:
            listed = "; ".join(f"{name} ({feature})" for name, feature in calls.items())
            needs.append(f"{os.path.basename(program)} calls externs BMv2 does not have: {listed}")
    for feature in features:
        needs.append(f"the run needs {EMBEDDED_FEATURES[feature]}")
    if lossy_links and not netem_available():
        needs.append("lossy links need the netem qdisc, which this kernel lacks, or the embedded switches' ports")
    return needs


def resolve_target(requested="auto", needs=()):
    """The target a run uses, and why when ``auto`` did not pick BMv2 although it is installed.

    Args:
        requested: ``auto``, ``embedded`` or ``bmv2``.
        needs: what the run needs that only the embedded target has (:func:`embedded_only_needs`).

    Returns:
        tuple: ``(target, note)``: ``"embedded"`` or ``"bmv2"``, and a sentence for the
        run's log and results when ``auto`` chose the embedded target over an installed
        BMv2 (else ``""``).

    Raises:
        ParameterError: unknown target, ``bmv2`` requested but not installed, or
            requested for a run that needs the embedded target (what BMv2 lacks named).
    """
    if requested not in TARGETS:
        raise ParameterError("target", requested, "one of: " + ", ".join(TARGETS))
    needs = list(needs)
    if requested == "auto":
        if not bmv2_available():
            return "embedded", ""
        if needs:
            return "embedded", f"target auto: the embedded target, not the installed BMv2: {needs[0]}"
        return "bmv2", ""
    if requested == "bmv2":
        if not bmv2_available():
            raise ParameterError("target", requested, "embedded or auto on this machine",
                                 "simple_switch_grpc and p4c are not on PATH (use the Vagrant VM)")
        if needs:
            raise ParameterError("target", requested, "embedded or auto", "; ".join(needs))
    return requested, ""


def source_digest(path):
    """Return the SHA-256 of a program and every ``#include "..."`` it pulls in, recursively."""
    digest = hashlib.sha256()
    seen = set()

    def visit(file_path):
        real = os.path.realpath(file_path)
        if real in seen:
            return
        seen.add(real)
        with open(real, "rb") as handle:
            data = handle.read()
        digest.update(real.encode() + b"\0" + data)
        for include in _INCLUDE.findall(data.decode(errors="replace")):
            candidate = os.path.join(os.path.dirname(real), include)
            if os.path.exists(candidate):
                visit(candidate)

    visit(path)
    return digest.hexdigest()


def compile_with_p4c(path, cache_dir=P4C_CACHE_DIR):
    """Compile a v1model program with p4c for BMv2, reusing a cached result.

    Args:
        path: the P4 program.
        cache_dir: where results are kept, one folder per source hash.

    Returns:
        tuple: ``(p4info_txt_path, bmv2_json_path)``.

    Raises:
        TestbedError: p4c is missing or rejects the program (its message included).
    """
    if shutil.which("p4c") is None:
        raise TestbedError("p4c is not on PATH: BMv2 programs cannot be compiled here")
    folder = os.path.join(cache_dir, source_digest(path))
    name = os.path.splitext(os.path.basename(path))[0]
    p4info_path = os.path.join(folder, f"{name}.p4info.txt")
    json_path = os.path.join(folder, f"{name}.json")
    if os.path.exists(p4info_path) and os.path.exists(json_path):
        return p4info_path, json_path
    os.makedirs(folder, exist_ok=True)
    result = subprocess.run(
        ["p4c", "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
         "--p4runtime-files", p4info_path, "-o", folder, path],
        capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise TestbedError(f"p4c failed on {path}:\n{result.stderr.strip()}")
    return p4info_path, json_path


def pipeline_config(path, target="auto"):
    """Build the pipeline config of ``path`` for a target.

    Args:
        path: the P4 program.
        target: ``auto``, ``embedded`` or ``bmv2`` (``auto`` resolved for this program).

    Returns:
        PipelineConfig: P4Info message and device config bytes; for the embedded target the
        P4Info is shared by every call for an unchanged program (callers must not modify it).

    Raises:
        ParameterError: bad target, or BMv2 for a program calling the embedded target's own
        externs (named; :mod:`testbed.p4.embedded_only`). P4LoadError / TestbedError: the
        program cannot be loaded or compiled.
    """
    if target != "embedded":
        target, _note = resolve_target(target, embedded_only_needs(path))
    if target == "bmv2":
        from google.protobuf import text_format
        from p4.config.v1 import p4info_pb2

        p4info_path, json_path = compile_with_p4c(path)
        p4info = p4info_pb2.P4Info()
        with open(p4info_path) as handle:
            text_format.Merge(handle.read(), p4info)
        with open(json_path, "rb") as handle:
            device_config = handle.read()
        return PipelineConfig("bmv2", p4info, device_config, path)
    from testbed.p4runtime.embedded import embedded_pipeline

    p4info, device_config = embedded_pipeline(path)
    return PipelineConfig("embedded", p4info, device_config, path)
