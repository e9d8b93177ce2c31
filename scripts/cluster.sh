#!/usr/bin/env bash
# A real Spark standalone cluster on 127.0.0.1 from the pip package (no downloads): one master, N workers.
#   scripts/cluster.sh start [WORKERS] [--cpu PCT] [--mem MB]   -> prints the master URL (spark://127.0.0.1:7077)
#   scripts/cluster.sh usage                                  -> per worker: CPU-seconds used, times throttled
#   scripts/cluster.sh stop
# Each worker has 1 core and ADAPTSTREAM_WORKER_MEMORY (default 2g) of memory.
# Capped workers (--cpu, --mem; root and cgroup v1 cpu + memory): each worker, and so its executors and their
# Python workers (its children), runs in its own cgroup with a CPU quota of PCT % of one core and a memory limit of
# MB, so that capacity grows with the number of workers on a 2-core machine. The worker offers its executors
# MB - 384 MB (its own JVM and the Python workers need the rest).
# PIDs, logs, the cgroups' names and the workers' work directories (SPARK_WORKER_DIR: application jars and
# executor logs, which Spark otherwise puts inside the installed pyspark package) live in
# ${ADAPTSTREAM_CLUSTER_DIR:-/tmp/adaptstream-cluster}; stop kills by those PIDs (and what is left in the cgroups)
# and removes the cgroups. A start that fails stops what it started.
set -euo pipefail
DIR=${ADAPTSTREAM_CLUSTER_DIR:-/tmp/adaptstream-cluster}
PY=${PYTHON:-python3}
CG=${ADAPTSTREAM_CGROUP_ROOT:-/sys/fs/cgroup}
CONTROLLERS="cpu memory cpuacct"  # cpuacct only where mounted: it gives `usage` its CPU-seconds
MIN_CPU=10     # % of a core: at 10 % a worker took 54 s to register (docs/cluster.md)
MIN_MEM=1024   # MB: worker JVM (256 MB heap) + one 512 MB executor + Python workers
WAIT=${ADAPTSTREAM_CLUSTER_TIMEOUT:-120}
PORT=${ADAPTSTREAM_MASTER_PORT:-7077}
URL="spark://127.0.0.1:$PORT"
die() { echo "cluster.sh: $*" >&2; exit 1; }

spark_env() {
  SPARK_HOME=$($PY -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  export SPARK_HOME SPARK_PID_DIR="$DIR/pids" SPARK_LOG_DIR="$DIR/logs" SPARK_WORKER_DIR="$DIR/work"
  export SPARK_LOCAL_IP=127.0.0.1
  export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$(command -v "$PY")}
}
daemon() { bash "$SPARK_HOME/sbin/spark-daemon.sh" "$@"; }

