"""Generate Python source for a checked v1model program and compile it once.

Every header and struct type becomes a Python class with ``__slots__`` (a
header parses itself from and serialises itself to bytes with one big-int
conversion); the parser becomes one function with a state loop; each control
becomes one function in which actions are inlined (at direct calls and in
each table's action dispatch), so a packet runs straight-line Python over
ints.  Values: ``bit<W>`` are unsigned ints below 2**W, ``int<W>`` signed
Python ints in range, ``bool`` Python bools, errors and enums ints.

The module source is compiled with :func:`compile` at load time;
:meth:`CompiledPipeline.instantiate` executes it against one switch's state
(tables, registers, ...) and returns the entry points the device calls.
"""
import keyword
import random as _random

from testbed.errors import P4LoadError
from testbed.p4.compiler.calls import CallsMixin
from testbed.p4.compiler.classes import ClassesMixin
from testbed.p4.compiler.expressions import ExpressionsMixin
from testbed.p4.compiler.externs import ExternsMixin
from testbed.p4.compiler.pycode import Emitter, Frame, FunctionContext, attr, varbit_length_attr
from testbed.p4.compiler.statements import StatementsMixin
from testbed.p4.compiler.tableapply import TableApplyMixin
from testbed.p4.compiler.walk import Walk
from testbed.p4.frontend import types as T
from testbed.p4.v1model import runtime as RT


class CompiledPipeline:
    """The generated code of one program.

    Attributes:
        source: the Python source text.
        code: the compiled code object.
        std_metadata_class / header/struct class names are inside the module.
    """

    def __init__(self, source, code, info, field_lists):
        self.source = source
        self.code = code
        self.info = info
        self.field_lists = field_lists

    def instantiate(self, state, rng=None, log=None):
        """Execute the module against ``state`` (a SwitchState); return its namespace dict.

        The namespace holds ``parser``, ``verify_checksum``, ``ingress``, ``egress``,
        ``compute_checksum``, ``deparser``, ``new_headers``, ``new_metadata``,
        ``new_standard_metadata`` and ``preserve_fields``.
        """
        from testbed.p4.v1model import hashes

        namespace = {
            "STATE": state,
            "RNG": rng or _random.Random(0),
            "RT": RT,
            "HASHES": hashes,
            "__name__": "p4_pipeline",
        }
        exec(self.code, namespace)  # noqa: S102 - our own generated code
        return namespace


