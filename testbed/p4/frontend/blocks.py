"""Resolved models of controls, parsers, actions and tables.

:func:`build_pipeline` instantiates the parser and controls that the
``V1Switch`` main package names, with their local objects (extern instances,
actions, tables, variables, nested control instances) and the fully
qualified names p4c would give them (``MyIngress.ipv4_lpm``).
"""
from testbed.p4.frontend import types as T
from testbed.p4.frontend.ast import annotation_value, expression_text, has_annotation
from testbed.p4.frontend.checker import Scope, Symbol


def qualified_name(prefix, local_name, annotations):
    """Fully qualified P4Info name of a control-local object (honours ``@name``)."""
    override = annotation_value(annotations, "name")
    if override is not None:
        if override.startswith("."):
            return override[1:]
        local_name = override
    return f"{prefix}.{local_name}" if prefix else local_name


class KeyModel:
    """A table key: expression, match kind, P4Info name and width."""

    def __init__(self, expr, match_kind, name, width, annotations):
        self.expr = expr
        self.match_kind = match_kind
        self.name = name
        self.width = width
        self.annotations = annotations


class ActionRefModel:
    """An action a table lists: the action's Symbol, its scope annotation and the arguments bound there.

    ``args`` are the expressions bound to the action's directional parameters in the
    ``actions`` list (``a(hdr.x)``); they are evaluated each time the table runs the action.
    """

    def __init__(self, symbol, scope, annotations, args=()):
        self.symbol = symbol
        self.scope = scope
        self.annotations = annotations
        self.args = list(args or ())


class TableModel:
    """A table with its properties resolved."""

    def __init__(self, name, local_name, decl, control):
        self.name = name
        self.local_name = local_name
        self.decl = decl
        self.control = control
        self.keys = []
        self.action_refs = []
        self.default_action = None  # (Symbol, [arg exprs])
        self.default_action_decl = None  # the default_action property (for its errors)
        self.const_default_action = False
        self.size = 1024
        self.implementation = None  # Symbol of an action_profile / action_selector instance
        self.direct_counter = None
        self.direct_meter = None
        self.entries = []  # list of (table_entry node)
        self.entries_const = False
        self.idle_timeout = False
        self.largest_priority_wins = True  # P4_16 1.2.4 table property, default true
        self.priority_delta = 1  # P4_16 1.2.4 table property, default 1

    @property
    def match_keys(self):
        """Keys that take part in the match."""
        return [k for k in self.keys if k.match_kind != "selector"]

    @property
    def selector_keys(self):
        """Keys hashed by the action selector."""
        return [k for k in self.keys if k.match_kind == "selector"]


class BlockModel:
    """What parser and control instances have in common: a scope, parameters and local objects."""

    def __init__(self, name, decl, model):
        self.name = name
        self.decl = decl
        self.model = model
        self.scope = Scope(model.global_scope, owner=self)
        self.params = []
        self.instances = {}
        self.variables = []


class ControlModel(BlockModel):
    """A control instance: scope, locals and tables."""

    def __init__(self, name, decl, model):
        super().__init__(name, decl, model)
        self.actions = {}
        self.tables = {}
        self.constants = []
        self.subcontrols = {}


class ParserModel(BlockModel):
    """A parser instance: scope, locals, states and the sub-parser instances it applies."""

    def __init__(self, name, decl, model):
        super().__init__(name, decl, model)
        self.states = {state.name: state for state in decl.states}
        self.subparsers = {}


class Pipeline:
    """The V1Switch blocks of a program, instantiated."""

    def __init__(self, model):
        self.model = model
        self.parser = None
        self.controls = {}  # role -> ControlModel
        self.all_controls = []  # every control instance, nested ones included
        self.tables = {}  # qualified name -> TableModel
        self.instances = {}  # qualified name -> Symbol (extern instances, global and local)
        self.actions = {}  # qualified name -> Symbol: the actions tables name


