"""A C-like preprocessor for P4 sources, small but exact about locations.

Supports ``#include "file"`` (relative to the including file), ``#include
<core.p4>`` / ``<v1model.p4>`` (from the target's own include directory, or
extra include directories), object-like ``#define NAME value`` and ``#undef``,
``#ifdef``/``#ifndef``/``#if``/``#elif``/``#else``/``#endif`` with simple
integer conditions (``defined(X)``, comparisons, ``&&``, ``||``, ``!``),
``#error`` and ``#warning``.  Function-like macros are rejected with the
file and line.  The result is a list of :class:`SourceLine` (text with
comments removed, plus the file and 1-based line it came from) and the table
of macros, which the lexer substitutes token by token.
"""
import os
import re
from dataclasses import dataclass

from testbed.errors import P4LoadError

TARGET_INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class SourceLine:
    """One preprocessed line: its text (no comments) and where it came from."""

    text: str
    filename: str
    line: int


@dataclass
class Macro:
    """An object-like macro: its replacement text and where it was defined."""

    name: str
    body: str
    filename: str
    line: int


class SourceProvider:
    """Finds and reads included files either from disk or from a dict of sources.

    Args:
        sources: optional dict {relative name: text}; when given, quoted
            includes are looked up there (relative to the main file's
            directory) instead of on disk.
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
        """Return the text of project file ``key`` (relative name); record it as used."""
        if self.sources is not None:
            if key not in self.sources:
                return None
            text = self.sources[key]
        else:
            path = os.path.join(self.base_dir, key)
            if not os.path.isfile(path):
                return None
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        self.used[key] = text
        return text

    def read_system(self, name):
        """Return (display name, text) of a ``<name>`` include, or None if not found."""
        for directory in [TARGET_INCLUDE_DIR] + self.include_dirs:
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as handle:
                    return f"<{name}>", handle.read()
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
    """

    def __init__(self, provider, defines=None):
        self.provider = provider
        self.macros = {}
        for name, value in (defines or {}).items():
            self.macros[name] = Macro(name, str(value), "<command line>", 0)
        self.lines = []
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
        if display in self._include_stack:
            raise P4LoadError(f"recursive #include of {display}", display, None)
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
                self.lines.append(SourceLine("", display, index)) if active else None
            match = _DIRECTIVE.match(line)
            if not match:
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
                raise P4LoadError(f"#error {rest}", display, lineno)
            elif directive in ("warning", "pragma", "line"):
                continue
            else:
                raise P4LoadError(f"unsupported preprocessor directive #{directive}", display, lineno)
        if conditions:
            raise P4LoadError("unterminated #if/#ifdef (missing #endif)", display, len(raw_lines))
        self._include_stack.pop()

    def _include(self, rest, key, display, lineno):
        if rest.startswith('"') and rest.count('"') >= 2:
            name = rest[1:rest.index('"', 1)]
            include_key = os.path.normpath(os.path.join(os.path.dirname(key), name))
            text = self.provider.read_project(include_key)
            if text is not None:
                self._process(text, include_key, self.provider.display_name(include_key))
                return
            found = self.provider.read_system(name)
            if found is None:
                raise P4LoadError(f'#include "{name}": file not found', display, lineno)
            self._process(found[1], found[0], found[0])
        elif rest.startswith("<") and ">" in rest:
            name = rest[1:rest.index(">")]
            found = self.provider.read_system(name)
            if found is None:
                raise P4LoadError(f"#include <{name}>: not found in the target's include directory", display, lineno)
            self._process(found[1], found[0], found[0])
        else:
            raise P4LoadError(f"malformed #include {rest}", display, lineno)

    def _define(self, rest, display, lineno):
        match = _IDENT.match(rest)
        if not match:
            raise P4LoadError(f"malformed #define {rest}", display, lineno)
        name = match.group(0)
        after = rest[match.end():]
        if after.startswith("("):
            raise P4LoadError(f"function-like macro {name}(...) is not supported", display, lineno)
        self.macros[name] = Macro(name, after.strip(), display, lineno)

    def _evaluate(self, expression, display, lineno):
        """Evaluate an #if condition with integer semantics."""
        text = re.sub(r"defined\s*\(\s*(\w+)\s*\)", lambda m: "1" if m.group(1) in self.macros else "0", expression)
        text = re.sub(r"defined\s+(\w+)", lambda m: "1" if m.group(1) in self.macros else "0", text)
        for _ in range(16):
            replaced = _IDENT.sub(lambda m: self.macros[m.group(0)].body or "0" if m.group(0) in self.macros else m.group(0), text)
            if replaced == text:
                break
            text = replaced
        text = _IDENT.sub("0", text)
        text = text.replace("&&", " and ").replace("||", " or ")
        text = re.sub(r"!(?!=)", " not ", text)
        if not re.fullmatch(r"[\d\s()<>=!+\-*/%andortx]*", text):
            raise P4LoadError(f"#if condition not understood: {expression}", display, lineno)
        try:
            return bool(eval(text, {"__builtins__": {}}, {}))  # noqa: S307 - characters checked above
        except Exception:
            raise P4LoadError(f"#if condition not understood: {expression}", display, lineno) from None
