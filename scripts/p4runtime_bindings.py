"""Regenerate the installed ``p4runtime`` package's Python code for a compiled protobuf backend.

Every ``p4runtime`` release on PyPI (1.3.0 to 1.6.0) ships ``*_pb2.py`` modules
made by protoc older than 3.19, which build descriptors directly.  protobuf 4.21
and later refuse that with their compiled backend (upb: "Descriptors cannot be
created directly"), so those modules only load with the pure-Python backend,
which encodes a 320-entry Write in about 100 ms.

This script keeps the release's protocol (its serialized ``FileDescriptorProto``
of each .proto file, read from the module source without importing it) and runs
protoc (from ``grpcio-tools``, installed in a throw-away virtual environment
with the same protobuf version as the target environment, so the generated
code is never newer than the runtime) on those descriptors.  The result, with
the release's unchanged ``*_pb2_grpc.py`` and ``__init__.py`` files, is
installed in the target environment as ``p4runtime <version>+protobuf<X.Y.Z>``
in place of the PyPI build.

Idempotent: when the target environment already imports the P4Runtime modules
with a compiled backend it does nothing.

Usage (as root, from scripts/install.sh)::

    /opt/testbed-venv/bin/python scripts/p4runtime_bindings.py [--force] [--work-dir DIR]

Exit status 0 when the environment imports ``p4.v1.p4runtime_pb2`` with a
compiled backend afterwards, 1 otherwise (with the reason on stderr).
"""
import argparse
import ast
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

CHECK = textwrap.dedent("""
    from google.protobuf.internal import api_implementation
    import p4.v1.p4runtime_pb2, p4.v1.p4runtime_pb2_grpc, p4.config.v1.p4info_pb2
    print(api_implementation.Type())
""")
COMPILED_BACKENDS = ("upb", "cpp")


def backend_in_use(python):
    """The protobuf backend ``python`` loads the P4Runtime modules with, or None if they fail."""
    env = {key: value for key, value in os.environ.items() if key != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    result = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, env=env, cwd="/")
    return result.stdout.strip() if result.returncode == 0 else None


def serialized_descriptor(path):
    """The serialized FileDescriptorProto in a generated ``*_pb2.py`` module (found in its source).

    Old modules pass it as ``FileDescriptor(serialized_pb=b'...')``, newer ones as
    ``AddSerializedFile(b'...')``.

    Raises:
        ValueError: the module holds neither.
    """
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "serialized_pb":
                return ast.literal_eval(keyword.value)
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name == "AddSerializedFile" and node.args:
            return ast.literal_eval(node.args[0])
    raise ValueError(f"{path}: no serialized file descriptor found")


def package_files():
    """``(version, {relative path: absolute path})`` of the installed p4runtime distribution's modules."""
    distribution = importlib.metadata.distribution("p4runtime")
    files = {}
    for item in distribution.files or ():
        relative = str(item)
        if relative.startswith("p4/") and relative.endswith(".py"):
            files[relative] = str(item.locate())
    if not any(path.endswith("_pb2.py") for path in files):
        raise RuntimeError("the installed p4runtime distribution lists no p4/**/_pb2.py module")
    return distribution.version.split("+")[0], files


def descriptor_set(pb2_files):
    """A serialized FileDescriptorSet of the P4Runtime files and every file they import."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    wanted = {}
    for path in pb2_files:
        proto = descriptor_pb2.FileDescriptorProto.FromString(serialized_descriptor(path))
        wanted[proto.name] = proto
    missing = [dep for proto in list(wanted.values()) for dep in proto.dependency if dep not in wanted]
    while missing:
        name = missing.pop()
        if name in wanted:
            continue
        module = name[:-len(".proto")].replace("/", ".") + "_pb2"  # google/rpc/status.proto
        __import__(module)
        proto = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(name).CopyToProto(proto)
        wanted[name] = proto
        missing.extend(dep for dep in proto.dependency if dep not in wanted)
    result = descriptor_pb2.FileDescriptorSet()
    result.file.extend(wanted.values())
    return result.SerializeToString(), [descriptor_pb2.FileDescriptorProto.FromString(
        serialized_descriptor(path)).name for path in pb2_files]


def protoc_environment(work_dir, protobuf_version):
    """A virtual environment with grpcio-tools for ``protobuf_version``; returns its python."""
    venv = os.path.join(work_dir, "protoc-venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "grpcio-tools", f"protobuf=={protobuf_version}"],
                   check=True)
    return python


def generate(work_dir, protoc_python, descriptors, proto_names):
    """Run protoc on the descriptor set; returns the output directory."""
    set_path = os.path.join(work_dir, "p4runtime.protoset")
    with open(set_path, "wb") as handle:
        handle.write(descriptors)
    out = os.path.join(work_dir, "generated")
    os.makedirs(out)
    subprocess.run([protoc_python, "-m", "grpc_tools.protoc", f"--descriptor_set_in={set_path}",
                    f"--python_out={out}", *proto_names], check=True)
    return out


def write_project(work_dir, version, files, generated, protobuf_version):
    """A source tree of the rebuilt p4runtime distribution; returns its directory."""
    project = os.path.join(work_dir, "project")
    for relative, path in files.items():
        target = os.path.join(project, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        source = os.path.join(generated, relative) if relative.endswith("_pb2.py") else path
        if not os.path.exists(source):
            raise RuntimeError(f"protoc did not generate {relative}")
        shutil.copyfile(source, target)
    major = int(protobuf_version.split(".")[0])
    local = "protobuf" + protobuf_version
    with open(os.path.join(project, "setup.py"), "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(f"""\
            from setuptools import find_namespace_packages, setup

            setup(
                name="p4runtime",
                version="{version}+{local}",
                description="P4Runtime Python bindings regenerated for protobuf {protobuf_version} "
                            "by the fabric testbed's scripts/p4runtime_bindings.py",
                packages=find_namespace_packages(include=["p4", "p4.*"]),
                install_requires=["protobuf>={protobuf_version},<{major + 1}", "grpcio",
                                  "googleapis-common-protos"],
            )
            """))
    return project


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="regenerate even if the modules load already")
    parser.add_argument("--work-dir", help="keep the intermediate files here (default: a temporary directory)")
    args = parser.parse_args(argv)

    backend = backend_in_use(sys.executable)
    if backend in COMPILED_BACKENDS and not args.force:
        print(f"p4runtime bindings: already load with protobuf's {backend} backend")
        return 0
    import google.protobuf

    protobuf_version = google.protobuf.__version__
    version, files = package_files()
    pb2_files = sorted(path for relative, path in files.items() if relative.endswith("_pb2.py"))
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="p4runtime-bindings-")
    try:
        descriptors, proto_names = descriptor_set(pb2_files)
        protoc_python = protoc_environment(work_dir, protobuf_version)
        generated = generate(work_dir, protoc_python, descriptors, proto_names)
        project = write_project(work_dir, version, files, generated, protobuf_version)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--force-reinstall", project], check=True)
    finally:
        if not args.work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    backend = backend_in_use(sys.executable)
    if backend not in COMPILED_BACKENDS:
        print(f"p4runtime bindings: still not loadable with a compiled protobuf backend (got {backend})",
              file=sys.stderr)
        return 1
    print(f"p4runtime bindings: p4runtime {version} regenerated for protobuf {protobuf_version} "
          f"({backend} backend)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
