"""Fuzzing (#57 item 3) of the CLI's flags and of Parquet input: every combination of ``adaptstream run`` flags either
reaches Spark's start (replaced here by a stand-in that refuses) or is refused with one line and exit status 1 or 2,
never a traceback; any bytes in a Parquet dataset become rows or one quarantined record, never an exception.

Property-based (Hypothesis), bounded; the examples below are the seed corpus (inputs kept because they sit on an
edge or broke a check once)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import adaptstream.spark.session
from adaptstream import cli
from adaptstream.connectors.parsing import FileFormat, parse_bytes

BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


class WouldStartSpark(Exception):
    """Raised where Spark would start: every check before it passed."""


def _run_options() -> dict[str, object]:
    """The click parameters of ``adaptstream run``, walked from the command typer builds (nothing hand-kept)."""
    import typer.main

    return {p.name: p for p in typer.main.get_command(cli.app).commands["run"].params}


TOKENS = ["0", "-1", "1", "2.5", "1e999", "nan", "inf", "", " ", "abc", "10 seconds", "k=v;k", "=", ";;", "a=1;a=2",
          "LR1S", "CM1S", "lmstream", "time", "klink", "prompt", "hash", "local[2]", "local[x]", "-", "--", "x" * 300,
          "k STRING, v INT", "SELECT * FROM input", "csv", "json", "parquet", "\u00e9", "./in",
          "/nonexistent"]  # fmt: skip


@st.composite
def run_argv(draw) -> list[str]:
    argv = ["run"]
    params = _run_options()
    for name in draw(st.lists(st.sampled_from(sorted(params)), max_size=6, unique=True)):
        p = params[name]
        if getattr(p, "is_flag", False):
            argv.append(draw(st.sampled_from([*p.opts, *p.secondary_opts])))
            continue
        for _ in range(draw(st.integers(1, 2)) if p.multiple else 1):
            argv += [p.opts[0], draw(st.sampled_from(TOKENS))]
    return argv


@pytest.fixture
def no_spark(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise WouldStartSpark

    monkeypatch.setattr(adaptstream.spark.session, "build_spark", refuse)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # run directories land here
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "0.csv").write_text("a,1\n")


def test_run_flags_end_in_spark_or_one_line(no_spark, capsys):
    reached = []

    @BOUNDED
    @given(run_argv())
    @example(["run", "--rate", "1e999"])
    @example(["run", "--workload", "LR1S", "--workload", "CM1S", "--elastic", "prompt"])
    @example(["run", "--sql", "SELECT * FROM input", "--input", "./in", "--schema", "k STRING, v INT"])
    @example(["run", "--admission-params", "k=v;k"])
    @example(["run", "--device", "gpu"])
    def one(argv: list[str]) -> None:
        try:
            cli.main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out = capsys.readouterr()
        text = out.out + out.err
        assert "Traceback" not in text, (argv, text)
        if "WouldStartSpark" in text:
            reached.append(argv)
            assert code == 1
        else:
            assert code in (1, 2), (argv, text)  # nothing ran without Spark: a refusal
            assert text.strip(), argv  # and it says why

    one()
    assert reached  # some combinations were valid: the fuzz reaches past the checks, not only refusals


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32())])
GOOD = _parquet(pa.table({"k": ["a", "b", None], "v": pa.array([1, 2, 3], pa.int32())}))
OTHER = _parquet(pa.table({"k": [1.5], "w": ["x"]}))  # a column of another type, one missing


def _mutated(data: bytes, cut: int, flips: list[tuple[int, int]], tail: bytes) -> bytes:
    b = bytearray(data[: max(0, len(data) - cut)])
    for pos, val in flips:
        if b:
            b[pos % len(b)] = val
    return bytes(b) + tail


@BOUNDED
@given(
    st.sampled_from([GOOD, OTHER, b""]),
    st.integers(0, 64),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    st.binary(max_size=16),
)
@example(GOOD, 0, [], b"")  # whole and valid
@example(GOOD, 8, [], b"")  # the footer cut off
@example(GOOD, 0, [], b"PAR1")  # a stray magic number appended
def test_parquet_bytes_become_rows_or_one_quarantined_record(base, cut, flips, tail):
    data = _mutated(base, cut, flips, tail)
    res = parse_bytes(data, SCHEMA, FileFormat("parquet"))
    assert res.table.schema == SCHEMA
    assert len(res.bad) <= 1 and not (res.bad and res.table.num_rows)  # the whole file, or one refusal
    for bad in res.bad:
        assert bad.get("reason") and "raw" in bad
    if data == GOOD:
        assert res.table.column("k").to_pylist() == ["a", "b", None] and not res.bad
