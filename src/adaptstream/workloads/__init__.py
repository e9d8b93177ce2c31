"""Workloads: deterministic dataset generators (Linear Road simulation, Google trace task_events) and the six
windowed queries of LMStream's Table III with their batch SQL oracles."""

from adaptstream.workloads import cluster, debs, linear_road, lmstream_queries, ysb  # noqa: F401  (registers entries)
from adaptstream.workloads.base import GENERATORS, WORKLOADS, DatasetGenerator, Workload, build_generator
from adaptstream.workloads.cluster import TaskEventsGenerator, TaskEventsGeneratorConfig
from adaptstream.workloads.io import dataset_file_name, write_dataset, write_run
from adaptstream.workloads.linear_road import LinearRoadGenerator, LinearRoadGeneratorConfig

__all__ = [
    "GENERATORS",
    "WORKLOADS",
    "DatasetGenerator",
    "LinearRoadGenerator",
    "LinearRoadGeneratorConfig",
    "TaskEventsGenerator",
    "TaskEventsGeneratorConfig",
    "Workload",
    "build_generator",
    "dataset_file_name",
    "write_dataset",
    "write_run",
]
