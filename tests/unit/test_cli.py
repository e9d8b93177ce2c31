"""The CLI as a new user meets it: --help everywhere, typical mistakes, missing inputs.

Every case asserts the exit code (2 for usage errors, 1 for other failures, 0 for help) and that no traceback is
printed. None of these start Spark: `build_spark` is replaced by a function that fails the test if called, so every
mistake here is also proven to be caught before Spark's 10-20 s start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import adaptstream.spark.session
from adaptstream import cli
from adaptstream.admission import ADMISSION
from adaptstream.connectors.traffic import TRAFFIC
from adaptstream.errors import ConfigError, ConnectorError
from adaptstream.partitioning import PARTITIONERS
from adaptstream.workloads import WORKLOADS

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
ROOT = os.path.dirname(SRC)
EXAMPLES = os.path.join(ROOT, "examples", "costmodel")


@pytest.fixture(autouse=True)
def _no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the CLI started Spark for a case that must fail before it")

    monkeypatch.setattr(adaptstream.spark.session, "build_spark", refuse)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)


def invoke(capsys, *args: str) -> tuple[int, str]:
    """Run `adaptstream ARGS` in this process; return (exit code, stdout + stderr)."""
    try:
        cli.main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out + out.err


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and group of the CLI, walked from the click tree typer builds (nothing hand-kept)."""
    import typer.main

    root = typer.main.get_command(cli.app)
    paths: list[tuple[str, ...]] = [()]

    def walk(cmd, prefix: tuple[str, ...]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            paths.append((*prefix, name))
            walk(sub, (*prefix, name))

    walk(root, ())
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "adaptstream")
def test_every_command_has_help(capsys, path):
    code, out = invoke(capsys, *path, "--help")
    assert code == 0, out
    assert "Usage: adaptstream" in out and "Traceback" not in out
    assert "<bool>" not in out  # flags read as --x / --no-x, without a stray type


def test_run_help_lists_every_registered_choice(capsys):
    code, out = invoke(capsys, "run", "--help")
    assert code == 0
    packed = "".join(out.split())  # click wraps long choice lists
    for registry in (WORKLOADS, ADMISSION, TRAFFIC, PARTITIONERS):
        assert "[" + "|".join(registry.names()) + "]" in packed


USAGE_ERRORS = [
    ((), "Usage: adaptstream"),  # no arguments: the help, as a usage error
    (("run", "--bogus"), "No such option: --bogus"),
    (("run", "--rate", "abc"), "Invalid value for '--rate'"),
    (("run", "--rate", "-500"), "Invalid value for '--rate'"),
    (("run", "--duration", "0"), "--duration"),
    (("run", "--num-blocks", "0"), "--num-blocks"),
    (("nope",), "No such command 'nope'"),
    (("partitioning", "bench"), "Usage: adaptstream partitioning bench"),
    (("costmodel",), "Usage: adaptstream costmodel"),
    (("run", "--partitioner", "nope"), "valid choices: " + ", ".join(PARTITIONERS.names())),
    (("run", "--admission", "sometimes"), "valid choices: asap, fixed, lmstream"),
    (("run", "--workload", "LR9Z"), "LR1S"),
    (("demo", "--traffic", "bursty"), "valid choices: constant, random, sinusoidal, step"),
    (
        (
            *("run", "--workload", "LR2S", "--reduce", "prompt", "--elastic", "static"),
            *("--elastic-params", "bogus=1", "--master", "spark://127.0.0.1:1"),
        ),
        "has no parameter(s) ['bogus']",
    ),
    (
        ("run", "--workload", "YSB", "--workload", "DEBS", "--scheduler", "klink", "--scheduler-params", "hold"),
        "name=value",
    ),
    (
        ("run", "--workload", "YSB", "--workload", "DEBS", "--scheduler", "klink", "--scheduler-params", "hodl=1"),
        "has no parameter(s) ['hodl']; valid:",
    ),
    (("bench", "klink", "--policies", "klink:hold=-1"), "hold must be >= 0"),
    (("bench", "prompt-elastic", "--route", "both"), "--route must be 'pane' or 'app'"),
    (("bench", "prompt-elastic", "--route", "app", "--workload", "CM1S"), "--route app runs LR2S"),
    (("bench", "prompt-elastic", "--route", "app", "--row-work", "-1"), "greater than or equal to 0"),
    (("bench", "composed", "--configs", "spark,fast"), "unknown ['fast']; valid: spark, lmstream, klink"),
    (("bench", "composed", "--queries", "LR1S"), "at least two sliding-window workloads"),
    (("bench", "composed", "--queries", "LR1S,LR1T"), "at least two sliding-window workloads"),
    (("bench", "composed", "--queries", "LR1S,NOPE"), "valid choices"),
    (("bench", "composed", "--rate", "250,0"), "--rate must list whole numbers of rows/s >= 1, got '250,0'"),
    (("bench", "composed", "--latency-target", "soon"), "latency_target must be > 0 seconds or 'auto'"),
    (("submit", __file__, "--latency-target", "-1"), "latency_target must be > 0 seconds or 'auto'"),
    (
        ("run", "--workload", "LR2S", "--workload", "CM1S", "--reduce", "split", "--elastic", "prompt"),
        "needs a cluster manager",  # several workloads: the application's tuner, refused on local[2] before Spark
    ),
    (("run", "--admission-params", "histroy=8"), "has no parameter(s) ['histroy']; valid: ['estimator', 'guard',"),
    (("run", "--admission-params", "history=1"), "lmstream needs history >= 2"),
    (("run", "--partitioner", "pk2", "--partitioner-params", "choices=x"), "choices='x' is not a valid int"),
    (("place",), "Missing argument"),
    (("place", "q.json", "h.json", "--target", "latency"), "proc-latency, e2e-latency, throughput"),
]


