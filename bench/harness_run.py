"""harness_run.py - running the measured programs for bench/harness.py: one process (timed through
bench/runone.c, or under callgrind), and the phases callgrind, timing and samples over every workload and
configuration."""
import concurrent.futures
import hashlib
import os
import random
import re
import statistics
import subprocess
import time

from harness_accept import SINGLE_THREADED
from harness_setup import ANNOTATED, UNWINDERS, env_of


def spawn(argv, env, out_path):
    """Runs argv; returns (exit code, wall ns, cpu s, maxrss KiB)."""
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
          (os.POSIX_SPAWN_DUP2, 1, 2)]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=fa)
    _, status, ru = os.wait4(pid, 0)
    t1 = time.perf_counter_ns()
    return os.waitstatus_to_exitcode(status), t1 - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


# Resident KiB by mapping class, as bench/stats_report.c classifies them: the profiler's slot window (64-bit:
# from 4 GiB, below 1 TiB), mimalloc's segments (anonymous, from 2 TiB, below 0x7f0000000000), other anonymous
# memory (the profiler's tables, thread stacks, the loader's), the library itself, the unwinders' libraries,
# the libraries it loads when first needed, and every other file.
RSS_CLASSES = ["window", "mimalloc", "anon", "ours", "unwinders", "lazy", "files"]


def rss_classes(smaps_text):
    out = dict.fromkeys(RSS_CLASSES, 0)
    cls = "anon"
    for line in smaps_text.splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            path = head[5] if len(head) > 5 else ""
            if not path.startswith("/"):
                cls = ("window" if lo >= 4 << 30 and hi <= 1 << 40 else
                       "mimalloc" if 2 << 40 <= lo < 0x7f0000000000 else "anon")
            else:
                base = os.path.basename(path)
                cls = ("ours" if base.startswith("libmimalloc-prof") else
                       "unwinders" if base.startswith(("libunwind", "liblzma", "libgcc_s")) else
                       "lazy" if base.startswith(("libm.so", "libz.so", "libprotobuf-c")) else "files")
        elif line.startswith("Rss:"):
            out[cls] += int(line.split()[1])
    return out


def spawn_polled(argv, env, out_path, every_s=0.002):
    """Runs argv like spawn(), reading its /proc/PID/smaps every `every_s` seconds; returns (exit code, the
    resident KiB by class at the largest total seen, that total)."""
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
          (os.POSIX_SPAWN_DUP2, 1, 2)]
    pid = os.posix_spawn(argv[0], argv, env, file_actions=fa)
    best, best_total = None, -1
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), best, best_total
        try:
            with open("/proc/%d/smaps" % pid) as fh:
                c = rss_classes(fh.read())
        except OSError:
            c = None
        if c and sum(c.values()) > best_total:
            best, best_total = c, sum(c.values())
        time.sleep(every_s)


def spawn_timed(a, argv, env, out_path):
    """Runs argv through bench/runone.c with bench/hwm_probe.c preloaded last; returns (exit code, wall ns,
    cpu s, peak RSS KiB, minor faults, ru_maxrss KiB).  The peak RSS is VmHWM at exit: ru_maxrss comes from
    the kernel's approximate per-CPU counters (hundreds of KiB off here, see bench/README.md)."""
    res, hwm = out_path + ".res", out_path + ".hwm"
    if os.path.exists(hwm):
        os.unlink(hwm)
    env = dict(env, HWM_PROBE_OUT=hwm,
               LD_PRELOAD=" ".join(x for x in (env.get("LD_PRELOAD"), a.bin + "/hwm_probe.so") if x))
    code = spawn([a.bin + "/runone", res] + argv, env, out_path)[0]
    kv = parse_kv(last_line(res)) if code == 0 else {}
    if "exit" not in kv:
        return 255, None, None, None, None, None
    mine = [x for x in map(parse_kv, read_lines(hwm)) if x.get("pid") == kv.get("pid")]
    peak = int(mine[-1]["hwm_kib"]) if mine and "hwm_kib" in mine[-1] else None
    return (int(kv["exit"]), int(kv["wall_ns"]), int(kv["cpu_ns"]) / 1e9, peak, int(kv["minflt"]),
            int(kv["maxrss_kib"]))


