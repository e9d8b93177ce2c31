#!/usr/bin/env bash
# A real Spark standalone cluster on 127.0.0.1 from the pip package (no downloads): one master, N workers.
#   scripts/cluster.sh start [WORKERS]   -> prints the master URL (spark://127.0.0.1:7077)
#   scripts/cluster.sh stop
# Each worker has 1 core and ADAPTSTREAM_WORKER_MEMORY (default 2g) of memory.
# PIDs, logs and the workers' work directories (SPARK_WORKER_DIR: application jars and executor logs, which Spark
# otherwise puts inside the installed pyspark package) live in ${ADAPTSTREAM_CLUSTER_DIR:-/tmp/adaptstream-cluster};
# stop kills by those PIDs only.
set -euo pipefail
DIR=${ADAPTSTREAM_CLUSTER_DIR:-/tmp/adaptstream-cluster}
PY=${PYTHON:-python3}
SPARK_HOME=$($PY -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_HOME SPARK_PID_DIR="$DIR/pids" SPARK_LOG_DIR="$DIR/logs" SPARK_WORKER_DIR="$DIR/work"
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$(command -v "$PY")}
PORT=${ADAPTSTREAM_MASTER_PORT:-7077}
URL="spark://127.0.0.1:$PORT"
daemon() { bash "$SPARK_HOME/sbin/spark-daemon.sh" "$@"; }
case "${1:-}" in
  start)
    n=${2:-2}
    mkdir -p "$SPARK_PID_DIR" "$SPARK_LOG_DIR" "$SPARK_WORKER_DIR"
    daemon start org.apache.spark.deploy.master.Master 1 --host 127.0.0.1 --port "$PORT" --webui-port 0 >/dev/null
    for i in $(seq 1 "$n"); do
      daemon start org.apache.spark.deploy.worker.Worker "$i" --host 127.0.0.1 --cores 1 \
        --memory "${ADAPTSTREAM_WORKER_MEMORY:-2g}" \
        --webui-port 0 "$URL" >/dev/null
    done
    for _ in $(seq 1 120); do  # wait until every worker registered (slow on a loaded machine)
      if [ "$(grep -h -c 'Successfully registered with master' "$SPARK_LOG_DIR"/*Worker*.out 2>/dev/null \
              | awk '{s+=$1} END {print s+0}')" -ge "$n" ]; then echo "$URL"; exit 0; fi
      sleep 1
    done
    echo "cluster did not come up; logs in $SPARK_LOG_DIR" >&2; exit 1 ;;
  stop)
    for f in "$SPARK_PID_DIR"/*Worker*.pid; do
      [ -e "$f" ] || continue
      i=$(basename "$f" .pid | sed 's/.*-//'); daemon stop org.apache.spark.deploy.worker.Worker "$i" >/dev/null || true
    done
    daemon stop org.apache.spark.deploy.master.Master 1 >/dev/null || true ;;
  *) echo "usage: $0 start [WORKERS] | stop" >&2; exit 2 ;;
esac