@pytest.mark.parametrize(("args", "expected"), USAGE_ERRORS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_usage_errors_exit_2_without_traceback(capsys, args, expected):
    code, out = invoke(capsys, *args)
    assert code == 2, out
    assert expected in " ".join(out.split()), out
    assert "Traceback" not in out


def test_version(capsys):
    from adaptstream import __version__

    code, out = invoke(capsys, "--version")
    assert code == 0 and out.strip() == f"adaptstream {__version__}"


def test_registry_choices_are_case_insensitive(capsys, tmp_path):
    # Resolved to the registered spelling, then stopped before Spark by the missing input.
    code, out = invoke(capsys, "run", "--workload", "lr2s", "--admission", "FIXED", "--input", str(tmp_path / "no"))
    assert code == 2 and "does not exist" in out


def test_missing_input_fails_before_spark(capsys, tmp_path):
    code, out = invoke(capsys, "run", "--input", str(tmp_path / "missing"), "--run-dir", str(tmp_path / "run"))
    assert code == 2
    assert f"--input '{tmp_path / 'missing'}' does not exist" in out
    assert "Traceback" not in out and "0/None" not in out
    assert not (tmp_path / "run").exists()


def test_input_that_is_a_file_fails_before_spark(capsys, tmp_path):
    f = tmp_path / "data.csv"
    f.write_text("1,2,3\n")
    code, out = invoke(capsys, "run", "--input", str(f))
    assert code == 2 and "is not a directory" in out


def test_empty_input_directory_says_so(capsys, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / ".hidden.csv").write_text("x\n")
    code, out = invoke(capsys, "run", "--input", str(tmp_path / "in"))
    assert code == 2 and "holds no data files" in out and "Traceback" not in out


@pytest.mark.parametrize("extra", [(), ("--flat",)])
def test_place_without_models_says_what_to_run(capsys, tmp_path, extra):
    pytest.importorskip("torch")
    pytest.importorskip("lightgbm")
    q, h = os.path.join(EXAMPLES, "query.json"), os.path.join(EXAMPLES, "hosts.json")
    for models in (tmp_path / "missing", tmp_path):  # no directory; an empty one
        code, out = invoke(capsys, "place", q, h, "--models", str(models), *extra)
        assert code == 1, out
        assert "adaptstream costmodel corpus" in out and "adaptstream costmodel train" in out
        assert "Traceback" not in out


@pytest.mark.parametrize(
    "args", [("place", "missing-q.json", "missing-h.json"), ("costmodel", "place", "missing-q.json", "missing-h.json")]
)
def test_place_missing_files_exit_1(capsys, args):
    code, out = invoke(capsys, *args)
    assert code == 1 and "does not exist" in out and "Traceback" not in out


def test_costmodel_train_missing_corpus_exits_1(capsys, tmp_path):
    code, out = invoke(capsys, "costmodel", "train", "--corpus", str(tmp_path / "none"), "--out", str(tmp_path / "m"))
    assert code == 1 and "no corpus" in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--repeat", "--chooser", "gnn"), "does not take --chooser"),
        (("--label", "x"), "goes with --chooser"),
        (("--types", "5-way-join"), "--types takes query types from"),
        (("--n", "10", "--start", "10"), "--start (10) must be"),
        (("--start", "-1"), "--start (-1) must be"),
        (("--repeat", "--rerun-failed", "--duration", "70"), "no failed runs (tbr-0-*"),
        (("--rerun-failed", "--chooser", "gnn"), "does not take --chooser"),
        (("--rerun-failed", "--duration", "70"), "no failed runs (tb-0-*"),
    ],
)
def test_testbed_corpus_option_mistakes_fail_before_the_testbed(capsys, tmp_path, args, says):
    code, out = invoke(capsys, "costmodel", "testbed-corpus", "--out", str(tmp_path / "t.jsonl"), *args)
    assert code in (1, 2) and says in out and "Traceback" not in out
    assert not (tmp_path / "t.jsonl").exists()