def build_pipeline(model):
    """Instantiate the main package's parser and controls.

    Returns:
        Pipeline.

    Raises:
        P4LoadError: unsupported locals, unknown names, bad table properties.
    """
    pipeline = Pipeline(model)
    for name, decl in model.global_instances.items():
        pipeline.instances[name] = model.global_scope.lookup(name)
    for name, decl in model.actions.items():
        symbol = model.global_scope.lookup(name)
        symbol.scope = _action_scope(model, decl, model.global_scope)
    parser_name = model.pipeline["parser"]
    args = model.pipeline_args.get("parser", [])
    pipeline.parser = _build_parser(model, model.parsers[parser_name], parser_name, pipeline, args,
                                    model.global_scope, model.main)
    for role in ("verify_checksum", "ingress", "egress", "compute_checksum", "deparser"):
        control_name = model.pipeline[role]
        args = model.pipeline_args.get(role, [])
        pipeline.controls[role] = _build_control(model, model.controls[control_name], control_name, pipeline,
                                                 args, model.global_scope, model.main)
    return pipeline


def _declare_params(model, scope, params, owner_list):
    for param in params:
        type_ = model.resolve_type(param.type_ref)
        symbol = Symbol("param", param.name, type_, direction=param.direction, decl=param)
        scope.define(param.name, symbol)
        owner_list.append(symbol)


def _action_scope(model, decl, parent):
    scope = Scope(parent)
    decl.param_symbols = []
    for param in decl.params:
        type_ = model.resolve_type(param.type_ref)
        symbol = Symbol("param", param.name, type_, direction=param.direction, decl=param, action_param=True)
        scope.define(param.name, symbol)
        decl.param_symbols.append(symbol)
    return scope


def _bind_constructor_arguments(model, block, decl, args, caller_scope, where):
    """Bind a parser's or control's constructor parameters to the (constant) arguments of its instance.

    P4_16 1.2.4 "Parameterization": constructor parameters are directionless and their
    arguments are compile-time known values, so each becomes a constant of the instance.
    """
    params = getattr(decl, "ctor_params", None) or []
    if len(args) != len(params):
        raise model.error(where, f"{decl.name} takes {len(params)} constructor argument(s), {len(args)} given")
    for param, arg in zip(params, args):
        type_ = model.resolve_type(param.type_ref)
        if not isinstance(type_, (T.BitType, T.BoolType, T.InfIntType, T.EnumType, T.ErrorType)):
            raise model.error(param, f"unsupported construct: constructor parameter {param.name} of type "
                                     f"{type_.name_text()} (integers, bools, enums and errors are supported)")
        value = model.const_value(arg, caller_scope, type_)
        block.scope.define(param.name, Symbol("const", param.name, type_, value=value, decl=param))


def _build_parser(model, decl, name, pipeline, args=(), caller_scope=None, where=None):
    parser = ParserModel(name, decl, model)
    _bind_constructor_arguments(model, parser, decl, list(args), caller_scope or model.global_scope, where or decl)
    _declare_params(model, parser.scope, decl.params, parser.params)
    for local in decl.locals:
        if local.kind == "const":
            model._declare_const(local, parser.scope)
        elif local.kind == "variable":
            type_ = model.resolve_type(local.type_ref)
            parser.variables.append(parser.scope.define(local.name, Symbol("var", local.name, type_, decl=local)))
        elif local.kind == "instance":
            _declare_instance(model, parser, local, pipeline, "parser", parser.subparsers)
        else:
            raise model.error(local, f"unsupported construct: {local.kind} in a parser")
    if "start" not in parser.states:
        raise model.error(decl, f"parser {decl.name} has no start state")
    return parser


MAX_INSTANCE_NESTING = 16


def _declare_instance(model, block, local, pipeline, nested_kind, nested):
    """A local instance of a parser or control: an extern, or a nested parser/control (``nested_kind``).

    Nested instances are built here (with their constructor arguments) and recorded in ``nested``.
    """
    type_ = model.resolve_type(local.type_ref)
    qualified = qualified_name(block.name, local.name, local.annotations)
    if isinstance(type_, T.BlockType) and type_.block_kind == nested_kind:
        if qualified.count(".") > MAX_INSTANCE_NESTING:
            raise model.error(local, f"{nested_kind} instances nested more than {MAX_INSTANCE_NESTING} deep")
        build = _build_parser if nested_kind == "parser" else _build_control
        sub = build(model, type_.decl, qualified, pipeline, local.args, block.scope, local)
        symbol = Symbol("instance", local.name, type_, decl=local, qualified=qualified, **{nested_kind: sub})
        nested[local.name] = sub
        block.scope.define(local.name, symbol)
        return
    if not isinstance(type_, T.ExternType):
        raise model.error(local, f"unsupported construct: instance of {type_.name_text()} in a {nested_kind}")
    if qualified in pipeline.instances:  # as p4c: two objects cannot share a control-plane name
        raise model.error(local, f"the name {qualified} is used for two extern instances (each instance of a "
                                 f"control needs its own name; a type applied directly twice has one)")
    symbol = Symbol("instance", local.name, type_, decl=local, qualified=qualified)
    block.scope.define(local.name, symbol)
    block.instances[local.name] = symbol
    pipeline.instances[qualified] = symbol


