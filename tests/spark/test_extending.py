"""docs/extending.md does what it says: its file is written into a temporary package, its check and its drain run
exactly as written (the drain as a PySpark program of its own, with the package on PYTHONPATH as the page says),
and the drained rows equal batch SQL over the files the toy connector wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
BLOCK = re.compile(r"^```python (file|step)=(\S+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> dict[tuple[str, str], str]:
    return {(m.group(1), m.group(2)): m.group(3) for m in BLOCK.finditer(PAGE.read_text())}


def test_the_page_has_the_file_the_check_and_the_drain():
    assert set(_blocks()) == {("file", "toyplug/toy.py"), ("step", "check"), ("step", "drain")}


def test_the_documented_steps_add_a_policy_and_a_connector(spark, tmp_path, monkeypatch):
    blocks = _blocks()
    pkg = tmp_path / "pkg"
    (pkg / "toyplug").mkdir(parents=True)
    (pkg / "toyplug" / "__init__.py").write_text("")
    (pkg / "toyplug" / "toy.py").write_text(blocks[("file", "toyplug/toy.py")])
    monkeypatch.syspath_prepend(str(pkg))

    exec(compile(blocks[("step", "check")], "<extending.md check>", "exec"), {})  # raises if the contract breaks

    from adaptstream.conformance import ConformanceError, check_policy

    (pkg / "toyplug" / "broken.py").write_text(
        blocks[("file", "toyplug/toy.py")].replace('return {"polls": self.polls}', "return {}")
        .replace('self.polls = int(state["polls"])', "pass")
    )  # fmt: skip
    with pytest.raises(ConformanceError, match="after a restart at step"):
        check_policy("admission", "toyplug.broken:EveryOtherConfig")  # the check can fail

    out = tmp_path / "out"
    script = tmp_path / "drain.py"
    script.write_text(blocks[("step", "drain")])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]),
           "SPARK_LOCAL_IP": "127.0.0.1"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(script), str(out)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "drained 6" in done.stdout
    streamed = sorted(tuple(r) for r in spark.read.parquet(str(out / "rows")).collect())
    written = spark.read.schema("k STRING, v INT").csv(str(out / "state" / "files"))
    assert streamed == sorted(tuple(r) for r in written.collect())
    assert len(streamed) == 6
    saved = json.loads((out / "state" / "policies.json").read_text())
    assert saved["policies"]["admission"]["policy"] == "every-other"  # the toy policy cut the batches
