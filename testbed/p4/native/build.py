"""Compile a program's generated C with the system C compiler and load it through cffi.

The shared object of a program is cached by the hash of everything that goes into it
(generated source, runtime, headers, compiler flags, compiler version) in
``$TESTBED_CACHE_DIR/native`` (default ``~/.cache/testbed/native``), like the p4c cache;
when that folder cannot be written the build goes to a temporary folder named like the
testbed's other temporary files, which ``testbed cleanup`` removes once its process is gone.

``TESTBED_NATIVE_SANITIZE=1`` builds with AddressSanitizer and UndefinedBehaviorSanitizer
(the process must then preload libasan: :func:`sanitizer_preload`).
"""
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

from testbed.errors import NativeBackendError
from testbed.p4.native.cgen import generate_c

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE_DIR = os.path.join(HERE, "include")
RUNTIME_SOURCE = os.path.join(HERE, "csrc", "tb_runtime.c")
DSF_SOURCE = os.path.join(HERE, "csrc", "tb_dsf.c")  # the DSF traffic manager
DSF_HEADER = os.path.join(INCLUDE_DIR, "tb_dsf.h")
SANITIZE_ENV = "TESTBED_NATIVE_SANITIZE"
COMPILER_ENV = "TESTBED_CC"

OPTIMIZE_FLAGS = ("-O2", "-fno-strict-aliasing")
SANITIZE_FLAGS = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                  "-fno-sanitize-recover=undefined")

CDEF = """
typedef struct tb_std_meta {
    uint32_t ingress_port; uint32_t egress_spec; uint32_t egress_port; uint32_t instance_type;
    uint32_t packet_length; uint32_t enq_timestamp; uint32_t enq_qdepth; uint32_t deq_timedelta;
    uint32_t deq_qdepth; uint64_t ingress_global_timestamp; uint64_t egress_global_timestamp;
    uint32_t mcast_grp; uint32_t egress_rid; uint32_t checksum_error; uint32_t parser_error; uint32_t priority;
} tb_std_meta_t;
typedef struct tb_request {
    uint32_t egress_spec; uint32_t mcast_grp; uint32_t priority; int32_t clone_session;
    int32_t clone_field_list; int32_t resubmit_field_list; int32_t recirculate_field_list;
    int32_t truncate_length;
} tb_request_t;
typedef struct tb_pipeline tb_pipeline_t;
typedef struct tb_packet tb_packet_t;
uint32_t tb_abi_version(void);
tb_pipeline_t *tb_pipeline_new(void);
void tb_pipeline_free(tb_pipeline_t *pl);
size_t tb_packet_size(void);
void tb_pipeline_lock(tb_pipeline_t *pl);
void tb_pipeline_unlock(tb_pipeline_t *pl);
void tb_packet_reset(tb_pipeline_t *pl, tb_packet_t *pkt);
tb_std_meta_t *tb_packet_std(tb_packet_t *pkt);
const char *tb_packet_failure(const tb_packet_t *pkt);
int tb_packet_extern_requests(const tb_packet_t *pkt, int32_t *ids, uint64_t *args, uint32_t max);
uint32_t tb_packet_payload_offset(const tb_packet_t *pkt);
int tb_packet_events(const tb_packet_t *pkt, int32_t *sites, uint64_t *values, uint32_t max);
void tb_packet_copy(tb_packet_t *dst, const tb_packet_t *src);
void tb_packet_copy_headers(tb_packet_t *dst, const tb_packet_t *src);
void tb_preserve_fields(int index, const tb_packet_t *src, tb_packet_t *dst);
int tb_parse(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len);
int tb_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req);
int tb_egress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req);
int tb_deparse(tb_pipeline_t *pl, tb_packet_t *pkt, uint8_t *out, uint32_t cap);
int tb_process(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len, uint32_t port,
               uint64_t now_ns, uint64_t timestamp_us, uint8_t *out, uint32_t cap, int32_t *out_len,
               tb_request_t *req);
int tb_run_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len, uint32_t port,
                   uint32_t instance_type, uint64_t now_ns, uint64_t timestamp_us, const tb_packet_t *preserve_from,
                   int preserve_index, tb_request_t *req);
int tb_table_load(tb_pipeline_t *pl, uint32_t table, uint32_t n, const int32_t *prio, const int32_t *kind,
                  const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                  const uint64_t *vals, const uint64_t *masks, const uint64_t *args, const uint8_t *range_key);
int tb_table_append(tb_pipeline_t *pl, uint32_t table, uint32_t n, const int32_t *prio, const int32_t *kind,
                    const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                    const uint64_t *vals, const uint64_t *masks, const uint64_t *args);
int tb_table_remove(tb_pipeline_t *pl, uint32_t table, uint32_t position);
int tb_table_update(tb_pipeline_t *pl, uint32_t table, uint32_t position, int32_t kind, int32_t action, uint64_t ref,
                    const uint64_t *args);
void tb_table_set_default(tb_pipeline_t *pl, uint32_t table, int32_t action, const uint64_t *args);
int tb_profile_load(tb_pipeline_t *pl, uint32_t profile, uint32_t nmembers, const uint64_t *member_ids,
                    const int32_t *member_actions, const uint64_t *member_args, uint32_t nargs,
                    uint32_t ngroups, const uint64_t *group_ids, const uint32_t *group_sizes,
                    const uint64_t *selection_ids);
uint64_t *tb_register_cells(tb_pipeline_t *pl, uint32_t index);
void tb_random_seed(tb_pipeline_t *pl, const uint32_t *key, uint32_t n);
void tb_meter_set(tb_pipeline_t *pl, uint32_t meter, uint64_t index, int configured, uint64_t cir, uint64_t cburst,
                  uint64_t pir, uint64_t pburst);
void tb_table_hits(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *hits);
void tb_table_meters(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *cells, int write);
void tb_table_counts(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *packets, uint64_t *bytes,
                     int write);
uint64_t *tb_counter_cells(tb_pipeline_t *pl, uint32_t index, int bytes);
"""

