"""``testbed p4 check FILE.p4``: load a P4 program with the embedded target and list what it declares.

Prints the tables (keys with match kinds and widths, actions, size, default
action, implementation, direct counters/meters, const entries), actions with
their parameters, action profiles/selectors, registers, counters, meters,
digests and controller headers; ``--json`` prints the same as JSON.  A program
the target cannot accept is reported as one line ``file:line: message`` on
standard error with exit status 1 (never a traceback).
"""
import dataclasses
import json
import re
import sys

from testbed.errors import P4LoadError, ParameterError


def register(subparsers):
    """Add the ``p4`` subcommand (with its ``check`` action) to the CLI."""
    parser = subparsers.add_parser("p4", help="P4 programs: check that a program loads and list its objects")
    actions = parser.add_subparsers(dest="p4_command", metavar="ACTION")
    actions.required = True
    check = actions.add_parser("check", help="load FILE.p4 with the embedded target; list tables, actions, "
                                             "externs, or print the error as file:line")
    check.add_argument("file", help="the P4_16 v1model program")
    check.add_argument("-I", "--include", action="append", default=[], metavar="DIR",
                       help="extra directory for #include <...>")
    check.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
                       help="predefine a macro")
    check.add_argument("--json", action="store_true", help="print the program's control-plane view as JSON")
    check.add_argument("--python", action="store_true", help="print the generated Python pipeline code")
    check.set_defaults(func=run_check)


_MACRO_NAME = re.compile(r"[A-Za-z_]\w*$")


def _defines(items):
    """{name: value} of ``-D NAME[=VALUE]`` options.

    A definition is one line, as on a ``#define`` line (GCC documents that an
    embedded newline truncates it; here it is refused rather than cut silently).

    Raises:
        ParameterError: a name that is not an identifier, or a value with a newline or
            another control character.
    """
    result = {}
    for item in items:
        name, _, value = item.partition("=")
        if not _MACRO_NAME.match(name):
            raise ParameterError("-D", item, "NAME or NAME=VALUE with NAME an identifier")
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value if char != "\t"):
            raise ParameterError("-D", item, "NAME=VALUE with VALUE on one line, without control characters")
        result[name] = value or "1"
    return result


def _one_line(text):
    """``text`` on one line (newlines and control characters shown as spaces)."""
    return " ".join(str(text).split())


def run_check(args):
    """Handler of ``testbed p4 check``; returns the exit status (1 for a program that does not load)."""
    from testbed.p4.loader import load_program

    try:
        program = load_program(args.file, include_dirs=args.include, defines=_defines(args.define))
    except (P4LoadError, ParameterError) as error:
        print(_one_line(error), file=sys.stderr)
        return 1
    if args.python:
        print(program.python_source)
        return 0
    if args.json:
        print(json.dumps(dataclasses.asdict(program.info), indent=2, default=str))
        return 0
    print(format_program(program))
    return 0


def _call_text(call):
    if call is None:
        return "-"
    return f"{call.action}({', '.join(str(a) for a in call.args)})"


def format_program(program):
    """Return the human-readable listing of a loaded program."""
    info = program.info
    lines = [f"program {info.name}: {len(info.tables)} table(s), {len(info.actions)} action(s)"]
    for table in info.tables.values():
        lines.append(f"table {table.name} (size {table.size})")
        for key in table.match_fields:
            lines.append(f"  key {key.name}: {key.match_type} bit<{key.bitwidth}>")
        for ref in table.action_refs:
            scope = "" if ref.scope == "TABLE_AND_DEFAULT" else f" [{ref.scope}]"
            lines.append(f"  action {ref.name}{scope}")
        const = "const " if table.const_default_action else ""
        lines.append(f"  default {const}{_call_text(table.default_action)}")
        if table.implementation:
            lines.append(f"  implementation {table.implementation}")
        if table.direct_counter:
            lines.append(f"  direct counter {table.direct_counter}")
        if table.direct_meter:
            lines.append(f"  direct meter {table.direct_meter}")
        if table.const_entries:
            lines.append(f"  {'const ' if table.entries_are_const else ''}entries: {len(table.const_entries)}")
    for action in info.actions.values():
        params = ", ".join(f"bit<{p.bitwidth}> {p.name}" for p in action.params)
        lines.append(f"action {action.name}({params})")
    for profile in info.action_profiles.values():
        kind = f"action_selector {profile.algorithm} width {profile.output_width}" if profile.with_selector \
            else "action_profile"
        lines.append(f"{kind} {profile.name} (size {profile.size}) for {', '.join(profile.table_names)}")
    for register in info.registers.values():
        lines.append(f"register {register.name}: bit<{register.bitwidth}>[{register.size}]")
    for counter in info.counters.values():
        lines.append(f"counter {counter.name}: {counter.size} x {counter.unit}")
    for counter in info.direct_counters.values():
        lines.append(f"direct_counter {counter.name}: {counter.unit} on {counter.table_name}")
    for meter in info.meters.values():
        lines.append(f"meter {meter.name}: {meter.size} x {meter.unit}")
    for meter in info.direct_meters.values():
        lines.append(f"direct_meter {meter.name}: {meter.unit} on {meter.table_name}")
    for digest in info.digests.values():
        fields = ", ".join(f"{f.name}:{f.bitwidth}" for f in digest.fields)
        lines.append(f"digest {digest.name} {{{fields}}}")
    for header in info.controller_packet_metadata.values():
        fields = ", ".join(f"{f.name}:{f.bitwidth}" for f in header.fields)
        lines.append(f"controller header {header.name} {{{fields}}}")
    return "\n".join(lines)
