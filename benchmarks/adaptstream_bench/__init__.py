"""The benchmark harness of adaptstream: every benchmark, report writer and experiment that exists to produce a
report under docs/results. It is not part of the installed product: `pip install -e benchmarks` (or
`scripts/setup.sh --dev`) adds it, and its commands (`adaptstream bench ...`, `adaptstream partitioning bench ...`,
`adaptstream costmodel eval | eval-real | repeatability`) then appear in the CLI through the `adaptstream.commands`
entry point (:func:`adaptstream_bench.cli.register`)."""
