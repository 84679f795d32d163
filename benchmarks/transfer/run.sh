#!/usr/bin/env bash
# Block transfer benchmarks (Preon section 4.4, and its missing multi-source
# half). Run as root from anywhere in the repository:
#
#   benchmarks/transfer/run.sh            # full run (1 GiB single-source, 256 MiB multi-source)
#   QUICK=1 benchmarks/transfer/run.sh    # smaller files, one run each
#
# (a) single source: a 1 GiB random file from one `p2pc blocks serve` to one
#     `p2pc blocks get -o` on 127.0.0.1, against rsync (daemon on 127.0.0.1,
#     generated rsyncd.conf, --whole-file, no compression), alternating, RUNS
#     times each. rsync is also timed with --fsync, since p2pc makes both its
#     block store and the output file durable (fsync) and plain rsync does not.
# (b) multi source: network namespaces created here (a hub namespace with a
#     bridge, one namespace per source and one for the sink, joined by veth
#     pairs), each source's uplink capped with tc tbf (CAP, default 100mbit);
#     the sink fetches a MSIZE_MIB file from 1, 2 and 4 sources. A capped
#     rsync from one source is the baseline.
#
# Parameters (environment): SIZE_MIB RUNS MSIZE_MIB MRUNS CAP FAST_CAP SOURCES
# SKIP_SINGLE SKIP_MULTI NO_TMPFS B_STORAGE=tmpfs|disk OUT P2PC_BIN (use this
# binary instead of building ./cmd/p2pc) GET_FLAGS (extra flags for every p2pc
# get, e.g. --no-bulk to move block data over gRPC)
# WARM_MIB (free memory warmed before each timed command in (a); 0 turns it off).
#
# Traffic goes only over loopback and the namespaces this script creates;
# the root namespace's interfaces are never touched. Everything is removed
# on exit. Results: results/transfer/{single_source,multi_source}.json and
# results/transfer/summary.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/results/transfer}
if [[ -n ${QUICK:-} ]]; then
	SIZE_MIB=${SIZE_MIB:-256} RUNS=${RUNS:-1} MSIZE_MIB=${MSIZE_MIB:-64} MRUNS=${MRUNS:-1}
fi
SIZE_MIB=${SIZE_MIB:-1024} # (a) file size
RUNS=${RUNS:-3}            # (a) runs of each tool
MSIZE_MIB=${MSIZE_MIB:-256} # (b) file size
MRUNS=${MRUNS:-1}          # (b) runs of each source count
CAP=${CAP:-100mbit}        # (b) uplink of each source
FAST_CAP=${FAST_CAP-1gbit} # (b) one more source on a faster link, p2pc vs rsync ("" to skip)
SOURCES=${SOURCES:-"1 2 4"}
WARM_MIB=${WARM_MIB:-$((2 * SIZE_MIB))} # (a) warm free memory before each timed command (0: off); see warm_memory
SKIP_MULTI=${SKIP_MULTI:-}
SKIP_SINGLE=${SKIP_SINGLE:-}
NL=$'\n'

[[ $(id -u) == 0 ]] || { echo "run.sh: needs root (network namespaces, tc)" >&2; exit 1; }
for tool in go rsync ip tc cmp awk /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/p2pc-bench-transfer.XXXXXX")
NS=p2pcbt$$ # prefix of every namespace created here
PIDS=()
NSES=()