def _build_control(model, decl, name, pipeline, args=(), caller_scope=None, where=None):
    control = ControlModel(name, decl, model)
    pipeline.all_controls.append(control)
    _bind_constructor_arguments(model, control, decl, list(args), caller_scope or model.global_scope, where or decl)
    _declare_params(model, control.scope, decl.params, control.params)
    for local in decl.locals:
        kind = local.kind
        if kind == "const":
            control.constants.append(model._declare_const(local, control.scope))
        elif kind == "variable":
            type_ = model.resolve_type(local.type_ref)
            control.variables.append(control.scope.define(local.name, Symbol("var", local.name, type_, decl=local)))
        elif kind == "instance":
            _declare_instance(model, control, local, pipeline, "control", control.subcontrols)
        elif kind == "action":
            qualified = qualified_name(name, local.name, local.annotations)
            symbol = Symbol("action", local.name, decl=local, qualified=qualified, control=control)
            control.scope.define(local.name, symbol)
            symbol.scope = _action_scope(model, local, control.scope)
            control.actions[local.name] = symbol
        elif kind == "table":
            qualified = qualified_name(name, local.name, local.annotations)
            if qualified in pipeline.tables:  # as p4c: two objects cannot share a control-plane name
                raise model.error(local, f"the name {qualified} is used for two tables (each instance of a control "
                                         f"needs its own name; a type applied directly twice has one)")
            table = TableModel(qualified, local.name, local, control)
            symbol = Symbol("table", local.name, decl=local, qualified=qualified, table=table)
            control.scope.define(local.name, symbol)
            control.tables[local.name] = table
            pipeline.tables[qualified] = table
            _resolve_table(model, table, control, pipeline)
        else:
            raise model.error(local, f"unsupported construct: {kind} in a control")
    return control


def _resolve_table(model, table, control, pipeline):
    scope = control.scope
    seen = set()
    for prop in table.decl.properties:
        kind = prop.kind
        if kind in seen and kind != "simple_property":
            raise model.error(prop, f"table {table.name}: duplicate {kind.replace('_property', '')} property")
        seen.add(kind)
        if kind == "key_property":
            for element in prop.elements:
                type_ = model.type_of(element.expr, scope)
                width = T.scalar_width(type_)
                if width is None:
                    raise model.error(element, f"table {table.name}: key {expression_text(element.expr)} of type "
                                               f"{type_.name_text()} cannot be matched")
                if element.match_kind not in model.match_kinds:
                    raise model.error(element, f"table {table.name}: unknown match kind {element.match_kind!r}")
                key_name = annotation_value(element.annotations, "name") or expression_text(element.expr)
                table.keys.append(KeyModel(element.expr, element.match_kind, key_name, width, element.annotations))
        elif kind == "actions_property":
            for ref in prop.refs:
                symbol = scope.lookup(ref.name)
                if symbol is None or symbol.kind != "action":
                    raise model.error(ref, f"table {table.name}: {ref.name!r} is not an action")
                directional = [p for p in symbol.decl.params if p.direction]
                if len(ref.args or ()) != len(directional):
                    raise model.error(ref, f"table {table.name}: action {ref.name} has {len(directional)} "
                                           f"directional parameter(s), {len(ref.args or ())} bound in the actions "
                                           f"list (P4_16: exactly the directional ones are bound there)")
                action_scope = "TABLE_AND_DEFAULT"
                if has_annotation(ref.annotations, "tableonly"):
                    action_scope = "TABLE_ONLY"
                elif has_annotation(ref.annotations, "defaultonly"):
                    action_scope = "DEFAULT_ONLY"
                table.action_refs.append(ActionRefModel(symbol, action_scope, ref.annotations, ref.args))
                pipeline.actions[symbol.qualified] = symbol
        elif kind == "entries_property":
            table.entries = prop.entries
            table.entries_const = prop.const
        elif kind == "simple_property":
            _simple_table_property(model, table, prop, scope, pipeline)
    if table.default_action is None:
        noaction = model.global_scope.lookup("NoAction")
        if noaction is not None:
            # as p4c does: the implicit default is NoAction, added as @defaultonly if not listed
            table.default_action = (noaction, [])
            pipeline.actions["NoAction"] = noaction
            if all(ref.symbol.qualified != "NoAction" for ref in table.action_refs):
                table.action_refs.append(ActionRefModel(noaction, "DEFAULT_ONLY", []))
    else:
        symbol, args = table.default_action
        refs = {ref.symbol.qualified: ref for ref in table.action_refs}
        if symbol.qualified not in refs:
            raise model.error(table.decl, f"table {table.name}: default action {symbol.name} is not in its actions")
        table.default_action = (symbol, data_arguments(model, table, table.default_action_decl, symbol, args,
                                                       refs[symbol.qualified]))
    if table.implementation is not None and not table.implementation.type.name == "action_selector" and \
            table.selector_keys:
        raise model.error(table.decl, f"table {table.name}: selector keys need an action_selector implementation")
    if table.selector_keys and table.implementation is None:
        raise model.error(table.decl, f"table {table.name}: selector keys without implementation = action_selector")


