#!/usr/bin/env bash
# Two p2pc builds' whole command side by side, in one run (issue 16):
# hyperfine alternates `p2pc run` of echo-2048 by OLD and NEW, locally and
# on one swarm of PEERS `p2pc join` peers x SLOTS on 127.0.0.1 (static
# --join, no mDNS: safe in the root network namespace; the peers are
# NEW's). Each build has its own data folder (warmed first), so the
# ratios are of the same machine at the same time. From the repository
# root:
#
#   git worktree add /tmp/old main && (cd /tmp/old && go build -o /tmp/p2pc-old ./cmd/p2pc)
#   go build -o /tmp/p2pc-new ./cmd/p2pc
#   benchmarks/wholecmd/compare.sh /tmp/p2pc-old /tmp/p2pc-new [PEERS=16] [SLOTS=32] [RUNS=10] [ROUNDS=3]
#
# hyperfine times one command's runs in a row: ROUNDS rounds of RUNS runs
# each interleave the builds at a coarser grain (a load that comes and
# goes then falls on both).
set -euo pipefail
old=$1 new=$2 peers=${3:-16} slots=${4:-32} runs=${5:-10} rounds=${6:-3}
spec=$PWD/benchmarks/wholecmd/echo-2048.yaml
work=$(mktemp -d "${TMPDIR:-/tmp}/p2pc-compare-XXXXXX")
export XDG_CONFIG_HOME=$work/config P2PC_NO_MDNS=true
"$new" --data "$work/new" swarm init >/dev/null 2>&1 # the secret: in XDG_CONFIG_HOME, shared
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT
for i in $(seq 1 "$peers"); do
	"$new" --data "$work/p$i" join --listen 127.0.0.1:0 --name "p$i" --slots "$slots" \
		>"$work/p$i.out" 2>"$work/p$i.log" &
	pids+=($!)
done
for i in $(seq 1 "$peers"); do
	for _ in $(seq 1 300); do grep -q '^listening' "$work/p$i.out" && break; sleep 0.1; done
done
join=$(awk '/^listening/ {print $2}' "$work"/p*.out | paste -sd,)
local_run() { echo "$1 --data $work/$2 run $spec --out $work/out-$2 --no-mdns --no-progress"; }
swarm_run() { echo "$(local_run "$1" "$2") --local-slots 0 --min-peers $peers --join $join"; }
for b in old new; do # warm: plugin build and memos (files older than 2 s), peers' plugin cache
	bin=$old; [ $b = new ] && bin=$new
	for _ in 1 2; do rm -rf "$work/out-$b"; $(swarm_run "$bin" $b) 2>/dev/null; sleep 1; done
	rm -rf "$work/out-$b"; $(local_run "$bin" $b) 2>/dev/null
done
for r in $(seq 1 "$rounds"); do
	echo "== round $r of $rounds"
	hyperfine -N -w 1 -r "$runs" --prepare "rm -rf $work/out-old $work/out-new" \
		-n "local old" "$(local_run "$old" old)" -n "local new" "$(local_run "$new" new)" \
		-n "swarm old" "$(swarm_run "$old" old)" -n "swarm new" "$(swarm_run "$new" new)" \
		--export-json "$work/hyperfine-$r.json"
done
echo "results: $work/hyperfine-*.json"
