#!/usr/bin/python3
"""harness.py - the measurements and the report of bench/run.sh (run that, not this).

Runs every workload under every allocator configuration and writes results.json and results.md:

  instructions  valgrind --tool=callgrind, whole process, one run per (workload, configuration), JOBS in
                parallel (counts do not depend on what else runs); "stopped" is run twice (A/A) to show
                how far counts repeat.
                The runs of mimalloc, stopped, armed and the three unwinders keep their profile, which
                callgrind_annotate turns into per-function counts: where the extra instructions go.
  wall, CPU,    ROUNDS interleaved rounds: in each round every workload runs once under every
  peak RSS,     configuration, the configurations in a fresh random order (seeded) one right after the
  page faults   other, so each round is a block of paired runs.  bench/runone.c runs each: wall = fork
                to wait4; CPU = user + sys and minor faults from wait4; peak RSS = VmHWM at exit, read by
                bench/hwm_probe.c preloaded last in every configuration (ru_maxrss, approximate here,
                is kept beside it).  A ratio is the median over rounds of the per-round ratio to the
                reference configuration; its interval is the distribution-free
                (sign-test / order-statistic) interval for that median at >= 95% where the number of
                rounds allows it (n >= 6), otherwise [min, max] with the coverage it has.
  memory        MEMORY_ROUNDS more rounds of the threaded C workloads under the configurations the
                memory criteria compare (mimalloc, stopped, fp, table, jemalloc, jemalloc-prof, tcmalloc,
                tcmalloc-sample): a difference of peak RSS is the median over the timed and the memory
                rounds.  Threaded workloads' peaks move by megabytes from run to run (mstress_like's A/A
                differences have a standard deviation of about 2.4 MiB), so their medians need more
                rounds than the times do.  Part of the timing phase.
  samples       one extra run per (workload, unwinder) with bench/unwind_report.c preloaded after the
                library: samples taken and stack depths (not timed).
  micro         bench/sample_cost.c (cost per sample by unwinder and depth: CPU and wall time, and
                instructions under callgrind), bench/prof_scale.c (dump time against live samples and
                stacks, profiler memory against live samples).

This file is the command line; the work is in the modules beside it: harness_setup.py (configurations,
workloads, environments), harness_run.py (running the programs: the callgrind, timing and samples
phases), harness_micro.py (the microbenchmarks), harness_stats.py (medians, ratios, intervals),
harness_report.py (results.json), harness_accept.py (the acceptance criteria) and
harness_markdown.py (results.md).

Only the Python standard library; the timed work all runs in native processes.
"""
import argparse
import json
import os
import subprocess
import time

from harness_accept import acceptance
from harness_markdown import markdown
from harness_micro import micro_callgrind_jobs, micro_prof_scale, micro_sample_cost, micro_trivial_rss
from harness_report import build_report, machine_meta
from harness_run import noisy_workloads, phase_callgrind, phase_samples, phase_timing
from harness_setup import make_configs, make_workloads


def rerender(a):
    """The report of an earlier run again, with this version's acceptance checks and tables."""
    with open(a.rerender) as fh:
        doc = json.load(fh)
    wl = [w["name"] for w in doc["workloads"]]
    doc["acceptance"] = acceptance(wl, {w["name"]: w["kind"] for w in doc["workloads"]},
                                   [c["name"] for c in doc["configs"]], doc["results"], doc["samples"] or {},
                                   doc.get("breakdown") or {}, doc["micro"].get("trivial_rss"))
    a.cg_samples = doc["meta"].get("cg_samples", 3000)
    os.makedirs(a.out, exist_ok=True)
    write_results(doc, a)