cleanup() {
	local rc=$?
	set +e
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null
	done
	for ns in "${NSES[@]}"; do
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$WORK"
	[[ -n ${SHM:-} ]] && rm -rf "$SHM"
	[[ -n ${SHM_B:-} ]] && rm -rf "$SHM_B"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
mibps() { awk -v mib="$1" -v s="$2" 'BEGIN {printf "%.1f", mib/s}'; }

# wait_listening FILE: wait for "listening ADDR" on the first line of FILE.
wait_listening() {
	local f=$1 i
	for i in $(seq 300); do
		if [[ -s $f ]] && head -1 "$f" | grep -q '^listening '; then
			head -1 "$f" | awk '{print $2}'
			return 0
		fi
		sleep 0.05
	done
	echo "run.sh: no 'listening' line in $f" >&2
	return 1
}

# json_field FILE KEY: a top-level number from a stats JSON file.
json_field() { awk -v k="\"$2\":" '$1 == k {gsub(/,/, "", $2); print $2; exit}' "$1"; }
# proc_cpu PID: CPU seconds used by PID and its reaped children so far.
TCK=$(getconf CLK_TCK)
proc_cpu() { awk -v t="$TCK" '{printf "%.2f", ($14 + $15 + $16 + $17) / t}' "/proc/$1/stat"; }

if [[ -n ${P2PC_BIN:-} ]]; then
	BIN=$P2PC_BIN # a prebuilt binary
else
	BIN=$WORK/p2pc
	log "building p2pc"
	(cd "$ROOT" && go build -o "$BIN" ./cmd/p2pc)
fi
mkdir -p "$OUT"
# Every p2pc process is a member of one fresh swarm, as a user's would be:
# all block bytes move over mutual TLS 1.3.
export P2PC_SWARM
P2PC_SWARM=$("$BIN" --swarm-file "$WORK/swarm" swarm init 2>/dev/null | awk '{print $4}')
[[ $P2PC_SWARM == p2pc1-* ]] || { echo "run.sh: could not make a swarm secret" >&2; exit 1; }

machine() {
	local cpu
	cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
	printf '{"cpu": "%s", "cores": %s, "mem_gib": %s, "kernel": "%s", "go": "%s", "rsync": "%s", "loadavg_start": "%s"}' \
		"$cpu" "$(nproc)" "$(awk '/MemTotal/ {printf "%d", $2/1048576}' /proc/meminfo)" "$(uname -r)" \
		"$(go env GOVERSION)" "$(rsync --version | awk 'NR==1 {print $3}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
MACHINE=$(machine)
CMDLINE=$(
	for v in SIZE_MIB RUNS MSIZE_MIB MRUNS CAP FAST_CAP SOURCES SKIP_SINGLE SKIP_MULTI NO_TMPFS B_STORAGE P2PC_BIN GET_FLAGS QUICK; do
		[[ -n ${!v:-} ]] && printf '%s=%q ' "$v" "${!v}"
	done
	echo benchmarks/transfer/run.sh
)

# ---------------------------------------------------------------- (a) ----
# warm_memory: make sure the next command finds WARM_MIB of free memory
# that the host backs. This VM reports free pages to its host (virtio-balloon
# free page reporting) and pages out cold memory (DAMON, "pageout"): a page
# the guest allocates after the host took it back costs a host fault on
# first touch, and 1 GiB of such pages took rsync 2.4 s of kernel time to
# fill (perf: copy_folio_from_iter_atomic) where warm ones take 0.5. Which
# command of a run met cold pages depended on what the one before it had
# freed; filling and freeing WARM_MIB of tmpfs just before each timed
# command gives every command the same start.
warm_memory() {
	[[ $WARM_MIB -gt 0 ]] || return 0
	local f=/dev/shm/p2pc-bench-warm.$$
	head -c "$((WARM_MIB << 20))" /dev/zero >"$f" && rm -f "$f"
}

# single_source LABEL DIR: the source store, the files and the destination
# all live in DIR (a disk or a tmpfs). Appends a JSON object to SINGLE_JSON
# and table rows to SINGLE_ROWS.
single_source() {
	local label=$1 dir=$2 file id addr port
	mkdir -p "$dir"
	file=$dir/a.bin
	log "(a/$label) writing a ${SIZE_MIB} MiB random file in $dir"
	head -c "$((SIZE_MIB << 20))" /dev/urandom >"$file"
	id=$("$BIN" --data "$dir/a-src" blocks put "$file" 2>/dev/null)

	local pids=()
	"$BIN" --data "$dir/a-src" blocks serve --listen 127.0.0.1:0 >"$WORK/a-serve.out" 2>"$WORK/a-serve.err" &
	pids+=($!)
	PIDS+=($!)
	addr=$(wait_listening "$WORK/a-serve.out")

	mkdir -p "$dir/rsync"
	ln "$file" "$dir/rsync/a.bin"
	for port in $(seq 28730 28790); do
		cat >"$WORK/rsyncd.conf" <<-EOF
			port = $port
			address = 127.0.0.1
			use chroot = false
			pid file = $WORK/rsyncd.pid
			log file = $WORK/rsyncd.log
			[bench]
			path = $dir/rsync
			read only = true
		EOF
		rsync --daemon --no-detach --config="$WORK/rsyncd.conf" &
		local rpid=$!
		sleep 0.3
		if kill -0 "$rpid" 2>/dev/null; then
			pids+=("$rpid")
			PIDS+=("$rpid")
			break
		fi
		port=""
	done
	[[ -n $port ]] || { echo "run.sh: rsync daemon did not start" >&2; return 1; }
	log "(a/$label) p2pc serves $addr, rsync daemon on 127.0.0.1:$port"

	local -A times=() cpu=()
	local tools=(p2pc_get_output p2pc_get_output_fetch_phase p2pc_get_store_only rsync rsync_fsync) t0 t1 i
	local ratios=() ratios_fsync=()
	# timed NAME SERVERPID CMD...: run CMD, append its wall time to
	# times[NAME] and the CPU seconds it cost, its own (user + system) and
	# the server's (p2pc serve, or the rsync daemon's reaped children), to
	# cpu[NAME].
	timed() {
		local name=$1 spid=$2 s0 s1
		shift 2
		rm -rf "$dir/a-dst" "$dir/a.out"
		warm_memory
		sync
		s0=$(proc_cpu "$spid")
		t0=$(now)
		if ! /usr/bin/time -f "%U %S" -o "$WORK/a-time" "$@"; then
			echo "run.sh: $name failed: $*" >&2
			return 1
		fi
		t1=$(now)
		sleep 0.3 # let the rsync daemon reap its child
		s1=$(proc_cpu "$spid")
		times[$name]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b-a}') "
		cpu[$name]+="$(awk -v a="$s0" -v b="$s1" 'END {printf "%.2f+%.2f", $1+$2, b-a}' "$WORK/a-time") "
	}
	last() { echo ${times[$1]} | awk '{print $NF}'; }
	for i in $(seq "$RUNS"); do
		timed p2pc_get_output "${pids[0]}" "$BIN" --data "$dir/a-dst" blocks get "$id" --from "$addr" -o "$dir/a.out" ${GET_FLAGS:-} \
			--stats-json "$WORK/a-stats.json" 2>"$WORK/a-get.err" || { cat "$WORK/a-get.err" >&2; return 1; }
		cmp -s "$file" "$dir/a.out" || { echo "run.sh: p2pc output differs" >&2; return 1; }
		times[p2pc_get_output_fetch_phase]+="$(awk -v ns="$(json_field "$WORK/a-stats.json" duration_ns)" 'BEGIN {print ns/1e9}') "
		timed p2pc_get_store_only "${pids[0]}" "$BIN" --data "$dir/a-dst" blocks get "$id" --from "$addr" ${GET_FLAGS:-} 2>"$WORK/a-get.err" ||
			{ cat "$WORK/a-get.err" >&2; return 1; }
		timed rsync "${pids[1]}" rsync --whole-file --no-compress "rsync://127.0.0.1:$port/bench/a.bin" "$dir/a.out"
		cmp -s "$file" "$dir/a.out" || { echo "run.sh: rsync output differs" >&2; return 1; }
		timed rsync_fsync "${pids[1]}" rsync --whole-file --no-compress --fsync "rsync://127.0.0.1:$port/bench/a.bin" "$dir/a.out"
		rm -rf "$dir/a-dst" "$dir/a.out"
		ratios+=("$(awk -v p="$(last p2pc_get_output)" -v r="$(last rsync)" 'BEGIN {printf "%.3f", r/p}')")
		ratios_fsync+=("$(awk -v p="$(last p2pc_get_output)" -v r="$(last rsync_fsync)" 'BEGIN {printf "%.3f", r/p}')")
		log "(a/$label) run $i:$(for k in "${tools[@]}"; do printf ' %s=%ss' "$k" "$(last "$k")"; done) rsync/p2pc=${ratios[-1]} rsync_fsync/p2pc=${ratios_fsync[-1]} load=$(cut -d' ' -f1 /proc/loadavg)"
	done

	local k med sec=() meds=() rate=() cpus=() cpumed=() c
	for k in "${tools[@]}"; do
		med=$(printf '%s\n' ${times[$k]} | median)
		sec+=("\"$k\": [$(echo ${times[$k]} | tr ' ' ',')]")
		meds+=("\"$k\": $med")
		rate+=("\"$k\": $(mibps "$SIZE_MIB" "$med")")
		eval "med_$k=$med"
		[[ -n ${cpu[$k]:-} ]] || continue
		cpus+=("\"$k\": [$(for c in ${cpu[$k]}; do printf '{"client": %s, "server": %s},' "${c%+*}" "${c#*+}"; done | sed 's/,$//')]")
		# medians of the client's and the server's CPU seconds
		c="$(for c in ${cpu[$k]}; do echo "${c%+*}"; done | median)+$(for c in ${cpu[$k]}; do echo "${c#*+}"; done | median)"
		cpumed+=("\"$k\": {\"client\": ${c%+*}, \"server\": ${c#*+}}")
		eval "cpu_$k=$c"
	done
	local rmed rfmed
	rmed=$(printf '%s\n' "${ratios[@]}" | median)
	rfmed=$(printf '%s\n' "${ratios_fsync[@]}" | median)
	SINGLE_JSON+="${SINGLE_JSON:+, }{\"storage\": \"$label\", \"dir\": \"$dir\", \"seconds\": {$(IFS=,; echo "${sec[*]}")}, \"median_seconds\": {$(IFS=,; echo "${meds[*]}")}, \"median_mib_per_s\": {$(IFS=,; echo "${rate[*]}")}, \"cpu_seconds\": {$(IFS=,; echo "${cpus[*]}")}, \"median_cpu_seconds\": {$(IFS=,; echo "${cpumed[*]}")}, \"rsync_over_p2pc_per_run\": [$(IFS=,; echo "${ratios[*]}")], \"rsync_fsync_over_p2pc_per_run\": [$(IFS=,; echo "${ratios_fsync[*]}")]}"
	SINGLE_ROWS+="${SINGLE_ROWS:+$NL}| $label | $med_p2pc_get_output ($(mibps "$SIZE_MIB" "$med_p2pc_get_output") MiB/s) | $med_p2pc_get_store_only ($(mibps "$SIZE_MIB" "$med_p2pc_get_store_only") MiB/s) | $med_rsync ($(mibps "$SIZE_MIB" "$med_rsync") MiB/s) | $med_rsync_fsync ($(mibps "$SIZE_MIB" "$med_rsync_fsync") MiB/s) | $rmed | $rfmed |"
	cpurow() { local c=$1; awk -v c="${c%+*}" -v s="${c#*+}" 'BEGIN {printf "%.2f + %.2f = %.2f", c, s, c + s}'; }
	CPU_ROWS+="${CPU_ROWS:+$NL}| $label | $(cpurow "$cpu_p2pc_get_output") | $(cpurow "$cpu_p2pc_get_store_only") | $(cpurow "$cpu_rsync") | $(cpurow "$cpu_rsync_fsync") |"

	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	rm -rf "$dir"
}

single_all() {
	single_source disk "$WORK/disk"
	if [[ -d /dev/shm && -z ${NO_TMPFS:-} ]]; then
		SHM=$(mktemp -d /dev/shm/p2pc-bench-transfer.XXXXXX)
		single_source tmpfs "$SHM"
	fi
	cat >"$OUT/single_source.json" <<-EOF
		{
		  "benchmark": "single-source transfer of a random file on loopback: p2pc blocks get vs rsync (daemon, --whole-file, no compression)",
		  "date": "$(date -u +%FT%TZ)",
		  "machine": $MACHINE,
		  "file_mib": $SIZE_MIB,
		  "runs": $RUNS,
		  "variants": [$SINGLE_JSON],
		  "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)"
		}
	EOF
	printf '\n(a) single source, %d MiB, median seconds of %d runs\n| storage | p2pc get -o | p2pc get (store only) | rsync | rsync --fsync | rsync / p2pc | rsync --fsync / p2pc |\n%s\n' \
		"$SIZE_MIB" "$RUNS" "$SINGLE_ROWS"
	printf '\nCPU seconds, client + server (medians)\n%s\n' "$CPU_ROWS"
}

# ---------------------------------------------------------------- (b) ----
# netns_add NAME: create a namespace (recorded for cleanup) with lo up.
netns_add() {
	ip netns add "$1"
	NSES+=("$1")
	ip -n "$1" link set lo up
}

# attach NS IP VETH: a veth pair from the hub's bridge (VETH) into NS
# (eth0 = IP/24).
attach() {
	local ns=$1 ipaddr=$2 hv=$3
	ip -n "$HUB" link add "$hv" type veth peer name eth0 netns "$ns"
	ip -n "$HUB" link set "$hv" master br0 up
	ip -n "$ns" addr add "$ipaddr/24" dev eth0
	ip -n "$ns" link set eth0 up
}

multi_source() {
	local maxsrc=0 n
	for n in $SOURCES; do ((n > maxsrc)) && maxsrc=$n; done
	HUB=${NS}-hub
	netns_add "$HUB"
	ip -n "$HUB" link add br0 type bridge
	ip -n "$HUB" link set br0 up
	local sink=${NS}-sink
	netns_add "$sink"
	attach "$sink" 10.77.0.100 vsink
	local i
	for i in $(seq "$maxsrc"); do
		netns_add "${NS}-s$i"
		attach "${NS}-s$i" "10.77.0.$i" "vsrc$i"
		ip netns exec "${NS}-s$i" tc qdisc add dev eth0 root tbf rate "$CAP" burst 256kb latency 200ms
	done
	log "(b) namespaces up: hub, sink, $maxsrc sources capped at $CAP each"

	# Stores and files live on tmpfs unless B_STORAGE=disk: this part
	# measures how capped uplinks add up, not the disk of a shared machine.
	if [[ ${B_STORAGE:-tmpfs} == tmpfs && -d /dev/shm ]]; then
		SHM_B=$(mktemp -d /dev/shm/p2pc-bench-transfer-b.XXXXXX)
		BDIR=$SHM_B
		B_STORAGE=tmpfs
	else
		BDIR=$WORK
		B_STORAGE=disk
	fi
	local file=$BDIR/b.bin id
	head -c "$((MSIZE_MIB << 20))" /dev/urandom >"$file"
	id=$("$BIN" --data "$BDIR/b-s1" blocks put "$file" 2>/dev/null)
	for i in $(seq 2 "$maxsrc"); do
		cp -a "$BDIR/b-s1" "$BDIR/b-s$i"
	done
	local addrs=()
	for i in $(seq "$maxsrc"); do
		ip netns exec "${NS}-s$i" "$BIN" --data "$BDIR/b-s$i" blocks serve --listen "10.77.0.$i:7070" \
			>"$WORK/b-serve$i.out" 2>"$WORK/b-serve$i.err" &
		PIDS+=($!)
		addrs+=("$(wait_listening "$WORK/b-serve$i.out")")
	done

	# Baseline: rsync from one capped source.
	mkdir -p "$BDIR/b-rsync"
	ln "$file" "$BDIR/b-rsync/b.bin"
	cat >"$WORK/b-rsyncd.conf" <<-EOF
		port = 8730
		address = 10.77.0.1
		use chroot = false
		pid file = $WORK/b-rsyncd.pid
		[bench]
		path = $BDIR/b-rsync
		read only = true
	EOF
	ip netns exec "${NS}-s1" rsync --daemon --no-detach --config="$WORK/b-rsyncd.conf" &
	PIDS+=($!)
	sleep 0.5
	rm -f "$BDIR/b.rsync"
	local t0 t1 rs
	t0=$(now)
	ip netns exec "$sink" rsync --whole-file --no-compress rsync://10.77.0.1:8730/bench/b.bin "$BDIR/b.rsync"
	t1=$(now)
	rs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b-a}')
	cmp -s "$file" "$BDIR/b.rsync" || { echo "run.sh: rsync output differs" >&2; return 1; }
	rm -f "$BDIR/b.rsync"
	log "(b) rsync from 1 capped source: ${rs}s ($(mibps "$MSIZE_MIB" "$rs") MiB/s)"

	local rows="" json="" one=""
	for n in $SOURCES; do
		local from ts=() r
		from=$(IFS=,; echo "${addrs[*]:0:n}")
		for r in $(seq "$MRUNS"); do
			rm -rf "$BDIR/b-sink" "$BDIR/b.out"
			t0=$(now)
			ip netns exec "$sink" "$BIN" --data "$BDIR/b-sink" blocks get "$id" --from "$from" -o "$BDIR/b.out" ${GET_FLAGS:-} \
				--stats-json "$WORK/b-stats$n.json" 2>"$WORK/b-get.err" || { cat "$WORK/b-get.err" >&2; return 1; }
			t1=$(now)
			cmp -s "$file" "$BDIR/b.out" || { echo "run.sh: p2pc output differs" >&2; return 1; }
			ts+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b-a}')")
		done
		local m per
		m=$(printf '%s\n' "${ts[@]}" | median)
		[[ -z $one ]] && one=$m
		per=$(awk 'match($0, /"[0-9.]+:[0-9]+"/) {peer = substr($0, RSTART + 1, RLENGTH - 2)}
			peer && /"blocks":/ {gsub(/,/, "", $2); printf "%s%s=%s", sep, peer, $2; sep = " "; peer = ""}' "$WORK/b-stats$n.json")
		log "(b) $n source(s): ${m}s ($(mibps "$MSIZE_MIB" "$m") MiB/s); blocks per source: $per"
		rows+="${rows:+$NL}$(printf '| %d | %s | %s | %s | %s |' "$n" "$m" "$(mibps "$MSIZE_MIB" "$m")" \
			"$(awk -v a="$one" -v b="$m" 'BEGIN {printf "%.2f", a/b}')" "$per")"
		json+=$(printf '%s{"sources": %d, "seconds": [%s], "median_seconds": %s, "mib_per_s": %s, "speedup_vs_1": %s, "blocks_per_source": "%s"}' \
			"${json:+, }" "$n" "$(IFS=,; echo "${ts[*]}")" "$m" "$(mibps "$MSIZE_MIB" "$m")" \
			"$(awk -v a="$one" -v b="$m" 'BEGIN {printf "%.3f", a/b}')" "$per")
	done
	# One source behind a FAST_CAP link (Preon's 1 Gbit/s setting):
	# p2pc and rsync from the same source, alternating.
	local fast_json="null"
	FAST_ROW=""
	if [[ -n $FAST_CAP ]]; then
		local fns=${NS}-f
		netns_add "$fns"
		attach "$fns" 10.77.0.50 vfast
		ip netns exec "$fns" tc qdisc add dev eth0 root tbf rate "$FAST_CAP" burst 4mb latency 50ms
		cp -a "$BDIR/b-s1" "$BDIR/b-f"
		ip netns exec "$fns" "$BIN" --data "$BDIR/b-f" blocks serve --listen 10.77.0.50:7070 \
			>"$WORK/b-servef.out" 2>"$WORK/b-servef.err" &
		PIDS+=($!)
		local faddr
		faddr=$(wait_listening "$WORK/b-servef.out")
		sed 's/^address = .*/address = 10.77.0.50/; s/^pid file = .*/pid file = '"${WORK//\//\\/}"'\/b-rsyncdf.pid/' \
			"$WORK/b-rsyncd.conf" >"$WORK/b-rsyncdf.conf"
		ip netns exec "$fns" rsync --daemon --no-detach --config="$WORK/b-rsyncdf.conf" &
		PIDS+=($!)
		sleep 0.5
		local fp=() fr=()
		for r in $(seq "$MRUNS"); do
			rm -rf "$BDIR/b-sink" "$BDIR/b.out"
			t0=$(now)
			ip netns exec "$sink" "$BIN" --data "$BDIR/b-sink" blocks get "$id" --from "$faddr" -o "$BDIR/b.out" ${GET_FLAGS:-} 2>"$WORK/b-get.err" ||
				{ cat "$WORK/b-get.err" >&2; return 1; }
			t1=$(now)
			cmp -s "$file" "$BDIR/b.out" || { echo "run.sh: p2pc output differs" >&2; return 1; }
			fp+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b-a}')")
			rm -f "$BDIR/b.rsync"
			t0=$(now)
			ip netns exec "$sink" rsync --whole-file --no-compress rsync://10.77.0.50:8730/bench/b.bin "$BDIR/b.rsync"
			t1=$(now)
			cmp -s "$file" "$BDIR/b.rsync" || { echo "run.sh: rsync output differs" >&2; return 1; }
			fr+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b-a}')")
			rm -f "$BDIR/b.rsync"
		done
		local mfp mfr
		mfp=$(printf '%s\n' "${fp[@]}" | median)
		mfr=$(printf '%s\n' "${fr[@]}" | median)
		log "(b) one source at $FAST_CAP: p2pc ${mfp}s ($(mibps "$MSIZE_MIB" "$mfp") MiB/s), rsync ${mfr}s ($(mibps "$MSIZE_MIB" "$mfr") MiB/s)"
		fast_json="{\"cap\": \"$FAST_CAP\", \"p2pc_seconds\": [$(IFS=,; echo "${fp[*]}")], \"rsync_seconds\": [$(IFS=,; echo "${fr[*]}")], \"p2pc_median_mib_per_s\": $(mibps "$MSIZE_MIB" "$mfp"), \"rsync_median_mib_per_s\": $(mibps "$MSIZE_MIB" "$mfr")}"
		FAST_ROW="| one source at $FAST_CAP | $mfp s ($(mibps "$MSIZE_MIB" "$mfp") MiB/s) | $mfr s ($(mibps "$MSIZE_MIB" "$mfr") MiB/s) |"
	fi

	cat >"$OUT/multi_source.json" <<-EOF
		{
		  "benchmark": "multi-source transfer, each source's uplink capped with tc tbf, in network namespaces",
		  "date": "$(date -u +%FT%TZ)",
		  "machine": $MACHINE,
		  "file_mib": $MSIZE_MIB,
		  "cap_per_source": "$CAP",
		  "storage": "$B_STORAGE",
		  "rsync_one_capped_source": {"seconds": $rs, "mib_per_s": $(mibps "$MSIZE_MIB" "$rs")},
		  "p2pc": [$json],
		  "one_source_fast_link": $fast_json,
		  "loadavg_end": "$(cut -d' ' -f1-3 /proc/loadavg)"
		}
	EOF
	MULTI_ROWS=$rows
	MULTI_RS=$rs
	printf '\n(b) %d MiB from sources capped at %s, median of %d runs\n| sources | seconds | MiB/s | speedup | blocks per source |\n%s\nrsync, 1 capped source: %ss (%s MiB/s)\n%s\n' \
		"$MSIZE_MIB" "$CAP" "$MRUNS" "$MULTI_ROWS" "$rs" "$(mibps "$MSIZE_MIB" "$rs")" "$FAST_ROW"
}

SINGLE_ROWS="" SINGLE_JSON="" CPU_ROWS="" MULTI_ROWS="" MULTI_RS="" SHM="" SHM_B="" FAST_ROW="" B_STORAGE=${B_STORAGE:-tmpfs}
[[ -n $SKIP_SINGLE ]] || single_all
[[ -n $SKIP_MULTI ]] || multi_source

{
	echo "# Block transfer benchmarks"
	echo
	echo "Generated by \`benchmarks/transfer/run.sh\` on $(date -u +%F). Machine: $MACHINE"
	echo
	if [[ -n $SINGLE_ROWS ]]; then
		echo "## (a) Single source on loopback: ${SIZE_MIB} MiB, median of ${RUNS} runs"
		echo
		echo "| storage | p2pc blocks get -o | p2pc blocks get (store only) | rsync | rsync --fsync | rsync / p2pc get -o | rsync --fsync / p2pc get -o |"
		echo "| --- | --- | --- | --- | --- | --- | --- |"
		echo "$SINGLE_ROWS"
		echo
		echo "Seconds, median of ${RUNS} runs (MiB/s from the median). The two ratio columns are medians of the per-run ratios: the four commands of a run are timed back to back, so each ratio compares them under the same load. Before each command the destination is removed and \`sync\` run; plain rsync's output is still being written back when it exits (outside its time), while p2pc's output, like rsync --fsync's, is durable when it exits."
		echo
		echo "CPU seconds, client + server (median of each), for the same runs:"
		echo
		echo "| storage | p2pc blocks get -o | p2pc blocks get (store only) | rsync | rsync --fsync |"
		echo "| --- | --- | --- | --- | --- |"
		echo "$CPU_ROWS"
		echo
		echo "What p2pc does per block: the source's store reads it and checks it against the CRC32C recorded with it (quarantining it if damaged), the server writes it with one writev on a bulk-path connection (mutual TLS 1.3 on the gRPC port, negotiated through the Have answer; gRPC carries the manifest, Have and the fallback); the fetcher reads it straight into a pooled, 4 KiB-aligned buffer and hashes it once with SHA-256 against its ID on receipt (blocks that arrive together are hashed together), and nothing hashes it again. \`get -o\` writes each byte once: the block goes to its offsets in a file assembled inside the store (direct I/O on a disk), which, complete, is fsynced, becomes the store's copy of the file and is hard-linked to the output (temporary name, rename, fsync of the directory). \`get\` without -o writes block files in batches of 32 MiB, each batch made durable in one pass (fsync of the files, rename, fsync of the directories) before its blocks count as fetched. See docs/design/blocks.md and docs/design/transfer.md."
		echo
		echo "Where the CPU goes (\`p2pc --cpuprofile\`): on the fetching side, SHA-256 of every block (crypto/sha256, one block at a time on the worker that received it, about 0.75 s per GiB with the SHA extensions) and the TLS decryption (AES-GCM) are most of the user time, the socket reads and the direct writes of the output the system time; on the serving side, reading the block files, the TLS encryption and the socket writes, then the CRC32C. rsync --whole-file hashes with xxh3 and moves plaintext with read/write on a plain socket; p2pc's bulk path moves the same bytes inside mutual TLS 1.3 (every node-to-node byte is encrypted), which on a CPU-bound loopback costs about 1.6x the time (results/trust/summary.md). On a 2-core machine shared with other jobs the command that needs less CPU finishes first; over a real link the network is the bottleneck again: see the 1 Gbit/s row below."
		echo
	fi
	if [[ -n $MULTI_ROWS ]]; then
		echo "## (b) Multi-source: ${MSIZE_MIB} MiB, each source's uplink capped at ${CAP} (tc tbf, network namespaces; stores on $B_STORAGE), median of ${MRUNS} runs"
		echo
		echo "| sources | seconds | MiB/s | speedup vs 1 | blocks per source |"
		echo "| --- | --- | --- | --- | --- |"
		echo "$MULTI_ROWS"
		echo
		echo "rsync from one capped source: ${MULTI_RS} s ($(mibps "$MSIZE_MIB" "$MULTI_RS") MiB/s)."
		echo
		if [[ -n $FAST_ROW ]]; then
			echo "Single source over a faster link (Preon's setting, 1 Gbit/s), ${MSIZE_MIB} MiB:"
			echo
			echo "| link | p2pc blocks get -o | rsync |"
			echo "| --- | --- | --- |"
			echo "$FAST_ROW"
			echo
		fi
	fi
	echo "Command: \`$CMDLINE\`."
	echo
	echo "Load average at the start: $(echo "$MACHINE" | sed 's/.*"loadavg_start": "\([^"]*\)".*/\1/'); at the end: $(cut -d' ' -f1-3 /proc/loadavg) (the machine has $(nproc) cores and is shared)."
} >"$OUT/summary.md"
log "wrote $OUT/summary.md"
