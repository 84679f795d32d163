#!/usr/bin/env bash
# What the web view costs a job (issue 18: "the view of a 100,000-task job
# must not slow the job by more than 2 %"). Run from anywhere in the
# repository, on a quiet machine:
#
#   benchmarks/webui/run.sh                 # 100,000 tiny echo tasks, 5 rounds
#   TASKS=2000 ROUNDS=1 benchmarks/webui/run.sh   # smoke check, not a figure
#
# Each round runs the same job twice, alternating which goes first:
#   plain: p2pc run job.yaml
#   ui:    p2pc run job.yaml --ui 127.0.0.1:0, with a client the whole time
#          that streams /api/events (as an open page does) and fetches one
#          page of the task table every second (as the page does)
# and prints each wall time; at the end the median of each and the
# overhead, (median ui - median plain) / median plain. The job is local
# (--no-mdns, no peers, SLOTS local slots), so nothing but the view
# differs; the output folder is removed between runs so none is resumed.
#
# Parameters (environment): TASKS (100000) ROUNDS (5) SLOTS (2) P2PC_BIN
# (use this binary instead of building ./cmd/p2pc). Needs curl and bc.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TASKS=${TASKS:-100000}
ROUNDS=${ROUNDS:-5}
SLOTS=${SLOTS:-2}
for tool in curl bc; do command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }; done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/p2pc-bench-webui.XXXXXX")
CLIENTS=()
cleanup() {
	for pid in "${CLIENTS[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

BIN=${P2PC_BIN:-$WORK/p2pc}
if [[ -z ${P2PC_BIN:-} ]]; then
	(cd "$ROOT" && go build -o "$BIN" ./cmd/p2pc)
fi
export P2PC_DATA=$WORK/data P2PC_NO_MDNS=true
cat >"$WORK/job.yaml" <<SPEC
name: webui-overhead
plugin: $ROOT/plugins/echo
tasks:
  - range: {param: n, from: 0, to: $((TASKS - 1))}
SPEC
# Build the plugin once, outside the timed runs.
"$BIN" run "$WORK/job.yaml" --out "$WORK/warm" --local-slots "$SLOTS" --no-progress >/dev/null 2>&1 || true
rm -rf "$WORK/warm"

now() { date +%s.%N; }

# run_plain prints the wall time of one plain run.
run_plain() {
	rm -rf "$WORK/out"
	local t0 t1
	t0=$(now)
	"$BIN" run "$WORK/job.yaml" --out "$WORK/out" --local-slots "$SLOTS" --no-progress >/dev/null 2>"$WORK/plain.err"
	t1=$(now)
	echo "$t1 - $t0" | bc -l
}

# run_ui prints the wall time of one run with the view and a client.
run_ui() {
	rm -rf "$WORK/out"
	local t0 t1 pid url base
	: >"$WORK/ui.err"
	t0=$(now)
	"$BIN" run "$WORK/job.yaml" --out "$WORK/out" --local-slots "$SLOTS" --no-progress --ui 127.0.0.1:0 >/dev/null 2>"$WORK/ui.err" &
	pid=$!
	for _ in $(seq 200); do
		url=$(sed -n 's/^web view: //p' "$WORK/ui.err")
		[[ -n $url ]] && break
		sleep 0.05
	done
	[[ -n $url ]] || { echo "run.sh: no web view URL" >&2; cat "$WORK/ui.err" >&2; exit 1; }
	base=${url%%/\?*}
	tok=${url##*token=}
	curl -sN -H "Authorization: Bearer $tok" "$base/api/events" >/dev/null 2>&1 &
	CLIENTS+=($!)
	(while sleep 1; do curl -s -H "Authorization: Bearer $tok" "$base/api/tasks?state=all&offset=0&limit=50" >/dev/null 2>&1 || true; done) &
	CLIENTS+=($!)
	wait "$pid" || true
	t1=$(now)
	for c in "${CLIENTS[@]}"; do kill "$c" 2>/dev/null || true; wait "$c" 2>/dev/null || true; done
	CLIENTS=()
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

plain=() ui=()
for r in $(seq "$ROUNDS"); do
	if ((r % 2)); then
		p=$(run_plain); u=$(run_ui)
	else
		u=$(run_ui); p=$(run_plain)
	fi
	plain+=("$p") ui+=("$u")
	printf 'round %d: plain %.3f s, ui %.3f s\n' "$r" "$p" "$u"
done
mp=$(printf '%s\n' "${plain[@]}" | median)
mu=$(printf '%s\n' "${ui[@]}" | median)
printf '%d tasks, %d rounds, %d slots: median plain %.3f s, ui %.3f s, overhead %+.2f %%\n' \
	"$TASKS" "$ROUNDS" "$SLOTS" "$mp" "$mu" "$(echo "100 * ($mu - $mp) / $mp" | bc -l)"
