"""F10 on a topology graph (seed 002): the detour algorithm (:mod:`.detours`), path counts and
path dilation (:mod:`.paths`) and pushback simulated message by message (:mod:`.pushback`).

The AB FatTree's wiring is :mod:`testbed.topologies.ab_fattree`; the controller that installs
these detours is :mod:`testbed.controllers.f10`.
"""