def data_arguments(model, table, where, symbol, args, ref):
    """The arguments of ``symbol``'s directionless parameters in a default action or an entry.

    P4_16 lets them give either only those, or all arguments with the directional ones written as
    bound in the table's ``actions`` list (``default_action = a(hdr.x, 5)`` for ``a(hdr.x)`` listed).

    Raises:
        P4LoadError: another count, or a directional argument other than the one bound there.
    """
    params = symbol.decl.params
    data = [index for index, param in enumerate(params) if not param.direction]
    if len(args) == len(data):
        return list(args)
    if len(args) == len(params):
        given = [expression_text(arg) for arg, param in zip(args, params) if param.direction]
        bound = [expression_text(arg) for arg in ref.args or ()]
        if given != bound:
            raise model.error(where, f"table {table.name}: action {symbol.name}: directional argument(s) "
                                     f"{', '.join(given)} differ from those bound in the actions list "
                                     f"({', '.join(bound)})")
        return [args[index] for index in data]
    raise model.error(where, f"table {table.name}: action {symbol.name} needs {len(data)} argument(s) (or all "
                             f"{len(params)}, the directional ones as bound in the actions list), got {len(args)}")


def _instance_property(model, table, prop, scope, wanted):
    value = prop.value
    if value.kind != "name":
        raise model.error(prop, f"unsupported construct: table {table.name}: {prop.name} must name an instance "
                                f"declared before the table")
    symbol = scope.lookup(value.name)
    if symbol is None or symbol.kind != "instance" or not isinstance(symbol.type, T.ExternType) or \
            symbol.type.name not in wanted:
        raise model.error(prop, f"table {table.name}: {prop.name} = {value.name}: expected "
                                f"{' or '.join(wanted)} instance")
    return symbol