def test_rerun_failed_needs_a_longer_duration_and_picks_the_failures(capsys, tmp_path):
    from dataclasses import replace

    from adaptstream.costmodel.model import read_traces, write_traces
    from adaptstream_bench.costmodel.data_cli import _failed_to_rerun

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "costmodel" / "train_sample.jsonl"
    ts = []
    for i, t in enumerate(list(read_traces(fix))[:4]):
        lab = replace(t.labels, success=i in (0, 3), origin="real")
        ts.append(replace(t, trace_id=f"tb-0-{i:05d}", labels=lab, meta={"duration_s": 35.0}))
    repeat = replace(ts[3], trace_id="tbr-0-00003", labels=replace(ts[3].labels, success=False))
    write_traces(tmp_path / "t.jsonl", [*ts, repeat])
    code, out = invoke(capsys, "costmodel", "testbed-corpus", "--out", str(tmp_path / "t.jsonl"), "--rerun-failed")
    assert code == 2 and "longer than the failed runs' (35 s), e.g. 70" in out and "Traceback" not in out
    assert _failed_to_rerun(tmp_path / "t.jsonl", "tb-0", 70.0, list(range(4))) == [1, 2]
    assert _failed_to_rerun(tmp_path / "t.jsonl", "tb-0", 70.0, [2, 3]) == [2]
    # with --repeat the failed repeat runs are picked, never the corpus runs of the same index
    assert _failed_to_rerun(tmp_path / "t.jsonl", "tbr-0", 70.0, list(range(4))) == [3]


def test_rerun_of_failed_repeats_writes_their_own_ids(capsys, tmp_path, monkeypatch):
    from dataclasses import replace

    from adaptstream.costmodel.model import read_traces, write_traces
    from adaptstream_bench.costmodel.testbed import corpus

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "costmodel" / "train_sample.jsonl"
    t = next(iter(read_traces(fix)))
    failed = replace(t, labels=replace(t.labels, success=False, origin="real"), meta={"duration_s": 35.0})
    both = [replace(failed, trace_id="tbr-0-00001"), replace(failed, trace_id="tb-0-00000")]
    write_traces(tmp_path / "t.jsonl", both)
    calls: list[dict] = []
    monkeypatch.setattr(corpus, "run_corpus", lambda *a, **k: calls.append(k) or 0)  # no testbed: the call only
    args = ("--out", str(tmp_path / "t.jsonl"), "--repeat", "--rerun-failed", "--n", "4", "--duration", "70")
    code, _ = invoke(capsys, "costmodel", "testbed-corpus", *args)
    assert code == 0 and len(calls) == 1
    assert calls[0]["id_prefix"] == "tbrl" and calls[0]["only"] == [1]  # the failed repeat, not the corpus run


