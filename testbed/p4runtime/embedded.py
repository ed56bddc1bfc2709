"""The embedded target's pipeline config of a program: its P4Info and device config.

Controllers, tests and the client's ``set_pipeline`` program many switches with the
same program, so a program given by path is loaded once per version of its files.
"""
import os
import threading

from testbed.p4.device_config import device_config_for
from testbed.p4runtime.p4info import build_p4info

_CACHE = {}  # absolute path -> ([(file, mtime)], (P4Info, device config))
_CACHE_LOCK = threading.Lock()


def embedded_pipeline(program):
    """(P4Info, device config bytes) of a program for the embedded target.

    Args:
        program: path of a .p4 file, or a loaded program (``testbed.p4.loader``).

    Returns:
        tuple: ``(p4.config.v1.p4info_pb2.P4Info, bytes)``; for a path, the same objects
        while neither the program nor a file it includes changes (callers must not
        modify them).

    Raises:
        P4LoadError: the program does not load (file:line).
    """
    if not isinstance(program, str):
        return build_p4info(program.info), device_config_for(program)
    # the compiler is imported only when a program is built: a BMv2 client never needs it
    from testbed.p4.loader import load_program

    path = os.path.abspath(program)
    with _CACHE_LOCK:
        cached = _CACHE.get(path)
        if cached is not None:
            stamps, result = cached
            if all(os.path.exists(f) and os.path.getmtime(f) == t for f, t in stamps):
                return result
        loaded = load_program(program)
        base = os.path.dirname(path)
        files = [os.path.join(base, name) for name in loaded.sources]
        stamps = [(f, os.path.getmtime(f)) for f in files if os.path.exists(f)] or [(path, os.path.getmtime(path))]
        result = (build_p4info(loaded.info), device_config_for(loaded))
        _CACHE[path] = (stamps, result)
        return result
