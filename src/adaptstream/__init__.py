"""adaptstream: self-tuning micro-batch stream processing on Apache Spark.

Spark does all data processing; adaptstream decides when a micro-batch is cut (admission), which rows go to
which Spark task (partitioning), which query runs next (scheduling), how many tasks run (elasticity) and where
an operator runs (device mapping, placement).
"""

from adaptstream.errors import AdaptstreamError, ConfigError, UnknownNameError

__version__ = "0.1.0"

__all__ = ["AdaptstreamError", "ConfigError", "UnknownNameError", "__version__"]
