"""The one place that builds SparkSessions: quiet logs, small shuffles, loopback networking, Java check."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import resources

from adaptstream.errors import EnvironmentProblem

DEFAULT_MASTER = "local[2]"


def check_java(min_major: int = 17) -> int:
    """Return the Java major version, or raise a clear error when Java is missing or too old."""
    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin"))
        if os.environ.get("JAVA_HOME")
        else shutil.which("java")
    )
    if java is None:
        msg = (
            f"Java {min_major}+ is required by Spark but no `java` was found. "
            "Install it, e.g. `apt-get install -y openjdk-17-jre-headless`, or run scripts/setup.sh as root."
        )
        raise EnvironmentProblem(msg)
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        msg = f"could not read the Java version from `java -version`: {out.strip()[:200]}"
        raise EnvironmentProblem(msg)
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0" style
        major = int(m.group(2))
    if major < min_major:
        msg = f"Spark 4 needs Java {min_major}+, found Java {major} at {java}"
        raise EnvironmentProblem(msg)
    return major


def log4j_config_path() -> str:
    return str(resources.files("adaptstream").joinpath("log4j2.properties"))


def redaction_regex() -> str:
    """One regular expression for Spark's redaction: the connectors' own, joined."""
    from adaptstream.connectors import CONNECTORS

    parts = [CONNECTORS.get(n).redaction_regex for n in CONNECTORS]
    return "|".join(f"(?:{p})" for p in parts if p) or "(?!)"


def _quote(value: str) -> str:
    """Spark splits extraJavaOptions like a shell: quote paths with spaces."""
    return f'"{value}"' if any(c.isspace() for c in value) else value


def build_spark(
    master: str = DEFAULT_MASTER,
    app_name: str = "adaptstream",
    shuffle_partitions: int = 2,
    polling_delay_ms: int = 20,
    conf: dict[str, str] | None = None,
    quiet: bool = True,
    driver_memory: str = "4g",
    log_file: str | None = None,
):  # -> pyspark.sql.SparkSession (import kept lazy so pure-policy code never loads Spark)
    """Build (or reuse) a SparkSession configured the way adaptstream's measurements assume.

    With ``quiet`` the console shows only Spark's errors, minus the ones an expected query stop produces;
    everything from WARN up goes to ``log_file`` (default: adaptstream-spark.log in the temp directory). The log
    configuration is read when the JVM starts, so it applies to the first session of a process only.
    """
    check_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    java_opts = "-Xss16m"
    if quiet:
        java_opts += f" -Dlog4j2.configurationFile=file:{_quote(log4j_config_path())}"
        if log_file:
            os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
            java_opts += f" -Dadaptstream.logFile={_quote(os.path.abspath(log_file))}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.streaming.pollingDelay", f"{polling_delay_ms}ms")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # secrets in connectors' option values (credentials in a URL) never reach plans, logs or the UI
        .config("spark.sql.redaction.string.regex", redaction_regex())
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        # The source ships each micro-batch's rows inside its input partitions, through the driver: large batches
        # (tens of MB, e.g. 10 s of 8000 rows/s into a self-join) exhaust Spark's default 1 GB driver heap.
        .config("spark.driver.memory", driver_memory)
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("WARN")
    from adaptstream.spark.datasource import register

    register(spark)
    return spark
