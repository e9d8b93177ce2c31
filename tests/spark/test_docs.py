"""The docs do what they say: every command and Python snippet in README.md and docs/*.md runs, on tiny inputs.

Commands run in this process through ``adaptstream.cli.main`` on the shared SparkSession, the commands of one block
in order, with sizes shrunk (``--duration``/``--rate`` appended: click keeps the last value) and placeholders (DIR,
RUN) bound to tiny inputs, inside ``tmp_path`` so relative paths (runs/, data/) never touch the checkout. Inline
``adaptstream ...`` commands in the prose are checked to name real commands and options. Blocks fenced ``sh``
need a standalone cluster (scripts/cluster.sh) and are left to the cluster tier's own tests.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from adaptstream import cli

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`(adaptstream [^`]+)`")
SKIP = ("scripts/setup.sh", "python3 -m pytest", "scripts/cluster.sh")  # set-up, not adaptstream's behaviour
TINY = {
    "run": ["--duration", "4", "--rate", "100"],
    "demo": ["--duration", "8", "--rate", "100"],
    "corpus": ["--n", "120", "--partitions", "2"],
    "train": ["--epochs", "1", "--max-seconds", "5"],
    "produce": ["--duration", "2", "--rate", "100"],
}
DOC_REDIS = "redis://127.0.0.1:6379"  # the docs' Redis address: bound to the test's own server (scripts/redis.sh)


def _bind_redis(request, text: str) -> str:
    if DOC_REDIS not in text:
        return text
    return text.replace(DOC_REDIS, request.getfixturevalue("redis_server").url)


def _blocks(lang: str) -> list[tuple[str, str]]:
    return [(p.name, m.group(2)) for p in DOCS for m in FENCE.finditer(p.read_text()) if m.group(1) == lang]


SELF_CONTAINED = ("adaptstream demo", "adaptstream --help")  # read nothing an earlier command wrote


def _command_blocks() -> list[list[str]]:
    """The adaptstream commands of each bash block, in order (a block's later commands use the earlier ones' output).
    A self-contained command the docs repeat word for word runs in its first block only (the demo is about a minute)."""
    blocks, seen = [], set()
    for _, body in _blocks("bash"):
        cmds = []
        for line in body.splitlines():
            for part in line.split("#", 1)[0].split("&&"):
                part = part.strip()
                if not part.startswith("adaptstream") or part.startswith(SKIP):
                    continue
                if part in SELF_CONTAINED and part in seen:
                    continue
                seen.add(part)
                cmds.append(part)
        if cmds:
            blocks.append(cmds)
    return blocks


def test_docs_have_commands_and_snippets():
    assert any(c.startswith("adaptstream demo") for block in _command_blocks() for c in block)
    assert len(_blocks("python")) >= 2


def _invoke(capsys, args: list[str]) -> tuple[int, str]:
    try:
        cli.main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def workdir(tmp_path, monkeypatch, spark):
    """A scratch checkout: examples/ copied, a tiny Linear Road input in DIR, the shared session for every
    command (the corpus job would otherwise build and stop its own)."""
    from adaptstream.workloads import LinearRoadGeneratorConfig, write_run
    from adaptstream_bench.costmodel import simcorpus as corpus_mod

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    write_run(LinearRoadGeneratorConfig(seed=1, segment_capacity=15.0).build(), None, str(tmp_path / "DIR"), [100] * 6)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.run, "_spark", lambda master, log_file, shuffle_partitions=2: spark)
    real_build = corpus_mod.build_corpus
    monkeypatch.setattr(corpus_mod, "build_corpus", lambda *a, **k: real_build(*a, **{**k, "spark": spark}))
    return tmp_path


def _run_documented(capsys, workdir: Path, command: str) -> None:
    args = [str(workdir / a) if a in ("DIR", "RUN") else a for a in shlex.split(command)[1:]]
    key = args[1] if args[:1] == ["costmodel"] else (args[0] if args else "")
    code, out = _invoke(capsys, [*args, *TINY.get(key, [])])
    assert code == 0, f"{command}: {out}"
    assert "Traceback" not in out
    if args[:1] == ["run"] and "--run-dir" in args:
        run_dir = Path(args[args.index("--run-dir") + 1])
        for name in ("run.json", "summary.json", "timeline.png", "metrics", "results"):
            assert (run_dir / name).exists(), name
    if args[:1] == ["demo"]:
        (demo,) = (workdir / "runs").glob("demo-*")
        assert (demo / "comparison.md").exists() and list(demo.glob("timeline-*.png"))


@pytest.mark.slow
@pytest.mark.parametrize("commands", _command_blocks(), ids=lambda block: block[0])
def test_documented_commands_run(capsys, workdir, commands, request):
    if any(shlex.split(c)[1] in ("costmodel", "place") for c in commands):
        pytest.importorskip("torch")
        pytest.importorskip("lightgbm")
    for command in commands:
        _run_documented(capsys, workdir, _bind_redis(request, command))


def test_python_snippets_run(workdir, spark, request):
    """Each Python block runs with the names its surrounding prose defines bound to tiny stand-ins; a streaming
    query it starts must process its input (relative paths are made absolute: Spark's processes keep the working
    directory they started in)."""
    import pyarrow as pa

    from adaptstream.workloads import build_generator, write_dataset

    gen = build_generator("linear_road", seed=0)
    (workdir / "lr").mkdir()
    (workdir / "data" / "in").mkdir(parents=True)
    write_dataset(gen.generate(0, 50), workdir / "lr" / "00000000.csv", "csv")
    write_dataset(pa.table({"k": ["a", "b"], "v": [1, 2]}), workdir / "data" / "in" / "00000000.csv", "csv")
    (workdir / "data" / "events").mkdir()
    (workdir / "data" / "events" / "00000000.csv").write_text("a,2024-01-01 00:00:05,1.5\nb,2024-01-01 00:00:41,2\n")
    words = pa.table({"word": ["a", "b", "a", "c"] * 25})
    for name, body in _blocks("python"):
        body = re.sub(r'"((?:data|runs)/[^"]*)"', lambda m: repr(str(workdir / m.group(1))), body)
        try:
            body = _bind_redis(request, body)
        except pytest.skip.Exception:  # no redis-server on this machine: the other snippets still run
            continue
        ns = {"spark": spark, "dir": str(workdir / "lr"), "arrived_table": words, "batch": words}
        exec(compile(body, f"<{name} snippet>", "exec"), ns)
        for query in [v for v in ns.values() if type(v).__name__ == "StreamingQuery"]:
            try:
                query.processAllAvailable()
                assert query.exception() is None
            finally:
                query.stop()
        for tuner in [v for v in ns.values() if type(v).__name__ == "Tuner"]:
            tuner.close()  # the next snippet may tune the session otherwise (on failure: tests/conftest.py closes it)
    assert (workdir / "runs" / "r1" / "datasets.jsonl").exists()  # the README snippet's metricsPath
    windows = spark.read.parquet(str(workdir / "runs" / "windows")).collect()  # docs/windowed.md's snippet
    assert sorted((r["k"], r["v_count"]) for r in windows) == [("a", 1)] * 3 + [("b", 1)] * 3


def _inline_commands() -> list[str]:
    found = {m.group(1) for p in DOCS for m in INLINE.finditer(p.read_text())}
    return sorted(c for c in found if not any(ch in c for ch in "<>|.") and "QUERY" not in c)


@pytest.mark.parametrize("command", _inline_commands())
def test_inline_commands_exist(capsys, command):
    """Prose mentions like `adaptstream partitioning list` name real commands and options (checked with --help)."""
    code, out = _invoke(capsys, [*shlex.split(command)[1:], "--help"])
    assert code == 0, out
