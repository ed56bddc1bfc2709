"""Generate C for a checked v1model program: the native backend's code generator.

It reads the same checked program (``LoadedProgram.model`` / ``.pipeline`` / ``.info``) the
Python code generator (:mod:`testbed.p4.compiler.codegen`) compiles, walks it with the same
:class:`testbed.p4.compiler.walk.Walk` (this module supplies the C text of what the walk visits), and
follows the Python target's semantics, which are BMv2's: the generated C implements the ABI of
``include/tb_pipeline.h`` with the runtime of ``include/tb_runtime.h``.

Representation: ``bit<W>`` (W <= 64), ``bool``, errors and enums are ``uint64_t`` values
kept below 2**W; a header is a C struct with a ``valid`` byte, a struct a C struct; header
fields wider than 64 bits are big-endian byte arrays that can be extracted, emitted,
copied, compared and hashed, nothing else.  Actions are inlined; sub-controls become C
functions whose composite arguments are passed by reference (copy-in/copy-out of scalars).

What it cannot compile it refuses with :class:`testbed.errors.NativeBackendError`, naming
the construct and its file:line (see :data:`UNSUPPORTED` for the list).
"""
from testbed.errors import NativeBackendError, P4LoadError
from testbed.p4.compiler.calls import lvalue_path, paths_overlap
from testbed.p4.compiler.pycode import Emitter, Frame, FunctionContext
from testbed.p4.compiler.statements import COMPOUND_OPERATORS
from testbed.p4.compiler.target_externs import EMBEDDED_ONLY, TARGET_EXTERNS
from testbed.p4.compiler.walk import BUILT, Walk
from testbed.p4.frontend import types as T
from testbed.p4.frontend.ast import Node, has_annotation
from testbed.p4.frontend.checker import convert_int
from testbed.p4.v1model import hashes

#: Constructs the C backend refuses (the Python backend runs them).
UNSUPPORTED = ("header stacks of header unions", "varbit fields not on whole bytes", "varbit local variables",
               "for loops in parsers", "parser value sets", "tuples", "functions returning headers or structs",
               "values wider than 64 bits outside extract/emit/copy/compare/hash (and keys, lookahead)",
               "division and modulo of int<W> values", "random() of int<W>", "hash algorithm random",
               "header or struct parameters of actions")

ALGORITHM_IDS = {name: index for index, name in enumerate(hashes.ALGORITHMS)}
STD_TYPE = "standard_metadata_t"
COMPOSITE = (T.HeaderType, T.StructType, T.StackType)


def leaf_name(code):
    """The field name of a member access code ``base.f_name``."""
    return code.rsplit(".f_", 1)[1]


def cnum(value):
    """C literal of a non-negative int below 2**64."""
    return f"UINT64_C({value})" if value > 0xFFFFFFFF else str(value)


class _Fn(FunctionContext):
    """Per generated C function: a control returns 1 on ``exit``, 0 at its end (negative: the packet stops).

    An inlined action's frame has its end ``label`` (``return`` jumps there) and, when it copies
    values back, the ``exit_flag`` an ``exit`` sets before jumping there.
    """

    def __init__(self, kind, out):
        super().__init__(kind, out)
        self.exit_code = "return 1;"
        self.return_code = "return 0;"