def write_results(doc, a):
    """Writes results.json and results.md into a.out and prints the markdown."""
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
    md = markdown(doc, a)
    with open(os.path.join(a.out, "results.md"), "w") as fh:
        fh.write(md)
    print(md)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--top")
    p.add_argument("--lib")
    p.add_argument("--bin")
    p.add_argument("--out")
    p.add_argument("--plant", type=int)
    p.add_argument("--plant-method")
    p.add_argument("--plant-preload")
    p.add_argument("--quick", type=int, default=0)
    p.add_argument("--rounds", type=int, default=0)
    p.add_argument("--memory-rounds", type=int, default=-1)
    p.add_argument("--noisy-memory-rounds", type=int, default=-1)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--workloads", default="")
    p.add_argument("--phases", default="callgrind timing samples micro")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--have-libunwind", type=int, default=1)
    p.add_argument("--command", default="bench/run.sh")
    p.add_argument("--rerender", metavar="RESULTS_JSON",
                   help="only recompute the acceptance checks and the tables of an earlier results.json (to OUT)")
    a = p.parse_args()
    if a.rerender:
        a.out = a.out or os.path.dirname(os.path.abspath(a.rerender))
        rerender(a)
        return
    for k in ("top", "lib", "bin", "out", "plant", "plant_method", "plant_preload"):
        if getattr(a, k) is None:
            p.error("--%s is required" % k.replace("_", "-"))
    a.rounds = a.rounds or (3 if a.quick else 12)
    a.mem_rounds = a.memory_rounds if a.memory_rounds >= 0 else (0 if a.quick else 30)
    a.noisy_mem_rounds = a.noisy_memory_rounds if a.noisy_memory_rounds >= 0 else (0 if a.quick else 150)
    a.scale = 0.1 if a.quick else 1.0
    a.depths = [8, 32] if a.quick else [8, 16, 32, 64]
    a.pairs = 5 if a.quick else 15
    a.batch_ms = 10 if a.quick else 20
    a.cg_samples = 1000 if a.quick else 3000
    a.dump_reps = 3 if a.quick else 5
    a.cells = (["1000:16", "1000:1000", "10000:16", "10000:1024", "10000:10000"] if a.quick else
               ["1000:16", "1000:1000", "10000:16", "10000:1024", "10000:10000", "100000:16", "100000:1024",
                "100000:16384", "1000000:1024"])
    a.have_libunwind = bool(a.have_libunwind)
    phases = a.phases.split()
    os.makedirs(a.out, exist_ok=True)
    a.raw = os.path.join(a.out, "raw")
    os.makedirs(a.raw, exist_ok=True)

    nm = subprocess.run(["nm", "-D", "--defined-only", "-C", a.lib], capture_output=True, text=True).stdout
    a.exported = {ln.split(None, 2)[2].split("@")[0] for ln in nm.splitlines() if len(ln.split(None, 2)) == 3}
    configs = make_configs(a)
    workloads = make_workloads(a)
    meta = machine_meta(a)
    timings = {}
    a.loadavg = []

    cg, cg_micro = {}, {}
    if "callgrind" in phases:
        t = time.time()
        print("harness: callgrind, %d workloads x %d configurations (+ %d microbenchmark runs), %d at a time" % (
            len(workloads), len(configs), len(micro_callgrind_jobs(a)) if "micro" in phases else 0, a.jobs), flush=True)
        cg, cg_micro = phase_callgrind(a, configs, workloads, micro_callgrind_jobs(a) if "micro" in phases else [])
        timings["callgrind"] = time.time() - t
    tm = None
    if "timing" in phases:
        t = time.time()
        print("harness: timing, %d rounds of %d workloads x %d configurations, then %d memory rounds" % (
            a.rounds, len(workloads), len(configs), a.mem_rounds), flush=True)
        a.loadavg.append("%.2f" % os.getloadavg()[0])
        tm = phase_timing(a, configs, workloads)
        a.loadavg.append("%.2f" % os.getloadavg()[0])
        timings["timing"] = time.time() - t
    if not a.loadavg:
        a.loadavg = ["%.2f" % os.getloadavg()[0]]
    samples = {}
    if "samples" in phases:
        t = time.time()
        print("harness: samples per workload and unwinder", flush=True)
        samples = phase_samples(a, configs, workloads, noisy_workloads(tm, a.mem_rounds))
        timings["samples"] = time.time() - t
    micro_cost, scale_rows, trivial = [], [], None
    if "micro" in phases:
        t = time.time()
        print("harness: microbenchmarks (sample cost, dump and memory, a trivial program's peak RSS)", flush=True)
        micro_cost = micro_sample_cost(a, cg_micro)
        scale_rows = micro_prof_scale(a)
        trivial = micro_trivial_rss(a, 5 if a.quick else 21)
        timings["micro"] = time.time() - t

    doc = build_report(a, configs, workloads, cg, tm, samples, micro_cost, scale_rows, meta, timings, trivial)
    write_results(doc, a)
    print("harness: wrote %s and %s" % (os.path.join(a.out, "results.json"), os.path.join(a.out, "results.md")))


if __name__ == "__main__":
    main()
