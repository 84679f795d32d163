#!/usr/bin/env python3
"""CPU per task of a swarm job, split into coordinator, peers and plugins,
for one or more p2pc builds interleaved in one run.

usage: pertask.py ROUNDS PEERS SLOTS TASKS TAG=P2PC,ECHO [TAG=P2PC,ECHO ...]
       env NET, PORT: where the peers listen (127.0.NET+k.x:PORT, build k)
       env PROFILE=DIR: write CPU profiles of the coordinator (one per run)
       and of each peer (over the whole script) into DIR.

Each build gets its own warm swarm of PEERS `p2pc join` processes on
127.0.NET+k.x (--no-mdns); each run is `p2pc run` of TASKS echo
tasks with --local-slots 0 and --min-peers PEERS. Builds are run in a
rotated order each round. Per run: the command's wall time, the CPU of the
coordinator (rusage of the `p2pc run` process), of the join processes, of
their plugin processes (live descendants plus the peers' reaped children)
and of the whole machine (/proc/stat, all processes: the machine is
shared, so that one is context). Prints medians with min-max per build and
the ratio of each build's medians to the first build's."""
import os, subprocess, sys, tempfile, time, statistics, shutil, signal
rounds, npeers, slots, ntasks = map(int, sys.argv[1:5])
builds = {}
for arg in sys.argv[5:]:
    tag, paths = arg.split("=", 1)
    b, echo = paths.split(",")
    builds[tag] = (os.path.abspath(b), os.path.abspath(echo))
prof = os.environ.get("PROFILE")
# Peers listen on 127.0.NET+k.x:PORT, build k: away from abswarm.py's
# 127.0.1-2.x:17070, which other runs on the machine may hold.
net, port = int(os.environ.get("NET", "61")), int(os.environ.get("PORT", "17471"))
work = tempfile.mkdtemp(prefix="p2pc-pertask-")
HZ = os.sysconf("SC_CLK_TCK")

def stat(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(f[1]), (int(f[11]) + int(f[12])) / HZ, (int(f[13]) + int(f[14])) / HZ

def parts(peers):
    """(peers' own CPU, plugins' CPU) in seconds, cumulative."""
    kids, own = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            s = stat(int(d))
            if s:
                kids.setdefault(s[0], []).append(int(d)); own[int(d)] = s
    pc = sum(own[p][1] for p in peers if p in own)
    plug = sum(own[p][2] for p in peers if p in own)
    todo = [k for p in peers for k in kids.get(p, [])]
    while todo:
        k = todo.pop()
        plug += own[k][1]
        todo += kids.get(k, [])
    return pc, plug

def machine():
    f = open("/proc/stat").readline().split()[1:]
    return (sum(map(int, f)) - int(f[3]) - int(f[4])) / HZ

os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "cfg")
os.environ["HOME"] = work
first = next(iter(builds.values()))[0]
line = subprocess.run([first, "--data", os.path.join(work, "init"), "swarm", "init"], capture_output=True, text=True)
os.environ["P2PC_SWARM"] = [w for w in (line.stdout + line.stderr).split() if w.startswith("p2pc1-")][0]
procs, addrs = {}, {}
try:
    for n, (tag, (b, echo)) in enumerate(builds.items()):
        procs[tag], addrs[tag] = [], []
        for i in range(npeers):
            a = f"127.0.{net+n}.{i+2}:{port}"
            log = open(os.path.join(work, f"{tag}-peer{i}.log"), "w")
            extra = ["--cpuprofile", os.path.join(prof, f"{tag}-peer{i}.pprof")] if prof else []
            p = subprocess.Popen([b, "--data", os.path.join(work, f"{tag}-pd{i}")] + extra + ["join", "--no-mdns", "--listen", a, "--name", f"{tag}{i}", "--slots", str(slots)], stdout=log, stderr=log)
            procs[tag].append(p); addrs[tag].append(a)
        open(os.path.join(work, f"{tag}.yaml"), "w").write(f"name: e{ntasks}\nplugin: {echo}\ntasks: [{{range: {{param: i, from: 0, to: {ntasks-1}}}}}]\ntimeout: 60s\n")
    time.sleep(3)
    runs = {t: 0 for t in builds}
    failed = {t: 0 for t in builds}
    def one(tag, tries=1):
        b = builds[tag][0]
        out = os.path.join(work, "o-" + tag)
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(os.path.join(work, "d-" + tag), ignore_errors=True)
        pids = [p.pid for p in procs[tag]]
        pc0, pl0 = parts(pids); m0 = machine()
        extra = ["--cpuprofile", os.path.join(prof, f"{tag}-coord{runs[tag]}.pprof")] if prof else []
        runs[tag] += 1
        t = time.perf_counter()
        p = subprocess.Popen([b, "--data", os.path.join(work, "d-" + tag)] + extra + ["run", os.path.join(work, f"{tag}.yaml"), "--out", out, "--local-slots", "0", "--no-mdns", "--no-progress", "--min-peers", str(npeers), "--join", ",".join(addrs[tag])], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        w = time.perf_counter() - t
        if p.returncode != 0:
            # On a crowded machine a run can fail to reach its peers:
            # it is counted and run again (at most 3 times in all).
            failed[tag] += 1
            print(f"{tag}: exit {p.returncode}: {err.decode()[-300:]}", file=sys.stderr, flush=True)
            if tries >= 3:
                sys.exit(f"{tag}: failed 3 times in a row")
            return one(tag, tries + 1)
        pc1, pl1 = parts(pids); m1 = machine()
        co = ru.ru_utime + ru.ru_stime
        return dict(wall=w, coord=co, peers=pc1 - pc0, plugins=pl1 - pl0, whole=co + pc1 - pc0 + pl1 - pl0, machine=m1 - m0)
    tags = list(builds)
    for t in tags:
        one(t)
    R = {t: [] for t in tags}
    loads = []
    for i in range(rounds):
        order = tags[i % len(tags):] + tags[:i % len(tags)]
        for t in order:
            R[t].append(one(t))
        print(f"round {i}: " + "; ".join(f"{t} whole {R[t][-1]['whole']*1e6/ntasks:.0f} us/task, {ntasks/R[t][-1]['wall']:.0f}/s" for t in order), file=sys.stderr, flush=True)
        loads.append(open('/proc/loadavg').read().split()[0])
    print(f"{rounds} rounds, {npeers}x{slots}, {ntasks} tasks; load (1 min) after each round: {' '.join(loads)}; failed runs (run again): {failed}")
    base = tags[0]
    med = lambda t, k: statistics.median(r[k] for r in R[t])
    for t in tags:
        rs = R[t]
        cols = []
        for k in ("coord", "peers", "plugins", "whole", "machine"):
            v = [r[k] * 1e6 / ntasks for r in rs]
            cols.append(f"{k} {statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]")
        ts = [ntasks / r["wall"] for r in rs]
        print(f"{t}: us/task " + ", ".join(cols) + f"; tasks/s {statistics.median(ts):.0f} [{min(ts):.0f}-{max(ts):.0f}]")
        if t != base:
            print(f"  {t}/{base} medians: " + ", ".join(f"{k} {med(t, k)/med(base, k) if med(base, k) else float('nan'):.2f}" for k in ("coord", "peers", "plugins", "whole", "wall")))
finally:
    for ps in procs.values():
        for p in ps:
            p.send_signal(signal.SIGTERM)
    for ps in procs.values():
        for p in ps:
            try: p.wait(20)
            except subprocess.TimeoutExpired: p.kill(); p.wait()
    if not os.environ.get("KEEP"):
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("kept", work, file=sys.stderr)