def _simple_table_property(model, table, prop, scope, pipeline):
    name = prop.name
    if name == "default_action":
        value = prop.value
        if value.kind == "call" and value.func.kind == "name":
            action_name, args = value.func.name, value.args
        elif value.kind == "name":
            action_name, args = value.name, []
        else:
            raise model.error(prop, f"table {table.name}: default_action must be an action call")
        symbol = scope.lookup(action_name)
        if symbol is None or symbol.kind != "action":
            raise model.error(prop, f"table {table.name}: default_action {action_name!r} is not an action")
        data_params = [p for p in symbol.decl.params if not p.direction]
        if len(args) not in (len(data_params), len(symbol.decl.params)):
            raise model.error(prop, f"table {table.name}: default_action {action_name} needs {len(data_params)} "
                                    f"argument(s) (or all {len(symbol.decl.params)}, the directional ones as "
                                    f"bound in the actions list), got {len(args)}")
        table.default_action = (symbol, args)  # the directional ones are checked once the actions are known
        table.default_action_decl = prop
        table.const_default_action = prop.const
        pipeline.actions[symbol.qualified] = symbol
    elif name == "size":
        table.size = model.const_value(prop.value, scope)
    elif name == "implementation":
        table.implementation = _instance_property(model, table, prop, scope, ("action_profile", "action_selector"))
    elif name == "counters":
        table.direct_counter = _instance_property(model, table, prop, scope, ("direct_counter",))
    elif name == "meters":
        table.direct_meter = _instance_property(model, table, prop, scope, ("direct_meter",))
    elif name == "support_timeout":
        table.idle_timeout = bool(model.const_value(prop.value, scope))
    elif name == "largest_priority_wins":
        value = model.const_value(prop.value, scope)
        if not isinstance(value, bool):
            raise model.error(prop, f"table {table.name}: largest_priority_wins must be true or false")
        table.largest_priority_wins = value
    elif name == "priority_delta":
        value = model.const_value(prop.value, scope)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise model.error(prop, f"table {table.name}: priority_delta must be a positive integer, got {value!r}")
        table.priority_delta = value
    elif name in ("max_group_size", "selector_size_semantics", "psa_empty_group_action"):
        return
    else:
        raise model.error(prop, f"unsupported construct: table property {name!r}")


# ---------------------------------------------------------------------- const entries
def convert_entries(model, table):
    """Convert a table's ``entries``/``const entries`` to ProgramInfo ConstEntry objects.

    Priorities (tables with a ternary, range or optional key) are returned in the P4Runtime
    convention, a larger number wins; see :func:`entry_priorities` for how they are chosen.
    """
    from testbed.p4 import program as P

    if not table.entries:
        return []
    keys = table.match_keys
    if table.selector_keys or table.implementation is not None:
        raise model.error(table.entries[0], f"unsupported construct: entries in table {table.name} with an "
                                            f"action profile/selector")
    needs_priority = any(k.match_kind in P.PRIORITY_MATCH_KINDS for k in keys)
    priorities = entry_priorities(model, table, needs_priority)
    result = []
    scope = table.control.scope
    allowed = {ref.symbol.qualified: ref for ref in table.action_refs}
    for entry, priority in zip(table.entries, priorities):
        items = entry.keyset.items if entry.keyset.kind == "tuple_keyset" else [entry.keyset]
        if len(items) == 1 and items[0].kind in ("default", "dontcare") and len(keys) > 1:
            items = items * len(keys)
        if len(items) != len(keys):
            raise model.error(entry, f"table {table.name}: entry has {len(items)} key value(s), the table has "
                                     f"{len(keys)} key(s)")
        matches = [_key_match(model, key, item, scope, table) for key, item in zip(keys, items)]
        action_symbol = scope.lookup(entry.action.name)
        if action_symbol is None or action_symbol.kind != "action" or action_symbol.qualified not in allowed:
            raise model.error(entry, f"table {table.name}: entry action {entry.action.name!r} is not one of "
                                     f"the table's actions")
        data_params = [p for p in action_symbol.decl.param_symbols if not p.direction]
        given = data_arguments(model, table, entry, action_symbol, entry.action.args,
                               allowed[action_symbol.qualified])
        args = tuple(model.const_value(arg, scope, param.type) & ((1 << T.scalar_width(param.type)) - 1)
                     for arg, param in zip(given, data_params))
        result.append(P.ConstEntry(matches, P.ActionCall(action_symbol.qualified, args), priority))
    return result