def read_lines(path):
    try:
        with open(path, errors="replace") as fh:
            return [x.strip() for x in fh if x.strip()]
    except OSError:
        return []


def last_line(path):
    lines = read_lines(path)
    return lines[-1] if lines else ""


def annotate(profile):
    """Self instructions per (object, function) of a callgrind profile, via callgrind_annotate."""
    txt = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", profile],
                         capture_output=True, text=True).stdout
    costs, obj = {}, "?"
    for line in txt.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*?)(?: \[(.*)\])?$", line)
        if not m or m.group(2) == "PROGRAM TOTALS":
            continue
        if m.group(3):
            obj = os.path.basename(m.group(3))
        fn = m.group(2)
        fn = fn.split(":", 1)[1] if ":" in fn and not fn.startswith("0x") else fn
        key = obj + "\t" + fn
        costs[key] = costs.get(key, 0) + int(m.group(1).replace(",", ""))
    return costs


def callgrind(argv, env, tag, raw, extra=(), keep=False):
    """Instructions of one whole run under callgrind (or of its toggled part with --collect-atstart=no);
    with keep, also its self instructions per function."""
    log, out, prof = (os.path.join(raw, tag + x) for x in (".vg.log", ".out", ".cg"))
    cmd = ["/usr/bin/valgrind", "--tool=callgrind", "--callgrind-out-file=" + (prof if keep else "/dev/null"),
           "--log-file=" + log] + list(extra) + argv
    code, wall, _, _ = spawn(cmd, env, out)
    n = None
    try:
        with open(log) as fh:
            m = re.search(r"Collected : (\d+)", fh.read())
            n = int(m.group(1)) if m else None
    except OSError:
        pass
    try:
        with open(out, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    except OSError:
        digest = None
    r = dict(instructions=n, exit=code, seconds=wall / 1e9, output=last_line(out), digest=digest)
    if keep and os.path.exists(prof):
        r["functions"] = annotate(prof)
        os.unlink(prof)
    return r


def phase_callgrind(a, configs, workloads, micro_jobs):
    jobs = []
    for w in workloads:
        for c in configs:
            jobs.append(("wl", w, c))
    jobs += micro_jobs
    results, micro = {}, {}
    t0 = time.time()
    done = 0

    def run(job):
        if job[0] == "wl":
            _, w, c = job
            return job, callgrind(w["cg"], env_of(c), "cg.%s.%s" % (w["name"], c["name"]), a.raw,
                                  keep=c["name"] in ANNOTATED)
        _, key, argv, env, extra = job
        return job, callgrind(argv, env, "cg.micro.%s" % key, a.raw, extra)

    # Longest first: the slow allocators' real programs would otherwise finish last, alone.
    order = sorted(jobs, key=lambda j: 0 if j[0] == "wl" and j[1]["kind"] == "real" else 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for job, r in pool.map(run, order):
            done += 1
            if job[0] == "wl":
                results.setdefault(job[1]["name"], {})[job[2]["name"]] = r
                if r["instructions"] is None or r["exit"] != 0:
                    print("  callgrind: %s under %s failed (exit %s), see %s" % (job[1]["name"], job[2]["name"], r["exit"], a.raw))
            else:
                micro[job[1]] = r
            if done % 10 == 0 or done == len(order):
                print("  callgrind: %d/%d runs, %.0f s" % (done, len(order), time.time() - t0), flush=True)
    return results, micro


# The configurations the memory criteria compare, and their references: the memory rounds run only these,
# on the threaded workloads, whose peaks move by megabytes from run to run (the single-threaded ones' A/A
# differences are a few pages: their timed rounds suffice).  `aa` (ours stopped, again) is the null: what
# the median of the paired differences reads when nothing differs, with as many pairs as fp and table;
# `armed` (a session, no sample) tells the cost of running from the cost of samples.
MEMORY_CONFIGS = ["mimalloc", "stopped", "aa", "armed", "fp", "table", "jemalloc", "jemalloc-prof",
                  "tcmalloc", "tcmalloc-sample"]
# A workload whose paired differences (fp or table less stopped) over the memory rounds have a standard
# deviation above this gets memory rounds up to a.noisy_mem_rounds in all: bench/mstress_like's is 3-4.5 MiB,
# so 42 pairs put its median within about +-0.5 MiB, 150 within about +-0.3.  The rule looks at the spread
# only, never at the difference itself.
NOISY_SD_KIB = 1024


def paired_sd(xs, ys):
    d = [x - y for x, y in zip(xs, ys) if x is not None and y is not None]
    return statistics.stdev(d) if len(d) > 2 else 0.0


def phase_timing(a, configs, workloads):
    """a.rounds timed rounds of every workload under every timed configuration, then a.mem_rounds more
    rounds of the threaded workloads under MEMORY_CONFIGS only (peak RSS; their times are not kept), each
    round's order seeded."""
    configs = [c for c in configs if c["timed"]]
    rng = random.Random(20240601)
    res = {w["name"]: {c["name"]: dict(wall=[], cpu=[], rss=[], maxrss=[], minflt=[], mem=[], fail=0)
                       for c in configs} for w in workloads}
    scratch = os.path.join(a.raw, "time.out")
    for w in workloads:                                   # warm the page cache and the binaries
        spawn_timed(a, w["time"], env_of(configs[0]), scratch)

    def run(w, c):
        code, wall, cpu, peak, flt, maxrss = spawn_timed(a, w["time"], env_of(c), scratch)
        if code != 0:
            res[w["name"]][c["name"]]["fail"] += 1
            print("  timing: %s under %s exited %d: %s" % (w["name"], c["name"], code, last_line(scratch)))
            return None, None, None, None, None
        return wall / 1e6, cpu * 1e3, peak, flt, maxrss

    t0 = time.time()
    for r in range(a.rounds):
        for w in workloads:
            order = list(configs)
            rng.shuffle(order)
            for c in order:
                cell = res[w["name"]][c["name"]]
                for k, v in zip(("wall", "cpu", "rss", "minflt", "maxrss"), run(w, c)):
                    cell[k].append(v)
        print("  timing: round %d/%d, %.0f s" % (r + 1, a.rounds, time.time() - t0), flush=True)
    mem = [c for c in configs if c["name"] in MEMORY_CONFIGS]
    threaded = [x for x in workloads if x["kind"] == "C" and x["name"] not in SINGLE_THREADED]

    def mem_round(ws):
        for w in ws:
            order = list(mem)
            rng.shuffle(order)
            for c in order:
                res[w["name"]][c["name"]]["mem"].append(run(w, c)[2])

    for r in range(a.mem_rounds if len(mem) == len(MEMORY_CONFIGS) else 0):
        mem_round(threaded)
        print("  memory: round %d/%d, %.0f s" % (r + 1, a.mem_rounds, time.time() - t0), flush=True)
    noisy = [w for w in threaded if a.mem_rounds and len(mem) == len(MEMORY_CONFIGS) and
             max(paired_sd(res[w["name"]][c]["mem"], res[w["name"]]["stopped"]["mem"])
                 for c in ("fp", "table")) > NOISY_SD_KIB]
    for r in range(a.mem_rounds, a.noisy_mem_rounds if noisy else 0):
        mem_round(noisy)
        print("  memory: round %d/%d of %s, %.0f s" % (
            r + 1, a.noisy_mem_rounds, " ".join(w["name"] for w in noisy), time.time() - t0), flush=True)
    return res


def noisy_workloads(tm, mem_rounds):
    """The workloads phase_timing gave more than mem_rounds memory rounds (NOISY_SD_KIB), with how many."""
    return {w: len(tm[w]["stopped"]["mem"]) for w in (tm or {})
            if "stopped" in tm[w] and len(tm[w]["stopped"]["mem"]) > mem_rounds}


def parse_kv(line):
    return {k: v for k, v in (x.split("=", 1) for x in line.split() if "=" in x)}


STATS_INT = ["samples", "live_samples", "dropped", "peak_live", "peak_live_bytes", "profiler_bytes", "arena_bytes",
             "arena_resident_bytes", "sampled_bytes", "hwm_kib", "rss_kib", "threads", "single_threaded", "rss_arena_kib", "rss_mi_kib",
             "rss_anon_kib", "rss_unw_kib", "rss_gcc_kib", "rss_lazy_kib", "rss_prof_kib", "rss_file_kib"]


# A noisy workload's peak composition (phase_samples) is the median, class by class, of this many polled runs
# of each configuration, in interleaved rounds: one run's mimalloc class moves by megabytes (mstress_like),
# while the profiler's own classes (window, anon, files) move by a few pages.
NOISY_PEAK_RUNS = 15


def peak_rounds(a, configs, w, runs):
    """`runs` interleaved polled runs of workload w (its timed size) under each of configs; per configuration
    the median of each class of the composition at the peak, or None when no run succeeded."""
    got = {c["name"]: [] for c in configs}
    rng = random.Random(20261203)
    scratch = os.path.join(a.raw, "peak.out")
    for _ in range(runs):
        order = list(configs)
        rng.shuffle(order)
        for c in order:
            code, peak, _ = spawn_polled(w["time"], env_of(c), scratch)
            if code == 0 and peak:
                got[c["name"]].append(peak)
    return {n: {k: int(statistics.median(p[k] for p in ps)) for k in ps[0]} if ps else None
            for n, ps in got.items()}


def phase_samples(a, configs, workloads, noisy=()):
    """Samples, stack depths (bench/unwind_report.c) and memory (bench/stats_report.c) of each sampling
    configuration, and the memory of `stopped`: a separate, untimed run each, at both sizes.  The
    workloads named in `noisy` get their peak composition from NOISY_PEAK_RUNS runs (peak_rounds)."""
    out = {}
    byname = {c["name"]: c for c in configs}
    for w in workloads:
        for u in UNWINDERS + ["stopped"]:
            if u not in byname:
                continue
            for which in ("cg", "time"):
                if which == "time" and w["time"] == w["cg"]:
                    out[w["name"]][u]["time"] = out[w["name"]][u]["cg"]
                    continue
                rep = os.path.join(a.raw, "samples.%s.%s.%s" % (w["name"], u, which))
                mem = rep + ".stats"
                for f in (rep, mem):
                    if os.path.exists(f):
                        os.unlink(f)
                e = env_of(byname[u], [a.bin + "/unwind_report.so", a.bin + "/stats_report.so"])
                e.update(UNWIND_REPORT_OUT=rep, STATS_REPORT_OUT=mem, MIMALLOC_PROF_ACCUM="1")
                code, peak, _ = spawn_polled(w[which], e, os.path.join(a.raw, "samples.out"))
                kv = parse_kv(last_line(rep)) if code == 0 else {}
                mv = parse_kv(last_line(mem)) if code == 0 else {}
                out.setdefault(w["name"], {}).setdefault(u, {})[which] = dict(
                    samples=int(kv.get("samples", 0)), stacks=int(kv.get("stacks", 0)),
                    depth_median=int(kv.get("med_sample", 0)), depth_max=int(kv.get("max", 0)),
                    dropped=int(kv.get("dropped", 0)), exit=code,
                    memory={k: int(mv[k]) for k in STATS_INT if k in mv}, peak_rss=peak, peak_runs=1)
        if w["name"] in noisy:
            cs = [byname[u] for u in UNWINDERS + ["stopped"] if u in byname]
            for u, peak in peak_rounds(a, cs, w, NOISY_PEAK_RUNS).items():
                out[w["name"]][u]["time"].update(peak_rss=peak, peak_runs=NOISY_PEAK_RUNS)
    return out
