"""A REAL heterogeneous Spark testbed on one machine (cgroups + network namespaces); see docs/testbed.md."""
