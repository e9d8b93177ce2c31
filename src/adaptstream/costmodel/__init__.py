"""Cost-model data: query/hardware/placement traces, simulated edge-cloud testbed, generators, corpora."""

from adaptstream.costmodel.model import (
    HOST_CATEGORIES,
    OPERATOR_KINDS,
    Host,
    Labels,
    Operator,
    OperatorKind,
    QueryGraph,
    Trace,
    read_traces,
    write_traces,
)

__all__ = [
    "HOST_CATEGORIES",
    "OPERATOR_KINDS",
    "Host",
    "Labels",
    "Operator",
    "OperatorKind",
    "QueryGraph",
    "Trace",
    "read_traces",
    "write_traces",
]
