"""Tiny end-to-end train/predict run on simulated traces; checkpoints; ensembles; few-shot fine-tuning.

Fixture: tests/fixtures/costmodel/train_sample.jsonl, 400 traces labelled by the SIMULATED testbed
(``corpus.trace_for(seed=7, index=i)``). Regenerate with ``PYTHONPATH=src python
tests/unit/costmodel/test_train.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from adaptstream.costmodel.ensemble import CostEnsembles, MetricEnsemble
from adaptstream.costmodel.model import read_traces
from adaptstream.costmodel.qerror import q_errors
from adaptstream.costmodel.train import (
    GraphDataset,
    TrainConfig,
    TrainedModel,
    fine_tune,
    holdout_split,
    stopping_score,
    train_model,
    validation_score,
)
from adaptstream.errors import CostModelError

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "costmodel" / "train_sample.jsonl"
N_SAMPLE, SAMPLE_SEED = 400, 7


@pytest.fixture(scope="module")
def data() -> tuple[GraphDataset, GraphDataset, GraphDataset]:
    torch.set_num_threads(1)
    ds = GraphDataset.from_traces(read_traces(SAMPLE))
    assert len(ds) == N_SAMPLE
    assert {m["origin"] for m in ds.meta} == {"simulated"}
    return ds.subset(range(300)), ds.subset(range(300, 350)), ds.subset(range(350, 400))


@pytest.fixture(scope="module")
def lp_model(data) -> TrainedModel:
    train, val, _ = data
    cfg = TrainConfig(metric="Lp", hidden=32, epochs=40, batch_size=64, patience=10, seed=0)
    return train_model(train, val, cfg)


def test_trained_gnn_beats_constant_predictor(data, lp_model) -> None:
    train, _, test = data
    tr, te = train.usable("proc_latency_ms"), test.usable("proc_latency_ms")
    assert te.size >= 30
    # the best constant under MSLE: the mean of log1p(y) on the training set
    const = np.expm1(np.log1p(train.column("proc_latency_ms")[tr]).mean())
    y = test.column("proc_latency_ms")[te]
    pred = lp_model.predict([test.graphs[i] for i in te])
    q_model, q_const = np.median(q_errors(y, pred)), np.median(q_errors(y, np.full_like(y, const)))
    assert q_model < q_const, (q_model, q_const)
    assert lp_model.history and lp_model.history[0]["epoch"] == 1


def test_checkpoint_round_trip_predicts_identically(tmp_path, data, lp_model) -> None:
    _, _, test = data
    lp_model.save(tmp_path / "m.pt")
    again = TrainedModel.load(tmp_path / "m.pt", device="cpu")
    np.testing.assert_allclose(again.predict(test.graphs), lp_model.predict(test.graphs), rtol=1e-5)
    assert again.stats.to_dict() == lp_model.stats.to_dict()  # feature statistics travel with the weights


def test_classifier_trains_and_ensemble_votes(tmp_path, data) -> None:
    train, val, test = data
    members = [
        train_model(train, val, TrainConfig(metric="success", hidden=16, epochs=3, batch_size=64, seed=s))
        for s in (0, 1, 2)
    ]
    ens = MetricEnsemble(members)
    per = ens.member_predictions(test.graphs)
    assert per.shape == (3, len(test))
    votes = ens.combine(per)
    np.testing.assert_array_equal(votes, (per >= 0.5).sum(axis=0) >= 2)
    both = CostEnsembles({"success": ens})
    both.save(tmp_path / "ens")
    loaded = CostEnsembles.load(tmp_path / "ens")
    np.testing.assert_array_equal(loaded.predict_graphs(test.graphs)["success"], votes)


def test_soft_vote_cuts_the_mean_probability_and_is_saved(tmp_path, data) -> None:
    train, val, test = data
    members = [
        train_model(train, val, TrainConfig(metric="success", hidden=16, epochs=3, batch_size=64, seed=s))
        for s in (0, 1)
    ]
    soft = MetricEnsemble(members, combine="mean")
    per = np.array([[0.9, 0.2, 0.6], [0.3, 0.4, 0.45]])
    np.testing.assert_array_equal(soft.combine(per), [True, False, True])  # means 0.6, 0.3, 0.525
    np.testing.assert_array_equal(MetricEnsemble(members).combine(per), [False, False, False])  # 1 of 2: no majority
    CostEnsembles({"success": soft}).save(tmp_path / "ens")
    again = CostEnsembles.load(tmp_path / "ens").ensembles["success"]
    assert again.combine_rule == "mean"
    np.testing.assert_array_equal(again.predict(test.graphs), soft.predict(test.graphs))
    with pytest.raises(CostModelError, match="valid: vote, mean"):
        MetricEnsemble(members, combine="median")  # type: ignore[arg-type]
    manifest = tmp_path / "ens" / "manifest.json"
    old = {k: v for k, v in json.loads(manifest.read_text()).items() if k != "combine"}  # written before soft votes
    manifest.write_text(json.dumps(old))
    assert CostEnsembles.load(tmp_path / "ens").ensembles["success"].combine_rule == "vote"


def test_regression_ensemble_is_the_mean() -> None:
    class Stub:  # minimal stand-in with a fixed output, only to exercise combine()
        metric = "throughput"

    ens = MetricEnsemble([Stub(), Stub(), Stub()])  # type: ignore[list-item]
    np.testing.assert_allclose(ens.combine(np.array([[1.0, 4.0], [2.0, 5.0], [3.0, 9.0]])), [2.0, 6.0])


def _shifted(ds: GraphDataset, factor: float) -> GraphDataset:
    labels = ds.labels.copy()
    labels[:, 2] *= factor  # column 2 = proc_latency_ms
    return GraphDataset(ds.graphs, labels, ds.meta)


def test_few_shot_fine_tuning_adapts_to_a_shifted_distribution(data, lp_model) -> None:
    # a "new" workload whose latencies are 20x the training ones: the base model is off by about 20x
    _, val, test = data
    extra, target = _shifted(val, 20.0), _shifted(test, 20.0)
    idx = target.usable("proc_latency_ms")
    y = target.column("proc_latency_ms")[idx]
    graphs = [target.graphs[i] for i in idx]
    before = np.median(q_errors(y, lp_model.predict(graphs)))
    tuned = fine_tune(lp_model, extra, epochs=30, lr=3e-3, seed=0)
    after = np.median(q_errors(y, tuned.predict(graphs)))
    assert before > 5.0
    assert after < before / 2, (before, after)
    assert tuned.model is not lp_model.model and tuned.stats is lp_model.stats  # base left untouched
    assert np.median(q_errors(y, lp_model.predict(graphs))) == pytest.approx(before)


@pytest.mark.gpu
def test_cuda_training_and_cpu_reload_agree(tmp_path, data) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    train, val, test = data
    cfg = TrainConfig(metric="T", hidden=16, epochs=3, batch_size=64, device="cuda")
    model = train_model(train, val, cfg)
    assert model.device().type == "cuda"
    model.save(tmp_path / "g.pt")
    cpu = TrainedModel.load(tmp_path / "g.pt", device="cpu")
    np.testing.assert_allclose(cpu.predict(test.graphs), model.predict(test.graphs), rtol=1e-4, atol=1e-4)


def _regenerate() -> None:
    from adaptstream.costmodel.model import write_traces
    from adaptstream_bench.costmodel.simcorpus import trace_for

    write_traces(SAMPLE, (trace_for(SAMPLE_SEED, i) for i in range(N_SAMPLE)))


def test_holdout_split_keeps_each_group_on_one_side() -> None:
    groups = np.repeat(np.arange(20), 2)  # a query's random and initial placement
    tr, va = holdout_split(40, 0.2, seed=3, groups=groups)
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(40))
    assert len(va) == 8 and not set(groups[tr]) & set(groups[va])
    plain_tr, plain_va = holdout_split(40, 0.2, seed=3)
    assert len(plain_va) == 8 and not set(plain_tr) & set(plain_va)
    with pytest.raises(CostModelError, match="3 group ids for 40"):
        holdout_split(40, 0.2, seed=3, groups=[0, 1, 2])
    with pytest.raises(CostModelError, match="1 group"):
        holdout_split(4, 0.2, seed=3, groups=[5, 5, 5, 5])


def test_fine_tune_early_stops_on_labelled_traces_of_whole_queries(monkeypatch, data, lp_model) -> None:
    _, val, _ = data  # 50 traces; some are unsuccessful, so unlabelled for Lp
    groups = np.arange(len(val)) // 2
    seen = {}

    def capture(train, va, cfg, init=None):
        seen["train"], seen["val"] = train, va
        return init

    monkeypatch.setattr("adaptstream.costmodel.train.train_model", capture)
    fine_tune(lp_model, val, seed=1, groups=groups)
    usable = set(val.usable("proc_latency_ms").tolist())
    assert len(usable) < len(val)  # the fixture holds unlabelled traces, so the filter is exercised
    ids = {m["trace_id"]: i for i, m in enumerate(val.meta)}
    tr = [ids[m["trace_id"]] for m in seen["train"].meta]
    va = [ids[m["trace_id"]] for m in seen["val"].meta]
    assert va and set(tr) | set(va) == usable and not set(tr) & set(va)
    assert not set(groups[tr]) & set(groups[va])
    with pytest.raises(CostModelError, match="2 group ids for 50"):
        fine_tune(lp_model, val, groups=[0, 1])


def test_stopping_score_of_a_classifier_moves_with_every_probability() -> None:
    y = np.array([1, 1, 1, 1, 0], dtype=float)
    sure, unsure = np.array([0.9, 0.9, 0.9, 0.9, 0.2]), np.array([0.6, 0.6, 0.6, 0.6, 0.4])
    # the same decisions, so the same balanced accuracy; the log-loss prefers the confident, right model
    assert validation_score("success", y, sure) == validation_score("success", y, unsure) == 0.0
    assert stopping_score("success", y, sure) < stopping_score("success", y, unsure)
    # per class: one failure weighs as much as the four successes
    assert stopping_score("success", y, sure) == pytest.approx((-np.log(0.9) - np.log(0.8)) / 2)
    # one class only, or a regression metric: the validation score itself
    assert stopping_score("success", np.ones(3), np.array([0.2, 0.9, 0.9])) == validation_score(
        "success", np.ones(3), np.array([0.2, 0.9, 0.9])
    )
    assert stopping_score("throughput", np.array([1.0, 2.0]), np.array([2.0, 2.0])) == pytest.approx(1.5)


if __name__ == "__main__":
    _regenerate()