def test_repeatability_without_repeats_exits_1(capsys, tmp_path):
    code, out = invoke(capsys, "costmodel", "repeatability", "--traces", str(tmp_path / "none.jsonl"))
    assert code == 1 and "--repeat" in out and "Traceback" not in out


@pytest.mark.parametrize(("opt", "says"), [("--partitions", "--partitions must be >= 1"), ("--folds", "--folds")])
def test_eval_real_option_mistakes_exit_1_before_any_training(capsys, tmp_path, opt, says):
    code, out = invoke(capsys, "costmodel", "eval-real", "--out", str(tmp_path / "r"), opt, "0")
    assert code == 1 and says in out and "Traceback" not in out


def test_bench_report_only_needs_a_report(capsys):
    code, out = invoke(capsys, "bench", "lmstream", "--report-only")
    assert code == 2 and "--report-only" in out and "Traceback" not in out


def test_debug_shows_the_traceback(capsys, tmp_path):
    code, out = invoke(capsys, "--debug", "run", "--input", str(tmp_path / "missing"))
    assert code == 2 and "Traceback" in out and "does not exist" in out


def test_unexpected_error_is_one_line_with_a_hint(capsys, monkeypatch):
    def boom(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("adaptstream.app.runner.check_spec", lambda *a, **k: boom())
    code, out = invoke(capsys, "run")
    assert code == 1
    assert "error: RuntimeError: disk on fire" in out and "--debug" in out and "Traceback" not in out


def test_missing_optional_package_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # as on a machine set up without --dev
    for name in [m for m in sys.modules if m.startswith(("adaptstream.costmodel.", "lightgbm"))]:
        if name != "adaptstream.costmodel.cli":
            monkeypatch.delitem(sys.modules, name)
    q, h = os.path.join(EXAMPLES, "query.json"), os.path.join(EXAMPLES, "hosts.json")
    code, out = invoke(capsys, "place", q, h, "--models", str(tmp_path))
    assert code == 1 and "needs the Python package 'torch'" in out and "Traceback" not in out


@pytest.mark.slow  # builds a throw-away virtual environment
def test_works_without_click_installed(tmp_path):
    """Current typer vendors click and no longer installs it: nothing may import `click`."""
    code = "import sys; sys.modules['click'] = None; from adaptstream.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for args, want in (
        ([], 2),
        (["run", "--bogus"], 2),
        (["--version"], 0),
        (["run", "--input", str(tmp_path / "missing")], 2),
    ):
        res = subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert res.returncode == want, res.stderr
        assert "Traceback" not in res.stdout + res.stderr


def test_query_error_extracts_our_line():
    """A failure inside the source reaches the driver as a Java exception embedding a Python traceback."""
    from adaptstream.errors import query_error

    text = (
        "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform "
        "latestOffset: Traceback (most recent call last):\n"
        '  File "/x/datasource.py", line 10, in latestOffset\n    self._ensure_started()\n'
        "adaptstream.errors.ConnectorError: files connector: input directory '/gone' does not exist\n"
        "\tat org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner.latestOffset(x.scala:1)\n"
    )
    err = query_error(text)
    assert isinstance(err, ConnectorError)
    assert str(err) == "files connector: input directory '/gone' does not exist"
    assert isinstance(query_error("x\nadaptstream.errors.UnknownNameError: unknown partitioner 'z'\n"), ConfigError)
    other = query_error("[PYTHON_X] failed: Traceback (most recent call last):\npyarrow.lib.ArrowInvalid: bad CSV\n")
    assert str(other) == "the streaming query failed: ArrowInvalid: bad CSV"