check_caps() {  # one line saying what is missing
  [ "$(id -u)" = 0 ] || die "capped workers (--cpu/--mem) need root (cgroups); run as root or start without them"
  for c in cpu memory; do
    [ -e "$CG/$c/cgroup.procs" ] || die "capped workers need cgroup v1 '$c' mounted at $CG/$c; it is not"
    [ -w "$CG/$c" ] || die "cgroup directory $CG/$c is not writable"
  done
  [[ $CPU =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "cluster.sh: --cpu must be a number (% of one core)" >&2; exit 2; }
  [[ $MEM =~ ^[0-9]+$ ]] || { echo "cluster.sh: --mem must be a whole number of MB" >&2; exit 2; }
  awk -v c="$CPU" -v m="$MIN_CPU" 'BEGIN {exit !(c >= m)}' ||
    { echo "cluster.sh: --cpu $CPU cannot host an executor; the minimum is $MIN_CPU (% of one core)" >&2; exit 2; }
  [ "$MEM" -ge "$MIN_MEM" ] ||
    { echo "cluster.sh: --mem $MEM cannot host an executor; the minimum is $MIN_MEM (MB)" >&2; exit 2; }
}

make_cgroup() {  # $1: worker number; records every directory it makes before writing limits
  local name="adaptstream-$(printf %s "$DIR" | md5sum | cut -c1-8)-w$1" c
  for c in $CONTROLLERS; do
    [ -e "$CG/$c/cgroup.procs" ] || continue
    mkdir -p "$CG/$c/$name"; echo "$CG/$c/$name" >> "$DIR/cgroups"
  done
  echo 100000 > "$CG/cpu/$name/cpu.cfs_period_us"
  awk -v c="$CPU" 'BEGIN {printf "%d\n", c * 1000}' > "$CG/cpu/$name/cpu.cfs_quota_us"
  echo $((MEM * 1024 * 1024)) > "$CG/memory/$name/memory.limit_in_bytes"
  echo "$name"
}

start_worker() {  # $1: worker number, $2: cgroup name or empty
  local mem=${ADAPTSTREAM_WORKER_MEMORY:-2g}
  [ -n "$2" ] && mem="$((MEM - 384))m"
  (
    if [ -n "$2" ]; then
      for c in $CONTROLLERS; do [ -d "$CG/$c/$2" ] && echo "$BASHPID" > "$CG/$c/$2/cgroup.procs"; done
      # one core's worth of JIT/GC threads and C1 only: start-up under a small quota otherwise costs tens of s
      export SPARK_DAEMON_JAVA_OPTS="-XX:ActiveProcessorCount=1 -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    fi
    daemon start org.apache.spark.deploy.worker.Worker "$1" --host 127.0.0.1 --cores 1 --memory "$mem" \
      --webui-port 0 "$URL" >/dev/null
  )
}

stop_all() {
  spark_env
  for f in "$SPARK_PID_DIR"/*Worker*.pid; do
    [ -e "$f" ] || continue
    i=$(basename "$f" .pid | sed 's/.*-//'); daemon stop org.apache.spark.deploy.worker.Worker "$i" >/dev/null || true
  done
  daemon stop org.apache.spark.deploy.master.Master 1 >/dev/null || true
  [ -e "$DIR/cgroups" ] || return 0
  local left=0 d p
  for d in $(sort -u "$DIR/cgroups"); do  # executors and Python workers the workers forked are ours too
    [ -d "$d" ] || continue
    for sig in TERM KILL; do  # (cgroupfs files report size 0: read them, do not test -s)
      for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -"$sig" "$p" 2>/dev/null || true; done
      for _ in $(seq 1 50); do [ -n "$(cat "$d/cgroup.procs" 2>/dev/null)" ] || break; sleep 0.1; done
    done
    for _ in $(seq 1 50); do rmdir "$d" 2>/dev/null && break; sleep 0.1; done  # busy until exits are reaped
    [ ! -d "$d" ] || { echo "cluster.sh: cgroup $d could not be removed" >&2; left=1; }
  done
  [ "$left" = 0 ] && rm -f "$DIR/cgroups"
  return "$left"
}

usage_report() {  # one line per worker: name cpu_seconds nr_throttled throttled_seconds
  [ -e "$DIR/cgroups" ] || die "no capped workers in $DIR"
  for d in $(sort -u "$DIR/cgroups" | grep '/cpu/'); do
    n=$(basename "$d")
    u=$(cat "$CG/cpuacct/$n/cpuacct.usage" 2>/dev/null || echo 0)
    awk -v n="$n" -v u="$u" '/nr_throttled/ {t=$2} /throttled_time/ {s=$2} END {printf "%s %.3f %d %.3f\n", n, u/1e9, t, s/1e9}' "$d/cpu.stat"
  done
}

case "${1:-}" in
  start)
    shift; n=2; CPU=""; MEM=""
    if [[ ${1:-} =~ ^[0-9]+$ ]]; then n=$1; shift; fi
    while [ $# -gt 0 ]; do
      case "$1" in
        --cpu) CPU=${2:?--cpu needs a value}; shift 2 ;;
        --mem) MEM=${2:?--mem needs a value}; shift 2 ;;
        *) echo "cluster.sh: unknown option $1 (use [WORKERS] [--cpu PCT] [--mem MB])" >&2; exit 2 ;;
      esac
    done
    capped=""
    if [ -n "$CPU$MEM" ]; then CPU=${CPU:-100}; MEM=${MEM:-2048}; check_caps; capped=1; fi
    spark_env
    mkdir -p "$SPARK_PID_DIR" "$SPARK_LOG_DIR" "$SPARK_WORKER_DIR"
    trap 'rc=$?; if [ "$rc" != 0 ]; then stop_all || true; fi' EXIT
    daemon start org.apache.spark.deploy.master.Master 1 --host 127.0.0.1 --port "$PORT" --webui-port 0 >/dev/null
    for i in $(seq 1 "$n"); do
      cg=""; [ -n "$capped" ] && cg=$(make_cgroup "$i")
      start_worker "$i" "$cg"
    done
    for _ in $(seq 1 "$WAIT"); do  # wait until every worker registered (slow on a loaded machine)
      if [ "$(grep -h -c 'Successfully registered with master' "$SPARK_LOG_DIR"/*Worker*.out 2>/dev/null \
              | awk '{s+=$1} END {print s+0}')" -ge "$n" ]; then echo "$URL"; exit 0; fi
      sleep 1
    done
    echo "cluster.sh: the cluster did not come up within $WAIT s (stopped again); logs in $SPARK_LOG_DIR" >&2
    exit 1 ;;
  usage) usage_report ;;
  stop) stop_all ;;
  *) echo "usage: $0 start [WORKERS] [--cpu PCT] [--mem MB] | usage | stop" >&2; exit 2 ;;
esac
