"""Load a P4_16 v1model program for the embedded target.

``load_program(path)`` reads the file and everything it includes, parses,
checks and compiles it once; the result carries the control-plane view
(:class:`testbed.p4.program.ProgramInfo`) and the compiled pipeline the
:class:`testbed.p4.v1model.device.Device` runs.  Any problem raises
:class:`testbed.errors.P4LoadError` with the original file and line.
"""
import contextlib
import os
import sys
import threading

from testbed.errors import P4LoadError
from testbed.p4.compiler.codegen import compile_pipeline
from testbed.p4.compiler.info import build_info
from testbed.p4.frontend.blocks import build_pipeline, collect_digest_types, convert_entries
from testbed.p4.frontend.checker import ProgramModel
from testbed.p4.frontend.parser import parse_source
from testbed.p4.frontend.preprocessor import Preprocessor, SourceProvider


class LoadedProgram:
    """A checked and compiled P4 program.

    Attributes:
        info: ProgramInfo (P4Info names).
        sources: dict {relative file name: text} of the main file and its project includes.
        main_file: the key of the main file in ``sources``.
        model: the checked ProgramModel (frontend).
        pipeline: the instantiated parser/controls (frontend).
        compiled: the generated Python pipeline (:class:`testbed.p4.compiler.codegen.CompiledPipeline`).
    """

    def __init__(self, info, sources, main_file, model, pipeline, compiled):
        self.info = info
        self.sources = sources
        self.main_file = main_file
        self.model = model
        self.pipeline = pipeline
        self.compiled = compiled

    @property
    def python_source(self):
        """The generated Python source (for debugging)."""
        return self.compiled.source if self.compiled is not None else None


def load_program(path, include_dirs=None, defines=None):
    """Load, check and compile the P4 program at ``path``.

    Args:
        path: the main .p4 file.
        include_dirs: extra directories for ``#include <...>``.
        defines: optional dict of predefined macros.

    Returns:
        LoadedProgram.

    Raises:
        P4LoadError: with file:line of the first problem.
    """
    if not os.path.isfile(path):
        raise P4LoadError(f"no such P4 file: {path}", path, None)
    base_dir = os.path.dirname(os.path.abspath(path))
    main_key = os.path.basename(path)
    provider = SourceProvider(None, base_dir, include_dirs, display_dir=os.path.dirname(path))
    return _load(provider, main_key, defines)


def load_program_from_sources(main_file, sources, include_dirs=None, defines=None):
    """Load a program from a dict {relative name: text} (as ``LoadedProgram.sources`` gives it).

    Raises:
        P4LoadError: with file:line of the first problem.
    """
    if main_file not in sources:
        raise P4LoadError(f"main file {main_file!r} is not among the sources ({', '.join(sorted(sources))})",
                          main_file, None)
    provider = SourceProvider(dict(sources), ".", include_dirs, display_dir="")
    return _load(provider, main_file, defines)


_RECURSION_LIMIT = 6000  # frames; the syntax tree is at most MAX_SYNTAX_DEPTH deep (a few frames per level)
_recursion_lock = threading.Lock()
_recursion_users = [0, None]  # loads running, the limit before the first of them


@contextlib.contextmanager
def _deep_recursion():
    """Raise the interpreter's recursion limit while a program loads (shared by concurrent loads)."""
    with _recursion_lock:
        if _recursion_users[0] == 0:
            _recursion_users[1] = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_recursion_users[1], _RECURSION_LIMIT))
        _recursion_users[0] += 1
    try:
        yield
    finally:
        with _recursion_lock:
            _recursion_users[0] -= 1
            if _recursion_users[0] == 0:
                sys.setrecursionlimit(_recursion_users[1])


def _load(provider, main_key, defines):
    progress = {"lines": None, "model": None}
    try:
        with _deep_recursion():
            return _stages(provider, main_key, defines, progress)
    except P4LoadError:
        raise
    except Exception as error:  # noqa: BLE001 - every failure of the loader becomes a located P4LoadError
        raise _internal_error(error, provider, main_key, progress) from None


def _stages(provider, main_key, defines, progress):
    preprocessor = Preprocessor(provider, defines)
    lines = preprocessor.run(main_key)
    progress["lines"] = lines
    ast = parse_source(lines)
    name = os.path.splitext(os.path.basename(main_key))[0]
    model = ProgramModel.__new__(ProgramModel)
    progress["model"] = model
    model.__init__(ast, lines, name)
    pipeline = build_pipeline(model)
    collect_digest_types(model, pipeline)
    entries = {table.name: convert_entries(model, table) for table in pipeline.tables.values()}
    info = build_info(model, pipeline, entries)
    compiled = compile_pipeline(model, pipeline, info)
    return LoadedProgram(info, dict(provider.used), main_key, model, pipeline, compiled)


def _internal_error(error, provider, main_key, progress):
    """A P4LoadError for an unexpected failure, at the construct that was being processed."""
    model = progress["model"]
    lines = progress["lines"]
    filename, line = provider.display_name(main_key), None
    if model is not None and getattr(model, "current", None) is not None:
        filename, line = model.location(model.current)
    elif lines:
        filename, line = lines[0].filename, lines[0].line
    if isinstance(error, RecursionError):
        message = "unsupported construct: the program is nested too deeply for the embedded target"
    elif isinstance(error, MemoryError):
        message = "unsupported construct: the program needs more memory than the embedded target allows"
    else:
        message = (f"internal error of the embedded target while compiling this construct "
                   f"({type(error).__name__}: {str(error)[:200]})")
    return P4LoadError(message, filename, line)
