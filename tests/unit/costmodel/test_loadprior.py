"""The class prior: a balanced logistic regression on the busiest host's load, added to the GNN's logit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from adaptstream.costmodel.features import build_graph
from adaptstream.costmodel.loadprior import FEATURES, LoadPrior, load_maxima
from adaptstream.costmodel.model import Host, Operator, QueryGraph, Trace
from adaptstream.costmodel.train import GraphDataset, TrainConfig, TrainedModel, train_model
from adaptstream.errors import CostModelError

HOSTS = [Host("h0", 25, 1024, 10, 1.0, "small"), Host("h1", 200, 2048, 10, 1.0, "large")]


def _query(rate: float) -> QueryGraph:
    return QueryGraph(
        f"q{rate}",
        (
            Operator("s", "source", {"event_rate": rate, "tuple_width_out": 3}),
            Operator("f", "filter", {"selectivity": 0.5}),
            Operator("k", "sink", {}),
        ),
        (("s", "f"), ("f", "k")),
    )


def test_load_maxima_take_the_busiest_host_of_each_feature() -> None:
    g = build_graph(_query(400.0), HOSTS, {"s": "h0", "f": "h1", "k": "h1"})
    m = load_maxima([g])
    assert m.shape == (1, len(FEATURES))
    # 400 rows/s on a quarter core beats 400 + 200 rows/s on two cores
    assert m[0, 0] == pytest.approx(math.log1p(1600.0))
    assert m[0, 1] == 0.0  # no window holds rows


def _graphs(rates: list[float], small: bool) -> list:
    host = "h0" if small else "h1"
    return [build_graph(_query(r), HOSTS, {"s": host, "f": host, "k": host}) for r in rates]


def test_fit_separates_by_load_and_round_trips() -> None:
    rates = [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0]  # below the testbed's rate cap
    graphs = _graphs(rates, small=True)
    y = np.array([1, 1, 1, 1, 1, 1, 1, 0, 0, 0])  # the three busiest runs fail; classes are unbalanced
    prior = LoadPrior.fit(graphs, y)
    z = prior.logits(graphs)
    assert np.all(np.diff(z) < 0)  # more load, less likely to succeed
    np.testing.assert_array_equal(z > 0, y == 1)
    again = LoadPrior.from_dict(prior.to_dict())
    np.testing.assert_allclose(again.logits(graphs), z)
    with pytest.raises(CostModelError, match="this version reads"):
        LoadPrior.from_dict({**prior.to_dict(), "features": ["log:cpu"]})


def test_one_class_gives_no_offset_and_labels_must_match() -> None:
    graphs = _graphs([10.0, 20.0], small=False)
    assert LoadPrior.fit(graphs, np.array([1, 1])).logits(graphs).tolist() == [0.0, 0.0]
    with pytest.raises(CostModelError, match="3 labels for 2 graphs"):
        LoadPrior.fit(graphs, np.array([1, 0, 1]))


def _dataset(n: int) -> GraphDataset:
    rng = np.random.default_rng(0)
    traces = []
    for i in range(n):
        rate = float(rng.choice([20.0, 60.0, 200.0, 600.0, 2000.0]))
        small = bool(rng.random() < 0.5)
        place = dict.fromkeys(("s", "f", "k"), "h0" if small else "h1")
        ok = rate / (0.25 if small else 2.0) < 2000.0  # fails when a core gets >= 2000 rows/s
        labels = {"throughput": 1.0, "success": ok, "backpressure": not ok, "origin": "real"}
        traces.append(
            Trace.from_dict(
                {
                    "trace_id": f"t{i}",
                    "query": _query(rate).to_dict(),
                    "hosts": [h.to_dict() for h in HOSTS],
                    "placement": place,
                    "labels": labels,
                    "meta": {},
                }
            )
        )
    return GraphDataset.from_traces(traces)


def test_a_classifier_trains_predicts_and_saves_with_its_prior(tmp_path) -> None:
    torch.set_num_threads(1)
    ds = _dataset(60)
    train, val = ds.subset(range(40)), ds.subset(range(40, 60))
    cfg = TrainConfig(metric="success", hidden=8, epochs=2, batch_size=16, seed=0, class_prior="load")
    m = train_model(train, val, cfg)
    assert m.class_prior is not None
    raw = m.raw_outputs(val.graphs)
    expect = 1.0 / (1.0 + np.exp(-(raw + m.class_prior.logits(val.graphs))))
    np.testing.assert_allclose(m.predict(val.graphs), expect, rtol=1e-6)
    m.save(tmp_path / "m.pt")
    again = TrainedModel.load(tmp_path / "m.pt", device="cpu")
    assert again.class_prior == m.class_prior
    np.testing.assert_allclose(again.predict(val.graphs), m.predict(val.graphs), rtol=1e-5)
    plain = train_model(train, val, TrainConfig(metric="success", hidden=8, epochs=2, batch_size=16, seed=0))
    assert plain.class_prior is None
    lp = train_model(
        train, val, TrainConfig(metric="throughput", hidden=8, epochs=2, batch_size=16, class_prior="load")
    )
    assert lp.class_prior is None  # a regression has no class prior
    with pytest.raises(CostModelError, match="valid: none, load"):
        train_model(train, val, TrainConfig(metric="success", epochs=1, class_prior="loud"))


def test_fine_tuning_can_add_a_prior_to_a_model_trained_without_one() -> None:
    from adaptstream.costmodel.train import fine_tune

    torch.set_num_threads(1)
    ds = _dataset(60)
    base = train_model(
        ds.subset(range(30)), ds.subset(range(30, 40)), TrainConfig(metric="success", hidden=8, epochs=1)
    )
    extra = ds.subset(range(40, 60))
    assert fine_tune(base, extra, epochs=1).class_prior is None
    tuned = fine_tune(base, extra, epochs=1, class_prior="load")
    assert tuned.class_prior is not None and base.class_prior is None  # the base model is left as it was
    assert fine_tune(tuned, extra, epochs=1).class_prior == tuned.class_prior  # a prior is kept, not refitted
    with pytest.raises(CostModelError, match="fine-tuning keeps it"):
        fine_tune(tuned, extra, epochs=1, class_prior="none")


def test_the_loss_and_the_stopping_score_see_the_prior() -> None:
    from adaptstream.costmodel.train import stopping_score

    torch.set_num_threads(1)
    ds = _dataset(60)
    train, val = ds.subset(range(40)), ds.subset(range(40, 60))
    cfg = TrainConfig(metric="success", hidden=8, epochs=1, batch_size=16, lr=0.0, class_prior="load")
    m = train_model(train, val, cfg)  # lr 0: the weights the loss was computed with are the ones kept
    assert m.class_prior is not None
    y = train.column("success")
    logit = torch.tensor(m.raw_outputs(train.graphs) + m.class_prior.logits(train.graphs), dtype=torch.float32)
    pos = float(y.mean())
    want = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([(1 - pos) / pos]))(
        logit, torch.tensor(y, dtype=torch.float32)
    )
    assert m.history[0]["train_loss"] == pytest.approx(float(want), rel=1e-4)
    y_va = val.column("success")
    assert m.history[0]["val_score"] == pytest.approx(stopping_score("success", y_va, m.predict(val.graphs)), rel=1e-5)


def test_the_prior_is_fitted_on_training_traces_only(monkeypatch) -> None:
    from adaptstream.costmodel import train as train_mod

    seen: list[int] = []
    real_fit = LoadPrior.fit.__func__  # type: ignore[attr-defined]

    def spy(cls, graphs, y):
        seen.append(len(graphs))
        return real_fit(cls, graphs, y)

    monkeypatch.setattr(LoadPrior, "fit", classmethod(spy))
    torch.set_num_threads(1)
    ds = _dataset(60)
    base = train_model(ds.subset(range(30)), ds.subset(range(30, 40)), TrainConfig(metric="success", epochs=1))
    cfg = TrainConfig(metric="success", hidden=8, epochs=1, class_prior="load")
    train_mod.train_model(ds.subset(range(30)), ds.subset(range(30, 40)), cfg)
    assert seen == [30]
    extra = ds.subset(range(40, 60))
    train_mod.fine_tune(base, extra, epochs=1, class_prior="load")
    assert len(seen) == 2 and 0 < seen[1] < len(extra)  # the early-stopping slice is left out


def test_checkpoints_without_a_prior_still_load(tmp_path) -> None:
    torch.set_num_threads(1)
    ds = _dataset(40)
    m = train_model(ds.subset(range(30)), ds.subset(range(30, 40)), TrainConfig(metric="success", hidden=8, epochs=1))
    m.save(tmp_path / "m.pt")
    ck = torch.load(tmp_path / "m.pt", weights_only=False)
    del ck["class_prior"], ck["train_config"]["class_prior"]  # as saved before the class prior existed
    torch.save(ck, tmp_path / "old.pt")
    old = TrainedModel.load(tmp_path / "old.pt", device="cpu")
    assert old.class_prior is None and old.config.class_prior == "none"
    np.testing.assert_allclose(old.predict(ds.graphs), m.predict(ds.graphs), rtol=1e-6)
