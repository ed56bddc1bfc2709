"""Compiler of the embedded P4 target: ProgramInfo extraction and Python code generation."""
