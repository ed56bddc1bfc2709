"""Code for applying a match-action table: key computation, lookup, direct resources, action dispatch.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.
"""
from testbed.p4.frontend import types as T


class TableApplyMixin:
    """Code for ``t.apply()``: lookup in the table's state, direct counters/meters, the chosen action."""

    def _table_apply(self, node, table, scope, fn):
        """Emit the lookup and action dispatch; return (hit variable, action-name variable)."""
        if getattr(fn, "control", None) is None or fn.kind != "control":
            raise self.error(node, "tables can only be applied in a control")
        out = fn.out
        model = self.model
        tbl = self.table_global(table)
        keys = []
        for key in table.match_keys:
            key_type = model.type_of(key.expr, table.control.scope)
            code = self.expr(key.expr, table.control.scope, fn)
            keys.append(self._to_unsigned(code, key_type) if isinstance(key_type, (T.BitType, T.BoolType)) else code)
        key_tuple = "(" + "".join(k + ", " for k in keys) + ")"
        selector = "None"
        if table.selector_keys:
            profile = self.info.action_profiles[table.implementation.qualified]
            fields = []
            for key in table.selector_keys:
                key_type = model.type_of(key.expr, table.control.scope)
                code = self._to_unsigned(self.expr(key.expr, table.control.scope, fn), key_type)
                fields.append((code, key.width))
            packed, nbytes = self._packed(fields)
            selector = fn.temp("h")
            # BMv2 hashes the selector keys with the algorithm and uses the whole hash value
            # (the outputWidth constructor argument is not used by simple_switch)
            out.line(f"{selector} = _compute_bytes({profile.algorithm!r}, {packed}.to_bytes({nbytes}, 'big'))")
        result = fn.temp("r")
        hit = fn.temp("hit")
        action = fn.temp("act")
        out.line(f"{result} = {tbl}.lookup({key_tuple}, {selector})")
        out.line(f"{hit} = {result}.hit")
        out.line(f"{action} = {result}.action")
        extras = []
        if table.direct_counter is not None:
            counter = self.instance_global(table.direct_counter)
            extras.append(f"{counter}.count({result}.entry, P.sm.f_packet_length)")
        if table.direct_meter is not None:
            meter = self.instance_global(table.direct_meter)
            unit = self.info.direct_meters[table.direct_meter.qualified].unit
            size = "P.sm.f_packet_length" if unit == "BYTES" else "1"
            extras.append(f"P.meter_color = {meter}.execute({result}.entry, {size}, P.now_ns)")
        if table.idle_timeout:
            extras.append(f"{tbl}.record_hit({result}.entry, P.now_ns)")
        if extras:
            out.line(f"if {hit}:")
            out.indent()
            for line in extras:
                out.line(line)
            out.dedent()
        first = True
        for ref in table.action_refs:
            out.line(f"{'if' if first else 'elif'} {action} == {ref.symbol.qualified!r}:")
            first = False
            out.indent()
            before = len(out.lines)
            self.inline_action(ref.symbol, None, table.control.scope, fn, node, from_table=result,
                               bound=ref.args or ())
            if len(out.lines) == before:
                out.line("pass")
            out.dedent()
        return hit, action