class CGenerator(Walk):
    """Generates the C source and the state layout of one program."""

    #: the C text of the walk's small forms (see :attr:`testbed.p4.compiler.walk.Walk.SYNTAX`)
    SYNTAX = {
        "true": "1",
        "false": "0",
        "not": "(!{code})",
        "land": "({left} && {right})",
        "lor": "({left} || {right})",
        "choice": "({cond} ? {then} : {otherwise})",
        "jump": "{kind};",
        "keyset_mask": "(({name} & {mask}) == {value})",
        "keyset_range": "({low} <= {name} && {name} <= {high})",
        "keyset_equal": "({name} == {value})",
        "bit_to_bool": "({code} != 0)",
        "bool_to_bit": "({code} ? 1 : 0)",
    }

    def __init__(self, program):
        self.program = program
        self.model = program.model
        self.pipeline = program.pipeline
        self.info = program.info
        self.types = Emitter()
        self.funcs = Emitter()           # prototypes
        self.function_bodies = Emitter()  # P4 functions
        self.type_names = {}
        self.counter = 0
        self.tables = []        # table names in state order
        self.table_index = {}
        self.profiles = []
        self.profile_index = {}
        self.registers = []     # (name, size, width)
        self.register_index = {}
        self.counters = []      # (name, size)
        self.counter_index = {}
        self.meters = []        # (name, size, unit)
        self.meter_index = {}
        self.actions = {"NoAction": 0}
        self.events = []  # digest and log_msg call sites: dicts of the layout
        self.target_extern_calls = 0
        self.field_lists = {}

    # ------------------------------------------------------------------ errors and names
    def unsupported(self, node, construct):
        """A NativeBackendError at ``node`` naming the construct the C backend cannot compile."""
        return self.error(node, f"unsupported construct: {construct}")

    def error(self, node, message):
        """A NativeBackendError at ``node`` (None: the program as a whole)."""
        where = self.model.error(node if node is not None else 0, message)
        return NativeBackendError(f"native backend: {message}", where.filename, where.line)

    @staticmethod
    def new_function(kind, out):
        return _Fn(kind, out)

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def c_name(self, symbol):
        if not hasattr(symbol, "c_code"):
            symbol.c_code = self.fresh("v_" + symbol.name)
        return symbol.c_code

    # ------------------------------------------------------------------ types
    def ctype(self, type_, node=None):
        """The C type of a value or variable of ``type_``."""
        if isinstance(type_, T.StackType) and isinstance(type_.element, T.HeaderType) and \
                not isinstance(type_.element, T.UnionType):
            return self._stack_type(type_, node)
        if isinstance(type_, (T.StackType, T.VarbitType, T.TupleType)):
            raise self.unsupported(node, f"{type_.name_text()} ({type(type_).__name__})")
        if isinstance(type_, T.StructType) and type_.name == STD_TYPE:
            return "tb_std_meta_t"
        if isinstance(type_, COMPOSITE):
            return self._struct_type(type_, node)
        self.check_scalar(type_, node)
        return "uint64_t"

    def check_scalar(self, type_, node):
        if isinstance(type_, T.BitType):
            if type_.width > 64:
                raise self.unsupported(node, f"{type_.name_text()} value (wider than 64 bits)")
            return
        if isinstance(type_, T.EnumType) and type_.underlying is not None:
            self.check_scalar(type_.underlying, node)
            return
        if isinstance(type_, (T.BoolType, T.ErrorType, T.EnumType, T.InfIntType)):
            return
        raise self.unsupported(node, f"value of type {type_.name_text()}")

    def _stack_type(self, type_, node):
        element = self.ctype(type_.element, node)
        name = f"K_{element}_{type_.size}"
        if name not in self.type_names.values():
            self.type_names[("stack", element, type_.size)] = name
            self.types.line(f"typedef struct {name} {{ uint32_t next_index; {element} items[{type_.size}]; }} {name};")
        return name

    def _struct_type(self, type_, node):
        name = self.type_names.get(id(type_))
        if name is not None:
            return name
        prefix = "H" if isinstance(type_, T.HeaderType) else "S"
        name = f"{prefix}_{type_.name}_{len(self.type_names)}"
        self.type_names[id(type_)] = name
        members = []
        if isinstance(type_, T.HeaderType):
            if type_.varbit is not None and (type_.varbit.offset % 8 or type_.varbit.type.max_width % 8):
                raise self.unsupported(node, f"varbit field of header {type_.name} not on "
                                                                  f"whole bytes")
            if type_.width % 8:
                raise self.unsupported(node, f"header {type_.name} not a whole number of bytes")
            members.append("uint8_t valid;")
        for f in type_.fields:
            ft = f.type
            if isinstance(ft, T.VarbitType):
                members.append(f"uint32_t l_{f.name}; uint8_t f_{f.name}[{ft.max_width // 8}];")
                continue
            if isinstance(type_, T.HeaderType) and isinstance(ft, T.BitType) and ft.width > 64:
                if ft.width % 8 or f.offset % 8:
                    raise self.unsupported(node, f"field {type_.name}.{f.name} wider than 64 bits and not byte aligned")
                members.append(f"uint8_t f_{f.name}[{ft.width // 8}];")
            elif isinstance(type_, T.HeaderType) and isinstance(ft, T.StructType) and \
                    any(self.is_wide(leaf) for _, leaf, _ in self._header_leaves("", ft, 0)):
                raise self.unsupported(node, f"a wide field in a struct in header {type_.name}")
            else:
                members.append(f"{self.ctype(ft, node)} f_{f.name};")
        if not members:
            members.append("uint8_t _empty;")
        self.types.line(f"typedef struct {name} {{ {' '.join(members)} }} {name};")
        return name

    def field(self, base_code, base_type, name):
        """C code of member ``name`` of a struct/header value."""
        if isinstance(base_type, T.StructType) and base_type.name == STD_TYPE:
            return f"{base_code}.{name}"
        return f"{base_code}.f_{name}"

    @staticmethod
    def is_wide(type_):
        return isinstance(type_, T.BitType) and type_.width > 64

    # ------------------------------------------------------------------ module
    def generate(self):
        """The C source text of the whole pipeline."""
        std_type = self.model.types.get(STD_TYPE)
        parser = self.pipeline.parser
        hdr_type = parser.params[1].type
        meta_type = parser.params[2].type
        hdr_c = self.ctype(hdr_type, parser.decl)
        meta_c = self.ctype(meta_type, parser.decl)
        self.ctype(std_type, parser.decl)
        self.meta_type = meta_type
        self._collect_field_lists(meta_type, [])
        for name in self.info.tables:
            self.table_index[name] = len(self.tables)
            self.tables.append(name)
        for name in self.info.action_profiles:
            self.profile_index[name] = len(self.profiles)
            self.profiles.append(name)
        for name, reg in self.info.registers.items():
            self.register_index[name] = len(self.registers)
            self.registers.append((name, reg.size, reg.bitwidth))
        for name, ctr in self.info.counters.items():
            self.counter_index[name] = len(self.counters)
            self.counters.append((name, ctr.size))
        for name, meter in self.info.meters.items():
            self.meter_index[name] = len(self.meters)
            self.meters.append((name, meter.size, meter.unit))
        body = Emitter()
        parser_fn = self.gen_parser(parser, body)
        names = {}
        for role in ("verify_checksum", "ingress", "egress", "compute_checksum", "deparser"):
            names[role] = self._gen_control(self.pipeline.controls[role], body, role == "deparser")
        out = Emitter()
        out.line("/* Generated by testbed.p4.native.cgen - do not edit */")
        out.line('#include "tb_runtime.h"')
        out.extend(self.types)
        out.line("struct tb_packet {")
        out.line("    tb_std_meta_t sm; tb_request_t req; uint64_t now_ns;")
        out.line("    const uint8_t *frame; uint32_t len; uint32_t payload_off; const char *fail;")
        out.line("    uint64_t meter_color;")
        out.line("    uint32_t fail_status;")
        out.line("    uint32_t nreq; int32_t req_ids[TB_MAX_EXTERN_REQUESTS];")
        out.line("    uint32_t nev; int32_t ev_sites[TB_MAX_EVENTS];")
        out.line("    uint64_t ev_values[TB_MAX_EVENTS][TB_MAX_EVENT_VALUES];")
        out.line("    uint64_t req_args[TB_MAX_EXTERN_REQUESTS][TB_MAX_EXTERN_ARGS];")
        out.line(f"    {hdr_c} hdr; {meta_c} meta;")
        out.line("};")
        out.line("typedef tb_packet_t P_t;")
        out.line(f"#define TB_PACKET_TOO_SHORT {self.model.errors.get('PacketTooShort', 1)}")
        out.extend(self.funcs)
        out.extend(self.function_bodies)
        out.extend(body)
        self._gen_entry_points(out, parser_fn, names)
        return out.text()

    def _gen_entry_points(self, out, parser_fn, names):
        nt = len(self.tables)
        tables = [self.info.tables[name] for name in self.tables]
        nkeys = [len(t.match_keys) for t in tables]
        for name, count in zip(self.tables, nkeys):
            if count > 16:
                raise P4LoadError(f"native backend: unsupported construct: table {name} with more than 16 keys")
        nargs = [self.table_nargs(t) for t in tables]
        profile = [self.profile_index.get(t.implementation, -1) if t.implementation else -1 for t in tables]

        def arr(ctype, values):
            return "{" + ", ".join(str(v) for v in values or [0]) + "}"
        out.line(f"static const uint32_t NKEYS[] = {arr('uint32_t', nkeys)};")
        out.line(f"static const uint32_t NARGS[] = {arr('uint32_t', nargs)};")
        out.line(f"static const int32_t TPROFILE[] = {arr('int32_t', profile)};")
        out.line(f"static const uint64_t REGSIZE[] = {arr('uint64_t', [r[1] for r in self.registers])};")
        out.line(f"static const uint64_t CTRSIZE[] = {arr('uint64_t', [c[1] for c in self.counters])};")
        out.line(f"static const uint64_t METERSIZE[] = {arr('uint64_t', [m[1] for m in self.meters])};")
        out.line("uint32_t tb_abi_version(void) { return TB_PIPELINE_ABI_VERSION; }")
        out.line(f"tb_pipeline_t *tb_pipeline_new(void) {{ return tb_state_new({nt}, NKEYS, NARGS, "
                 f"{len(self.profiles)}, TPROFILE, {len(self.registers)}, REGSIZE, {len(self.counters)}, CTRSIZE, "
                 f"{len(self.meters)}, METERSIZE); }}")
        out.line("void tb_pipeline_free(tb_pipeline_t *pl) { tb_state_free(pl); }")
        out.line("size_t tb_packet_size(void) { return sizeof(tb_packet_t); }")
        out.line("tb_std_meta_t *tb_packet_std(tb_packet_t *pkt) { return &pkt->sm; }")
        out.line("int tb_packet_extern_requests(const tb_packet_t *pkt, int32_t *ids, uint64_t *args, uint32_t max) { "
                 "uint32_t n = pkt->nreq < max ? pkt->nreq : max; for (uint32_t i = 0; i < n; i++) { "
                 "ids[i] = pkt->req_ids[i]; memcpy(args + i * TB_MAX_EXTERN_ARGS, pkt->req_args[i], "
                 "sizeof pkt->req_args[i]); } return (int)n; }")
        out.line("int tb_packet_events(const tb_packet_t *pkt, int32_t *sites, uint64_t *values, uint32_t max) { "
                 "uint32_t n = pkt->nev < max ? pkt->nev : max; for (uint32_t i = 0; i < n; i++) { "
                 "sites[i] = pkt->ev_sites[i]; memcpy(values + i * TB_MAX_EVENT_VALUES, pkt->ev_values[i], "
                 "sizeof pkt->ev_values[i]); } return (int)n; }")
        out.line("uint32_t tb_packet_payload_offset(const tb_packet_t *pkt) { return pkt->payload_off; }")
        out.line("const char *tb_packet_failure(const tb_packet_t *pkt) { return pkt->fail ? pkt->fail : \"\"; }")
        out.line("void tb_packet_copy(tb_packet_t *dst, const tb_packet_t *src) { *dst = *src; }")
        out.line("void tb_packet_copy_headers(tb_packet_t *dst, const tb_packet_t *src) { dst->hdr = src->hdr; "
                 "dst->frame = src->frame; dst->len = src->len; dst->payload_off = src->payload_off; }")
        out.line("void tb_packet_reset(tb_pipeline_t *pl, tb_packet_t *pkt) { (void)pl; memset(pkt, 0, sizeof *pkt); "
                 "pkt->req.clone_session = pkt->req.clone_field_list = pkt->req.resubmit_field_list = "
                 "pkt->req.recirculate_field_list = pkt->req.truncate_length = -1; }")
        out.line("static void req_reset(tb_packet_t *pkt) { pkt->meter_color = 0; pkt->nreq = 0; "
                 "pkt->req.clone_session = pkt->req.clone_field_list = "
                 "pkt->req.resubmit_field_list = pkt->req.recirculate_field_list = -1; }")
        out.line("static void req_out(tb_packet_t *pkt, tb_request_t *req) { "
                 "pkt->req.egress_spec = pkt->sm.egress_spec; "
                 "pkt->req.mcast_grp = pkt->sm.mcast_grp; pkt->req.priority = pkt->sm.priority; "
                 "if (req) *req = pkt->req; }")
        out.line("void tb_preserve_fields(int index, const tb_packet_t *src, tb_packet_t *dst) {")
        out.line("    switch (index) {")
        for index, paths in sorted(self.field_lists.items()):
            out.line(f"    case {index}:")
            for path in paths:
                dotted = ".".join("f_" + p for p in path)
                out.line(f"        memcpy(&dst->meta.{dotted}, &src->meta.{dotted}, sizeof dst->meta.{dotted});")
            out.line("        break;")
        out.line("    default: break;")
        out.line("    }")
        out.line("}")
        out.line("int tb_parse(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len) {")
        out.line("    pkt->frame = frame; pkt->len = len; pkt->nev = 0;")
        out.line(f"    int st = {parser_fn}(pl, pkt, frame, len, &pkt->hdr, &pkt->meta, &pkt->sm);")
        out.line("    return st < 0 ? -st : TB_OK;")
        out.line("}")
        out.line("int tb_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req) {")
        out.line("    pkt->now_ns = now_ns; req_reset(pkt); pkt->req.truncate_length = -1;")
        out.line(f"    int st = {names['verify_checksum']}(pl, pkt, &pkt->hdr, &pkt->meta);")
        out.line("    if (st < 0) return -st;")
        out.line(f"    st = {names['ingress']}(pl, pkt, &pkt->hdr, &pkt->meta, &pkt->sm);")
        out.line("    req_out(pkt, req);")
        out.line("    return st < 0 ? -st : TB_OK;")
        out.line("}")
        out.line("int tb_egress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req) {")
        out.line("    pkt->now_ns = now_ns; req_reset(pkt); pkt->req.truncate_length = -1; pkt->nev = 0;")
        out.line(f"    int st = {names['egress']}(pl, pkt, &pkt->hdr, &pkt->meta, &pkt->sm);")
        out.line("    req_out(pkt, req);")
        out.line("    return st < 0 ? -st : TB_OK;")
        out.line("}")
        out.line("int tb_deparse(tb_pipeline_t *pl, tb_packet_t *pkt, uint8_t *out, uint32_t cap) {")
        out.line("    pkt->nev = 0;")
        out.line(f"    int st = {names['compute_checksum']}(pl, pkt, &pkt->hdr, &pkt->meta);")
        out.line("    if (st < 0) return st;")
        out.line("    uint32_t off = 0;")
        out.line(f"    st = {names['deparser']}(pl, pkt, out, cap, &off, &pkt->hdr);")
        out.line("    if (st < 0) return st;")
        out.line("    uint32_t rest = pkt->len - pkt->payload_off;")
        out.line("    if (off + rest > cap) return -TB_NEED_SPACE;")
        out.line("    memcpy(out + off, pkt->frame + pkt->payload_off, rest);")
        out.line("    return (int)(off + rest);")
        out.line("}")
        out.extend(_PROCESS)

    def table_nargs(self, table_info):
        counts = [len(self.info.actions[ref.name].params) for ref in table_info.action_refs
                  if ref.name in self.info.actions]
        n = max(counts, default=0)
        if n > 16:
            raise P4LoadError(f"native backend: unsupported construct: table {table_info.name}: an action with "
                              f"more than 16 parameters")
        return n

    def action_id(self, qualified):
        if qualified not in self.actions:
            self.actions[qualified] = len(self.actions)
        return self.actions[qualified]

    # ------------------------------------------------------------------ parser
    def parser_prologue(self, parser, fn, sub):
        """The parser's C function head.

        The main parser is ``parser_X(pl, pkt, buf, n, hdr, meta, sm)``; a sub-parser (a parser instance
        applied in a state) is ``subparser_X(pl, pkt, buf, n, &off, &err, params...)`` returning 1 when it
        rejected (explicitly or with an error), which rejects the parser that applied it too.
        """
        out = fn.out
        params = parser.params
        params[0].c_code = None
        names = [self.c_parameter(p, parser.decl) for p in params[1:]]
        if sub:
            function = self.fresh("subparser_" + parser.name.replace(".", "__"))
            out.line(f"static int {function}(tb_pipeline_t *pl, P_t *pkt, const uint8_t *buf, uint32_t n, "
                     f"uint32_t *p_off, uint64_t *p_err{''.join(', ' + n for n in names)}) {{")
        else:
            function = "parser_" + parser.decl.name
            out.line(f"static int {function}(tb_pipeline_t *pl, P_t *pkt, const uint8_t *buf, uint32_t n, "
                     f"{', '.join(names)}) {{")
        parser.c_function = function
        out.indent()
        out.line("(void)pl; (void)pkt;")
        out.line(f"uint32_t off = {'*p_off' if sub else '0'}; uint64_t err = 0; int st = 0; unsigned steps = 0; "
                 f"int rej = 0; (void)steps; (void)rej;")
        for p in params[1:]:
            if p.direction == "out" and not isinstance(p.type, COMPOSITE) and sub:
                out.line(f"{p.c_code} = 0;")
        return function

    @staticmethod
    def parser_loop(fn):
        fn.out.line("for (;;) {")
        fn.out.line("switch (st) {")

    @staticmethod
    def parser_state(fn, state_id, first):
        fn.out.line(f"case {state_id}: {{")
        fn.out.indent()

    @staticmethod
    def parser_state_end(fn):
        fn.out.dedent()
        fn.out.line("}")

    @staticmethod
    def parser_epilogue(parser, fn, sub):
        out = fn.out
        out.line("default: goto P_done;")
        out.line("}")
        out.line("}")
        out.line("P_done:")
        if sub:
            out.line("*p_off = off; *p_err = err;")
            out.line("return (rej || err) ? 1 : 0;")
        else:
            out.line("pkt->payload_off = off;")
            out.line(f"{parser.params[3].c_code}.parser_error = (uint32_t)err;")
            out.line("return TB_OK;")
        out.dedent()
        out.line("}")

    def subparser_call(self, symbol, call, scope, fn):
        """``p.apply(packet, ...)`` in a parser state: the sub-parser continues at the current offset."""
        sub = symbol.parser
        out = fn.out
        codes, copy_backs = [], []
        for arg, p in zip(call.args[1:], sub.params[1:]):
            if arg.kind not in ("list", "struct_expr", "invalid_header", "dontcare"):
                self.model.type_of(arg, scope)
            if isinstance(p.type, COMPOSITE):
                self._composite_argument(arg, p, scope, fn, codes, copy_backs)
            elif p.direction in ("out", "inout"):
                if self.has_index(arg) or arg.kind == "slice":
                    raise self.unsupported(arg, "an indexed or sliced out argument of a parser")
                temp = fn.temp("a")
                out.line(f"uint64_t {temp} = {self.expr(arg, scope, fn) if p.direction == 'inout' else '0'};")
                codes.append(f"&{temp}")
                copy_backs.append(f"{self.lvalue(arg, scope, fn)} = {temp};")
            else:
                codes.append(self.expr(arg, scope, fn, want=p.type))
        flag = fn.temp("x")
        sub_err = fn.temp("e")
        out.line(f"uint64_t {sub_err} = 0;")
        out.line(f"int {flag} = {sub.c_function}(pl, pkt, buf, n, &off, &{sub_err}{''.join(', ' + c for c in codes)});")
        out.line(f"if ({flag} < 0) return {flag};")
        for line in copy_backs:
            out.line(line)
        out.line(f"if ({flag}) {{ err = {sub_err}; {'rej = 1; ' if getattr(fn, 'subparser', False) else ''}"
                 f"goto P_done; }}")

    def _composite_argument(self, arg, param, scope, fn, codes, copy_backs):
        """A header/struct argument of a sub-parser or sub-control: passed by reference; an ``out`` one
        through a fresh (zeroed) temporary copied back after the call."""
        target = self.lvalue(arg, scope, fn)
        if param.direction == "out":
            temp = fn.temp("o")
            fn.out.line(f"{self.ctype(param.type, arg)} {temp}; memset(&{temp}, 0, sizeof {temp});")
            codes.append(f"&{temp}")
            copy_backs.append(f"{target} = {temp};")
        else:
            codes.append(f"&{target}")

    @staticmethod
    def goto_end(fn, reject):
        if reject and getattr(fn, "subparser", False):
            fn.out.line("rej = 1; goto P_done;")
        else:
            fn.out.line("goto P_done;")

    def goto_state(self, fn, state_id, backward):
        if backward:
            fn.out.line(f"if (++steps > 4096) {{ err = {self.model.errors.get('ParserTimeout', 5)}; goto P_done; }}")
        fn.out.line(f"st = {state_id}; continue;")

    @staticmethod
    def no_transition(fn):
        fn.out.line("goto P_done;")

    def select_key(self, expr, scope, fn):
        name = fn.temp("k")
        fn.out.line(f"uint64_t {name} = {self.expr(expr, scope, fn)};")
        return name

    @staticmethod
    def select_case(fn, first, conditions):
        if conditions:
            fn.out.line(f"if ({' && '.join(conditions)}) {{")
            fn.out.indent()

    @staticmethod
    def select_case_end(fn, first, conditions):
        if conditions:
            fn.out.dedent()
            fn.out.line("}")

    def select_no_match(self, fn):
        fn.out.line(f"err = {self.model.errors['NoMatch']}; goto P_done;")

    def _keyset_condition(self, item, key, scope):
        if item.kind == "name":
            symbol = scope.lookup(item.name)
            if symbol is not None and symbol.kind == "instance":
                raise self.unsupported(item, "parser value set")
        return super()._keyset_condition(item, key, scope)

    def _const_for(self, expr, scope, type_):
        """A constant as a C value: int<W> as its two's complement bit pattern."""
        value = super()._const_for(expr, scope, type_)
        if isinstance(value, bool):
            return int(value)
        if isinstance(type_, T.BitType):
            value &= type_.mask
        if value < 0:
            raise self.unsupported(expr, "negative constant")
        return value

    # ------------------------------------------------------------------ controls
    def _gen_control(self, control, out, is_deparser):
        fn = _Fn("deparser" if is_deparser else "control", out)
        fn.control = control
        for sub in control.subcontrols.values():
            self._gen_control(sub, out, False)
        params = []
        copies = []
        for param in control.params:
            type_ = param.type
            if isinstance(type_, T.ExternType):
                if type_.name != "packet_out" or not is_deparser:
                    raise self.unsupported(control.decl, f"control parameter of extern type {type_.name}")
                param.c_code = None
                params.append("uint8_t *obuf, uint32_t ocap, uint32_t *p_off")
                continue
            params.append(self.c_parameter(param, control.decl))
            if param.direction == "out" and not isinstance(type_, COMPOSITE):
                copies.append(f"{param.c_code} = 0;")
        function = self.fresh("ctl_" + control.name.replace(".", "__"))
        control.c_function = function
        out.line(f"static int {function}(tb_pipeline_t *pl, P_t *pkt, {', '.join(params)}) {{")
        out.indent()
        out.line("(void)pl; (void)pkt;")
        if is_deparser:
            out.line("uint32_t off = *p_off;")
            fn.exit_code = "*p_off = off; return 1;"
            fn.return_code = "*p_off = off; return 0;"
        for line in copies:
            out.line(line)
        for variable in control.variables:
            self._local_variable(variable, control.scope, fn)
        self.block(control.decl.body, control.scope, fn)
        out.line(fn.return_code)
        out.dedent()
        out.line("}")
        return function

    def c_parameter(self, param, node):
        """The C parameter of a P4 parameter (sets its ``c_code``): composites and out/inout scalars by
        pointer, in scalars by value."""
        name = self.fresh("p_" + param.name)
        if isinstance(param.type, COMPOSITE):
            param.c_code = f"(*{name})"
            return f"{self.ctype(param.type, node)} *{name}"
        self.check_scalar(param.type, node)
        if param.direction in ("out", "inout"):
            param.c_code = f"(*{name})"
            return f"uint64_t *{name}"
        param.c_code = name
        return f"uint64_t {name}"

    def _local_variable(self, variable, scope, fn):
        decl = variable.decl
        self._declare(variable, variable.type, decl.init, scope, fn, decl)

    def _declare(self, symbol, type_, init, scope, fn, node):
        out = fn.out
        name = self.c_name(symbol)
        ctype = self.ctype(type_, node)
        if isinstance(type_, COMPOSITE):
            out.line(f"{ctype} {name}; memset(&{name}, 0, sizeof {name});")
            if init is not None:
                self.assign_composite(name, type_, init, scope, fn)
        elif init is None:
            out.line(f"uint64_t {name} = 0;")
        else:
            self.model.type_of(init, scope)
            out.line(f"uint64_t {name} = {self.expr(init, scope, fn, want=type_)};")

    # ------------------------------------------------------------------ statements
    def block(self, block, scope, fn):
        inner = scope.child()
        fn.out.line("{")
        fn.out.indent()
        for statement in block.statements:
            self.statement(statement, inner, fn)
        fn.out.dedent()
        fn.out.line("}")

    def body(self, statement, scope, fn):
        if statement.kind == "block":
            self.block(statement, scope, fn)
        else:
            fn.out.line("{")
            fn.out.indent()
            self.statement(statement, scope.child(), fn)
            fn.out.dedent()
            fn.out.line("}")

    def variable_declaration(self, symbol, node, scope, fn):
        if node.init is not None and node.init.kind not in BUILT:
            self.model.type_of(node.init, scope)
        self._declare(symbol, symbol.type, node.init, scope, fn, node)

    def compound_assignment(self, node, target_type, scope, fn):
        if self.has_index(node.target):
            raise self.unsupported(node, f"{node.op} on this target")
        operation = Node("binop", node.loc, op=COMPOUND_OPERATORS[node.op], left=node.target, right=node.value)
        self.model.type_of(operation, scope)
        self.store(node.target, self.expr(operation, scope, fn, want=target_type), scope, fn)

    def if_statement(self, node, scope, fn):
        self.condition(node, node.cond, scope, "if")
        fn.out.line(f"if ({self.expr(node.cond, scope, fn)})")
        self.body(node.then, scope, fn)
        if node.otherwise is not None:
            fn.out.line("else")
            self.body(node.otherwise, scope, fn)

    def exit_statement(self, node, fn):
        if fn.kind != "control":
            raise self.unsupported(node, f"exit in a {fn.kind}")
        self.emit_exit(fn)

    def emit_function_return(self, node, scope, fn):
        if node.expr is None:
            fn.out.line("return 0;")
        else:
            self.model.type_of(node.expr, scope)
            fn.out.line(f"return {self.expr(node.expr, scope, fn, want=fn.return_type)};")

    @staticmethod
    def emit_action_return(fn, node):
        fn.out.line(f"goto {fn.frames[fn.innermost('action')].label};")

    def union_code(self, node, scope, fn):
        return self.lvalue(node, scope, fn)

    @staticmethod
    def invalidate_member(fn, union, member):
        fn.out.line(f"{union}.f_{member}.valid = 0;")

    @staticmethod
    def has_index(node):
        """True if an l-value path has a stack index or next/last (evaluated once per use here)."""
        while node.kind in ("member", "slice", "index"):
            if node.kind == "index" or (node.kind == "member" and node.member in ("next", "last")):
                return True
            node = node.expr
        return False

    def for_statement(self, node, scope, fn):
        """``for (init; condition; updates) body``; ``continue`` runs the updates first."""
        out = fn.out
        inner = scope.child()
        out.line("{")
        for statement in node.init:
            self.statement(statement, inner, fn)
        frame = self.loop_frame(fn, node.updates, inner)
        out.line("for (;;) {")
        if node.cond is not None:
            self.condition(node, node.cond, inner, "for")
            out.line(f"if (!({self.expr(node.cond, inner, fn)})) break;")
        self.body(node.body, inner, fn)
        for statement in node.updates:
            self.statement(statement, inner, fn)
        fn.frames.pop()
        self.end_loop(frame, fn)

    @staticmethod
    def loop_variable(symbol, node, fn):
        """A ``for (T x in ...)`` loop opens a C block; its counter."""
        counter = fn.temp("it")
        fn.out.line("{")
        return counter

    def loop_over_range(self, counter, symbol, collection, scope, fn):
        type_ = symbol.type
        self.check_scalar(type_, symbol.decl)
        if type_.signed:
            raise self.unsupported(symbol.decl, "a range loop over int<W>")
        low = self.expr(collection.low, scope, fn, want=type_)
        high = self.expr(collection.high, scope, fn, want=type_)
        fn.out.line(f"for (unsigned __int128 {counter} = {low}; {counter} <= (unsigned __int128)({high}); "
                    f"{counter}++) {{")
        symbol.c_code = self.fresh("v_" + symbol.name)
        fn.out.line(f"uint64_t {symbol.c_code} = (uint64_t){counter};")

    def loop_over_stack(self, counter, symbol, collection, stack_type, scope, fn):
        stack = self.lvalue(collection, scope, fn)
        pointer = self.fresh("p_" + symbol.name)
        fn.out.line(f"for (int {counter} = 0; {counter} < {stack_type.size}; {counter}++) {{")
        fn.out.line(f"{self.ctype(symbol.type, symbol.decl)} *{pointer} = &{stack}.items[{counter}];")
        symbol.c_code = f"(*{pointer})"

    def loop_over_values(self, counter, symbol, items, scope, fn):
        self.check_scalar(symbol.type, symbol.decl)
        values = [self.expr(item, scope, fn, want=symbol.type) for item in items]
        array = fn.temp("vals")
        fn.out.line(f"uint64_t {array}[{max(len(values), 1)}] = {{{', '.join(values) or '0'}}};")
        fn.out.line(f"for (int {counter} = 0; {counter} < {len(values)}; {counter}++) {{")
        symbol.c_code = self.fresh("v_" + symbol.name)
        fn.out.line(f"uint64_t {symbol.c_code} = {array}[{counter}];")

    @staticmethod
    def end_loop(frame, fn):
        fn.out.line("}")
        fn.out.line("}")

    def switch_value(self, expr, scope, fn):
        value = fn.temp("sw")
        fn.out.line(f"uint64_t {value} = {self.expr(expr, scope, fn)};")
        return value

    def switch_action_label(self, qualified):
        return str(self.action_id(qualified))

    @staticmethod
    def switch_constant(value):
        return cnum(int(value))

    @staticmethod
    def switch_case(fn, first, value, values):
        if values is None:
            fn.out.line("else" if not first else "if (1)")
        else:
            cond = " || ".join(f"{value} == {v}" for v in values)
            fn.out.line(f"{'if' if first else 'else if'} ({cond})")

    # ------------------------------------------------------------------ assignment
    def assignment(self, node, scope, fn):
        target = node.target
        value = node.value
        target_type = self.model.type_of(target, scope)
        if value.kind not in ("list", "struct_expr", "invalid_header"):
            self.model.type_of(value, scope)
        if isinstance(target_type, COMPOSITE):
            dest = self.lvalue(target, scope, fn)
            self.assign_composite(dest, target_type, value, scope, fn)
            if isinstance(target_type, T.HeaderType) and target.kind == "member":
                parent_type = target.expr.type or self.model.type_of(target.expr, scope)
                if isinstance(parent_type, T.UnionType):
                    fn.out.line(f"if ({dest}.valid) {{")
                    self._invalidate_union_siblings(target, scope, fn)
                    fn.out.line("}")
            return
        # the l-value (its run-time indexes) is evaluated before the value (P4_16 "Assignment")
        if self.is_wide(target_type):
            dest = self.lvalue(target, scope, fn)
            source = self.wide_code(value, scope, fn)
            fn.out.line(f"memmove({dest}, {source}, sizeof {dest});")
            return
        if target.kind == "slice":
            self._slice_store(target, lambda: self.expr(value, scope, fn, want=target_type), scope, fn)
            return
        dest = self.lvalue(target, scope, fn)
        fn.out.line(f"{dest} = {self.expr(value, scope, fn, want=target_type)};")

    def store(self, target, value_code, scope, fn):
        """Emit ``target = value`` for a scalar l-value node."""
        self.model.type_of(target, scope)
        if target.kind == "slice":
            self._slice_store(target, value_code, scope, fn)
        else:
            fn.out.line(f"{self.lvalue(target, scope, fn)} = {value_code};")

    def _slice_store(self, target, value_code, scope, fn):
        """Emit ``target = value`` for a slice; ``value_code`` may be a callable giving the code, called
        after the l-value's indexes are evaluated."""
        base, lo, width = target, 0, None
        while base.kind == "slice":
            if width is None:
                width = base.hi_value - base.lo_value + 1
            lo += base.lo_value
            base = base.expr
        base_type = base.type or self.model.type_of(base, scope)
        if not isinstance(base_type, T.BitType) or base_type.width > 64:
            raise self.unsupported(target, "slice of this type")
        code = self.lvalue(base, scope, fn)
        if callable(value_code):
            value_code = value_code()
        mask = ((1 << width) - 1) << lo
        keep = ~mask & base_type.mask
        fn.out.line(f"{code} = ({code} & {cnum(keep)}) | ((({value_code}) << {lo}) & {cnum(mask)});")

    def assign_composite(self, dest, type_, value, scope, fn):
        out = fn.out
        kind = value.kind
        if kind == "invalid_header":
            out.line(f"memset(&{dest}, 0, sizeof {dest});")
            return
        if kind in ("list", "struct_expr"):
            if not isinstance(type_, (T.HeaderType, T.StructType)):
                raise self.unsupported(value, f"a list or structure expression of {type_.name_text()}")
            pairs = self.field_values(value, type_)
            temp = fn.temp("c")
            out.line(f"{self.ctype(type_, value)} {temp}; memset(&{temp}, 0, sizeof {temp});")
            for item, f in pairs:
                target = self.field(temp, type_, f.name)
                if isinstance(f.type, COMPOSITE):
                    self.assign_composite(target, f.type, item, scope, fn)
                else:
                    self.model.type_of(item, scope)
                    if self.is_wide(f.type):
                        out.line(f"memmove({target}, {self.wide_code(item, scope, fn)}, sizeof {target});")
                    else:
                        out.line(f"{target} = {self.expr(item, scope, fn, want=f.type)};")
            if isinstance(type_, T.HeaderType):
                out.line(f"{temp}.valid = 1;")
            out.line(f"{dest} = {temp};")
            return
        source = self.lvalue(value, scope, fn) if kind in ("name", "member") else None
        if source is None:
            raise self.unsupported(value, f"composite value of kind {kind}")
        out.line(f"{dest} = {source};")

    # ------------------------------------------------------------------ l-values
    def lvalue(self, node, scope, fn):
        """C l-value code of a variable, parameter or member path."""
        kind = node.kind
        if kind == "name":
            symbol = scope.lookup(node.name)
            if symbol is None or symbol.kind not in ("var", "param"):
                raise self.unsupported(node, f"use of {node.name} as a variable")
            code = getattr(symbol, "c_code", None)
            if code is None:
                if symbol.kind == "param" and getattr(symbol, "action_param", False):
                    raise self.unsupported(node, f"action parameter {node.name} outside its action")
                return self.c_name(symbol)
            return code
        if kind == "member":
            base_type = node.expr.type or self.model.type_of(node.expr, scope)
            if isinstance(base_type, T.StackType):
                base = self.lvalue(node.expr, scope, fn)
                if node.member == "next":
                    return self._stack_item(base, f"{base}.next_index", base_type, fn)
                if node.member == "last":
                    return self._stack_item(base, f"({base}.next_index - 1)", base_type, fn)
                raise self.unsupported(node, f"stack member {node.member} as an l-value")
            if not isinstance(base_type, COMPOSITE):
                raise self.unsupported(node, f"member of {base_type.name_text()}")
            return self.field(self.lvalue(node.expr, scope, fn), base_type, node.member)
        if kind == "call" and node.func.kind == "member" and node.func.member == "lookahead" and \
                isinstance(node.type or self.model.type_of(node, scope), T.HeaderType):
            return self._lookahead(node, fn)
        if kind == "index":
            base_type = node.expr.type or self.model.type_of(node.expr, scope)
            if not isinstance(base_type, T.StackType):
                raise self.unsupported(node, f"index of {base_type.name_text()}")
            base = self.lvalue(node.expr, scope, fn)
            folded = self.model.try_const(node.index, scope)
            if folded is not None:
                index = int(folded[0])
                if not 0 <= index < base_type.size:
                    raise self.unsupported(node, f"header stack index {index} out of bounds (size {base_type.size})")
                return f"{base}.items[{index}]"
            self.model.type_of(node.index, scope)
            return self._stack_item(base, self.expr(node.index, scope, fn), base_type, fn)
        raise self.unsupported(node, f"l-value of kind {kind}")

    def _stack_item(self, base, index_code, stack_type, fn):
        """A stack element at a run-time index: out of range stops the switch, as simple_switch does."""
        temp = fn.temp("si")
        fn.out.line(f"uint64_t {temp} = (uint64_t)({index_code});")
        fn.out.line(f"if ({temp} >= {stack_type.size}) {{ pkt->fail = \"header stack index out of range\"; "
                    f"{self.fail_code(fn, 'TB_HALT')} }}")
        return f"{base}.items[{temp}]"

    def wide_code(self, node, scope, fn):
        """Byte array code of a field wider than 64 bits (only header fields and paths to them)."""
        if node.kind not in ("name", "member"):
            raise self.unsupported(node, "value wider than 64 bits that is not a field")
        return self.lvalue(node, scope, fn)

    # ------------------------------------------------------------------ expressions
    def folded_constant(self, value, type_, node):
        if isinstance(type_, T.BitType) and type_.width <= 64:
            value &= type_.mask  # int<W>: the two's complement pattern
        if value < 0 or value >> 64:
            raise self.unsupported(node, "constant outside 0..2**64-1")
        return cnum(value)

    def expression(self, node, scope, fn, want=None):
        """C code (a uint64_t value) of a scalar expression (typed, not a constant :meth:`Walk.expr` folded)."""
        if node.kind not in ("call", "member", "binop") or not isinstance(node.type, T.TableApplyType):
            if isinstance(node.type, T.BitType):
                self.check_scalar(node.type, node)
        return super().expression(node, scope, fn, want)

    @staticmethod
    def int_literal(value):
        return cnum(int(value))

    def constant_name(self, node, value, want):
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(want, T.BitType):
            value = convert_int(value, want) & want.mask
        if not isinstance(value, int) or value < 0 or value >> 64:
            raise self.unsupported(node, f"constant {node.name} of this value")
        return cnum(value)

    def variable_code(self, symbol, node, scope, fn):
        return self.lvalue(node, scope, fn)

    def index_expr(self, node, scope, fn):
        return self.lvalue(node, scope, fn)

    def unop(self, node, inner, type_):
        if node.op == "~" and isinstance(type_, T.BitType):
            return f"({inner} ^ {cnum(type_.mask)})"
        if node.op == "-" and isinstance(type_, T.BitType):
            return f"((0 - {inner}) & {cnum(type_.mask)})"
        raise self.unsupported(node, f"operator {node.op} on {type_.name_text()}")

    def stack_member(self, node, base_type, scope, fn):
        base = self.lvalue(node.expr, scope, fn)
        if node.member == "lastIndex":
            return f"((uint64_t)({base}.next_index - 1) & 4294967295u)"
        if node.member == "nextIndex":
            return f"((uint64_t){base}.next_index)"
        if node.member == "size":
            return str(base_type.size)
        return self.lvalue(node, scope, fn)

    def field_expr(self, node, scope, fn):
        return self.lvalue(node, scope, fn)

    def header_valid_code(self, header, scope, fn):
        return f"((uint64_t){self.lvalue(header, scope, fn)}.valid)"

    def union_valid_code(self, union_node, union_type, scope, fn):
        union = self.lvalue(union_node, scope, fn)
        return "((uint64_t)(" + " || ".join(f"{union}.f_{f.name}.valid" for f in union_type.fields) + "))"

    def packet_length_code(self, node):
        raise self.unsupported(node, "packet_in.length()")

    # ------------------------------------------------------------------ statements inside expressions
    @staticmethod
    def declare_temp(fn, temp):
        fn.out.line(f"uint64_t {temp};")

    @staticmethod
    def set_temp(fn, temp, code, declare=False):
        fn.out.line(f"uint64_t {temp} = {code};" if declare else f"{temp} = {code};")

    @staticmethod
    def begin_if(fn, cond, negate=False):
        fn.out.line(f"if (!{cond}) {{" if negate else f"if ({cond}) {{")

    @staticmethod
    def begin_else(fn):
        fn.out.line("} else {")

    @staticmethod
    def end_if(fn):
        fn.out.line("}")

    @staticmethod
    def is_literal(code):
        return code.isdigit()

    def _lookahead(self, node, fn):
        type_ = node.type
        if fn.kind == "parser" and isinstance(type_, T.HeaderType) and type_.varbit is None:
            temp = fn.temp("la")
            fn.out.line(f"if (off + {type_.byte_size} > n) {{ err = TB_PACKET_TOO_SHORT; goto P_done; }}")
            fn.out.line(f"{self.ctype(type_, node)} {temp}; memset(&{temp}, 0, sizeof {temp});")
            self._extract_fields(temp, type_, fn.out)
            return temp
        if fn.kind != "parser" or not isinstance(type_, T.BitType) or type_.width > 64:
            raise self.unsupported(node, f"lookahead<{type_.name_text()}>")
        nbytes = (type_.width + 7) // 8
        temp = fn.temp("la")
        fn.out.line(f"if (off + {nbytes} > n) {{ err = TB_PACKET_TOO_SHORT; goto P_done; }}")
        fn.out.line(f"uint64_t {temp} = tb_get_bits(buf + off, 0, {type_.width});")
        return temp

    def _cast(self, node, scope, fn):
        target = node.type.underlying if isinstance(node.type, T.EnumType) else node.type
        if isinstance(target, T.BitType):
            self.check_scalar(target, node)
        return super()._cast(node, scope, fn)

    @staticmethod
    def cast_bits(inner, source, target):
        if source.signed and source.width < target.width:
            return f"((uint64_t)tb_sext({inner}, {source.width}) & {cnum(target.mask)})"
        if source.width > target.width:
            return f"({inner} & {cnum(target.mask)})"
        return inner

    def composite_operand(self, node, type_, scope, fn):
        """C code of a header/struct/stack operand (list and structure expressions are built in a temporary)."""
        if node.kind in ("name", "member", "index"):
            return self.lvalue(node, scope, fn)
        temp = fn.temp("c")
        fn.out.line(f"{self.ctype(type_, node)} {temp}; memset(&{temp}, 0, sizeof {temp});")
        self.assign_composite(temp, type_, node, scope, fn)
        return temp

    def save_composite(self, fn, code, type_, node):
        temp = fn.temp("l")
        fn.out.line(f"{self.ctype(type_, node)} {temp} = {code};")
        return temp

    def _equal_code(self, left, right, type_):
        """Equality as P4_16 defines it: headers both invalid or both valid with equal fields; members of structs
        and stacks pairwise."""
        if isinstance(type_, T.StackType):
            parts = [self._equal_code(f"{left}.items[{i}]", f"{right}.items[{i}]", type_.element)
                     for i in range(type_.size)]
            return "(" + " && ".join(parts) + ")"
        parts = []
        for f in type_.fields:
            a, b = self.field(left, type_, f.name), self.field(right, type_, f.name)
            if isinstance(f.type, COMPOSITE):
                parts.append(self._equal_code(a, b, f.type))
            elif isinstance(f.type, T.VarbitType):
                parts.append(f"({left}.l_{f.name} == {right}.l_{f.name} && memcmp({a}, {b}, sizeof {a}) == 0)")
            elif self.is_wide(f.type):
                parts.append(f"(memcmp({a}, {b}, sizeof {a}) == 0)")
            else:
                parts.append(f"({a} == {b})")
        fields = " && ".join(parts) or "1"
        if isinstance(type_, T.HeaderType):
            return f"({left}.valid == {right}.valid && (!{left}.valid || ({fields})))"
        return f"({fields})"

    def arithmetic(self, node, scope, fn):
        """The binary operators but ``&&``, ``||`` and equality of composites."""
        op = node.op
        type_ = node.type
        left_type = node.left.type
        right_type = node.right.type
        if op in ("eq", "ne") and (self.is_wide(left_type) or self.is_wide(right_type)):
            left = self.wide_code(node.left, scope, fn)
            right = self.wide_code(node.right, scope, fn)
            return f"(memcmp({left}, {right}, sizeof {left}) {'==' if op == 'eq' else '!='} 0)"
        if op in ("eq", "ne", "lt", "gt", "le", "ge"):
            operand_type = left_type if not isinstance(left_type, T.InfIntType) else right_type
            left, right = self._operands(node.left, node.right, scope, fn, want=operand_type)
            symbol = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}[op]
            if op not in ("eq", "ne") and isinstance(operand_type, T.BitType) and operand_type.signed:
                width = operand_type.width
                return f"(tb_sext({left}, {width}) {symbol} tb_sext({right}, {width}))"
            return f"({left} {symbol} {right})"
        if isinstance(type_, T.InfIntType):
            raise self.unsupported(node, "arithmetic on width-less integers at run time")
        self.check_scalar(type_, node)
        if op == "concat":
            left, right = self._operands(node.left, node.right, scope, fn)
            return f"(({left} << {right_type.width}) | {right})"
        if op in ("shl", "shr"):
            left = self.saved(self.expr(node.left, scope, fn, want=type_), node.right, scope, fn)
            amount = self.model.try_const(node.right, scope)
            if op == "shr" and type_.signed:
                count = cnum(int(amount[0])) if amount is not None else self.expr(node.right, scope, fn)
                return f"tb_sshr({left}, {count}, {type_.width})"
            if amount is not None:
                count = int(amount[0])
                if op == "shr":
                    return f"({left} >> {count})" if count < 64 else "0"
                if count >= type_.width:
                    return "0"
                return f"(({left} << {count}) & {cnum(type_.mask)})"
            right = self.expr(node.right, scope, fn)
            if op == "shr":
                return f"tb_shr({left}, {right})"
            return f"tb_shl({left}, {right}, {type_.width})"
        left, right = self._operands(node.left, node.right, scope, fn, want=type_)
        mask = cnum(type_.mask) if isinstance(type_, T.BitType) else None
        if op in ("band", "bor", "bxor"):
            return f"({left} {({'band': '&', 'bor': '|', 'bxor': '^'})[op]} {right})"
        if op in ("add", "sub", "mul"):
            symbol = {"add": "+", "sub": "-", "mul": "*"}[op]
            return f"(({left} {symbol} {right}) & {mask})"
        signed = isinstance(type_, T.BitType) and type_.signed
        if op in ("div", "mod") and signed:
            raise self.unsupported(node, f"{op} of {type_.name_text()} values")
        if op == "div":
            return f"tb_udiv({left}, {right})"
        if op == "mod":
            return f"tb_umod({left}, {right})"
        if op in ("sadd", "ssub") and signed:
            symbol = "+" if op == "sadd" else "-"
            return (f"tb_ssat((__int128)tb_sext({left}, {type_.width}) {symbol} (__int128)tb_sext({right}, "
                    f"{type_.width}), {type_.width})")
        if op == "sadd":
            return f"tb_sadd({left}, {right}, {mask})"
        if op == "ssub":
            return f"tb_ssub({left}, {right})"
        raise self.unsupported(node, f"operator {op}")

    # ------------------------------------------------------------------ calls
    def header_validity(self, base, method, scope, fn):
        target = self.lvalue(base, scope, fn)
        if method == "setValid":
            self._invalidate_union_siblings(base, scope, fn)
            fn.out.line(f"{target}.valid = 1;")
        elif method == "setInvalid":
            fn.out.line(f"{target}.valid = 0;")

    def stack_shift(self, base, base_type, method, count, scope, fn):
        stack = self.lvalue(base, scope, fn)
        size = base_type.size
        count = min(count, size)
        if count:
            items = f"{stack}.items"
            if method == "push_front":
                fn.out.line(f"memmove(&{items}[{count}], &{items}[0], {size - count} * sizeof {items}[0]);")
                fn.out.line(f"memset(&{items}[0], 0, {count} * sizeof {items}[0]);")
                fn.out.line(f"{stack}.next_index = {stack}.next_index + {count} < {size} ? "
                            f"{stack}.next_index + {count} : {size};")
            else:
                fn.out.line(f"memmove(&{items}[0], &{items}[{count}], {size - count} * sizeof {items}[0]);")
                fn.out.line(f"memset(&{items}[{size - count}], 0, {count} * sizeof {items}[0]);")
                fn.out.line(f"{stack}.next_index = {stack}.next_index > {count} ? "
                            f"{stack}.next_index - {count} : 0;")

    def inline_action(self, symbol, args, scope, fn, node, from_table=None, bound=()):
        """An action's body in place: parameters as C locals, scalar out/inout copied back at its end
        (also when it leaves through ``return`` or ``exit``, as P4's copy-in/copy-out says)."""
        decl = symbol.decl
        out = fn.out
        params = decl.param_symbols
        label = self.fresh("A_end")
        out.line("{")
        out.indent()
        pairs = self.action_pairs(symbol, args, node, bound)
        copy_backs = []
        codes = []
        for arg, p in pairs:
            self.check_scalar(p.type, node)
            if arg.kind not in ("list", "struct_expr", "invalid_header", "dontcare"):
                self.model.type_of(arg, scope)
            if p.direction in ("out", "inout"):
                if arg.kind == "dontcare":
                    codes.append("0")
                    continue
                if self.has_index(arg) or arg.kind == "slice":
                    raise self.unsupported(arg, "an indexed or sliced out argument of an action")
                codes.append(self.expr(arg, scope, fn) if p.direction == "inout" else "0")
                copy_backs.append((arg, p))
            else:
                codes.append(self.expr(arg, scope, fn, want=p.type))
        for code, (_, p) in zip(codes, pairs):
            p.c_code = self.fresh("a_" + p.name)
            out.line(f"uint64_t {p.c_code} = {code};")
        if from_table is not None:
            for index, p in enumerate([p for p in params if not p.direction]):
                self.check_scalar(p.type, node)
                p.c_code = self.fresh("a_" + p.name)
                value = f"{from_table}.args[{index}]"
                if isinstance(p.type, T.BoolType):
                    value = f"({value} != 0)"
                out.line(f"uint64_t {p.c_code} = {value};")
        frame = Frame("action")
        frame.label = label
        if copy_backs:
            frame.exit_flag = fn.temp("ex")
            out.line(f"int {frame.exit_flag} = 0;")
        fn.frames.append(frame)
        self.block(decl.body, symbol.scope, fn)
        fn.frames.pop()
        out.line(f"{label}: ;")
        for arg, p in copy_backs:
            out.line(f"{self.lvalue(arg, scope, fn)} = {p.c_code};")
        if frame.exit_flag is not None:
            out.line(f"if ({frame.exit_flag}) {{")
            self.emit_exit(fn)
            out.line("}")
        out.dedent()
        out.line("}")

    @staticmethod
    def fail_code(fn, status):
        """C statement(s) stopping the packet with ``status`` (TB_DROPPED / TB_HALT) where ``fn`` is."""
        if fn.kind == "function":
            return f"pkt->fail_status = {status}; return 0;"
        return f"return -{status};"

    def emit_exit(self, fn):
        """``exit``: leave the control, through the copy-backs of the actions it is in."""
        for frame in reversed(fn.frames):
            if frame.kind == "action" and frame.exit_flag is not None:
                fn.out.line(f"{frame.exit_flag} = 1; goto {frame.label};")
                return
        fn.out.line(fn.exit_code)

    def function_call(self, symbol, call, scope, fn):
        """Code of a P4 function call: emits the call and its copy-backs, returns the result's code."""
        decl = symbol.decl
        if not hasattr(decl, "c_function"):
            self._gen_function(symbol, call)
        params = decl.param_symbols
        self.check_arguments(call, decl.name, params, call.args)
        codes, copy_backs = [], []
        for arg, p in zip(call.args, params):
            if arg.kind not in ("list", "struct_expr", "invalid_header", "dontcare"):
                self.model.type_of(arg, scope)
            if isinstance(p.type, COMPOSITE):
                if p.direction == "out":
                    raise self.unsupported(arg, "an out header or struct argument of a function")
                codes.append(f"&{self.lvalue(arg, scope, fn)}")
            elif p.direction in ("out", "inout"):
                if self.has_index(arg) or arg.kind == "slice":
                    raise self.unsupported(arg, "an indexed or sliced out argument of a function")
                temp = fn.temp("a")
                fn.out.line(f"uint64_t {temp} = {self.expr(arg, scope, fn) if p.direction == 'inout' else '0'};")
                codes.append(f"&{temp}")
                copy_backs.append((arg, temp))
            else:
                codes.append(self.expr(arg, scope, fn, want=p.type))
        result = fn.temp("f")
        fn.out.line(f"uint64_t {result} = {decl.c_function}(pl, pkt{''.join(', ' + c for c in codes)});")
        fn.out.line("if (pkt->fail_status) return -(int)pkt->fail_status;")
        for arg, temp in copy_backs:
            fn.out.line(f"{self.lvalue(arg, scope, fn)} = {temp};")
        return result

    def _gen_function(self, symbol, node):
        decl = symbol.decl
        if not isinstance(symbol.return_type, T.VoidType):
            self.check_scalar(symbol.return_type, node)
        emitter = Emitter()
        fn = _Fn("function", emitter)
        scope = self.function_scope(decl)
        names = [self.c_parameter(param, node) for param in decl.param_symbols]
        decl.c_function = self.fresh("fn_" + decl.name)
        fn.exit_code = None
        fn.return_code = "return 0;"
        signature = f"static uint64_t {decl.c_function}(tb_pipeline_t *pl, P_t *pkt{''.join(', ' + n for n in names)})"
        self.funcs.line(signature + ";")
        emitter.line(signature + " {")
        emitter.indent()
        emitter.line("(void)pl; (void)pkt;")
        fn.return_type = symbol.return_type
        self.block(decl.body, scope, fn)
        emitter.line("return 0;")
        emitter.dedent()
        emitter.line("}")
        self.function_bodies.extend(emitter)

    def subcontrol_call(self, symbol, call, scope, fn):
        sub = symbol.control
        out = fn.out
        codes = []
        copy_backs = []
        written = []
        for arg, param in zip(call.args, sub.params):
            type_ = param.type
            if arg.kind == "dontcare":
                raise self.unsupported(call, "_ as a control argument")
            if arg.kind not in ("list", "struct_expr", "invalid_header"):
                self.model.type_of(arg, scope)
            if isinstance(type_, COMPOSITE):
                root, path = lvalue_path(arg)
                if root is None:
                    raise self.unsupported(arg, "a control argument that is not a variable or member")
                found = scope.lookup(root.name)
                written.append((id(found), path, param.direction in ("out", "inout")))
                self._composite_argument(arg, param, scope, fn, codes, copy_backs)
                continue
            if param.direction in ("out", "inout"):
                temp = fn.temp("a")
                initial = self.expr(arg, scope, fn) if param.direction == "inout" else "0"
                out.line(f"uint64_t {temp} = {initial};")
                codes.append(f"&{temp}")
                if arg.kind == "slice":
                    raise self.unsupported(arg, "a slice as an out argument of a control")
                copy_backs.append(f"{self.lvalue(arg, scope, fn)} = {temp};")
            else:
                codes.append(self.expr(arg, scope, fn, want=type_))
        for i, first in enumerate(written):
            for second in written[i + 1:]:
                if first[0] == second[0] and (first[2] or second[2]) and paths_overlap(first[1], second[1]):
                    raise self.unsupported(call, "overlapping composite arguments of a control")
        flag = fn.temp("x")
        out.line(f"int {flag} = {sub.c_function}(pl, pkt, {', '.join(codes)});")
        for line in copy_backs:
            out.line(line)
        out.line(f"if ({flag} < 0) return {flag};")
        out.line(f"if ({flag}) {{ {fn.exit_code} }}")

    # ------------------------------------------------------------------ tables
    def _table_apply(self, node, table, scope, fn):
        """Emit the lookup and the action dispatch; return (hit code, action id code)."""
        if fn.kind != "control":
            raise self.unsupported(node, "table applied outside a control")
        out = fn.out
        model = self.model
        index = self.table_index[table.name]
        keys = []
        for key in table.match_keys:
            key_type = model.type_of(key.expr, table.control.scope)
            if self.is_wide(key_type):
                raise self.unsupported(key.expr, "table key wider than 64 bits")
            keys.append(self.expr(key.expr, table.control.scope, fn))
        karr = fn.temp("k")
        out.line(f"uint64_t {karr}[{max(len(keys), 1)}] = {{{', '.join(keys) or '0'}}};")
        selector = "0"
        if table.selector_keys:
            profile = self.info.action_profiles[table.implementation.qualified]
            if profile.algorithm == "random":
                raise self.unsupported(node, "selector with hash algorithm random")
            fields = []
            for key in table.selector_keys:
                key_type = model.type_of(key.expr, table.control.scope)
                fields.append(self._field_item(key.expr, key_type, table.control.scope, fn, key.width))
            buf, nbytes = self._pack(fields, fn)
            selector = fn.temp("h")
            out.line(f"uint64_t {selector} = tb_hash({ALGORITHM_IDS[profile.algorithm]}, {buf}, {nbytes});")
        result = fn.temp("r")
        out.line(f"tb_result_t {result};")
        out.line(f"tb_table_lookup(&pl->tables[{index}], {karr}, {selector}, &{result});")
        if table.direct_counter is not None:
            out.line(f"if ({result}.hit && {result}.entry) {{ {result}.entry->counter_packets += 1; "
                     f"{result}.entry->counter_bytes += pkt->sm.packet_length; }}")
        if table.idle_timeout:
            out.line(f"if ({result}.hit && {result}.entry) {result}.entry->last_hit_ns = pkt->now_ns + 1;")
        if table.direct_meter is not None:
            unit = self.info.direct_meters[table.direct_meter.qualified].unit
            need = "pkt->sm.packet_length" if unit == "BYTES" else "1"
            out.line(f"if ({result}.hit) pkt->meter_color = {result}.entry ? "
                     f"tb_meter_cell_execute(&{result}.entry->meter, {need}, pkt->now_ns) : 0;")
        first = True
        for ref in table.action_refs:
            out.line(f"{'if' if first else 'else if'} ({result}.action == {self.action_id(ref.symbol.qualified)})")
            first = False
            self.inline_action(ref.symbol, None, table.control.scope, fn, node, from_table=result,
                               bound=ref.args or ())
        return f"((uint64_t){result}.hit)", f"((uint64_t){result}.action)"

    # ------------------------------------------------------------------ field lists
    def _field_item(self, node, type_, scope, fn, width=None):
        """(kind, code, width) of one scalar of a field list: kind 'v' value, 'w' wide byte array."""
        if self.is_wide(type_):
            return ("w", self.wide_code(node, scope, fn), type_.width)
        if isinstance(type_, T.VarbitType):
            if node.kind != "member":
                raise self.unsupported(node, "a varbit value that is not a header field")
            return ("vb", self.lvalue(node, scope, fn), f"{self.lvalue(node.expr, scope, fn)}.l_{node.member}")
        width = T.scalar_width(type_) if width is None else width
        if width is None:
            raise self.unsupported(node, f"{type_.name_text()} in a field list")
        return ("v", self.expr(node, scope, fn), width)

    def _field_list(self, node, scope, fn):
        if node.kind == "list":
            items = []
            for item in node.items:
                items.extend(self._field_list(item, scope, fn))
            return items
        type_ = self.model.type_of(node, scope)
        if isinstance(type_, COMPOSITE):
            return self._composite_items(self.lvalue(node, scope, fn), type_, node)
        return [self._field_item(node, type_, scope, fn)]

    def _composite_items(self, base, type_, node):
        items = []
        for f in type_.fields:
            code = self.field(base, type_, f.name)
            if isinstance(f.type, T.StackType):
                raise self.unsupported(node, "a header stack in a field list")
            if isinstance(f.type, COMPOSITE):
                items.extend(self._composite_items(code, f.type, node))
            elif isinstance(f.type, T.VarbitType):
                items.append(("vb", code, f"{base}.l_{f.name}"))
            elif self.is_wide(f.type):
                items.append(("w", code, f.type.width))
            else:
                width = T.scalar_width(f.type)
                if width is None:
                    raise self.unsupported(node, f"{f.type.name_text()} in a field list")
                items.append(("v", code, width))
        return items

    def _pack(self, items, fn):
        """Emit a byte buffer holding the items packed MSB first; return (buffer, byte count)."""
        if any(kind == "vb" for kind, _, _ in items):
            return self._pack_runtime(items, fn)
        total = sum(width for _, _, width in items)
        nbytes = (total + 7) // 8
        buf = fn.temp("fb")
        fn.out.line(f"uint8_t {buf}[{max(nbytes, 1)}]; memset({buf}, 0, sizeof {buf});")
        bit = 0
        for kind, code, width in items:
            if width == 0:
                continue
            if kind == "w":
                if bit % 8:
                    fn.out.line(f"for (unsigned _i = 0; _i < {width // 8}; _i++) "
                                f"tb_put_bits({buf}, {bit} + 8 * _i, 8, {code}[_i]);")
                else:
                    fn.out.line(f"memcpy({buf} + {bit // 8}, {code}, {width // 8});")
            else:
                fn.out.line(f"tb_put_bits({buf}, {bit}, {width}, {code});")
            bit += width
        return buf, nbytes

    def _pack_runtime(self, items, fn):
        """``_pack`` for field lists with a varbit (its length is known at run time)."""
        room = sum(width for kind, _, width in items if kind != "vb")
        buf, pos = fn.temp("fb"), fn.temp("pos")
        varbits = [code for kind, code, _ in items if kind == "vb"]
        size = f"({(room + 7) // 8 + 1} + {' + '.join(f'sizeof {code}' for code in varbits)})"
        fn.out.line(f"uint8_t {buf}[{size}]; memset({buf}, 0, sizeof {buf}); unsigned {pos} = 0;")
        for kind, code, width in items:
            if kind == "vb":
                fn.out.line(f"for (unsigned _i = 0; _i < ({width}) / 8; _i++) tb_put_bits({buf}, {pos} + 8 * _i, 8, "
                            f"{code}[_i]);")
                fn.out.line(f"{pos} += {width};")
            elif kind == "w":
                fn.out.line(f"for (unsigned _i = 0; _i < {width // 8}; _i++) tb_put_bits({buf}, {pos} + 8 * _i, 8, "
                            f"{code}[_i]);")
                fn.out.line(f"{pos} += {width};")
            elif width:
                fn.out.line(f"tb_put_bits({buf}, {pos}, {width}, {code}); {pos} += {width};")
        return buf, f"(({pos} + 7) / 8)"

    # ------------------------------------------------------------------ externs
    def _algorithm(self, node):
        if node.kind != "type_member" or node.type_name != "HashAlgorithm" or node.member not in ALGORITHM_IDS:
            raise self.unsupported(node, "hash algorithm that is not HashAlgorithm.<name>")
        if node.member == "random":
            raise self.unsupported(node, "hash algorithm random")
        return ALGORITHM_IDS[node.member]

    def extern_function(self, name, call, scope, fn):
        args = call.args
        out = fn.out
        for arg in args:
            if arg.kind not in ("list", "dontcare"):
                self.model.type_of(arg, scope)
        if name == "mark_to_drop":
            target = self.lvalue(args[0], scope, fn) if args else "pkt->sm"
            out.line(f"{target}.egress_spec = TB_DROP_PORT; {target}.mcast_grp = 0;")
        elif name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                      "update_checksum_with_payload"):
            algorithm = self._algorithm(args[3])
            target_type = self.model.type_of(args[2], scope)
            if not isinstance(target_type, T.BitType) or target_type.width > 64:
                raise self.unsupported(args[2], "checksum field that is not bit<W <= 64>")
            cond = self.expr(args[0], scope, fn)
            out.line(f"if ({cond}) {{")
            buf, nbytes = self._pack(self._field_list(args[1], scope, fn), fn)
            if name.endswith("_with_payload"):
                value = (f"tb_hash2({algorithm}, {buf}, {nbytes}, pkt->frame + pkt->payload_off, "
                         f"pkt->len - pkt->payload_off)")
            else:
                value = f"tb_hash({algorithm}, {buf}, {nbytes})"
            if name.startswith("verify"):
                field = self.expr(args[2], scope, fn)
                if algorithm == ALGORITHM_IDS["csum16"] or True:
                    out.line(f"if ({value} != {field}) pkt->sm.checksum_error = 1;")
            else:
                self.store(args[2], f"({value} & {cnum(target_type.mask)})", scope, fn)
            out.line("}")
        elif name == "hash":
            result_type = self.model.type_of(args[0], scope)
            if not isinstance(result_type, T.BitType) or result_type.width > 64:
                raise self.unsupported(args[0], "hash result that is not bit<W <= 64>")
            algorithm = self._algorithm(args[1])
            base = self.expr(args[2], scope, fn, want=result_type)
            maximum = self.expr(args[4], scope, fn, want=T.BitType(64))
            buf, nbytes = self._pack(self._field_list(args[3], scope, fn), fn)
            self.store(args[0], f"tb_hash_ext(tb_hash({algorithm}, {buf}, {nbytes}), {base}, {maximum}, "
                                f"{result_type.width})", scope, fn)
        elif name == "random":
            result_type = self.model.type_of(args[0], scope)
            if not isinstance(result_type, T.BitType) or result_type.signed or result_type.width > 64:
                raise self.unsupported(args[0], "random of a type other than bit<W <= 64>")
            low = self.expr(args[1], scope, fn, want=result_type)
            high = self.expr(args[2], scope, fn, want=result_type)
            self.store(args[0], f"tb_rng_randint(&pl->rng, {low}, {high})", scope, fn)
        elif name in ("clone", "clone_preserving_field_list"):
            if args[0].kind != "type_member" or args[0].type_name != "CloneType":
                raise self.unsupported(args[0], "clone type that is not CloneType.I2E or E2E")
            session = self.expr(args[1], scope, fn, want=T.BitType(32))
            field_list = str(self.model.const_value(args[2], scope)) if name != "clone" else "-1"
            out.line(f"pkt->req.clone_session = (int32_t){session}; pkt->req.clone_field_list = {field_list};")
        elif name == "clone3":
            if args[0].kind != "type_member" or args[0].type_name != "CloneType":
                raise self.unsupported(args[0], "clone type that is not CloneType.I2E or E2E")
            session = self.expr(args[1], scope, fn, want=T.BitType(32))
            index = self._synthetic_field_list(args[2], scope)
            out.line(f"pkt->req.clone_session = (int32_t){session}; pkt->req.clone_field_list = {index};")
        elif name in ("resubmit", "recirculate"):
            attribute = "resubmit_field_list" if name == "resubmit" else "recirculate_field_list"
            out.line(f"pkt->req.{attribute} = {self._synthetic_field_list(args[0], scope)};")
        elif name in ("resubmit_preserving_field_list", "recirculate_preserving_field_list"):
            index = self.model.const_value(args[0], scope)
            attribute = "resubmit_field_list" if name.startswith("resubmit") else "recirculate_field_list"
            out.line(f"pkt->req.{attribute} = {int(index)};")
        elif name == "truncate":
            out.line(f"pkt->req.truncate_length = (int32_t){self.expr(args[0], scope, fn, want=T.BitType(32))};")
        elif name in ("assert", "assume"):
            filename, line = self.model.location(call)
            message = f"{name} failed at {filename}:{line}".replace("\\", "/").replace('"', "'")
            out.line(f"if (!{self.expr(args[0], scope, fn)}) {{ pkt->fail = \"{message}\"; "
                     f"{self.fail_code(fn, 'TB_DROPPED')} }}")
        elif name == "digest":
            digest_type = getattr(call, "digest_type", None)
            if digest_type is None:
                raise self.unsupported(call, "digest of data without a named struct type")
            data = args[1]
            if data.kind == "list":
                if len(data.items) != len(digest_type.fields):
                    raise self.unsupported(data, f"digest {digest_type.name} with the wrong number of values")
                values = [self.expr(item, scope, fn, want=f.type) for item, f in zip(data.items, digest_type.fields)]
            else:
                base = self.lvalue(data, scope, fn)
                values = [self.field(base, digest_type, f.name) for f in digest_type.fields]
                for f in digest_type.fields:
                    self.check_scalar(f.type, data)
            self._event(call, {"kind": "digest", "name": digest_type.name, "count": len(values)}, values, fn)
        elif name == "log_msg":
            if not args or args[0].kind != "string":
                raise self.unsupported(call, "log_msg without a string literal first")
            items = []
            if len(args) > 1:
                items = args[1].items if args[1].kind == "list" else [args[1]]
            values, kinds = [], []
            for item in items:
                item_type = self.model.type_of(item, scope)
                values.append(self.expr(item, scope, fn))
                if isinstance(item_type, T.BoolType):
                    kinds.append(["bool", 1])
                elif isinstance(item_type, T.BitType) and item_type.signed:
                    kinds.append(["int", item_type.width])
                else:
                    kinds.append(["bit", 64])
            self._event(call, {"kind": "log", "message": args[0].value, "values": kinds}, values, fn)
        elif name in TARGET_EXTERNS:
            self._target_extern(name, call, scope, fn)
        elif name == "verify":
            if fn.kind != "parser":
                raise self.unsupported(call, "verify outside a parser")
            out.line(f"if (!{self.expr(args[0], scope, fn)}) {{ err = {self.expr(args[1], scope, fn)}; "
                     f"goto P_done; }}")
        else:
            raise self.unsupported(call, f"extern function {name}")

    def _event(self, call, site, values, fn):
        """Record a digest or log_msg call in the packet (the device delivers it after the stage)."""
        if len(values) > 16:
            raise self.unsupported(call, f"{site['kind']} with more than 16 values")
        ident = len(self.events)
        self.events.append(site)
        out = fn.out
        out.line("if (pkt->nev < TB_MAX_EVENTS) {")
        out.line(f"pkt->ev_sites[pkt->nev] = {ident};")
        for index, value in enumerate(values):
            out.line(f"pkt->ev_values[pkt->nev][{index}] = {value};")
        out.line("pkt->nev++;")
        out.line("}")

    def _target_extern(self, name, call, scope, fn):
        """A call of the embedded target's own externs: a request the device carries out after ingress."""
        symbol = scope.lookup(name)
        decl = symbol.decl
        expected = TARGET_EXTERNS[name]
        if not has_annotation(decl.annotations, EMBEDDED_ONLY):
            raise self.unsupported(call, f"extern {name} not declared @{EMBEDDED_ONLY}")
        if tuple(param.name for param in decl.params) != expected or len(call.args) != len(expected):
            raise self.unsupported(call, f"extern {name} with parameters other than the target's")
        if not self._inside_ingress(fn.control):
            raise self.unsupported(call, f"{name} outside the ingress control")
        values = []
        for arg, param in zip(call.args, decl.params):
            param_type = self.model.resolve_type(param.type_ref)
            values.append(self.expr(arg, scope, fn, want=param_type))
        ident = list(TARGET_EXTERNS).index(name)
        self.target_extern_calls += 1
        out = fn.out
        out.line("if (pkt->nreq >= TB_MAX_EXTERN_REQUESTS) { pkt->fail = \"too many target extern calls\"; "
                 f"{self.fail_code(fn, 'TB_DROPPED')} }}")
        out.line(f"pkt->req_ids[pkt->nreq] = {ident};")
        for index, value in enumerate(values):
            out.line(f"pkt->req_args[pkt->nreq][{index}] = {value};")
        out.line("pkt->nreq++;")

    def _inside_ingress(self, control):
        pending = [self.pipeline.controls["ingress"]]
        while pending:
            candidate = pending.pop()
            if candidate is control:
                return True
            pending.extend(candidate.subcontrols.values())
        return False

    def extern_method(self, base, base_type, method, call, scope, fn):
        out = fn.out
        args = call.args
        for arg in args:
            if arg.kind not in ("list", "dontcare"):
                self.model.type_of(arg, scope)
        extern = base_type.name
        if extern == "packet_in":
            if method == "extract" and len(args) in (1, 2) and args[0].kind != "dontcare":
                type_ = self.model.type_of(args[0], scope)
                if not isinstance(type_, T.HeaderType):
                    raise self.unsupported(call, "extract of a non-header")
                target_node = args[0]
                stack = None
                if target_node.kind == "member" and target_node.member == "next" and \
                        isinstance(target_node.expr.type, T.StackType):
                    stack_type = target_node.expr.type
                    stack = self.lvalue(target_node.expr, scope, fn)
                    out.line(f"if ({stack}.next_index >= {stack_type.size}) {{ "
                             f"err = {self.model.errors['StackOutOfBounds']}; goto P_done; }}")
                    target = f"{stack}.items[{stack}.next_index]"
                else:
                    target = self.lvalue(target_node, scope, fn)
                vbits = None
                if type_.varbit is None:
                    if len(args) == 2:
                        raise self.unsupported(call, f"extract with a size of header {type_.name} (it has no varbit)")
                    size = type_.byte_size
                    out.line(f"if (off + {size} > n) {{ err = TB_PACKET_TOO_SHORT; goto P_done; }}")
                else:
                    if len(args) != 2:
                        raise self.unsupported(call, f"extract of header {type_.name} (varbit) without a size")
                    self.model.type_of(args[1], scope)
                    vbits = fn.temp("vb")
                    size = fn.temp("nb")
                    errors = self.model.errors
                    out.line(f"uint64_t {vbits} = {self.expr(args[1], scope, fn, want=T.BitType(32))};")
                    out.line(f"if ({vbits} & 7) {{ err = {errors.get('ParserInvalidArgument', 6)}; goto P_done; }}")
                    out.line(f"uint64_t {size} = {type_.width >> 3} + ({vbits} >> 3);")
                    out.line(f"if (off + {size} > n) {{ err = TB_PACKET_TOO_SHORT; goto P_done; }}")
                    out.line(f"if ({size} > {(type_.max_width + 7) >> 3}) {{ err = {errors.get('HeaderTooShort', 4)}; "
                             f"goto P_done; }}")
                if stack is None:
                    self._invalidate_union_siblings(target_node, scope, fn)
                self._extract_fields(target, type_, out, vbits)
                if stack is not None:
                    out.line(f"{stack}.next_index++;")
                out.line(f"off += {size};")
                return
            if method == "extract" and len(args) == 1 and args[0].kind == "dontcare":
                if len(call.type_args) != 1:
                    raise self.unsupported(call, "extract(_) without the header type")
                type_ = self.model.resolve_type(call.type_args[0])
                if not isinstance(type_, T.HeaderType) or type_.varbit is not None:
                    raise self.unsupported(call, f"extract<{type_.name_text()}>(_)")
                out.line(f"if (off + {type_.byte_size} > n) {{ err = TB_PACKET_TOO_SHORT; goto P_done; }}")
                out.line(f"off += {type_.byte_size};")
                return
            if method == "advance":
                amount = self.model.try_const(args[0], scope)
                if amount is None or int(amount[0]) % 8:
                    raise self.unsupported(call, "advance by a run-time or non-byte amount")
                nbytes = int(amount[0]) // 8
                out.line(f"if (off + {nbytes} > n) {{ err = TB_PACKET_TOO_SHORT; goto P_done; }}")
                out.line(f"off += {nbytes};")
                return
            if method == "lookahead":
                call.type = self.model.type_of(call, scope)
                self._lookahead(call, fn)
                return
            raise self.unsupported(call, f"packet_in.{method} in this form")
        if extern == "packet_out":
            if method != "emit" or fn.kind != "deparser":
                raise self.unsupported(call, f"packet_out.{method}")
            arg = args[0]
            self._emit(self.lvalue(arg, scope, fn), arg.type, fn, arg)
            return
        symbol = getattr(base, "symbol", None)
        if symbol is None or symbol.kind != "instance":
            raise self.unsupported(call, f"method {method} of {extern}")
        if extern == "counter" and method == "count":
            index = self.counter_index[symbol.qualified]
            size = self.counters[index][1]
            temp = fn.temp("i")
            out.line(f"uint64_t {temp} = {self.expr(args[0], scope, fn)};")
            out.line(f"if ({temp} < {size}) {{ pl->counter_packets[{index}].v[{temp}] += 1; "
                     f"pl->counter_bytes[{index}].v[{temp}] += pkt->sm.packet_length; }}")
        elif extern == "register" and method in ("read", "write"):
            index = self.register_index[symbol.qualified]
            _, size, width = self.registers[index]
            if width > 64:
                raise self.unsupported(call, "register wider than 64 bits")
            element = base_type.type_args[0] if base_type.type_args else T.BitType(32)
            self.check_scalar(element, call)
            temp = fn.temp("i")
            if method == "read":
                out.line(f"uint64_t {temp} = {self.expr(args[1], scope, fn)};")
                self.store(args[0], f"({temp} < {size} ? pl->registers[{index}].v[{temp}] : 0)", scope, fn)
            else:
                out.line(f"uint64_t {temp} = {self.expr(args[0], scope, fn)};")
                value = self.expr(args[1], scope, fn, want=element)
                out.line(f"if ({temp} < {size}) pl->registers[{index}].v[{temp}] = ({value}) & "
                         f"{cnum(element.mask if isinstance(element, T.BitType) else 1)};")
        elif extern == "meter" and method == "execute_meter":
            index = self.meter_index[symbol.qualified]
            unit = self.meters[index][2]
            need = "pkt->sm.packet_length" if unit == "BYTES" else "1"
            result_type = self.model.type_of(args[1], scope)
            self.check_scalar(result_type, call)
            mask = cnum(result_type.mask) if isinstance(result_type, T.BitType) else 3
            self.store(args[1], f"(tb_meter_execute(&pl->meters[{index}], {self.expr(args[0], scope, fn)}, {need}, "
                                f"pkt->now_ns) & {mask})", scope, fn)
        elif extern == "direct_meter" and method == "read":
            result_type = self.model.type_of(args[0], scope)
            self.check_scalar(result_type, call)
            self.store(args[0], "pkt->meter_color", scope, fn)
        elif extern == "direct_counter" and method == "count":
            pass  # counted on the table's hit
        else:
            raise self.unsupported(call, f"{extern}.{method}")

    def _header_leaves(self, base, type_, offset):
        """(code, type, bit offset) of each bit-string leaf of a header in wire order (structs in it flattened).

        After a varbit field the offset is C code adding its run-time length.
        """
        leaves = []
        for f in type_.fields:
            code = self.field(base, type_, f.name)
            if isinstance(f.type, T.StructType):
                leaves.extend(self._header_leaves(code, f.type, offset))
                offset = self._add_offset(offset, T.field_width(f.type))
            elif isinstance(f.type, T.VarbitType):
                leaves.append((code, f.type, offset))
                offset = f"({offset} + {base}.l_{f.name})"
            else:
                leaves.append((code, f.type, offset))
                offset = self._add_offset(offset, T.field_width(f.type))
        return leaves

    @staticmethod
    def _add_offset(offset, width):
        return offset + width if isinstance(offset, int) else f"({offset} + {width})"

    def _extract_fields(self, target, type_, out, vbits=None):
        """Fill header ``target`` from the bytes at ``buf + off`` and make it valid (``vbits``: the varbit length)."""
        if type_.varbit is not None:
            out.line(f"{target}.l_{type_.varbit.name} = (uint32_t)({vbits});")
        for code, leaf, offset in self._header_leaves(target, type_, 0):
            if isinstance(leaf, T.VarbitType):
                out.line(f"memset({code}, 0, sizeof {code});")
                out.line(f"memcpy({code}, buf + off + ({offset}) / 8, ({vbits}) / 8);")
            elif self.is_wide(leaf):
                out.line(f"memcpy({code}, buf + off + {offset // 8}, {leaf.width // 8});")
            else:
                out.line(f"{code} = tb_get_bits(buf + off, {offset}, {T.field_width(leaf)});")
        out.line(f"{target}.valid = 1;")

    def _emit(self, code, type_, fn, node):
        out = fn.out
        if isinstance(type_, T.HeaderType):
            size = type_.byte_size
            if type_.varbit is not None:
                size = f"({size} + {code}.l_{type_.varbit.name} / 8)"
            out.line(f"if ({code}.valid) {{")
            out.line(f"if (off + {size} > ocap) return -TB_NEED_SPACE;")
            out.line(f"memset(obuf + off, 0, {size});")
            for fcode, leaf, offset in self._header_leaves(code, type_, 0):
                if isinstance(leaf, T.VarbitType):
                    out.line(f"memcpy(obuf + off + ({offset}) / 8, {fcode}, {code}.l_{leaf_name(fcode)} / 8);")
                elif self.is_wide(leaf):
                    out.line(f"memcpy(obuf + off + {offset // 8}, {fcode}, {leaf.width // 8});")
                else:
                    out.line(f"tb_put_bits(obuf + off, {offset}, {T.field_width(leaf)}, {fcode});")
            out.line(f"off += {size};")
            out.line("}")
        elif isinstance(type_, T.StructType):
            for f in type_.fields:
                self._emit(self.field(code, type_, f.name), f.type, fn, node)
        elif isinstance(type_, T.StackType):
            for index in range(type_.size):
                self._emit(f"{code}.items[{index}]", type_.element, fn, node)
        else:
            raise self.unsupported(node, f"emit of {type_.name_text()}")


