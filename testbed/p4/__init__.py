"""The embedded P4_16 v1model target: frontend, compiler, pipeline and runtime state."""
