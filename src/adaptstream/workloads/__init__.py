"""workloads family."""