def _write_metrics(d, datasets, batches) -> str:
    m = d / "metrics"
    (m / "source").mkdir(parents=True)
    (m / "datasets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in datasets))
    (m / "batches.jsonl").write_text("".join(json.dumps(r) + "\n" for r in batches))
    (m / "source" / "manifest.jsonl").write_text(
        "".join(json.dumps({"seq": r["seq"], "sentinel": r["sentinel"]}) + "\n" for r in datasets)
    )
    return str(m)


def test_progress_counts_agree_with_the_summary(tmp_path):
    """Warm-up batches and the end-of-input marker batch are left out of both the live count and the table."""
    from adaptstream.app.runner import progress_snapshot
    from adaptstream.metrics.summary import summarize

    datasets, batches = [], []
    for i in range(10):  # one dataset per second, one batch per two datasets
        datasets.append(
            {
                "seq": i,
                "path": f"{i}.csv",
                "arrival": float(i),
                "rows": 10,
                "bytes": 1,
                "quarantined": 0,
                "sentinel": False,
                "batch": i // 2,
                "admitted_at": i + 0.5,
                "completed_at": i + 1.0,
                "buffering": 0.5,
                "latency": 1.0 + i / 10,
                "processing": 0.5,
            }
        )
    for b in range(5):
        batches.append(
            {
                "batch": b,
                "start": 2 * b,
                "end": 2 * b + 2,
                "rows": 20,
                "processing_time": 0.5,
                "max_latency": 1.0 + (2 * b + 1) / 10,
            }
        )
    datasets.append({**datasets[-1], "seq": 10, "sentinel": True, "latency": 0.0})
    batches.append({"batch": 5, "start": 10, "end": 11, "rows": 1, "processing_time": 0.1, "max_latency": 0.0})
    m = _write_metrics(tmp_path, datasets, batches)
    for warmup in (0.0, 4.0):
        snap, summary = progress_snapshot(m, warmup), summarize(m, None, warmup)
        assert snap["batches"] == summary.batches
        assert snap["last_max_latency"] == pytest.approx(1.9)  # not the marker batch's 0.0
    assert summarize(m).batches == 5


def test_progress_ignores_a_line_the_source_is_still_writing(tmp_path):
    """The source process appends the metrics while the driver reads them: a half-written last line is left for
    the next read (a torn read once failed a benchmark run with a JSONDecodeError)."""
    import json

    from adaptstream.app.runner import progress_snapshot

    m = tmp_path / "metrics"
    (m / "source").mkdir(parents=True)
    ds = {"seq": 0, "arrival": 0.0, "sentinel": False}
    (m / "datasets.jsonl").write_text(json.dumps(ds) + "\n" + json.dumps(ds)[:20])
    (m / "batches.jsonl").write_text('{"batch": 0, "start": 0, "end": 1, "rows": 1')
    (m / "source" / "manifest.jsonl").write_text(json.dumps({"seq": 0}) + "\n" + '{"seq": 1, "sentinel": tr')
    snap = progress_snapshot(str(m))
    assert (snap["completed"], snap["batches"], snap["arrived"], snap["sealed"]) == (1, 0, 1, False)


def test_progress_during_warm_up(tmp_path):
    from adaptstream.app.runner import progress_snapshot

    m = _write_metrics(tmp_path, [], [])
    assert progress_snapshot(m, 5.0)["warming_up"]
    assert cli._progress_info(progress_snapshot(m, 5.0)).startswith("warm-up")


def test_benchmark_reports_default_to_a_run_directory():
    from pathlib import Path

    from adaptstream.outdirs import report_dir

    default = report_dir("bench-x", None, False)
    assert default.parts[0] == "runs" and default.name.startswith("bench-x-")
    assert report_dir("bench-x", None, True) == Path("docs/results")
    assert report_dir("bench-x", "elsewhere", False) == Path("elsewhere")
    with pytest.raises(ConfigError):
        report_dir("bench-x", "elsewhere", True)


def test_device_gpu_and_device_without_reduce_are_usage_errors(capsys):
    code, out = invoke(capsys, "run", "--workload", "CM1S", "--reduce", "hash", "--device", "gpu")
    assert code == 2 and "do not run on a GPU inside Spark tasks yet" in out and "Traceback" not in out
    code, out = invoke(capsys, "run", "--workload", "CM1S", "--device", "auto")
    assert code == 2 and "--device auto needs --reduce" in out and "Traceback" not in out
    code, out = invoke(capsys, "run", "--workload", "CM1S", "--reduce", "hash", "--device", "tpu")
    assert code == 2 and "valid: cpu, auto, gpu" in out
