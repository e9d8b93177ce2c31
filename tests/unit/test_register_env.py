"""The data source is registered with the environment keys Spark's streaming source runner adds in place, and the
application's environment is left as it was (see spark/datasource.py _register_class)."""

from __future__ import annotations

from types import SimpleNamespace

from adaptstream.spark import datasource


def test_runner_keys_present_at_registration_and_removed_after(monkeypatch):
    monkeypatch.setattr("adaptstream.spark.drain.install", lambda: None)
    seen: list[dict] = []
    env = {"USER_VAR": "1", "SPARK_BUFFER_SIZE": "4096"}
    conf = SimpleNamespace(get=lambda key, default=None: default)
    spark = SimpleNamespace(
        sparkContext=SimpleNamespace(environment=env, getConf=lambda: conf),
        dataSource=SimpleNamespace(register=lambda cls: seen.append(dict(env))),
    )
    datasource.register(spark)
    datasource.register(spark, {"admission": "fixed"})
    assert len(seen) == 2
    for at_registration in seen:
        assert set(datasource.RUNNER_ENV) <= at_registration.keys()
        assert at_registration["SPARK_BUFFER_SIZE"] == "4096"  # the application's own value is kept
    assert env == {"USER_VAR": "1", "SPARK_BUFFER_SIZE": "4096"}
