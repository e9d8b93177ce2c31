"""Costream's data side, for reports only: the simulated edge-cloud testbed (SIMULATED labels), corpus builders,
real-trace recording and the REAL heterogeneous testbed (cgroups + network namespaces)."""