def entry_priorities(model, table, needs_priority):
    """The priority of each of ``table``'s initial entries, larger wins (P4Runtime), or Nones.

    Two sources decide, as in p4c + BMv2:

    * ``priority = N`` (P4_16 1.2.4, "Entry priorities") is only allowed in ``entries``
      without ``const`` (p4c's frontend, frontends/p4/entryPriorities.cpp: "Table with
      'const' entries cannot have priorities").  Missing values follow the specification's
      pseudocode with the ``largest_priority_wins`` and ``priority_delta`` table properties;
      with ``largest_priority_wins = false`` a smaller number wins, so the numbers are mirrored
      into the P4Runtime convention.
    * Otherwise p4c's BMv2 backend (backends/bmv2/common/control.h, ``convertTableEntries``)
      gives each entry the value of its ``@priority(N)`` annotation or else a counter that starts
      at 1 and advances with every entry, and BMv2 lets the *smaller* number win (its native
      convention; PI inverts P4Runtime priorities for it, behavioral-model issue #581).  p4c's
      test ``table-entries-priority-bmv2`` shows it: ``@priority(1)`` on the third entry beats the
      first entry's ``@priority(3)``.  Without annotations the first entry wins, as the
      specification says for entries without priorities.

    Raises:
        P4LoadError: ``priority =`` in ``const entries``, or in a table that needs no
            priorities, or missing on the first entry when other entries have one.
    """
    entries = table.entries
    explicit = [entry.priority for entry in entries]
    if any(value is not None for value in explicit):
        first = next(entry for entry in entries if entry.priority is not None)
        if table.entries_const:
            raise model.error(first, f"table {table.name}: entries of 'const entries' cannot have priorities "
                                     f"(use 'entries' without const)")
        if not needs_priority:
            raise model.error(first, f"table {table.name}: its key match kinds need no priorities, but some are "
                                     f"specified")
        if explicit[0] is None:
            raise model.error(entries[0], f"table {table.name}: the first entry must have a priority when "
                                          f"others have one")
        return _spec_priorities(model, table, explicit)
    if not needs_priority:
        return [None] * len(entries)
    annotated = any(a.name == "priority" for entry in entries for a in entry.annotations or ())
    if not (table.entries_const or annotated):
        return _spec_priorities(model, table, explicit)
    bmv2 = []
    for position, entry in enumerate(entries):
        annotation = next((a for a in entry.annotations or () if a.name == "priority"), None)
        bmv2.append(position + 1 if annotation is None else _annotation_int(model, entry, annotation))
    highest = max(bmv2)
    return [highest - value + 1 for value in bmv2]


def _spec_priorities(model, table, explicit):
    """P4_16 1.2.4 "Entry priorities": fill in missing priorities; return them with a larger number winning."""
    count = len(explicit)
    delta = table.priority_delta
    largest_wins = table.largest_priority_wins
    scope = table.control.scope
    values = [None if expr is None else model.const_value(expr, scope) for expr in explicit]
    for entry, value in zip(table.entries, values):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >> 64):
            raise model.error(entry, f"table {table.name}: entry priority must be a non-negative integer, "
                                     f"got {value!r}")
    if all(value is None for value in values):
        # no priorities in the source: 1, 1 + delta, ... from the last entry (largest wins) or the first
        order = range(count - 1, -1, -1) if largest_wins else range(count)
        for step, index in enumerate(order):
            values[index] = 1 + step * delta
    else:
        current = values[0]
        for index in range(1, count):
            if values[index] is not None:
                current = values[index]
            else:
                current = current - delta if largest_wins else current + delta
                if current < 0:
                    raise model.error(table.entries[index], f"table {table.name}: computed entry priority "
                                                            f"{current} is negative")
                values[index] = current
    if not largest_wins:
        highest = max(values)
        return [highest - value + 1 for value in values]
    lowest = min(values)
    return [value - lowest + 1 for value in values] if lowest < 1 else values


def _annotation_int(model, entry, annotation):
    """The integer of an ``@priority(N)`` annotation."""
    from testbed.p4.frontend.lexer import parse_integer

    tokens = annotation.tokens
    negative = len(tokens) == 2 and tokens[0].kind == "-"
    number = tokens[-1] if tokens else None
    if number is None or number.kind != "INTEGER" or len(tokens) > 1 + negative:
        raise model.error(entry, f"@priority needs one integer, got @priority({annotation.text})")
    try:
        value = parse_integer(number.value)[0]
    except ValueError as error:
        raise model.error(entry, f"@priority: {error}") from None
    return -value if negative else value


