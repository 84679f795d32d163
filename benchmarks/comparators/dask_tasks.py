#!/usr/bin/python3
"""Run trivial tasks on a Dask LocalCluster: the comparator of p2pc bench's
tracker and latency suites (Preon sections 4.2 and 4.3).

    /usr/bin/python3 dask_tasks.py --tasks 2048 --workers 16 --threads 32

Needs Debian's python3-distributed. Three modes:

- alone (the default): starts a LocalCluster of worker processes on
  127.0.0.1 (p2pc bench runs it inside a private network namespace), warms
  every worker thread up with one round of tasks, then --runs times submits
  --tasks tasks at once (each returns its argument, like p2pc's echo
  plugin) and waits for all of them.
- --serve: starts the LocalCluster, prints {"address", "startup_s",
  "dask_version"} as one line and keeps the cluster until stdin closes: a
  standing cluster, as p2pc's peers stand in a swarm.
- --scheduler ADDR: a client of a standing cluster, as a user's script
  is: connects, submits, gathers, exits (no warm-up unless --warmup), so
  that the caller can time the whole command from process start to exit
  against `p2pc run`'s.

Prints one JSON object on stdout:

    startup_s        cluster start until every worker is up (0 as a client)
    warmup_s         the warm-up round
    total_s          first submit until the last result is in
    tasks_per_s      tasks / total_s
    submit_unix      wall-clock time of the submit (time.time())
    latencies_ms     per task, submit until its result reached the client,
                     in submission order
"""
import argparse
import json
import sys
import time


def echo(x):
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1, help="measured rounds (latencies of all, times of each)")
    ap.add_argument("--serve", action="store_true", help="start a cluster, print its address, keep it until stdin closes")
    ap.add_argument("--scheduler", help="run as a client of the standing cluster at this address")
    ap.add_argument("--warmup", action="store_true", help="as a client: warm the workers up first")
    args = ap.parse_args()

    import logging
    logging.getLogger("distributed").setLevel(logging.ERROR)
    from dask.distributed import Client, LocalCluster, as_completed

    t0 = time.perf_counter()
    cluster = None
    if args.scheduler:
        client = Client(args.scheduler)
    else:
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=args.threads,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
        client.wait_for_workers(args.workers)
    startup = time.perf_counter() - t0 if cluster else 0.0

    if args.serve:
        # Warm every worker thread up, then stand until stdin closes.
        client.gather(client.map(echo, range(args.workers * args.threads), pure=False))
        print(json.dumps({"address": cluster.scheduler_address, "startup_s": startup,
                          "dask_version": __import__("distributed").__version__}), flush=True)
        sys.stdin.read()
        client.close()
        cluster.close()
        return 0

    t1 = time.perf_counter()
    if cluster or args.warmup:
        n = len(client.scheduler_info()["workers"]) * args.threads if not cluster else args.workers * args.threads
        warm = client.map(echo, range(n), pure=False)
        client.gather(warm)
        del warm
    warmup = time.perf_counter() - t1

    runs = []
    for _ in range(args.runs):
        submit_unix = time.time()
        submit = time.perf_counter()
        futs = client.map(echo, range(args.tasks), pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        lat = [0.0] * len(futs)
        for f in as_completed(futs):
            lat[index[f.key]] = (time.perf_counter() - submit) * 1000.0
        total = time.perf_counter() - submit
        bad = [f for f in futs if f.status != "finished"]
        if bad:
            print(f"dask_tasks: {len(bad)} tasks did not finish", file=sys.stderr)
            return 1
        runs.append({"total_s": total, "tasks_per_s": args.tasks / total, "submit_unix": submit_unix, "latencies_ms": lat})
        del futs

    client.close()
    if cluster:
        cluster.close()
    out = {
        "dask_version": __import__("distributed").__version__,
        "tasks": args.tasks,
        "workers": args.workers,
        "threads_per_worker": args.threads,
        "startup_s": startup,
        "warmup_s": warmup,
        "runs": runs,
    }
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
