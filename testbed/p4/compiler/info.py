"""Build the control-plane view (:class:`testbed.p4.program.ProgramInfo`) of a checked program.

Names follow p4c's P4Info: control-local objects are ``Control.local``,
top-level ones keep their name, ``@name`` overrides, keys are named by their
expression text, digests after the struct type they send.
"""
from testbed.p4 import program as P
from testbed.p4.frontend import types as T
from testbed.p4.frontend.ast import annotation_value, walk_nodes, walk_statements

_COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}
_METER_UNITS = {"packets": "PACKETS", "bytes": "BYTES"}


def _annotation_texts(annotations):
    return [a.source() for a in annotations or () if a.name not in ("name",)]


def _location(model, node):
    filename, line = model.location(node)
    return P.SourceLocation(filename, line) if filename else None


_CONTROL_ROLES = ("verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


def _action_uses(control, uses, local_actions):
    """Append the actions ``control`` and the controls it instantiates use, in p4c's order.

    Args:
        control: a ControlModel; its sub-control instances count at their declaration.
        uses: list of ``(action symbol, from a table)`` to extend: tables' action lists and
            default actions in declaration order first, then direct calls in apply order.
        local_actions: list of the control-local action symbols in declaration order to extend
            (a sub-control's actions where its instance is declared).
    """
    table_uses = []

    def declarations(block):
        for local in block.decl.locals:
            if local.kind == "action":
                local_actions.append(block.actions[local.name])
            elif local.kind == "instance" and local.name in block.subcontrols:
                declarations(block.subcontrols[local.name])
            elif local.kind == "table":
                table = block.tables[local.name]
                table_uses.extend((ref.symbol, True) for ref in table.action_refs)
                if table.default_action is not None:
                    table_uses.append((table.default_action[0], True))

    def calls(block):
        for statement in walk_statements(block.decl.body):
            if statement.kind != "call_statement":
                continue
            func = statement.call.func
            if func.kind == "name":
                symbol = block.scope.lookup(func.name)
                if symbol is not None and symbol.kind == "action":
                    uses.append((symbol, False))
            elif (func.kind == "member" and func.member == "apply" and func.expr.kind == "name"
                  and func.expr.name in block.subcontrols):
                calls(block.subcontrols[func.expr.name])

    declarations(control)
    uses.extend(table_uses)
    calls(control)


def control_plane_actions(pipeline):
    """The actions P4Info lists, in p4c's order, each with whether its parameters are listed.

    p4c writes P4Info from its frontend's output (``serializeP4RuntimeIfRequired`` runs
    before the midend), in which sub-controls are inlined where they are instantiated, an
    action called from another action is inlined into it (so it is not listed unless used
    elsewhere), a top-level action gets a copy at the start of each control using it (in the
    order of first use), and an action called directly from an apply block has the
    parameters the call binds removed.  The P4Info analyzer then visits the controls in
    pipeline order and keeps the first copy of each name: the table's copy (with its
    parameters) when a table of that control lists the action, else a parameterless one.

    Args:
        pipeline: the Pipeline.

    Returns:
        list: ``(qualified name, action symbol, parameters listed)`` in P4Info order.
    """
    listed = {}
    for role in _CONTROL_ROLES:
        control = pipeline.controls.get(role)
        if control is None:
            continue
        uses, local_actions = [], []
        _action_uses(control, uses, local_actions)
        from_table = {}
        for symbol, via_table in uses:
            from_table[id(symbol)] = from_table.get(id(symbol), False) or via_table
        globals_first = []
        for symbol, _via_table in uses:
            if symbol.control is None and symbol not in globals_first:
                globals_first.append(symbol)
        for symbol in globals_first + [s for s in local_actions if id(s) in from_table]:
            listed.setdefault(symbol.qualified, (symbol.qualified, symbol, from_table[id(symbol)]))
    return list(listed.values())


def _extern_function_calls(pipeline, actions):
    """The extern functions called from the controls' apply blocks or from ``actions`` (and the
    actions these call), sorted.

    Args:
        pipeline: the Pipeline.
        actions: the action symbols P4Info lists.
    """
    names = set()
    pending = [(control.decl.body, control.scope) for control in pipeline.all_controls]
    pending += [(symbol.decl.body, symbol.scope) for symbol in actions]
    seen = set()
    while pending:
        body, scope = pending.pop()
        for node in walk_nodes(body):
            if node.kind != "call" or node.func.kind != "name":
                continue
            symbol = scope.lookup(node.func.name)
            if symbol is None:
                continue
            if symbol.kind == "extern_function":
                names.add(symbol.name)
            elif symbol.kind == "action" and id(symbol) not in seen:
                seen.add(id(symbol))
                pending.append((symbol.decl.body, symbol.scope))
    return sorted(names)


def build_info(model, pipeline, table_entries):
    """Return the ProgramInfo of ``pipeline``.

    Args:
        model: the ProgramModel.
        pipeline: the Pipeline from :func:`testbed.p4.frontend.blocks.build_pipeline`.
        table_entries: dict table name -> list of ConstEntry (already converted).
    """
    info = P.ProgramInfo(name=model.name)
    listed_actions = control_plane_actions(pipeline)
    info.extern_function_calls = _extern_function_calls(pipeline, [symbol for _, symbol, _ in listed_actions])
    for name, symbol, from_table in listed_actions:
        decl = symbol.decl
        params = []
        for param, param_symbol in zip(decl.params, decl.param_symbols):
            if param.direction or not from_table:
                continue
            width = T.scalar_width(param_symbol.type)
            if width is None:
                raise model.error(param, f"action {name}: parameter {param.name} of type "
                                         f"{param_symbol.type.name_text()} cannot come from the control plane")
            params.append(P.ActionParam(param.name, width))
        info.actions[name] = P.Action(name, params, _annotation_texts(decl.annotations), _location(model, decl))
    for name, table in pipeline.tables.items():
        match_fields = [P.MatchField(k.name, k.width, k.match_kind, _annotation_texts(k.annotations))
                        for k in table.keys]
        action_refs = [P.ActionRef(ref.symbol.qualified, ref.scope) for ref in table.action_refs]
        default = None
        if table.default_action is not None:
            symbol, args = table.default_action
            values = []
            for arg, param in zip(args, [p for p in symbol.decl.param_symbols if not p.direction]):
                mask = (1 << T.scalar_width(param.type)) - 1
                values.append(model.const_value(arg, table.control.scope, param.type) & mask)
            default = P.ActionCall(symbol.qualified, tuple(values))
        info.tables[name] = P.Table(
            name=name,
            match_fields=match_fields,
            action_refs=action_refs,
            size=table.size,
            default_action=default,
            const_default_action=table.const_default_action,
            const_entries=table_entries.get(name, []),
            entries_are_const=table.entries_const,
            implementation=table.implementation.qualified if table.implementation else None,
            direct_counter=table.direct_counter.qualified if table.direct_counter else None,
            direct_meter=table.direct_meter.qualified if table.direct_meter else None,
            idle_timeout=table.idle_timeout,
            annotations=_annotation_texts(table.decl.annotations),
            location=_location(model, table.decl),
        )
    for qualified, symbol in pipeline.instances.items():
        _add_instance(model, info, pipeline, qualified, symbol)
    for type_ in model.types.values():
        if isinstance(type_, T.HeaderType):
            role = annotation_value(type_.annotations, "controller_header")
            if role is not None:
                info.controller_packet_metadata[role] = P.ControllerPacketMetadata(
                    role, [P.PacketMetadataField(f.name, T.field_width(f.type)) for f in type_.fields],
                    type_name=type_.name)
    for digest_type in pipeline.digest_types.values():
        info.digests[digest_type.name] = P.Digest(
            digest_type.name, [P.DigestField(f.name, T.flatten_width(f.type)) for f in digest_type.fields])
    return info


def _ctor_int(model, symbol, index):
    args = symbol.decl.args
    if index >= len(args):
        raise model.error(symbol.decl, f"{symbol.type.name} {symbol.name}: missing constructor argument {index + 1}")
    return model.const_value(args[index], model.global_scope)


def _ctor_enum(model, symbol, index, enum_name):
    args = symbol.decl.args
    if index >= len(args) or args[index].kind != "type_member" or args[index].type_name != enum_name:
        raise model.error(symbol.decl, f"{symbol.type.name} {symbol.name}: argument {index + 1} must be "
                                       f"{enum_name}.<member>")
    return args[index].member


def _direct_table(model, pipeline, qualified, symbol, table_property):
    """The one table whose ``table_property`` (``counters``/``meters``) names a direct counter/meter instance."""
    extern = symbol.type.name  # also the TableModel attribute: direct_counter / direct_meter
    tables = [t.name for t in pipeline.tables.values() if getattr(t, extern) is symbol]
    if len(tables) != 1:
        raise model.error(symbol.decl, f"{extern} {qualified} must be attached to exactly one table "
                                       f"({table_property} = {symbol.name}), found {len(tables)}")
    return tables[0]


def _add_instance(model, info, pipeline, qualified, symbol):
    extern = symbol.type.name
    if extern == "counter":
        info.counters[qualified] = P.Counter(qualified, _ctor_int(model, symbol, 0),
                                             _COUNTER_UNITS[_ctor_enum(model, symbol, 1, "CounterType")])
    elif extern == "direct_counter":
        table = _direct_table(model, pipeline, qualified, symbol, "counters")
        info.direct_counters[qualified] = P.DirectCounter(qualified, table,
                                                          _COUNTER_UNITS[_ctor_enum(model, symbol, 0, "CounterType")])
    elif extern == "meter":
        info.meters[qualified] = P.Meter(qualified, _ctor_int(model, symbol, 0),
                                         _METER_UNITS[_ctor_enum(model, symbol, 1, "MeterType")])
    elif extern == "direct_meter":
        table = _direct_table(model, pipeline, qualified, symbol, "meters")
        info.direct_meters[qualified] = P.DirectMeter(qualified, table,
                                                      _METER_UNITS[_ctor_enum(model, symbol, 0, "MeterType")])
    elif extern == "register":
        if not symbol.type.type_args or not isinstance(symbol.type.type_args[0], T.BitType):
            raise model.error(symbol.decl, f"register {qualified}: element type must be bit<W> or int<W>")
        info.registers[qualified] = P.Register(qualified, symbol.type.type_args[0].width, _ctor_int(model, symbol, 0))
    elif extern in ("action_profile", "action_selector"):
        tables = [t.name for t in pipeline.tables.values() if t.implementation is symbol]
        max_group = annotation_value(symbol.decl.annotations, "max_group_size")
        if extern == "action_profile":
            info.action_profiles[qualified] = P.ActionProfile(qualified, tables, _ctor_int(model, symbol, 0))
        else:
            algorithm = _ctor_enum(model, symbol, 0, "HashAlgorithm")
            info.action_profiles[qualified] = P.ActionProfile(
                qualified, tables, _ctor_int(model, symbol, 1), with_selector=True, algorithm=algorithm,
                output_width=_ctor_int(model, symbol, 2), max_group_size=int(max_group) if max_group else 0)
    elif extern in ("packet_in", "packet_out", "Checksum16"):
        return
    else:
        raise model.error(symbol.decl, f"unsupported construct: extern {extern} (instance {qualified})")
