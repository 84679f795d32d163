#!/usr/bin/env python3
"""A/B of two p2pc builds on a swarm job, interleaved ABBA.
usage: P2PC_A=... ECHO_A=... P2PC_B=... ECHO_B=... abswarm.py PAIRS PEERS SLOTS TASKS
Each build gets its own warm swarm of PEERS join processes on 127.0.N.x
(fixed ports, --no-mdns); each run is `p2pc run` of TASKS echo tasks with
--local-slots 0. Prints wall medians, coordinator CPU and peers' CPU."""
import os, subprocess, sys, tempfile, time, random, statistics, shutil, signal
pairs, npeers, slots, ntasks = map(int, sys.argv[1:5])
d = os.path.dirname(os.path.abspath(__file__))
work = tempfile.mkdtemp(prefix="p2pc-abs-")
# The builds: $P2PC_A/$ECHO_A and $P2PC_B/$ECHO_B, or p2pc-A, echo-A,
# p2pc-B and echo-B beside this script.
env = lambda k, f: os.environ.get(k) or os.path.join(d, f)
builds = {"A": (env("P2PC_A", "p2pc-A"), env("ECHO_A", "echo-A"), 1), "B": (env("P2PC_B", "p2pc-B"), env("ECHO_B", "echo-B"), 2)}
HZ = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / HZ
os.environ["XDG_CONFIG_HOME"] = os.path.join(work, "cfg")
os.environ["HOME"] = work
line = subprocess.run([builds["A"][0], "--data", os.path.join(work, "init"), "swarm", "init"], capture_output=True, text=True)
os.environ["P2PC_SWARM"] = [w for w in (line.stdout + line.stderr).split() if w.startswith("p2pc1-")][0]
procs, addrs = {}, {}
try:
    for tag, (b, echo, net) in builds.items():
        procs[tag], addrs[tag] = [], []
        for i in range(npeers):
            a = f"127.0.{net}.{i+2}:17070"
            log = open(os.path.join(work, f"{tag}-peer{i}.log"), "w")
            p = subprocess.Popen([b, "--data", os.path.join(work, f"{tag}-pd{i}"), "join", "--no-mdns", "--listen", a, "--name", f"{tag}{i}", "--slots", str(slots)], stdout=log, stderr=log)
            procs[tag].append(p); addrs[tag].append(a)
        spec = os.path.join(work, f"{tag}.yaml")
        open(spec, "w").write(f"name: e{ntasks}\nplugin: {echo}\ntasks: [{{range: {{param: i, from: 0, to: {ntasks-1}}}}}]\ntimeout: 30s\n")
    time.sleep(3)
    def one(tag):
        b = builds[tag][0]
        out = os.path.join(work, "o-" + tag)
        shutil.rmtree(out, ignore_errors=True)
        pc0 = sum(cpu(p.pid) for p in procs[tag])
        t = time.perf_counter()
        p = subprocess.Popen([b, "--data", os.path.join(work, "d-" + tag), "run", os.path.join(work, f"{tag}.yaml"), "--out", out, "--local-slots", "0", "--no-mdns", "--no-progress", "--min-peers", str(npeers), "--join", ",".join(addrs[tag])], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = p.communicate()
        w = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit(f"{tag}: exit {p.returncode}: {err.decode()[-800:]}")
        pc = sum(cpu(p.pid) for p in procs[tag]) - pc0
        return w, pc
    for _ in range(2):
        one("A"); one("B")
    R = {"A": [], "B": []}
    for i in range(pairs):
        for tag in (("A", "B") if i % 2 == 0 else ("B", "A")):
            R[tag].append(one(tag))
    load = open('/proc/loadavg').read().split()[:3]
    for tag in "AB":
        ws = [w for w, _ in R[tag]]; ps = [c for _, c in R[tag]]
        print(f"{tag}: wall median {statistics.median(ws)*1000:.0f} ms [{min(ws)*1000:.0f}-{max(ws)*1000:.0f}], {ntasks/statistics.median(ws):.0f} tasks/s over the command; peers' CPU median {statistics.median(ps)*1e6/ntasks:.0f} us/task")
    A = [w for w, _ in R["A"]]; B = [w for w, _ in R["B"]]
    rs = sorted(statistics.median(random.choices(B, k=len(B))) / statistics.median(random.choices(A, k=len(A))) for _ in range(2000))
    print(f"B/A wall {statistics.median(B)/statistics.median(A):.3f} 95% CI [{rs[50]:.3f}, {rs[1949]:.3f}] ({pairs} pairs, {npeers}x{slots}, {ntasks} tasks, load {load})")
finally:
    for ps in procs.values():
        for p in ps:
            p.send_signal(signal.SIGTERM)
    for ps in procs.values():
        for p in ps:
            try: p.wait(10)
            except subprocess.TimeoutExpired: p.kill(); p.wait()
    shutil.rmtree(work, ignore_errors=True)
