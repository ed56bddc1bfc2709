"""A C-like preprocessor for P4 sources, small but exact about locations.

Supports ``#include "file"`` (relative to the including file), ``#include <core.p4>`` /
``<v1model.p4>`` (from the target's own include directory, or extra include directories),
object-like and function-like ``#define`` (with ``#`` and ``##``), ``#undef``,
``#ifdef``/``#ifndef``/``#if``/``#elif``/``#else``/``#endif`` with the C preprocessor's
integer conditions (:mod:`testbed.p4.frontend.macros`), ``#error``, ``#warning``, ``#pragma``
and ``#line``.  Macros are expanded line by line as they are defined at that point; a
function-like macro call may span lines.  The result is a list of :class:`SourceLine`
(text with comments removed and macros expanded, plus the file and 1-based line it came from).

Includes are confined: a program given as a dict of sources (a P4Runtime device config)
reads only those sources and the target's include directory, never another file of the
machine; ``<...>`` names never leave their include directory.  Every problem is a
:class:`testbed.errors.P4LoadError` with file and line.
"""
import os
import re
from dataclasses import dataclass

from testbed.errors import P4LoadError
from testbed.p4.frontend.macros import Macro, MacroError, MacroExpander, evaluate_condition

TARGET_INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
MAX_INCLUDE_DEPTH = 64
MAX_SOURCE_BYTES = 16 * 1024 * 1024  # one source file
MAX_PROGRAM_CHARS = 512 << 10  # the preprocessed program (includes and macros expanded); p4src/f10.p4 has 27 KB

_DIRECTIVE = re.compile(r"^\s*#\s*(\w*)\s*(.*)$")
_DEFINE = re.compile(r"([A-Za-z_]\w*)(\(([^)]*)\))?")
_IDENT = re.compile(r"[A-Za-z_]\w*$")

__all__ = ["Macro", "Preprocessor", "SourceLine", "SourceProvider", "TARGET_INCLUDE_DIR", "decode_source",
           "strip_comments"]


@dataclass
class SourceLine:
    """One preprocessed line: its text (no comments) and where it came from."""

    text: str
    filename: str
    line: int


def decode_source(data, display):
    """The text of a source file's bytes; non-UTF-8 bytes are a P4LoadError at their line.

    Raises:
        P4LoadError: the bytes are not UTF-8 text, or the file is larger than the bound.
    """
    if len(data) > MAX_SOURCE_BYTES:
        raise P4LoadError(f"source file larger than {MAX_SOURCE_BYTES} bytes", display, None)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise P4LoadError(f"the file is not UTF-8 text (byte 0x{data[error.start]:02x})", display, line,
                          column) from None


def _read_file(path, display):
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as error:
        raise P4LoadError(f"cannot read {display}: {error.strerror}", display, None) from None
    return decode_source(data, display)


class SourceProvider:
    """Finds and reads included files either from disk or from a dict of sources.

    Args:
        sources: optional dict {relative name: text}; when given, quoted
            includes are looked up there (relative to the main file's
            directory) instead of on disk, and nothing else of the machine is read.
        base_dir: directory the relative names are relative to (disk mode).
        include_dirs: extra directories searched for ``<...>`` includes.
        display_dir: prefix used to show file names in errors.
    """

    def __init__(self, sources=None, base_dir=".", include_dirs=None, display_dir=""):
        self.sources = sources
        self.base_dir = base_dir
        self.include_dirs = list(include_dirs or [])
        self.display_dir = display_dir
        self.used = {}

    def display_name(self, key):
        """Return the name of a project file as errors show it."""
        if key.startswith("<"):
            return key
        return os.path.normpath(os.path.join(self.display_dir, key)) if self.display_dir else key

    def read_project(self, key):
        """Return the text of project file ``key`` (relative name); record it as used.

        Raises:
            P4LoadError: a source that is not text (not a str, or not UTF-8 on disk).
        """
        if self.sources is not None:
            if key not in self.sources:
                return None
            text = self.sources[key]
            if isinstance(text, (bytes, bytearray)):
                text = decode_source(bytes(text), self.display_name(key))
            elif not isinstance(text, str):
                raise P4LoadError(f"source {key!r} is not text", self.display_name(key), None)
        else:
            path = os.path.join(self.base_dir, key)
            if not os.path.isfile(path):
                return None
            text = _read_file(path, self.display_name(key))
        self.used[key] = text
        return text

    def read_system(self, name):
        """Return (display name, text) of a ``<name>`` include, or None if not found.

        ``name`` must stay inside the include directory: absolute names and ``..`` that
        leave it are not looked up (a device config cannot read files of the machine).
        """
        if os.path.isabs(name) or "\0" in name:
            return None
        for directory in [TARGET_INCLUDE_DIR] + self.include_dirs:
            root = os.path.realpath(directory)
            path = os.path.realpath(os.path.join(root, name))
            if not path.startswith(root + os.sep):
                continue
            if os.path.isfile(path):
                return f"<{name}>", _read_file(path, f"<{name}>")
        return None


