"""Mininet integration: hosts, P4 switch classes, fabric networks and cleanup."""
