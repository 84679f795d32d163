#!/usr/bin/env bash
# Two p2pc builds and the rsync daemon, interleaved in one run, for
# CPU seconds per GiB (what survives a loaded machine) beside the wall
# time. Each round fetches SIZE_MIB of random data on 127.0.0.1 with
# `blocks get -o` from a `blocks serve` of build A, then of build B (each
# build serves and fetches), and with rsync (daemon, --whole-file, no
# compression); the order rotates A B R, B R A, R A B. Files and stores
# live in /dev/shm; free memory is warmed before each command (see
# run.sh, warm_memory). Prints one line per command: wall, MiB/s, client
# and server CPU seconds, their total, and the load average at its start.
#
#   benchmarks/transfer/abcpu.sh /tmp/p2pc.old /tmp/p2pc.new
#
# Parameters (environment): ROUNDS (6), SIZE_MIB (1024).
set -euo pipefail

[[ $# == 2 ]] || { echo "usage: abcpu.sh BIN_A BIN_B" >&2; exit 2; }
A=$1 B=$2
ROUNDS=${ROUNDS:-6}
SIZE_MIB=${SIZE_MIB:-1024}
for tool in rsync cmp awk /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "abcpu.sh: $tool not found" >&2; exit 1; }
done
D=$(mktemp -d /dev/shm/p2pc-abcpu.XXXXXX)
TCK=$(getconf CLK_TCK)
PIDS=()
cleanup() {
	set +e
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$D"
}
trap cleanup EXIT

export P2PC_SWARM
P2PC_SWARM=$("$A" --swarm-file "$D/swarm" swarm init 2>/dev/null | awk '{print $4}')
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$D/a.bin"
declare -A SP ADDR
for t in A B; do
	bin=${!t}
	id=$("$bin" --data "$D/src$t" blocks put "$D/a.bin" 2>/dev/null)
	"$bin" --data "$D/src$t" blocks serve --listen 127.0.0.1:0 >"$D/serve$t.out" 2>"$D/serve$t.err" &
	SP[$t]=$!
	PIDS+=($!)
	for _ in $(seq 100); do
		grep -q listening "$D/serve$t.out" 2>/dev/null && break
		sleep 0.05
	done
	ADDR[$t]=$(head -1 "$D/serve$t.out" | awk '{print $2}')
	[[ -n ${ADDR[$t]} ]] || { echo "abcpu.sh: blocks serve ($t) did not start" >&2; cat "$D/serve$t.err" >&2; exit 1; }
done
mkdir -p "$D/rs"
ln "$D/a.bin" "$D/rs/a.bin"
for port in $(seq 28800 28860); do
	cat >"$D/rsyncd.conf" <<-EOC
		port = $port
		address = 127.0.0.1
		use chroot = false
		pid file = $D/rsyncd.pid
		[bench]
		path = $D/rs
		read only = true
	EOC
	rsync --daemon --no-detach --config="$D/rsyncd.conf" &
	SP[R]=$!
	sleep 0.3
	if kill -0 "${SP[R]}" 2>/dev/null; then
		PIDS+=("${SP[R]}")
		break
	fi
	port=
done
[[ -n $port ]] || { echo "abcpu.sh: rsync daemon did not start" >&2; exit 1; }

cpu() { awk -v t="$TCK" '{printf "%.2f", ($14 + $15 + $16 + $17) / t}' "/proc/$1/stat"; }
one() {
	local t=$1 s0 s1 w u s l
	rm -rf "$D/dst" "$D/out"
	head -c "$((2 * SIZE_MIB << 20))" /dev/zero >"$D/warm" && rm -f "$D/warm"
	l=$(cut -d' ' -f1 /proc/loadavg)
	s0=$(cpu "${SP[$t]}")
	if [[ $t == R ]]; then
		/usr/bin/time -f "%e %U %S" -o "$D/time" rsync --whole-file --no-compress "rsync://127.0.0.1:$port/bench/a.bin" "$D/out"
		sleep 0.3 # let the daemon reap its child
	else
		local bin=${!t}
		/usr/bin/time -f "%e %U %S" -o "$D/time" "$bin" --data "$D/dst" blocks get "$id" --from "${ADDR[$t]}" -o "$D/out" >/dev/null 2>"$D/get.err" ||
			{ cat "$D/get.err" >&2; exit 1; }
	fi
	s1=$(cpu "${SP[$t]}")
	cmp -s "$D/out" "$D/a.bin" || { echo "abcpu.sh: the output of $t differs" >&2; exit 1; }
	read -r w u s <"$D/time"
	awk -v t="$t" -v w="$w" -v u="$u" -v s="$s" -v a="$s0" -v b="$s1" -v l="$l" -v mib="$SIZE_MIB" 'BEGIN {
		printf "%s wall %.2f MiB/s %6.1f client %.2f server %.2f total %.2f per-GiB %.2f load %s\n", t, w, mib / w, u + s, b - a, u + s + b - a, (u + s + b - a) * 1024 / mib, l }'
}
echo "A=$A B=$B R=rsync $(rsync --version | awk 'NR==1 {print $3}'), ${SIZE_MIB} MiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	case $((r % 3)) in
	1) order="A B R" ;;
	2) order="B R A" ;;
	0) order="R A B" ;;
	esac
	for t in $order; do one "$t"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
