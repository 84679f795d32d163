#!/usr/bin/env bash
# The bulk path against gRPC (blocks get --no-bulk) with real p2pc
# processes over a link: two network namespaces created here joined by a
# veth pair, the server's side capped with tc tbf. Prints, per run, the
# wall time, the throughput and the CPU seconds of the client and the
# server per GiB (the figure `just bench-guard` emulates in-process).
# Run as root from anywhere in the repository:
#
#   benchmarks/transfer/bulkcpu.sh                  # 1gbit, 256 MiB, 5 runs
#   CAP=none RUNS=3 benchmarks/transfer/bulkcpu.sh  # veth without a cap
#
# Parameters (environment): CAP (tc rate, or none), SIZE_MIB, RUNS,
# P2PC_BIN (use this binary instead of building ./cmd/p2pc). Traffic stays
# in the namespaces made here; files live in /dev/shm; all is removed on
# exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CAP=${CAP:-1gbit}
SIZE_MIB=${SIZE_MIB:-256}
RUNS=${RUNS:-5}
[[ $(id -u) == 0 ]] || { echo "bulkcpu.sh: needs root (network namespaces, tc)" >&2; exit 1; }
for tool in go ip tc cmp awk /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "bulkcpu.sh: $tool not found" >&2; exit 1; }
done

W=$(mktemp -d /dev/shm/p2pc-bulkcpu.XXXXXX)
S=p2pcbc$$-s C=p2pcbc$$-c
SPID=
cleanup() {
	set +e
	if [[ -n $SPID ]]; then
		kill "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
	fi
	ip netns del "$S" 2>/dev/null
	ip netns del "$C" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

BIN=${P2PC_BIN:-}
if [[ -z $BIN ]]; then
	BIN=$W/p2pc
	(cd "$ROOT" && go build -o "$BIN" ./cmd/p2pc)
fi
ip netns add "$S"
ip netns add "$C"
ip -n "$S" link add eth0 type veth peer name eth0 netns "$C"
ip -n "$S" addr add 10.79.0.1/24 dev eth0
ip -n "$C" addr add 10.79.0.2/24 dev eth0
for n in "$S" "$C"; do
	ip -n "$n" link set eth0 up
	ip -n "$n" link set lo up
done
if [[ $CAP != none ]]; then
	ip netns exec "$S" tc qdisc add dev eth0 root tbf rate "$CAP" burst 4mb latency 50ms
fi

export P2PC_SWARM
P2PC_SWARM=$("$BIN" --swarm-file "$W/swarm" swarm init 2>/dev/null | awk '{print $4}')
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$W/f.bin"
id=$("$BIN" --data "$W/src" blocks put "$W/f.bin" 2>/dev/null)
ip netns exec "$S" "$BIN" --data "$W/src" blocks serve --listen 10.79.0.1:7070 >"$W/serve.out" 2>"$W/serve.err" &
SPID=$!
for _ in $(seq 100); do
	grep -q listening "$W/serve.out" && break
	sleep 0.1
done
grep -q listening "$W/serve.out" || { echo "bulkcpu.sh: blocks serve did not start:" >&2; cat "$W/serve.err" >&2; exit 1; }

# ticks: the server's CPU time so far, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$SPID/stat"; }
hz=$(getconf CLK_TCK)
echo "cap $CAP, ${SIZE_MIB} MiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
	for mode in bulk grpc; do
		flags=()
		[[ $mode == grpc ]] && flags=(--no-bulk)
		rm -rf "$W/dst" "$W/out"
		t0=$(ticks)
		/usr/bin/time -f "%e %U %S" -o "$W/time" ip netns exec "$C" "$BIN" --data "$W/dst" \
			blocks get "$id" --from 10.79.0.1:7070 -o "$W/out" "${flags[@]}" >/dev/null 2>"$W/get.err" ||
			{ cat "$W/get.err" >&2; exit 1; }
		t1=$(ticks)
		cmp -s "$W/out" "$W/f.bin" || { echo "bulkcpu.sh: the fetched file differs" >&2; exit 1; }
		read -r wall u s <"$W/time"
		awk -v m="$mode" -v r="$r" -v w="$wall" -v c="$(awk -v u="$u" -v s="$s" 'BEGIN{print u + s}')" \
			-v sv="$(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN{print t / hz}')" -v mib="$SIZE_MIB" 'BEGIN {
			printf "run %d %-4s %.2f s %6.1f MiB/s  client %.2f s  server %.2f s  CPU %.2f s/GiB\n", r, m, w, mib / w, c, sv, (c + sv) * 1024 / mib }'
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