#: the C type strings the pipeline's Python side hands to its ffi (:mod:`testbed.p4.native.device`,
#: :mod:`.state`, :mod:`.dsf`); parsed when the library is loaded (:func:`preparse_types`)
PIPELINE_TYPES = ("char[]", "uint8_t[]", "int32_t[]", "uint32_t[]", "uint64_t[]", "int32_t *", "uint32_t *",
                  "int64_t *", "tb_packet_t *", "tb_request_t *")


def preparse_types(ffi, cdecls):
    """Have ``ffi`` parse the C type strings ``cdecls`` now.

    cffi parses a type string with pycparser the first time it meets it, and the parse writes to the
    parser's tables (their reference counts).  Parsed where a library is loaded, which for switches is
    their fork server, every switch finds them cached instead of copying those pages: 0.6 MiB of each
    native switch on a k=4 FatTree.

    Args:
        ffi: a ``cffi.FFI`` holding the declarations the strings name.
        cdecls: type strings such as ``"uint64_t[]"``.

    Raises:
        cffi.CDefError: a string that is not a type of ``ffi``.
    """
    for cdecl in cdecls:
        ffi.typeof(cdecl)


def header_cdef(path):
    """The declarations of a C header that cffi reads: its text between ``/* cdef-begin */`` and
    ``/* cdef-end */``, comments removed.

    Args:
        path: the header file.

    Returns:
        str: declarations for ``cffi.FFI.cdef``.

    Raises:
        OSError: the file cannot be read; ValueError: it has no cdef-begin / cdef-end markers.
    """
    with open(path) as handle:
        text = handle.read()
    begin, end = text.find("/* cdef-begin */"), text.find("/* cdef-end */")
    if begin < 0 or end < begin:
        raise ValueError(f"{path}: no /* cdef-begin */ ... /* cdef-end */ part")
    return re.sub(r"/\*.*?\*/", "", text[begin:end], flags=re.S)


def compiler():
    """The C compiler command (``$TESTBED_CC`` or gcc / cc on PATH), or None when there is none."""
    named = os.environ.get(COMPILER_ENV)
    if named:
        return shutil.which(named)
    return shutil.which("gcc") or shutil.which("cc")


def unavailable():
    """Why this machine cannot build native pipelines (no C compiler, no cffi), or None when it can.

    >>> unavailable() in (None, "no C compiler (gcc) found; install gcc (scripts/install.sh)",
    ...                   "the cffi package is missing (pip install cffi)")
    True
    """
    if compiler() is None:
        return "no C compiler (gcc) found; install gcc (scripts/install.sh)"
    try:
        import cffi  # noqa: F401 - only whether it imports
    except ImportError:
        return "the cffi package is missing (pip install cffi)"
    return None


def sanitizing():
    """True when ``TESTBED_NATIVE_SANITIZE`` asks for sanitizer builds."""
    return os.environ.get(SANITIZE_ENV, "") not in ("", "0")


def sanitizer_preload():
    """The libasan path a process loading sanitized pipelines must preload (LD_PRELOAD), or None."""
    cc = compiler()
    if cc is None:
        return None
    path = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True,
                          check=False).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


