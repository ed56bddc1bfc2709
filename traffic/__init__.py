"""RoCEv2-like traffic: packets, queue pairs, senders, receivers, collectives, metrics."""