def strip_comments(text, filename):
    """Remove ``//`` and ``/* */`` comments, keeping newlines so line numbers stay right.

    Raises:
        P4LoadError: an unterminated block comment or string.
    """
    out = []
    i = 0
    n = len(text)
    line = 1
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    j += 1
                if j < n and text[j] == "\n":
                    raise P4LoadError("unterminated string literal", filename, line)
                j += 1
            if j >= n:
                raise P4LoadError("unterminated string literal", filename, line)
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise P4LoadError("unterminated /* comment", filename, line)
            comment = text[i:j + 2]
            newlines = comment.count("\n")
            line += newlines
            out.append(" " + "\n" * newlines)
            i = j + 2
        else:
            if ch == "\n":
                line += 1
            out.append(ch)
            i += 1
    return "".join(out)


class Preprocessor:
    """Runs the directives of a main file and everything it includes.

    Args:
        provider: a :class:`SourceProvider`.
        defines: optional dict of predefined macros {name: value text}.

    Raises:
        P4LoadError: a predefined macro name that is not an identifier.
    """

    def __init__(self, provider, defines=None):
        self.provider = provider
        self.macros = {}
        for name, value in (defines or {}).items():
            if not isinstance(name, str) or not _IDENT.match(name):
                raise P4LoadError(f"macro name {name!r} given to define is not an identifier", "<command line>", 0)
            self.macros[name] = Macro(name, str(value), "<command line>", 0)
        self.lines = []
        self._output_chars = 0
        self._include_stack = []

    def run(self, main_key):
        """Preprocess project file ``main_key``; return the list of :class:`SourceLine`.

        Raises:
            P4LoadError: missing file, bad directive, unbalanced conditionals.
        """
        text = self.provider.read_project(main_key)
        if text is None:
            raise P4LoadError(f"cannot read P4 file {main_key!r}", self.provider.display_name(main_key), None)
        self._process(text, main_key, self.provider.display_name(main_key))
        return self.lines

    def _process(self, text, key, display):
        self._include_stack.append(display)
        raw_lines = strip_comments(text, display).split("\n")
        # (active, seen_true_branch, parent_active) per open conditional
        conditions = []
        active = True
        index = 0
        while index < len(raw_lines):
            lineno = index + 1
            line = raw_lines[index]
            index += 1
            while line.endswith("\\") and index < len(raw_lines):
                line = line[:-1] + " " + raw_lines[index]
                index += 1
                self.lines.append(SourceLine("", display, index))
            match = _DIRECTIVE.match(line)
            if not match:
                if active:
                    line, index = self._expand(line, raw_lines, index, display, lineno)
                    self._output_chars += len(line)
                    if self._output_chars > MAX_PROGRAM_CHARS:  # bounds the work of every later stage
                        raise P4LoadError(f"unsupported construct: the preprocessed program is larger than "
                                          f"{MAX_PROGRAM_CHARS} characters (MAX_PROGRAM_CHARS)", display, lineno)
                self.lines.append(SourceLine(line if active else "", display, lineno))
                continue
            self.lines.append(SourceLine("", display, lineno))
            directive, rest = match.group(1), match.group(2).strip()
            if directive in ("ifdef", "ifndef"):
                name = rest.split()[0] if rest else ""
                if not name:
                    raise P4LoadError(f"#{directive} needs a name", display, lineno)
                value = (name in self.macros) == (directive == "ifdef")
                conditions.append([active and value, value, active])
                active = active and value
            elif directive == "if":
                value = self._evaluate(rest, display, lineno) if active else False
                conditions.append([active and value, value, active])
                active = active and value
            elif directive == "elif":
                if not conditions:
                    raise P4LoadError("#elif without #if", display, lineno)
                state = conditions[-1]
                if state[1] or not state[2]:
                    state[0] = False
                else:
                    value = self._evaluate(rest, display, lineno)
                    state[0] = value
                    state[1] = value
                active = state[0]
            elif directive == "else":
                if not conditions:
                    raise P4LoadError("#else without #if", display, lineno)
                state = conditions[-1]
                state[0] = state[2] and not state[1]
                state[1] = True
                active = state[0]
            elif directive == "endif":
                if not conditions:
                    raise P4LoadError("#endif without #if", display, lineno)
                conditions.pop()
                active = conditions[-1][0] if conditions else True
            elif not active:
                continue
            elif directive == "include":
                self._include(rest, key, display, lineno)
            elif directive == "define":
                self._define(rest, display, lineno)
            elif directive == "undef":
                self.macros.pop(rest.split()[0] if rest else "", None)
            elif directive == "error":
                raise P4LoadError(f"#error {rest[:200]}", display, lineno)
            elif directive in ("warning", "pragma", "line", ""):
                continue
            else:
                raise P4LoadError(f"unsupported preprocessor directive #{directive[:40]}", display, lineno)
        if conditions:
            raise P4LoadError("unterminated #if/#ifdef (missing #endif)", display, len(raw_lines))
        self._include_stack.pop()

    def _expand(self, line, raw_lines, index, display, lineno):
        """Expand the macros of a source line; a macro call may continue on the following lines.

        Returns:
            (expanded text, index of the next raw line).
        """
        if not self.macros:
            return line, index
        expander = MacroExpander(self.macros)
        try:
            while expander.open_invocation(line) and index < len(raw_lines) and \
                    not _DIRECTIVE.match(raw_lines[index]):
                line = line + " " + raw_lines[index]
                index += 1
                self.lines.append(SourceLine("", display, index))
            return expander.expand_text(line), index
        except MacroError as error:
            raise P4LoadError(str(error), display, lineno) from None

    def _include(self, rest, key, display, lineno):
        if len(self._include_stack) >= MAX_INCLUDE_DEPTH:
            raise P4LoadError(f"#include nested more than {MAX_INCLUDE_DEPTH} files deep", display, lineno)
        if rest.startswith('"') and rest.count('"') >= 2:
            name = rest[1:rest.index('"', 1)]
            include_key = os.path.normpath(os.path.join(os.path.dirname(key), name))
            if not key.startswith("<"):
                text = self.provider.read_project(include_key)
                if text is not None:
                    self._check_recursion(self.provider.display_name(include_key), display, lineno)
                    self._process(text, include_key, self.provider.display_name(include_key))
                    return
            found = self.provider.read_system(name)
            if found is None:
                raise P4LoadError(f'#include "{name[:200]}": file not found', display, lineno)
            self._check_recursion(found[0], display, lineno)
            self._process(found[1], found[0], found[0])
        elif rest.startswith("<") and ">" in rest:
            name = rest[1:rest.index(">")]
            found = self.provider.read_system(name)
            if found is None:
                raise P4LoadError(f"#include <{name[:200]}>: not found in the target's include directory", display,
                                  lineno)
            self._check_recursion(found[0], display, lineno)
            self._process(found[1], found[0], found[0])
        else:
            raise P4LoadError(f"malformed #include {rest[:200]}", display, lineno)

    def _check_recursion(self, included, display, lineno):
        if included in self._include_stack:
            raise P4LoadError(f"recursive #include of {included}", display, lineno)

    def _define(self, rest, display, lineno):
        match = _DEFINE.match(rest)
        if not match:
            raise P4LoadError(f"malformed #define {rest[:200]}", display, lineno)
        name = match.group(1)
        params = None
        variadic = False
        if match.group(2):
            params = [p.strip() for p in match.group(3).split(",")] if match.group(3).strip() else []
            if params and params[-1] == "...":
                params[-1] = "__VA_ARGS__"
                variadic = True
            for param in params:
                if not _IDENT.match(param):
                    raise P4LoadError(f"#define {name}: parameter {param[:40]!r} is not a name", display, lineno)
            if len(set(params)) != len(params):
                raise P4LoadError(f"#define {name}: a parameter name is repeated", display, lineno)
            body = rest[match.end():]
        else:
            body = rest[match.end():]
        self.macros[name] = Macro(name, body.strip(), display, lineno, params, variadic)

    def _evaluate(self, expression, display, lineno):
        """Evaluate an #if condition with the C preprocessor's integer semantics."""
        try:
            return evaluate_condition(expression, self.macros)
        except MacroError as error:
            raise P4LoadError(f"#if condition not understood: {error}", display, lineno) from None
