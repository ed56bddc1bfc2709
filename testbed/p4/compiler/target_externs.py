"""Code for the embedded target's own extern functions (those declared ``@embedded_only``).

The fixed-function parts of the embedded target (the DSF traffic manager,
:mod:`testbed.p4.v1model.dsf`) are called from P4 through extern functions
that p4src includes declare with ``@embedded_only("what it is")``.  A call
compiles to a *request* appended to the packet's context
(``P.extern_requests``: ``(name, argument values)``), which the device carries
out at the end of ingress (:meth:`testbed.p4.v1model.device.Device` hands it
to the extension).  The declaration must name the target's parameters in the
target's order, so a program and the target cannot disagree silently.
"""
from testbed.p4.frontend.ast import has_annotation
from testbed.p4.v1model.dsf.constants import EXTERNS

EMBEDDED_ONLY = "embedded_only"

#: extern function name -> its parameter names, for every extern the target implements itself
TARGET_EXTERNS = dict(EXTERNS)


def emit_target_extern(generator, name, call, scope, fn):
    """Emit a call of one of :data:`TARGET_EXTERNS`.

    Args:
        generator: the :class:`~testbed.p4.compiler.codegen.CodeGenerator`.
        name: the extern function's name.
        call: the call node.
        scope, fn: where the call is.

    Raises:
        P4LoadError: the declaration is not ``@embedded_only`` or its parameters differ from the
            target's, the argument count is wrong, or the call is not in the ingress control.
    """
    symbol = scope.lookup(name)
    decl = symbol.decl
    expected = TARGET_EXTERNS[name]
    if not has_annotation(decl.annotations, EMBEDDED_ONLY):
        raise generator.error(call, f"extern {name} is a function of the embedded target: declare it "
                                    f"@{EMBEDDED_ONLY} (include p4src/include/dsf.p4)")
    declared = tuple(param.name for param in decl.params)
    if declared != expected:
        raise generator.error(call, f"extern {name} is declared with parameters ({', '.join(declared)}); the "
                                    f"embedded target's are ({', '.join(expected)})")
    if len(call.args) != len(expected):
        raise generator.error(call, f"{name} needs {len(expected)} argument(s), got {len(call.args)}")
    if generator._role_of(fn) != "ingress":
        raise generator.error(call, f"{name} is only allowed in the ingress control")
    values = []
    for arg, param in zip(call.args, decl.params):
        param_type = generator.model.resolve_type(param.type_ref)
        values.append(generator._to_unsigned(generator.expr(arg, scope, fn, want=param_type), param_type))
    fn.out.line(f"P.extern_requests = (P.extern_requests or ()) + (({name!r}, ({''.join(v + ', ' for v in values)})),)")