def _key_match(model, key, item, scope, table):
    from testbed.p4 import program as P

    width = key.width
    full = (1 << width) - 1
    kind = key.match_kind
    wildcard = item.kind in ("default", "dontcare")

    def value_of(expr):
        value = model.const_value(expr, scope)
        if isinstance(value, bool):
            value = int(value)
        return value & full

    if kind == "exact":
        if wildcard:
            raise model.error(item, f"table {table.name}: exact key {key.name} cannot be a wildcard")
        return P.KeyMatch("exact", value_of(item))
    if kind == "lpm":
        if wildcard:
            return P.KeyMatch("lpm", 0, prefix_len=0)
        if item.kind == "mask":
            value, mask = value_of(item.value), value_of(item.mask)
            prefix = bin(mask).count("1")
            if mask != (full >> (width - prefix)) << (width - prefix) if prefix else mask != 0:
                raise model.error(item, f"table {table.name}: lpm mask {mask:#x} is not a prefix")
            return P.KeyMatch("lpm", value & mask, prefix_len=prefix)
        return P.KeyMatch("lpm", value_of(item), prefix_len=width)
    if kind in ("ternary", "optional"):
        if wildcard:
            return P.KeyMatch(kind, 0, mask=0 if kind == "ternary" else None)
        if item.kind == "mask":
            if kind == "optional":
                raise model.error(item, f"table {table.name}: optional key {key.name} takes a value or _")
            value, mask = value_of(item.value), value_of(item.mask)
            return P.KeyMatch("ternary", value & mask, mask=mask)
        return P.KeyMatch(kind, value_of(item), mask=full)
    if kind == "range":
        if wildcard:
            return P.KeyMatch("range", 0, high=full)
        if item.kind == "range":
            return P.KeyMatch("range", value_of(item.low), high=value_of(item.high))
        value = value_of(item)
        return P.KeyMatch("range", value, high=value)
    raise model.error(item, f"table {table.name}: unsupported match kind {kind}")


# ---------------------------------------------------------------------- digests
def collect_digest_types(model, pipeline):
    """Find every ``digest(...)`` call; record the struct type each sends (P4Info digest names)."""
    pipeline.digest_types = {}
    for control in pipeline.all_controls:
        for action in control.actions.values():
            _walk_digests(model, pipeline, action.decl.body, action.scope)
        _walk_digests(model, pipeline, control.decl.body, control.scope)
    for action in model.actions.values():
        symbol = model.global_scope.lookup(action.name)
        _walk_digests(model, pipeline, action.body, symbol.scope)


def _walk_digests(model, pipeline, statement, scope):
    kind = statement.kind
    if kind == "block":
        inner = scope.child()
        for child in statement.statements:
            if child.kind == "variable":
                inner.define(child.name, Symbol("var", child.name, model.resolve_type(child.type_ref)))
            elif child.kind == "const":
                model._declare_const(child, inner)
            else:
                _walk_digests(model, pipeline, child, inner)
    elif kind == "if":
        _walk_digests(model, pipeline, statement.then, scope)
        if statement.otherwise is not None:
            _walk_digests(model, pipeline, statement.otherwise, scope)
    elif kind == "switch":
        for case in statement.cases:
            if case.body is not None:
                _walk_digests(model, pipeline, case.body, scope)
    elif kind == "for":
        inner = scope.child()
        for child in statement.init:
            if child.kind == "variable":
                inner.define(child.name, Symbol("var", child.name, model.resolve_type(child.type_ref)))
        _walk_digests(model, pipeline, statement.body, inner)
    elif kind == "for_in":
        inner = scope.child()
        inner.define(statement.name, Symbol("var", statement.name, model.resolve_type(statement.type_ref)))
        _walk_digests(model, pipeline, statement.body, inner)
    elif kind == "call_statement":
        call = statement.call
        if call.func.kind == "name" and call.func.name == "digest" and \
                getattr(scope.lookup("digest"), "kind", None) == "extern_function":
            if len(call.args) != 2:
                raise model.error(call, "digest needs 2 arguments: digest(receiver, data)")
            if call.type_args:
                type_ = model.resolve_type(call.type_args[0])
            else:
                type_ = model.type_of(call.args[1], scope)
            if not isinstance(type_, T.StructType):
                raise model.error(call, "digest data must have a named struct type (digest<T>(...) or a struct "
                                        "variable) so the control plane can name it")
            for field in type_.fields:
                if T.scalar_width(field.type) is None:
                    raise model.error(call, f"digest struct {type_.name}: field {field.name} is not a bit field")
            call.digest_type = type_
            pipeline.digest_types[type_.name] = type_