class CodeGenerator(ClassesMixin, StatementsMixin, CallsMixin, TableApplyMixin, ExternsMixin, ExpressionsMixin, Walk):
    """Generates the pipeline module for a ProgramModel and its Pipeline."""

    def __init__(self, model, pipeline, info):
        self.model = model
        self.pipeline = pipeline
        self.info = info
        self.module = Emitter()
        self.globals_init = Emitter()
        self.class_names = {}
        self.global_counter = 0
        self.field_lists = {}

    # ------------------------------------------------------------------ helpers
    def error(self, node, message):
        """A P4LoadError located at ``node``."""
        return self.model.error(node, message)

    def unsupported(self, node, construct):
        """A P4LoadError at ``node``: the generator cannot compile ``construct``."""
        return self.error(node, f"unsupported construct: {construct}")

    def check_variable_type(self, node, type_):
        """Refuse, at ``node``'s line, a loop variable of a type the generated code has no value for."""
        if isinstance(type_, T.VarbitType):
            raise self.error(node, f"unsupported construct: a loop variable of type {type_.name_text()}")

    def declare_varbit(self, name, init, scope, fn):
        """A local ``varbit`` variable: a holder with the value and its current length, as a header field has.

        ``name`` is the variable's code (``holder.f_v``), so reads, assignments, comparisons and
        field lists treat it exactly as a varbit header field.  Without an initializer it is empty
        (length 0), which is what BMv2 gives a default-constructed varbit.
        """
        holder = name.rpartition(".")[0]
        fn.out.line(f"{holder} = _VarbitLocal()")
        if init is None:
            return
        source = self.lvalue(init, scope, fn)
        fn.out.line(f"{name} = {source}")
        fn.out.line(f"{self._varbit_length_code(name, init)} = {self._varbit_length_code(source, init)}")

    def global_name(self, prefix):
        """A new module-level name."""
        self.global_counter += 1
        return f"{prefix}_{self.global_counter}"

    def py_name(self, symbol, fn):
        """The Python variable of a P4 variable or parameter (assigned once, unique)."""
        if not hasattr(symbol, "py"):
            base = symbol.name if not keyword.iskeyword(symbol.name) else symbol.name + "_"
            self.global_counter += 1
            symbol.py = f"v_{base}_{self.global_counter}"
            if symbol.kind == "var" and isinstance(symbol.type, T.VarbitType):
                symbol.py += "." + attr("v")
        return symbol.py

    # ------------------------------------------------------------------ module
    def generate(self):
        """Generate the whole pipeline module; return its source text."""
        out = self.module
        out.line("# Generated by testbed.p4.compiler.codegen - do not edit")
        out.line("_hash_compute = HASHES.compute")
        out.line("_hash_extern = HASHES.hash_extern")
        out.line("_checksum16 = HASHES.checksum16")
        out.line("_PacketTooShort = %d" % self.model.errors.get("PacketTooShort", 1))
        out.line("")
        out.line("def _shl(value, amount, width, mask):")
        out.line("    return (value << amount) & mask if amount < width else 0")
        out.line("")
        out.line("def _udiv(a, b):")
        out.line("    return a // b if b else 0")
        out.line("")
        out.line("def _umod(a, b):")
        out.line("    return a % b if b else 0")
        out.line("")
        out.line("def _csum_int(number, nbytes):")
        out.line("    if nbytes & 1:")
        out.line("        number <<= 8")
        out.line("    total = number % 65535")
        out.line("    if total == 0 and number:")
        out.line("        total = 65535")
        out.line("    return ~total & 65535")
        out.line("")
        out.line("_compute_bytes = HASHES.compute_bytes")
        out.line("")
        out.line("def _hash_ext(algorithm, base, data, maximum, width):")
        out.line("    raw = _compute_bytes(algorithm, data)")
        out.line("    modulus = (maximum & 18446744073709551615) or 1")
        out.line("    return ((raw % modulus) + (base & 18446744073709551615)) & ((1 << width) - 1)")
        out.line("")
        out.line("def _random(lo, hi):")
        out.line("    return RNG.randint(lo, hi) if lo <= hi else lo")
        out.line("")
        out.line("def _pack_int(items):")
        out.line("    value = total = 0")
        out.line("    for item, width in items:")
        out.line("        value = (value << width) | item")
        out.line("        total += width")
        out.line("    return value << (-total % 8)")
        out.line("")
        out.line("def _pack_len(items):")
        out.line("    return (sum(width for _, width in items) + 7) >> 3")
        out.line("")
        value, length = attr("v"), varbit_length_attr("v")
        out.line("class _VarbitLocal:")
        out.line(f"    __slots__ = ({value!r}, {length!r})")
        out.line("")
        out.line("    def __init__(self):")
        out.line(f"        self.{value} = 0")
        out.line(f"        self.{length} = 0")
        out.line("")
        out.line("def _stk(stack, index):")
        out.line("    if 0 <= index < len(stack.items):")
        out.line("        return stack.items[index]")
        out.line("    raise RT.TargetAbort(f'header stack index {index} out of range (size {len(stack.items)}): '")
        out.line("                         f'simple_switch stops with std::out_of_range')")
        out.line("")
        std_type = self.model.types.get("standard_metadata_t")
        if not isinstance(std_type, T.StructType):
            raise P4LoadError("standard_metadata_t is missing (include <v1model.p4>)")
        std_class = self.class_for(std_type)
        parser = self.pipeline.parser
        hdr_type = parser.params[1].type
        meta_type = parser.params[2].type
        if not isinstance(hdr_type, T.StructType) or not isinstance(meta_type, T.StructType):
            raise self.error(parser.decl, "the parser's headers and metadata parameters must be structs")
        hdr_class = self.class_for(hdr_type)
        meta_class = self.class_for(meta_type)
        self.hdr_type = hdr_type
        self.meta_type = meta_type
        # the field lists of @field_list annotations in user metadata
        self._collect_field_lists(meta_type, [])
        body = Emitter()
        self.gen_parser(parser, body)
        names = {}
        for role in ("verify_checksum", "ingress", "egress", "compute_checksum", "deparser"):
            control = self.pipeline.controls[role]
            names[role] = self._gen_control(control, body, role == "deparser")
        module = self.module
        module.extend(self.globals_init)
        module.line("")
        module.extend(body)
        module.line("")
        module.line(f"new_headers = {hdr_class}")
        module.line(f"new_metadata = {meta_class}")
        module.line(f"new_standard_metadata = {std_class}")
        module.line(f"parser = {parser.py_function}")
        for role, function in names.items():
            module.line(f"{role} = {function}")
        module.line("")
        self._gen_preserve()
        return module.text()

    def _gen_preserve(self):
        out = self.module
        out.line("def preserve_fields(index, src, dst):")
        out.indent()
        out.line("'''Copy the user metadata fields of @field_list(index) from src to dst.'''")
        if not self.field_lists:
            out.line("return")
        first = True
        for index, paths in sorted(self.field_lists.items()):
            out.line(f"{'if' if first else 'elif'} index == {index}:")
            first = False
            out.indent()
            if not paths:
                out.line("pass")
            for path in paths:
                dotted = ".".join(attr(p) for p in path)
                out.line(f"dst.{dotted} = src.{dotted}")
            out.dedent()
        out.dedent()
        out.line("")

    def instance_global(self, symbol):
        """Module-level name bound to the state object of an extern instance."""
        if hasattr(symbol, "global_py"):
            return symbol.global_py
        extern = symbol.type.name
        qualified = symbol.qualified
        collections = {"counter": "counters", "meter": "meters", "register": "registers",
                       "direct_counter": "direct_counters", "direct_meter": "direct_meters"}
        if extern in collections:
            name = self.global_name("X")
            self.globals_init.line(f"{name} = STATE.{collections[extern]}[{qualified!r}]")
            symbol.global_py = name
            return name
        raise self.error(symbol.decl, f"unsupported construct: extern {extern} used in code")

    def table_global(self, table):
        """Module-level name bound to the TableState of ``table``."""
        if not hasattr(table, "global_py"):
            table.global_py = self.global_name("TBL")
            self.globals_init.line(f"{table.global_py} = STATE.tables[{table.name!r}]")
        return table.global_py

    # ------------------------------------------------------------------ parser

    def new_function(self, kind, out):
        return FunctionContext(kind, out)

    def parser_prologue(self, parser, fn, sub):
        """The parser function's head.

        The main parser is ``parser_X(P, buf, hdr, meta, sm)`` returning the parser error.
        A sub-parser (a parser instance applied in a state) is
        ``parser_X(P, buf, off, n, params...)`` returning ``(reject error or None, offset,
        scalar outs...)``; its reject state rejects the parser that applied it too.
        """
        out = fn.out
        params = parser.params
        packet_param = params[0]
        packet_param.py = "_packet"
        names = [self.py_name(p, fn) for p in params[1:]]
        if sub:
            function = "parser_" + parser.name.replace(".", "__")
            out.line(f"def {function}(P, buf, off, n{''.join(', ' + name for name in names)}):")
        else:
            function = "parser_" + parser.decl.name
            out.line(f"def {function}(P, buf, {', '.join(names)}):")
        parser.py_function = function
        out.indent()
        if sub:
            out.line("rej = False")
            for param in params[1:]:
                if param.direction == "out" and not isinstance(param.type, (T.HeaderType, T.StructType,
                                                                             T.StackType)):
                    out.line(f"{param.py} = {self._initial_value(param.type)}")
        else:
            out.line("off = 0")
            out.line("n = len(buf)")
        out.line("err = 0")
        return function

    @staticmethod
    def parser_loop(fn):
        fn.out.line("st = 0")
        fn.out.line("steps = 0")
        fn.out.line("while True:")
        fn.out.indent()

    @staticmethod
    def parser_state(fn, state_id, first):
        fn.out.line(f"{'if' if first else 'elif'} st == {state_id}:")
        fn.out.indent()

    @staticmethod
    def parser_state_end(fn):
        fn.out.dedent()

    @staticmethod
    def parser_epilogue(parser, fn, sub):
        out = fn.out
        out.line("else:")
        out.line("    break")
        out.dedent()
        if sub:
            outs = [p.py for p in parser.params[1:] if p.direction in ("out", "inout")
                    and not isinstance(p.type, (T.HeaderType, T.StructType, T.StackType))]
            out.line(f"return (err if rej or err else None, off{''.join(', ' + o for o in outs)})")
        else:
            out.line("P.parser_offset = off")
            out.line("return err")
        out.dedent()
        out.line("")

    def _local_variable(self, variable, scope, fn):
        """A parser- or control-level variable, with its initializer."""
        out = fn.out
        init = variable.decl.init
        name = self.py_name(variable, fn)
        out.origin = variable.decl.loc
        if isinstance(variable.type, T.VarbitType):
            if init is not None:
                self.model.type_of(init, scope)
                self._check_assignable(init, variable.type, init.type)
            self.declare_varbit(name, init, scope, fn)
        elif init is None:
            out.line(f"{name} = {self._initial_value(variable.type)}")
        elif isinstance(variable.type, (T.HeaderType, T.StructType, T.StackType, T.TupleType)):
            value = self.composite_value(init, variable.type, scope, fn)
            fresh = init.kind in ("list", "struct_expr", "invalid_header")
            out.line(f"{name} = {value}" if fresh else f"{name} = {value}.copy()")
        else:
            self.model.type_of(init, scope)
            self._check_assignable(init, variable.type, init.type)
            out.line(f"{name} = {self.expr(init, scope, fn, want=variable.type)}")

    @staticmethod
    def goto_end(fn, reject):
        if reject and getattr(fn, "subparser", False):
            fn.out.line("rej = True")
        fn.out.line("break")

    def goto_state(self, fn, state_id, backward):
        out = fn.out
        if backward:
            # a transition backwards may loop: give up after many states like a parser timeout
            out.line("steps += 1")
            out.line("if steps > 4096:")
            out.line(f"    err = {self.model.errors.get('ParserTimeout', 5)}")
            out.line("    break")
        out.line(f"st = {state_id}")
        out.line("continue")

    @staticmethod
    def no_transition(fn):
        fn.out.line("break  # no transition: reject")

    def select_key(self, expr, scope, fn):
        name = fn.temp("k")
        fn.out.line(f"{name} = {self.expr(expr, scope, fn)}")
        return name

    @staticmethod
    def select_case(fn, first, conditions):
        if conditions:
            fn.out.line(f"{'if' if first else 'elif'} {' and '.join(conditions)}:")
            fn.out.indent()
        elif not first:
            fn.out.line("else:")
            fn.out.indent()

    @staticmethod
    def select_case_end(fn, first, conditions):
        if conditions or not first:
            fn.out.dedent()

    def select_no_match(self, fn):
        fn.out.line(f"err = {self.model.errors['NoMatch']}")
        fn.out.line("break")

    # ------------------------------------------------------------------ controls

    def _gen_control(self, control, out, is_deparser, function_name=None):
        fn = FunctionContext("deparser" if is_deparser else "control", out)
        fn.control = control
        names = []
        for param in control.params:
            if isinstance(param.type, T.ExternType) and param.type.name in ("packet_out", "packet_in"):
                param.py = "_out"
                names.append("_out")
            else:
                names.append(self.py_name(param, fn))
        # scalar out/inout parameters (sub-controls) are returned after the exit flag
        outs = [p.py for p in control.params if p.direction in ("out", "inout")
                and not isinstance(p.type, (T.HeaderType, T.StructType, T.StackType, T.ExternType))]
        if outs:
            tail = "".join(", " + o for o in outs)
            fn.exit_code = f"return (True{tail})"
            fn.return_code = f"return (False{tail})"
        function = function_name or ("ctl_" + control.name.replace(".", "__"))
        control.py_function = function
        # nested control instances first (separate functions)
        for sub in control.subcontrols.values():
            self._gen_control(sub, out, False)
        out.line(f"def {function}(P, {', '.join(names)}):")
        out.indent()
        for param in control.params:
            if param.direction == "out" and param.py != "_out" and not isinstance(param.type, T.ExternType):
                out.line(f"{param.py} = {self._initial_value(param.type)}")
        for variable in control.variables:
            self._local_variable(variable, control.scope, fn)
        self.block(control.decl.body, control.scope, fn)
        out.line(fn.return_code)
        out.dedent()
        out.line("")
        # type-check actions no table or call uses (their code is thrown away), as p4c would
        for action in control.actions.values():
            if not getattr(action, "inlined", False):
                scratch = FunctionContext("control", Emitter())
                scratch.control = control
                frame = Frame("action", looped=True)
                frame.return_flag = "_rt_unused"
                scratch.frames.append(frame)
                for param in action.decl.param_symbols:
                    self.py_name(param, scratch)
                self.block(action.decl.body, action.scope, scratch)
        return function


def compile_pipeline(model, pipeline, info):
    """Generate and compile the pipeline module of a checked program.

    Returns:
        CompiledPipeline.

    Raises:
        P4LoadError: an unsupported construct, with file:line.
    """
    generator = CodeGenerator(model, pipeline, info)
    source = generator.generate()
    filename = f"<p4 pipeline {model.name}>"
    try:
        code = compile(source, filename, "exec")
    except (SyntaxError, RecursionError, MemoryError, ValueError, OverflowError) as error:
        # Python's own limits (nesting of blocks, indentation, parentheses) or a generator
        # bug: report it at the P4 line the generated code came from
        origin = generator.module.origin_of(getattr(error, "lineno", None) or 1)
        where = origin if origin is not None else 0
        reason = getattr(error, "msg", None) or type(error).__name__
        raise generator.error(where, f"unsupported construct: this code is nested too deeply or is too large "
                                     f"for the embedded target's code generator (Python: {reason})") from None
    return CompiledPipeline(source, code, info, generator.field_lists)
