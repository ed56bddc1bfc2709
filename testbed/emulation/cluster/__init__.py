"""Fabrics over several servers with Mininet's cluster edition (see README, "Fabrics over several servers")."""
