#!/usr/bin/env bash
# A real Redis server for adaptstream's tests and benchmarks, on 127.0.0.1 only.
#   scripts/redis.sh install                     Debian's redis-server, with apt-get when run as root (quiet)
#   scripts/redis.sh start [PORT [DIR]]          -> prints "port=P pid=PID dir=DIR" (a free port and a new
#                                                   temporary DIR unless given: restart on the same PORT and DIR)
#   scripts/redis.sh stop PID                    stops that server only (SIGTERM: it flushes its AOF) and waits
# Everything the server writes (append-only file, log, pid file) stays in DIR; nothing else is persisted.
# REDIS_APPENDFSYNC=always makes every acknowledged write survive a kill -9 of the server (default: everysec).
set -euo pipefail

install() {
  command -v redis-server >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis.sh: installing redis-server with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
    # Debian's package starts a system-wide server on 6379 where a service manager runs; we never use it.
  else
    echo "redis.sh: redis-server is not installed; install it (e.g. 'sudo apt-get install redis-server')" >&2
    exit 3
  fi
}

free_port() {
  ${PYTHON:-python3} -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  install
  local port=${1:-$(free_port)} dir=${2:-$(mktemp -d -t adaptstream-redis-XXXXXX)}
  mkdir -p "$dir"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" \
    --logfile "$dir/redis.log" --save "" --appendonly yes --appendfsync "${REDIS_APPENDFSYNC:-everysec}" --protected-mode yes >/dev/null
  for _ in $(seq 1 100); do
    if [ -s "$dir/redis.pid" ] && [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; then
      echo "port=$port pid=$(cat "$dir/redis.pid") dir=$dir"
      return 0
    fi
    sleep 0.1
  done
  echo "redis.sh: redis-server did not answer on 127.0.0.1:$port; log: $dir/redis.log" >&2
  tail -n 5 "$dir/redis.log" >&2 || true
  exit 1
}

stop() {
  local pid=${1:?usage: $0 stop PID}
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
  install) install ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: $0 install | start [PORT [DIR]] | stop PID" >&2; exit 2 ;;
esac