@functools.lru_cache(maxsize=4)
def _compiler_version(cc):
    return subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout


def cache_dir():
    """The per-user cache folder of built pipelines (created), or a temporary one when it cannot be written."""
    base = os.environ.get("TESTBED_CACHE_DIR", os.path.expanduser("~/.cache/testbed"))
    folder = os.path.join(base, "native")
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    return _temp_cache()


@functools.lru_cache(maxsize=1)
def _temp_cache():
    return tempfile.mkdtemp(prefix=f"testbed-native-{os.getpid()}-")


def _runtime_text():
    parts = []
    for path in [RUNTIME_SOURCE, DSF_SOURCE] + sorted(os.path.join(INCLUDE_DIR, n) for n in os.listdir(INCLUDE_DIR)):
        with open(path, encoding="utf-8") as handle:
            parts.append(handle.read())
    return "\n".join(parts)


class NativeLibrary:
    """A built pipeline: the cffi ``ffi`` and ``lib`` and the state layout.

    Attributes:
        ffi: the cffi FFI.
        lib: the loaded shared object.
        layout: the generator's layout dict (tables, profiles, registers, counters, actions).
        path: the shared object's path.
        packet_size: bytes of one ``tb_packet_t``.
    """

    def __init__(self, ffi, lib, layout, path):
        self.ffi = ffi
        self.lib = lib
        self.layout = layout
        self.path = path
        self.packet_size = lib.tb_packet_size()


_LOADED = {}


def build(program):
    """Generate, compile (or take from the cache) and load the native pipeline of ``program``.

    Args:
        program: a :class:`testbed.p4.loader.LoadedProgram`.

    Returns:
        NativeLibrary.

    Raises:
        NativeBackendError: a construct the C backend cannot compile (file:line), no C
            compiler, cffi missing, or a failed build (with the compiler's message).
    """
    cached = getattr(program, "_native_library", None)
    if cached is not None and cached.sanitized == sanitizing():
        return cached.library
    source, layout = generate_c(program)
    missing = unavailable()
    if missing:
        raise NativeBackendError(f"native backend: {missing}")
    import cffi

    cc = compiler()
    flags = list(SANITIZE_FLAGS if sanitizing() else OPTIMIZE_FLAGS)
    digest = hashlib.sha256("\0".join([source, _runtime_text(), " ".join(flags), _compiler_version(cc),
                                       cffi.__version__]).encode()).hexdigest()[:24]
    folder = os.path.join(cache_dir(), digest)
    library_path = os.path.join(folder, "pipeline.so")
    if digest in _LOADED:
        library = _LOADED[digest]
    else:
        if not os.path.exists(library_path):
            _compile(cc, flags, source, layout, folder, library_path)
        ffi = cffi.FFI()
        ffi.cdef(CDEF + header_cdef(DSF_HEADER))
        try:
            lib = ffi.dlopen(library_path)
        except OSError as error:
            raise NativeBackendError(f"native backend: cannot load {library_path}: {error}") from None
        if lib.tb_abi_version() != 1:
            raise NativeBackendError(f"native backend: {library_path} has ABI {lib.tb_abi_version()}, expected 1")
        preparse_types(ffi, PIPELINE_TYPES)
        library = NativeLibrary(ffi, lib, layout, library_path)
        _LOADED[digest] = library
    program._native_library = _Cached(library, sanitizing())
    return library


class _Cached:
    __slots__ = ("library", "sanitized")

    def __init__(self, library, sanitized):
        self.library = library
        self.sanitized = sanitized


def _compile(cc, flags, source, layout, folder, library_path):
    os.makedirs(folder, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".build-", dir=folder)
    try:
        c_path = os.path.join(work, "pipeline.c")
        with open(c_path, "w", encoding="utf-8") as handle:
            handle.write(source)
        out = os.path.join(work, "pipeline.so")
        command = [cc, *flags, "-std=gnu11", "-fPIC", "-shared", "-fvisibility=default", "-I", INCLUDE_DIR,
                   c_path, RUNTIME_SOURCE, DSF_SOURCE, "-o", out, "-lpthread", "-lm"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise NativeBackendError("native backend: the C compiler failed on the generated pipeline: "
                                     + (result.stderr.strip()[-2000:] or f"exit status {result.returncode}"))
        with open(os.path.join(work, "layout.json"), "w", encoding="utf-8") as handle:
            json.dump(layout, handle)
        shutil.copy(c_path, os.path.join(folder, "pipeline.c"))
        os.replace(out, library_path)  # atomic: a concurrent build of the same program is harmless
    finally:
        shutil.rmtree(work, ignore_errors=True)
