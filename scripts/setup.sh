#!/usr/bin/env bash
# Install what adaptstream needs on a fresh machine: Java 17+ (apt, when run as root), then the package.
#   scripts/setup.sh          runtime only (pyspark, pyarrow, ...)
#   scripts/setup.sh --dev    + test tools, the cost model's PyTorch (CPU) and LightGBM, Debian's redis-server
#                             for the Redis Streams tests (scripts/redis.sh install; apt when run as root) and the
#                             benchmark harness (benchmarks/, `adaptstream bench ...`)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -n1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: Java 17+ not found; installing openjdk-17-jre-headless with apt" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Spark needs Java 17 or newer and none was found. Install it (e.g. 'sudo apt-get install" \
         "openjdk-17-jre-headless') and run this again." >&2
    exit 1
  fi
fi

extras=""
if [ "${1:-}" = "--dev" ]; then
  extras="[dev,gnn]"
  scripts/redis.sh install || echo "setup: no redis-server: the Redis tests will be skipped" >&2
  # A plain 'torch' requirement would pull the newest CUDA build (several GB); the CPU build is enough here.
  $PY -c "import torch" 2>/dev/null || $PY -m pip install -q "torch==2.13.0" \
    || $PY -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi
$PY -m pip install -q -e ".${extras}"
if [ "${1:-}" = "--dev" ]; then
  # The benchmark harness (benchmarks/adaptstream_bench) is a package of its own, not part of the product.
  $PY -m pip install -q --no-deps -e benchmarks
fi
echo "setup: ok ($(java -version 2>&1 | head -n1); $($PY -c 'import pyspark; print("pyspark", pyspark.__version__)'))"
