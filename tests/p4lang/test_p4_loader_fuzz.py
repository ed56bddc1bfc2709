"""The P4 loader on every .p4 file of the project and on seeded mutants of them.

Whatever the input, ``load_program_from_sources`` either succeeds or raises P4LoadError with a
file (and, past the file itself, a line), within a time bound; never another exception, never
a stall.  The mutants are generated from a fixed seed, so a failure reproduces.
"""
import glob
import os
import random
import re
import time

import pytest

from testbed.errors import P4LoadError
from testbed.p4.loader import load_program, load_program_from_sources

from repo_paths import REPO

PROJECT_P4 = sorted(glob.glob(os.path.join(REPO, "p4src", "**", "*.p4"), recursive=True) +
                    glob.glob(os.path.join(REPO, "tests", "p4lang", "programs", "*.p4")))


def _is_program(path):
    """A main program (not an include): it includes v1model.p4 and instantiates V1Switch."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return "<v1model.p4>" in text and "V1Switch(" in text


MAIN_PROGRAMS = [p for p in PROJECT_P4 if _is_program(p)]
SEED = 20240611
MUTANTS_PER_PROGRAM = 12
TIME_BOUND_SECONDS = 60  # per load; a loaded 2-core machine needs well under a second

_TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d\w*|0x[0-9a-fA-F]+|\"[^\"\n]*\"|//[^\n]*|.", re.S)
_INSERTS = [
    "(", ")", "{", "}", "[", "]", "<", ">", ";", ",", ".", "=", "==", "&&&", "..", "...", "#", "@", "@name(",
    "+=", "|+|=", "++", "_", "0", "-1", "8w255", "1" * 300, "0x" + "f" * 3000, "9" * 5000, "bit<4097>",
    "varbit<8>", "header_union", "for", "break", "continue", "exit", "return", "apply", "extract", "this",
    "value_set", "\u00e9", "\x00", "\\", "#define X(a) a a\n", "\n#if 9**9\n#endif\n", '\n#include "x.p4"\n',
    "\n#include </etc/passwd>\n", "((((((((((", "))))))))))", "{#}", "{ a = 1 }", "priority = 1:",
]


def _sources_of(path):
    """The sources dict of a project file (its includes from disk), or just the file."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    sources = {os.path.basename(path): text}
    for match in re.finditer(r'#include\s+"([^"]+)"', text):
        included = os.path.join(os.path.dirname(path), match.group(1))
        if os.path.isfile(included):
            with open(included, encoding="utf-8") as handle:
                sources[os.path.normpath(match.group(1))] = handle.read()
    return sources


def _mutate(text, rng):
    """A mutant of ``text``: one to three token-level edits, or a byte-level edit."""
    tokens = _TOKEN.findall(text)
    for _ in range(rng.randint(1, 3)):
        if not tokens:
            break
        index = rng.randrange(len(tokens))
        operation = rng.choice(["delete", "duplicate", "swap", "insert", "replace", "truncate", "nest"])
        if operation == "delete":
            del tokens[index]
        elif operation == "duplicate":
            tokens.insert(index, tokens[index])
        elif operation == "swap":
            other = rng.randrange(len(tokens))
            tokens[index], tokens[other] = tokens[other], tokens[index]
        elif operation == "insert":
            tokens.insert(index, rng.choice(_INSERTS))
        elif operation == "replace":
            words = [t for t in tokens if t[:1].isalpha()]
            tokens[index] = rng.choice(words) if words else "x"
        elif operation == "truncate":
            tokens = tokens[:index]
        else:
            depth = rng.choice([50, 300, 2000])
            tokens.insert(index, rng.choice(["(" * depth, "{" * depth, "-" * depth, "if (true) " * depth]))
    mutated = "".join(tokens)
    if rng.random() < 0.05:
        data = bytearray(mutated.encode("utf-8", "replace"))
        if data:
            data[rng.randrange(len(data))] = rng.choice([0xFF, 0xC3, 0x80, 0x00])
        return bytes(data)
    return mutated


def _check_load(main, sources):
    started = time.monotonic()
    try:
        load_program_from_sources(main, sources)
    except P4LoadError as error:
        assert error.filename is not None, str(error)
        assert "\n" not in str(error)
    assert time.monotonic() - started < TIME_BOUND_SECONDS


@pytest.mark.parametrize("path", PROJECT_P4, ids=[os.path.relpath(p, REPO) for p in PROJECT_P4])
def test_every_project_p4_file_loads_or_is_refused_cleanly(path):
    try:
        load_program(path)
    except P4LoadError as error:
        assert error.filename is not None
        assert not _is_program(path), f"a project program does not load: {error}"


@pytest.mark.parametrize("path", MAIN_PROGRAMS, ids=[os.path.relpath(p, REPO) for p in MAIN_PROGRAMS])
def test_mutants_load_or_raise_p4loaderror_only(path):
    sources = _sources_of(path)
    main = os.path.basename(path)
    rng = random.Random(f"{SEED}:{os.path.relpath(path, REPO)}")
    for _ in range(MUTANTS_PER_PROGRAM):
        mutated = dict(sources)
        target = main if rng.random() < 0.8 else rng.choice(sorted(sources))
        mutated[target] = _mutate(sources[target], rng)
        _check_load(main, mutated)
