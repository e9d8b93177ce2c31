"""Costream evaluation benchmark: Exp. 1, 2, 3/4, 5, 7 and real-trace q-errors -> docs/results/costmodel.md.

Labels of the corpus are SIMULATED (edge-cloud testbed simulator); see the report for what that means.
Run from the repository root, after building the corpus (scripts/costmodel_build_corpus.py):

    nice -n 10 python benchmarks/costmodel_eval.py                  # full run, ~25 min on 2 shared cores
    nice -n 10 python benchmarks/costmodel_eval.py --quick          # smoke run, a few minutes

Every option of `adaptstream costmodel eval` is available here as well (see --help).
"""

from __future__ import annotations

import argparse
import dataclasses

from adaptstream_bench.costmodel_eval import EvalConfig, run_evaluation

QUICK = {
    "n_train": 3000,
    "n_aux_train": 1500,
    "members": 1,
    "main_seconds": 10.0,
    "aux_seconds": 5.0,
    "exp2_queries": 4,
    "exp2_candidates": 15,
    "exp3_traces": 60,
    "exp5_per_chain": 20,
    "exp5_fewshot": 60,
    "exp4_dims": ("cpu",),
    "exp7b_metrics": ("throughput",),
    "out_dir": "runs/costmodel_quick",
    "models_dir": "runs/costmodel_quick_models",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, report under runs/costmodel_quick")
    parser.add_argument(
        "--reuse-models",
        action="store_true",
        help="load the main GNN ensembles from --models-dir, skip training",
    )
    for f in dataclasses.fields(EvalConfig):
        if f.type in ("int", "float", "str"):
            parser.add_argument(
                f"--{f.name.replace('_', '-')}",
                type={"int": int, "float": float, "str": str}[f.type],
                default=None,
            )
        elif f.type == "tuple[str, ...]":
            parser.add_argument(f"--{f.name.replace('_', '-')}", default=None, help="comma-separated")
    args = parser.parse_args()
    overrides: dict = dict(QUICK) if args.quick else {}
    if args.reuse_models:
        overrides["reuse_models"] = True
    for f in dataclasses.fields(EvalConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            overrides[f.name] = tuple(x.strip() for x in v.split(",") if x.strip()) if f.type.startswith("tuple") else v
    run_evaluation(EvalConfig(**overrides))


if __name__ == "__main__":
    main()
