"""DSF, a disaggregated scheduled fabric (seed 000): the Mininet topology and its reachability.

* :mod:`.topology`: :class:`~.topology.DSFTopo`, RDSW/FDSW/SDSW tiers, planes and clusters;
* :mod:`.reachability`: per-destination reachability, link capacities and Input
  Balanced Mode's withdrawals (pure functions on ``topo.graph()``).

Only :mod:`.topology` needs Mininet.
"""
