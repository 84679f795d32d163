#!/usr/bin/env bash
# The whole command on a swarm (issue 16): N `p2pc join` peers on
# 127.0.0.1 (static --join, no mDNS: safe in the root network namespace),
# then `p2pc run` of echo-2048 with --local-slots 0, its phases traced
# (--trace-phases: when each phase ends, ms from exec), RUNS times; the
# peers stay warm between runs. From the repository root:
#
#   go build -o p2pc ./cmd/p2pc
#   benchmarks/wholecmd/swarm.sh [PEERS=16] [SLOTS=32] [RUNS=3]
#
# Each run's phase lines and wall time go to stdout; the peers' logs stay
# in the work folder it prints, with each peer's view of the submitter
# ("member left": its leave; "member failed" would be a death).
set -euo pipefail
peers=${1:-16} slots=${2:-32} runs=${3:-3}
bin=${P2PC:-./p2pc}
spec=benchmarks/wholecmd/echo-2048.yaml
work=$(mktemp -d "${TMPDIR:-/tmp}/p2pc-wholecmd-XXXXXX")
export XDG_CONFIG_HOME=$work/config P2PC_NO_MDNS=true
"$bin" --data "$work/sub" swarm init >/dev/null 2>&1
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT
for i in $(seq 1 "$peers"); do
	"$bin" --data "$work/p$i" --log-level info join --listen 127.0.0.1:0 --name "p$i" --slots "$slots" \
		>"$work/p$i.out" 2>"$work/p$i.log" &
	pids+=($!)
done
for i in $(seq 1 "$peers"); do
	for _ in $(seq 1 300); do grep -q '^listening' "$work/p$i.out" && break; sleep 0.1; done
done
join=$(awk '/^listening/ {print $2}' "$work"/p*.out | paste -sd,)
for r in $(seq 1 "$runs"); do
	rm -rf "$work/out"
	echo "== run $r ($peers peers x $slots slots)"
	start=$(date +%s.%N)
	"$bin" --data "$work/sub" run "$spec" --out "$work/out" --local-slots 0 --min-peers "$peers" \
		--join "$join" --no-progress --trace-phases 2>&1 | grep -E '^phase|complete'
	echo "wall $(echo "$(date +%s.%N) - $start" | bc) s"
done
echo "peers' logs: $work (member left: $(grep -l 'member left.*-run-' "$work"/p*.log | wc -l) of $peers; member failed: $(grep -c 'member failed' "$work"/p*.log | awk -F: '{s+=$2} END {print s+0}'))"
