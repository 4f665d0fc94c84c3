#!/bin/bash
# A producer with nothing but redis-cli: enqueue three jobs, then wait for each final result.
# Usage: redis_cli_producer.sh PORT
set -euo pipefail
port="$1"
cli() { redis-cli -p "$port" "$@"; }
for i in 1 2 3; do
  cli XADD flashq:jobs '*' id "cli-$i" prompt "hello from redis-cli $i" max_tokens 6 > /dev/null
done
for i in 1 2 3; do
  for _ in $(seq 1 300); do
    if cli XRANGE "flashq:out:{cli-$i}" - + | grep -q '^final$'; then break; fi
    sleep 0.1
  done
  final=$(cli XRANGE "flashq:out:{cli-$i}" - + | grep -A1 '^final$' | tail -1)
  echo "cli-$i: $final"
  case "$final" in *'"finish_reason":"length"'*|*'"finish_reason":"stop"'*) ;; *) exit 1 ;; esac
done
