"""FC+ (seed 001) and its baseline FC: expander topologies on virtual layers, deadlock-free routing, throughput.

* :mod:`.topology`: the generators (:func:`~.topology.fcplus_graph`,
  :func:`~.topology.fc_graph`) giving a networkx ToR graph with the virtual-layer
  structure, and the Mininet topologies :class:`~.topology.FCPlusTopo` /
  :class:`~.topology.FCTopo` built on them;
* :mod:`.routing`: K-shortest paths, up-down paths and down-up turns ``T_du``,
  DF-KSP, FC+ (1L-K)/(2L-K), FC's edge-disjoint up-down routing, lossless
  priorities per hop and the (switch, in-port, out-port) priority transitions;
* :mod:`.deadlock`: channel dependency graphs per priority and their cycles;
* :mod:`.throughput`: traffic matrices and the path-based multi-commodity-flow
  throughput (scipy's HiGHS).

Only :mod:`.topology`'s classes need Mininet; the other modules are pure.
"""
