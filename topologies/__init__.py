"""Topology generators (Clos, FatTree, AB FatTree, DSF) and the fat-tree designer."""
