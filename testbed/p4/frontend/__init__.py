"""Frontend of the embedded P4_16 target: preprocessor, lexer, lark grammar, AST and type checker.

The pipeline is ``preprocessor`` (files -> source lines with their origin, macros expanded by
``macros``) -> ``lexer`` (lines -> tokens, type names told apart from other names) ->
``parser`` (tokens -> AST through the LALR grammar in ``p4.lark``) -> ``checker`` (AST -> a
resolved, typed program model) -> ``blocks`` (the instantiated parser and controls, tables and
their entries).  Every error is a :class:`testbed.errors.P4LoadError` naming the original
file and line.
"""
