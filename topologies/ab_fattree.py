"""F10's AB FatTree (seed 002, section 4): a FatTree with type-A and type-B subtrees.

The wiring, names, ports and location addresses are those of
:class:`testbed.topologies.fattree.FatTree`; only the subtree types differ.
Among the children of every group (the ``p`` subtrees below a level-``i+1``
group, or the ``2p`` subtrees below the cores) even positions are type A and
odd positions type B, so half the subtrees are of each type (``ceil(p/2)``
type A when ``p`` is odd).  Type-B roots connect to their parents with stride
``p^i``, which lets a parent with a failed child in one type detour in two
extra hops through a child of the other type (see
:mod:`testbed.topologies.f10`).  At level 0 (``p^0 = 1``) both wirings
coincide, as in the paper.

For k = 4, L = 2: the aggregation switches of a type-A pod reach cores {0, 1}
and {2, 3}; those of a type-B pod reach {0, 2} and {1, 3}.
"""
from testbed.topologies.fattree import FatTree


class ABFatTree(FatTree):
    """An AB FatTree; same constructor, parameters and interface as :class:`FatTree`.

    Extra queries inherited from :class:`FatTree` that matter here:
    :meth:`subtree_type`, :meth:`type_stack`, :meth:`failure_group`,
    :meth:`failure_group_members`, :meth:`location`, :meth:`subtree_prefix`.
    """

    kind = "abfattree"

    def subtree_type_of(self, level, group):
        """'A' for subtrees at even positions among their siblings, 'B' at odd positions."""
        return "A" if self.position(level, group) % 2 == 0 else "B"
