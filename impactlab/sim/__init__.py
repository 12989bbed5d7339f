"""The simulation core: the engine (the only module that touches simpy), its clock, the cluster's
nodes, job records and the event log, node health, and ``policy``, the protocol the engine offers
and every policy implements."""
