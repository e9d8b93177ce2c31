"""One way to configure a policy: option fields with metadata, one coercion, one ``k=v;k=v`` parser,
``Registry.build`` for every family, and ``admissionParams`` / ``partitionerParams`` reaching every field."""

from __future__ import annotations

import dataclasses

import pytest

from adaptstream.admission import ADMISSION, BatchOutcome, PendingDataset
from adaptstream.allocation import ALLOCATORS
from adaptstream.app.runner import RunSpec, source_options
from adaptstream.config import describe, option, option_fields, parse_kv
from adaptstream.devices import DEVICE_MAPPERS
from adaptstream.elasticity import ELASTICITY
from adaptstream.errors import ConfigError
from adaptstream.partitioning import PARTITIONERS, make_config
from adaptstream.scheduling import SCHEDULERS
from adaptstream.spark.options import SourceOptions, known_options
from adaptstream.workloads import WORKLOADS


def test_parse_kv_is_the_one_parameter_parser():
    assert parse_kv(" a=1 ; b = x=y ;;", "opt") == {"a": "1", "b": "x=y"}
    assert parse_kv("", "opt") == {}
    for bad in ("a", "=1", "a=1;b"):
        with pytest.raises(ConfigError, match="opt must look like 'name=value;name=value'"):
            parse_kv(bad, "opt")


@dataclasses.dataclass(frozen=True)
class _Toy:
    n: int = option("countOf", 3, "int", low=1, help="how many")
    on: bool = option("switch", False, "bool")
    size: int = option("size", 0, "bytes")


def test_option_fields_carry_name_kind_range_and_help():
    assert set(option_fields(_Toy)) == {"countof", "switch", "size"}
    assert describe([_Toy])[0] == ("countOf", "int", "3", "how many")
    from adaptstream.config import from_options

    assert from_options(_Toy, {"countof": "5", "switch": "yes", "size": "2k"}) == _Toy(5, True, 2048)
    with pytest.raises(ConfigError, match=r"option countOf must be in \[1, inf\], got '0'"):
        from_options(_Toy, {"countof": "0"})
    with pytest.raises(ConfigError, match="option switch must be true or false"):
        from_options(_Toy, {"switch": "maybe"})


@pytest.mark.parametrize("registry", [ADMISSION, PARTITIONERS, SCHEDULERS, ALLOCATORS, ELASTICITY, DEVICE_MAPPERS])
def test_every_family_builds_through_one_registry_build_that_names_the_valid_fields(registry):
    name = registry.names()[0]
    config = registry.build(name, "")
    valid = sorted(f.name for f in dataclasses.fields(config))
    with pytest.raises(ConfigError, match=r"has no parameter\(s\) \['nope'\]") as err:
        registry.build(name, "nope=1")
    assert str(err.value).endswith(f"valid: {valid}")


def test_a_name_may_imply_parameters_and_params_override_them():
    assert make_config("pk5").choices == 5
    assert PARTITIONERS.build("pk5", "choices=3").choices == 3
    assert make_config("cm-hll").cardinality == "hll"


def _decisions(policy, steps: int = 400) -> list:
    """A deterministic trace whose processing cost drifts, so how much history the policy keeps matters."""
    now, pending, out = 1_700_000_000.0, [], []
    for i in range(steps):
        now += 0.25
        pending.append(PendingDataset(i, now, 500 + (i % 7) * 300))
        est = policy.estimate_max_latency(now, pending)
        if policy.admit(now, pending):
            rows = sum(d.rows for d in pending)
            proc = 0.05 + rows / (4000.0 if (i // 40) % 2 else 12000.0)
            policy.on_batch_complete(BatchOutcome(rows, now, now + proc, now + proc - pending[0].arrival, est))
            now += proc
            pending = []
        out.append((i, None if est is None else round(est, 6)))
    return out


def test_admission_params_reach_lmstream_from_spark_options_and_change_its_decisions(tmp_path):
    base = {"path": str(tmp_path), "admission": "lmstream", "slide": "5 seconds"}
    default = SourceOptions.parse(base).admission_policy()
    tuned = SourceOptions.parse({**base, "admissionParams": "history=3;margin_z=0;lookahead=false"}).admission_policy()
    assert (tuned.config.history, tuned.config.margin_z, tuned.config.lookahead) == (3, 0.0, False)
    assert (tuned.config.slide, default.config.history) == (5.0, 12)  # the shared option still reaches it
    assert _decisions(default) != _decisions(tuned)
    same = SourceOptions.parse({**base, "admissionParams": "history=12"}).admission_policy()
    assert _decisions(same) == _decisions(SourceOptions.parse(base).admission_policy())  # the default, spelled out
    with pytest.raises(ConfigError, match=r"has no parameter\(s\) \['histroy'\]; valid: \['estimator', 'guard'"):
        SourceOptions.parse({**base, "admissionParams": "histroy=8"})
    with pytest.raises(ConfigError, match="margin_z must be a number of standard deviations"):
        SourceOptions.parse({**base, "admissionParams": "margin_z=99"})


def test_partitioner_params_are_checked_when_the_source_is_built(tmp_path):
    base = {"path": str(tmp_path), "partitioner": "pk2", "partitionKey": "k"}
    with pytest.raises(ConfigError, match="choices='x' is not a valid int"):
        SourceOptions.parse({**base, "partitionerParams": "choices=x"})
    with pytest.raises(ConfigError, match=r"has no parameter\(s\) \['nope'\]"):
        SourceOptions.parse({**base, "partitionerParams": "nope=1"})


def test_the_cli_options_round_trip_through_spark_options_unchanged(tmp_path):
    (tmp_path / "in").mkdir()
    spec = RunSpec(
        workload="LR1S",
        admission="lmstream",
        admission_params="history=8;margin_z=2",
        trigger=7.5,
        margin="1.5",
        input_dir=str(tmp_path / "in"),
        partitioner="pk5",
        partitioner_params="choices=3",
        num_blocks=3,
    )
    raw = source_options(spec, WORKLOADS.get("LR1S"), str(tmp_path / "run"))
    assert {k.lower() for k in raw} <= known_options()
    o = SourceOptions.parse(raw)
    assert (o.admission, o.admission_params, o.trigger, o.margin) == ("lmstream", "history=8;margin_z=2", 7.5, 1.5)
    assert (o.partitioner, o.partitioner_params, o.num_blocks) == ("pk5", "choices=3", 3)
    assert o.partition_key == tuple(WORKLOADS.get("LR1S").key_columns) and o.path == str(tmp_path / "in")
    assert o.admission_policy().config.history == 8


def test_the_option_table_is_generated_from_every_option_field():
    from adaptstream.spark.options import ALIASES, option_table

    rows = option_table()
    assert {r[0].lower() for r in rows} == known_options() - set(ALIASES)
    assert all(r[4] for r in rows), [r[0] for r in rows if not r[4]]  # every option says what it means
    assert {r[0] for r in option_table("redis")} >= {"redisTimeout", "trim", "path"}
    assert "fileStableSeconds" not in {r[0] for r in option_table("redis")}


def test_the_window_period_defaults_to_a_given_slide(tmp_path):
    """One window slide for LMStream and the scheduler: ``slide`` given alone is the scheduler's window period too;
    ``windowPeriod`` given wins; neither leaves the query without a deadline for the scheduler."""
    path = str(tmp_path)
    assert SourceOptions.parse({"path": path, "slide": "5 seconds"}).window_period == 5.0
    assert SourceOptions.parse({"path": path, "slide": "5 seconds", "windowPeriod": "10 seconds"}).window_period == 10
    assert SourceOptions.parse({"path": path}).window_period == 0.0