_PROCESS = Emitter()
for _line in """\
int tb_run_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len, uint32_t port,
                   uint32_t instance_type, uint64_t now_ns, uint64_t timestamp_us, const tb_packet_t *preserve_from,
                   int preserve_index, tb_request_t *req) {
    tb_packet_reset(pl, pkt);
    pkt->sm.ingress_port = port; pkt->sm.packet_length = len; pkt->sm.instance_type = instance_type;
    pkt->sm.ingress_global_timestamp = timestamp_us & UINT64_C(0xFFFFFFFFFFFF);
    int st = tb_parse(pl, pkt, frame, len);
    if (st) return TB_STAGE_PARSE | st;
    if (preserve_from) tb_preserve_fields(preserve_index, preserve_from, pkt);
    st = tb_ingress(pl, pkt, now_ns, req);
    return st ? (TB_STAGE_INGRESS | st) : TB_OK;
}
int tb_process(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len, uint32_t port,
               uint64_t now_ns, uint64_t timestamp_us, uint8_t *out, uint32_t cap, int32_t *out_len,
               tb_request_t *req) {
    tb_packet_reset(pl, pkt);
    pkt->sm.ingress_port = port; pkt->sm.packet_length = len; pkt->sm.instance_type = TB_INSTANCE_NORMAL;
    pkt->sm.ingress_global_timestamp = timestamp_us & UINT64_C(0xFFFFFFFFFFFF);
    int st = tb_parse(pl, pkt, frame, len);
    if (st) return TB_STAGE_PARSE | st;
    st = tb_ingress(pl, pkt, now_ns, req);
    if (st) return TB_STAGE_INGRESS | st;
    if (req->clone_session >= 0 || req->resubmit_field_list >= 0 || pkt->sm.mcast_grp || pkt->nreq || pkt->nev)
        return TB_STAGE_INGRESS | TB_CONTINUE;
    if (pkt->sm.egress_spec == TB_DROP_PORT) return TB_STAGE_INGRESS | TB_DROP;
    int32_t truncate = req->truncate_length;
    pkt->sm.egress_port = pkt->sm.egress_spec;
    pkt->sm.egress_spec = 0;
    pkt->sm.egress_global_timestamp = timestamp_us & UINT64_C(0xFFFFFFFFFFFF);
    st = tb_egress(pl, pkt, now_ns, req);
    if (st) return TB_STAGE_EGRESS | st;
    if (req->truncate_length < 0) req->truncate_length = truncate;
    if (req->clone_session >= 0 || req->recirculate_field_list >= 0 || pkt->nev) return TB_STAGE_EGRESS | TB_CONTINUE;
    if (pkt->sm.egress_spec == TB_DROP_PORT) return TB_STAGE_EGRESS | TB_DROP;
    int n = tb_deparse(pl, pkt, out, cap);
    if (n < 0) return TB_STAGE_DEPARSE | -n;
    if (pkt->nev) return TB_STAGE_DEPARSE | TB_CONTINUE;  /* log_msg in computeChecksum / deparser */
    if (req->truncate_length >= 0 && req->truncate_length < n) n = req->truncate_length;
    *out_len = n;
    return TB_OK;
}""".splitlines():
    _PROCESS.line(_line)


def generate_c(program):
    """Generate the C source of a loaded program.

    Args:
        program: a :class:`testbed.p4.loader.LoadedProgram`.

    Returns:
        (source text, layout dict): the layout names the tables, profiles, registers,
        counters and action ids in the order the native state uses.

    Raises:
        NativeBackendError: a construct the C backend cannot compile, with file:line.
    """
    generator = CGenerator(program)
    try:
        source = generator.generate()
    except NativeBackendError:
        raise
    except P4LoadError as error:
        raise NativeBackendError(f"native backend: {error.message}", error.filename, error.line) from None
    layout = {
        "tables": list(generator.tables),
        "profiles": list(generator.profiles),
        "registers": [name for name, _, _ in generator.registers],
        "counters": [name for name, _ in generator.counters],
        "meters": [name for name, _, _ in generator.meters],
        "target_externs": list(TARGET_EXTERNS),
        "uses_target_externs": generator.target_extern_calls > 0,
        "events": list(generator.events),
        "actions": dict(generator.actions),
        "table_nargs": [generator.table_nargs(generator.info.tables[name]) for name in generator.tables],
        "field_lists": sorted(generator.field_lists),
    }
    return source, layout
