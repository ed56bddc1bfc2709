"""FC+ (seed 001) control plane: programs p4src/fcplus.p4 from topologies/fcplus routing, sets the switches'
port queues and PFC (:mod:`.programming`, :mod:`.controller`)."""
