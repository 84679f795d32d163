#!/usr/bin/env python3
"""Confinement's cost on the local 2048-echo job (issue 13's figure).

The whole `p2pc run`, confined (the default) and with P2PC_SANDBOX=off,
interleaved run by run in ABBA order (a load that drifts over the runs
falls on both alike; hyperfine runs one command's runs in a row). Each
run's wall time, and its CPU from wait4 (the process tree: the plugin
processes, which p2pc waits for, included), context switches and page
faults. Separate warm data folders (WARM runs of each first, not
counted); the output folder is removed before each run. From the
repository root:

    go build -o p2pc ./cmd/p2pc && go build -o echo ./plugins/echo
    benchmarks/confine/ab.py [PAIRS] [WARM]

Prints per variant the median of each column, and the ratio
confined/off of the medians (wall, and CPU = user + sys) with a 95 %
bootstrap interval; the runs go to runs.csv in the work folder it names.
P2PC and ECHO name other binaries; P2PC_AB_ARGS adds flags to the run;
P2PC_AB_TASKS changes the number of tasks (2 shows the fixed cost alone).
"""
import os, random, shutil, statistics, subprocess, sys, tempfile, time

pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 40
warm = int(sys.argv[2]) if len(sys.argv) > 2 else 3
p2pc = os.path.realpath(os.environ.get("P2PC", "./p2pc"))
echo = os.path.realpath(os.environ.get("ECHO", "./echo"))
extra = os.environ.get("P2PC_AB_ARGS", "").split()
tasks = int(os.environ.get("P2PC_AB_TASKS", "2048"))
work = tempfile.mkdtemp(prefix="p2pc-confine-", dir=os.environ.get("TMPDIR", "/tmp"))
spec = os.path.join(work, "e2048.yaml")
with open(spec, "w") as f:
    f.write(f"name: e2048\nplugin: {echo}\ntasks: [{{range: {{param: i, from: 0, to: {tasks - 1}}}}}]\ntimeout: 30s\n")
out = os.path.join(work, "o")
cols = ["wall_ms", "cpu_ms", "user_ms", "sys_ms", "csw", "faults"]


def one(variant):
    env = dict(os.environ)
    env.pop("P2PC_SANDBOX", None)
    data = os.path.join(work, "d-" + variant)
    if variant == "off":
        env["P2PC_SANDBOX"] = "off"
    shutil.rmtree(out, ignore_errors=True)
    argv = [p2pc, "--data", data, "run", spec, "--out", out, "--no-mdns", "--no-progress"] + extra
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t0) * 1e3
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"{variant} run failed ({p.returncode}):\n{err}")
    u, s = ru.ru_utime * 1e3, ru.ru_stime * 1e3
    return [wall, u + s, u, s, ru.ru_nvcsw + ru.ru_nivcsw, ru.ru_minflt]


def ratio_ci(a, b, n=2000):
    rs = []
    for _ in range(n):
        ra = [random.choice(a) for _ in a]
        rb = [random.choice(b) for _ in b]
        rs.append(statistics.median(ra) / statistics.median(rb))
    rs.sort()
    return statistics.median(a) / statistics.median(b), rs[int(0.025 * n)], rs[int(0.975 * n)]


for _ in range(warm):
    one("confined")
    one("off")
runs = {"confined": [], "off": []}
with open(os.path.join(work, "runs.csv"), "w") as f:
    f.write("variant," + ",".join(cols) + "\n")
    for i in range(pairs):
        order = ["confined", "off"] if i % 2 == 0 else ["off", "confined"]
        for v in order:
            r = one(v)
            runs[v].append(r)
            f.write(v + "," + ",".join(f"{x:.3f}" for x in r) + "\n")
shutil.rmtree(out, ignore_errors=True)
print(f"{pairs} pairs, ABBA; runs in {work}/runs.csv; 1-minute load now {os.getloadavg()[0]:.2f}")
print(f"{'variant':10}" + "".join(f"{c:>10}" for c in cols) + "   (medians)")
for v, rs in runs.items():
    print(f"{v:10}" + "".join(f"{statistics.median(col):10.1f}" for col in zip(*rs)))
for k, name in ((0, "wall"), (1, "cpu")):
    r, lo, hi = ratio_ci([x[k] for x in runs["confined"]], [x[k] for x in runs["off"]])
    print(f"confined/off {name}: {r:.3f} [{lo:.3f}, {hi:.3f}]")
d = [c[0] - o[0] for c, o in zip(runs["confined"], runs["off"])]
print(f"paired wall difference, median: {statistics.median(d):+.1f} ms")
