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
                to wait4; CPU = user + sys, peak RSS = ru_maxrss and minor faults, all from wait4.  A
                ratio is the median over rounds of the per-round ratio to the reference
                configuration; its interval is the distribution-free
                (sign-test / order-statistic) interval for that median at >= 95% where the number of
                rounds allows it (n >= 6), otherwise [min, max] with the coverage it has.
  samples       one extra run per (workload, unwinder) with bench/unwind_report.c preloaded after the
                library: samples taken and stack depths (not timed).
  micro         bench/sample_cost.c (cost per sample by unwinder and depth: CPU and wall time, and
                instructions under callgrind), bench/prof_scale.c (dump time against live samples and
                stacks, profiler memory against live samples).

Only the Python standard library; the timed work all runs in native processes.
"""
import argparse
import concurrent.futures
import datetime
import glob
import hashlib
import json
import math
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

RATE = 524288                       # bytes: MIMALLOC_PROF_SAMPLE_RATE, lg_prof_sample:19, TCMALLOC_SAMPLE_PARAMETER
UNWINDERS = ["fp", "libunwind", "libgcc"]
REAL = ["python3", "sqlite3", "perl"]


def die(msg):
    print("harness: " + msg, file=sys.stderr)
    sys.exit(1)


def system_lib(name):
    # The native architecture's copy first: cross-testing installs other architectures' beside it.
    native = subprocess.run(["cc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    hits = sorted(glob.glob("/usr/lib/%s/%s" % (native, name))) + sorted(glob.glob("/usr/lib/" + name))
    if not hits:
        die("%s not found (run bench/run.sh, which installs it)" % name)
    return hits[0]


# ---------------------------------------------------------------------------------------------------
# Configurations and workloads
# ---------------------------------------------------------------------------------------------------

def make_configs(a):
    mi, je, tc = system_lib("libmimalloc.so.2"), system_lib("libjemalloc.so.2"), system_lib("libtcmalloc.so.4")
    ours = {"MIMALLOC_PROF_SAMPLE_RATE": str(RATE), "MIMALLOC_PROF_SEED": "1"}
    c = [
        dict(name="glibc", label="glibc malloc", preload=[], env={}, ref=None),
        dict(name="mimalloc", label="plain mimalloc", preload=[mi], env={}, ref="glibc"),
        dict(name="stopped", label="ours, stopped", preload=[a.lib], env=dict(ours), ref="mimalloc"),
        dict(name="aa", label="ours, stopped again (A/A control)", preload=[a.lib], env=dict(ours), ref="stopped"),
    ]
    c.append(dict(name="armed", label="ours, started at rate 2^40: no sample, start-up and re-check cost only",
                  preload=[a.lib], env=dict(ours, MIMALLOC_PROF="1", MIMALLOC_PROF_SAMPLE_RATE="1t",
                                            MIMALLOC_PROF_UNWIND="fp"), ref="stopped"))
    for u in UNWINDERS:
        c.append(dict(name=u, label="ours, sampling, %s" % u, preload=[a.lib],
                      env=dict(ours, MIMALLOC_PROF="1", MIMALLOC_PROF_UNWIND=u), ref="stopped"))
    c += [
        dict(name="plant", label="planted control: ours stopped + %d nops/call (%s)" % (a.plant, a.plant_method),
             preload=a.plant_preload.split(), env=dict(ours), ref="stopped"),
        dict(name="jemalloc", label="jemalloc", preload=[je], env={}, ref="glibc"),
        dict(name="jemalloc-prof", label="jemalloc prof:true,lg_prof_sample:19", preload=[je],
             env={"MALLOC_CONF": "prof:true,lg_prof_sample:19"}, ref="jemalloc"),
        dict(name="tcmalloc", label="tcmalloc", preload=[tc], env={}, ref="glibc"),
        dict(name="tcmalloc-sample", label="tcmalloc TCMALLOC_SAMPLE_PARAMETER=%d" % RATE, preload=[tc],
             env={"TCMALLOC_SAMPLE_PARAMETER": str(RATE)}, ref="tcmalloc"),
    ]
    for x in c:
        x.setdefault("timed", True)
    return c


ANNOTATED = ["mimalloc", "stopped", "armed"] + UNWINDERS


def make_workloads(a):
    b, top, s = a.bin, a.top, a.scale

    def n(x):
        return str(max(1, int(x * s)))

    def f(x):
        return "%g" % (x * s)

    w = [
        dict(name="malloc_loop", kind="C", desc="single-thread small-object churn: malloc/free 16..256 B, window of 1024 live",
             cg=[b + "/malloc_loop", n(2000000)], time=[b + "/malloc_loop", n(20000000)]),
        dict(name="mixed_live", kind="C", desc="mixed sizes 16 B..256 KiB with a live set of 32768 blocks (~60 MiB)",
             cg=[b + "/mixed_live", n(1000000)], time=[b + "/mixed_live", n(3000000)]),
        dict(name="xthread", kind="C", desc="producer/consumer, 2+2 threads: every block freed by another thread",
             cg=[b + "/xthread", n(1000000)], time=[b + "/xthread", n(3000000)]),
        dict(name="realloc_heavy", kind="C", desc="512 string builders growing by realloc 1..64 B at a time up to 8 KiB",
             cg=[b + "/realloc_heavy", n(1000000)], time=[b + "/realloc_heavy", n(4000000)]),
        dict(name="aligned", kind="C", desc="posix_memalign/aligned_alloc/memalign, alignment 16..4096, 16..8192 B",
             cg=[b + "/aligned", n(500000)], time=[b + "/aligned", n(2000000)]),
        dict(name="thread_churn", kind="C", desc="threads created 4 at a time, 2000 malloc/free each, half freed by main",
             cg=[b + "/thread_churn", n(400)], time=[b + "/thread_churn", n(2000)]),
        dict(name="stdio_lines", kind="C", desc="single-threaded: getc() through a text file, strndup() of each line, window of 4096 lines",
             cg=[b + "/stdio_lines", b + "/lines.txt", n(100000)], time=[b + "/stdio_lines", b + "/lines.txt", n(1000000)]),
        dict(name="thread_short", kind="C", desc="many short-lived threads: 8 at a time, 96 mallocs of 16..2048 B each",
             cg=[b + "/thread_short", n(500)], time=[b + "/thread_short", n(3000)]),
        dict(name="rptest_like", kind="C", desc="rptest's shape: 4 threads, 2048-block working sets, 16 B..16 KiB (octaves equally often), batches handed to the next thread",
             cg=[b + "/rptest_like", n(1000000)], time=[b + "/rptest_like", n(8000000)]),
        dict(name="mstress_like", kind="C", desc="mstress's shape: rounds of 8 fresh threads, 16-256 B + 1% to 64 KiB + 0.01% to 4 MiB, blocks swapped through a shared array",
             cg=[b + "/mstress_like", n(4)], time=[b + "/mstress_like", n(30)]),
        dict(name="xmalloc_like", kind="C", desc="xmalloc-test's shape: 2 producers pass single 8..256 B blocks through lock-free rings to 2 consumers",
             cg=[b + "/xmalloc_like", n(500000)], time=[b + "/xmalloc_like", n(4000000)]),
        dict(name="python3", kind="real", desc="Debian python3 (PYTHONMALLOC=malloc) on bench/py_workload.py",
             cg=[a.python, top + "/bench/py_workload.py", f(0.5)]),
        dict(name="sqlite3", kind="real", desc="Debian sqlite3 shell on bench/sqlite_workload.sql, in memory",
             cg=["/usr/bin/sqlite3", "-batch", "-cmd", ".parameter set @n " + n(15000), ":memory:",
                 ".read " + top + "/bench/sqlite_workload.sql"]),
        dict(name="perl", kind="real", desc="Debian perl on bench/pl_workload.pl",
             cg=["/usr/bin/perl", top + "/bench/pl_workload.pl", f(0.35)]),
    ]
    for x in w:
        x.setdefault("time", x["cg"])
    if a.workloads:
        want = a.workloads.split()
        unknown = [x for x in want if x not in [y["name"] for y in w]]
        if unknown:
            die("unknown workload(s): " + " ".join(unknown))
        w = [x for x in w if x["name"] in want]
    return w


BASE_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1", "PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"}


def env_of(cfg, extra_preload=None):
    e = dict(BASE_ENV)
    e["HOME"] = os.environ.get("HOME", "/tmp")
    e.update(cfg["env"])
    pre = list(cfg["preload"]) + (extra_preload or [])
    if pre:
        e["LD_PRELOAD"] = " ".join(pre)
    return e


def env_words(cfg):
    """The configuration's variables, for the commands in the report."""
    e = dict(cfg["env"])
    if cfg["preload"]:
        e["LD_PRELOAD"] = " ".join(cfg["preload"])
    return " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(e.items()))


# ---------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------

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


def spawn_timed(a, argv, env, out_path):
    """Runs argv through bench/runone.c; returns (exit code, wall ns, cpu s, maxrss KiB, minor faults)."""
    res = out_path + ".res"
    code = spawn([a.bin + "/runone", res] + argv, env, out_path)[0]
    kv = parse_kv(last_line(res)) if code == 0 else {}
    if "exit" not in kv:
        return 255, None, None, None, None
    return int(kv["exit"]), int(kv["wall_ns"]), int(kv["cpu_ns"]) / 1e9, int(kv["maxrss_kib"]), int(kv["minflt"])


def last_line(path):
    try:
        with open(path, errors="replace") as fh:
            lines = [x.strip() for x in fh if x.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


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


def phase_timing(a, configs, workloads):
    configs = [c for c in configs if c["timed"]]
    rng = random.Random(20240601)
    res = {w["name"]: {c["name"]: dict(wall=[], cpu=[], rss=[], minflt=[], fail=0) for c in configs} for w in workloads}
    scratch = os.path.join(a.raw, "time.out")
    for w in workloads:                                   # warm the page cache and the binaries
        spawn_timed(a, w["time"], env_of(configs[0]), scratch)
    t0 = time.time()
    for r in range(a.rounds):
        for w in workloads:
            order = list(configs)
            rng.shuffle(order)
            for c in order:
                code, wall, cpu, rss, flt = spawn_timed(a, w["time"], env_of(c), scratch)
                cell = res[w["name"]][c["name"]]
                if code != 0:
                    cell["fail"] += 1
                    print("  timing: %s under %s exited %d: %s" % (w["name"], c["name"], code, last_line(scratch)))
                    wall = cpu = rss = flt = None
                cell["wall"].append(wall / 1e6 if wall is not None else None)
                cell["cpu"].append(cpu * 1e3 if cpu is not None else None)
                cell["rss"].append(rss)
                cell["minflt"].append(flt)
        print("  timing: round %d/%d, %.0f s" % (r + 1, a.rounds, time.time() - t0), flush=True)
    return res


def parse_kv(line):
    return {k: v for k, v in (x.split("=", 1) for x in line.split() if "=" in x)}


STATS_INT = ["samples", "live_samples", "dropped", "peak_live", "peak_live_bytes", "profiler_bytes", "arena_bytes",
             "arena_resident_bytes", "sampled_bytes", "hwm_kib", "rss_kib", "threads", "single_threaded", "rss_arena_kib", "rss_mi_kib",
             "rss_anon_kib", "rss_unw_kib", "rss_gcc_kib", "rss_prof_kib", "rss_file_kib"]


def phase_samples(a, configs, workloads):
    """Samples, stack depths (bench/unwind_report.c) and memory (bench/stats_report.c) of each sampling
    configuration, and the memory of `stopped`: a separate, untimed run each, at both sizes."""
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
                code = spawn(w[which], e, os.path.join(a.raw, "samples.out"))[0]
                kv = parse_kv(last_line(rep)) if code == 0 else {}
                mv = parse_kv(last_line(mem)) if code == 0 else {}
                out.setdefault(w["name"], {}).setdefault(u, {})[which] = dict(
                    samples=int(kv.get("samples", 0)), stacks=int(kv.get("stacks", 0)),
                    depth_median=int(kv.get("med_sample", 0)), depth_max=int(kv.get("max", 0)),
                    dropped=int(kv.get("dropped", 0)), exit=code,
                    memory={k: int(mv[k]) for k in STATS_INT if k in mv})
    return out


# ---------------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------------

def sign_interval(xs, conf=0.95):
    """Order-statistic interval for the median of xs: the narrowest [x(k), x(n+1-k)] whose coverage
    (from Binomial(n, 1/2)) is >= conf; [min, max] when even that is below conf.  Returns lo, hi, coverage."""
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None, None, 0.0
    best_k, best_cov = 1, 1 - 2 * 0.5 ** n if n > 1 else 0.0
    for k in range(1, n // 2 + 1):
        cov = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if cov >= conf:
            best_k, best_cov = k, cov
        else:
            break
    return xs[best_k - 1], xs[n - best_k], best_cov


def ratio_stats(num, den):
    pairs = [(x, y) for x, y in zip(num, den) if x is not None and y is not None and y > 0]
    if not pairs:
        return None
    rs = [x / y for x, y in pairs]
    lo, hi, cov = sign_interval(rs)
    return dict(median=statistics.median(rs), lo=lo, hi=hi, coverage=cov, n=len(rs),
                verdict="slower" if lo > 1 else "faster" if hi < 1 else "same")


def diff_stats(num, den):
    """Per-round differences num - den (paired rounds): median, its order-statistic interval, mean."""
    ds = [x - y for x, y in zip(num, den) if x is not None and y is not None]
    if not ds:
        return None
    lo, hi, cov = sign_interval(ds)
    return dict(median=statistics.median(ds), lo=lo, hi=hi, coverage=cov, n=len(ds), mean=statistics.mean(ds))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------------------------------------------
# Microbenchmarks
# ---------------------------------------------------------------------------------------------------

def micro_callgrind_jobs(a):
    jobs = []
    for u in UNWINDERS:
        for d in a.depths:
            for mode in ("on", "off"):
                env = dict(BASE_ENV, MIMALLOC_PROF_UNWIND=u)
                jobs.append(("micro", "%s.%d.%s" % (u, d, mode),
                             [a.bin + "/sample_cost", "callgrind", mode, str(a.cg_samples), str(d)], env,
                             ["--collect-atstart=no"]))
    return jobs


def micro_sample_cost(a, cg):
    rows = []
    for u in UNWINDERS:
        env = dict(BASE_ENV, MIMALLOC_PROF_UNWIND=u)
        out = os.path.join(a.raw, "sample_cost.%s.out" % u)
        code = spawn([a.bin + "/sample_cost", "time", str(a.pairs), str(a.batch_ms)] + [str(d) for d in a.depths], env, out)[0]
        if code != 0:
            print("  sample_cost %s failed: %s" % (u, last_line(out)))
            continue
        per = {}
        with open(out) as fh:
            for line in fh:
                if line.startswith("pair "):
                    kv = parse_kv(line)
                    per.setdefault(int(kv["depth"]), []).append(kv)
        for d in a.depths:
            ps = per.get(d, [])
            if not ps:
                continue
            cpu = [(int(p["cpu_on"]) - int(p["cpu_off"])) / int(p["samples"]) for p in ps]
            wall = [(int(p["wall_on"]) - int(p["wall_off"])) / int(p["samples"]) for p in ps]
            clo, chi, ccov = sign_interval(cpu)
            wlo, whi, _ = sign_interval(wall)
            on, off = cg.get("%s.%d.on" % (u, d)), cg.get("%s.%d.off" % (u, d))
            ins = None
            if on and off and on["instructions"] and off["instructions"]:
                smp = int(parse_kv(on["output"]).get("samples", 0))
                ins = (on["instructions"] - off["instructions"]) / smp if smp else None
            rows.append(dict(unwinder=u, depth=d, frames=int(ps[0]["frames"]), n=int(ps[0]["n"]), pairs=len(ps),
                             cpu_ns=statistics.median(cpu), cpu_lo=clo, cpu_hi=chi, coverage=ccov,
                             wall_ns=statistics.median(wall), wall_lo=wlo, wall_hi=whi, instructions=ins))
    return rows


def micro_prof_scale(a):
    env = dict(BASE_ENV, MIMALLOC_PROF_UNWIND="fp")
    out = os.path.join(a.raw, "prof_scale.out")
    code = spawn([a.bin + "/prof_scale", str(a.dump_reps)] + a.cells, env, out)[0]
    rows = []
    if code != 0:
        print("  prof_scale failed: %s" % last_line(out))
        return rows
    with open(out) as fh:
        for line in fh:
            if not line.startswith("cell "):
                continue
            kv = parse_kv(line)
            dump = [int(x) for x in kv["dump_ns"].split(",")]
            visit = [int(x) for x in kv["visit_ns"].split(",")]
            live = int(kv["live_samples"])
            pb = int(kv["prof_bytes"]) - int(kv["base_bytes"])
            rows.append(dict(live=int(kv["live"]), stacks=int(kv["stacks"]), live_samples=live,
                             stacks_seen=int(kv["stacks_seen"]), profiler_bytes=pb,
                             bytes_per_sample=pb / live if live else None,
                             dump_ms=statistics.median(dump) / 1e6, dump_ms_min=min(dump) / 1e6,
                             visit_ms=statistics.median(visit) / 1e6, dump_bytes=int(kv["dump_bytes"])))
    return rows


# ---------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:                                    # noqa: BLE001 - metadata only
        return ""


def machine_meta(a):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = sh("awk '/MemTotal/ { printf \"%.1f GiB\", $2 / 1048576 }' /proc/meminfo")
    pk = {}
    for p in ["libmimalloc2.0", "libjemalloc2", "libgoogle-perftools4", "python3.11", "sqlite3", "perl-base",
              "valgrind", "gcc-12", "libc6", "libunwind8"]:
        v = sh("dpkg-query -W -f='${Version}\\n' %s 2>/dev/null | head -n 1" % p)   # one line: multiarch copies repeat it
        if v:
            pk[p] = v
    return dict(
        cpu=cpu, cores=os.cpu_count(), memory=mem, kernel=platform.release(),
        debian=sh("cat /etc/debian_version"), virtualization=sh("systemd-detect-virt 2>/dev/null") or "unknown",
        governor=sh("cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null") or "n/a",
        gcc=sh("gcc --version | head -n 1"), packages=pk,
        commit=sh("git -C %s rev-parse --short HEAD 2>/dev/null" % shlex.quote(a.top)),
        dirty=bool(sh("git -C %s status --porcelain -- lib include configure.ac Makefile.am 2>/dev/null" % shlex.quote(a.top))),
        library=a.lib, libunwind=a.have_libunwind)


def fmt_ratio(r, digits=3, bold_over=None):
    if r is None:
        return "-"
    s = "%.*f" % (digits, r)
    return "**%s**" % s if bold_over is not None and r > bold_over else s


def fmt_ci(st, digits=3):
    if st is None:
        return "-"
    mark = {"slower": "+", "faster": "-", "same": ""}[st["verdict"]]
    return "%.*f [%.*f, %.*f]%s" % (digits, st["median"], digits, st["lo"], digits, st["hi"], mark)


SINGLE_THREADED = ["malloc_loop", "mixed_live", "realloc_heavy", "aligned", "stdio_lines"]  # C workloads with one thread
# The profiler's own code: what sampling runs besides the program, mimalloc and libc (whose counts in a
# multi-threaded program under valgrind move with the thread interleaving, see the A/A control).
OWN_OBJECTS = ("libmimalloc-prof", "libunwind", "liblzma", "libgcc_s", "ld-linux", "libm.so")
RSS_FIXED_KIB = 1536        # issue 13: extra peak RSS <= 1.5 MiB + 1 KiB per live sample
RSS_PER_SAMPLE_KIB = 1
INSTR_GEOMEAN_C = 1.0015    # sampling / stopped instructions, geometric mean over the C workloads
INSTR_STDIO = 1.002         # ... and on the single-threaded stdio workload
WALL_MAX = 1.15             # sampling / stopped wall time, every workload
STDIO = "stdio_lines"
SAMPLING = ["fp", "libunwind"]   # the acceptance's "sampling": the default unwinder (auto = libunwind) and fp


def geomean(rs):
    return math.exp(statistics.mean(math.log(r) for r in rs)) if rs else None


def acceptance(wl, kinds, names, R, samples, breakdown):
    """Issue 13's acceptance criteria, per sampling configuration (fp and libunwind; libgcc for information)."""
    out = dict(rss=[], rss_mean={}, instr={}, wall=[], criteria=[])
    have = [u for u in UNWINDERS if u in names and "stopped" in names]
    for w in wl:
        for u in have:
            d = R[w][u].get("rss_delta")
            s = (samples.get(w, {}).get(u, {}).get("time") or {}).get("memory", {})
            live = s.get("peak_live")
            if d is None:
                continue
            limit = RSS_FIXED_KIB + RSS_PER_SAMPLE_KIB * (live or 0)
            out["rss"].append(dict(workload=w, config=u, median_kib=d["median"], lo_kib=d["lo"], hi_kib=d["hi"],
                                   mean_kib=d["mean"], peak_live=live, limit_kib=limit, met=d["median"] <= limit))
    for u in have + [c for c in ("jemalloc-prof", "tcmalloc-sample") if c in names]:
        ds = [R[w][u]["rss_delta"]["median"] for w in wl if R[w][u].get("rss_delta")]
        if ds:
            out["rss_mean"][u] = statistics.mean(ds)
    for u in have:
        cw = [w for w in wl if kinds[w] == "C" and R[w][u].get("instr_ratio")]
        rs = [R[w][u]["instr_ratio"] for w in cw]
        st = [R[w][u]["instr_ratio"] for w in cw if w in SINGLE_THREADED]
        own = {}
        for w in cw:
            d, ist = (breakdown.get(w) or {}).get(u), R[w]["stopped"].get("instructions")
            if d and ist:
                own[w] = 1 + sum(v for o, v in d["by_object"].items() if o.startswith(OWN_OBJECTS)) / ist
        out["instr"][u] = dict(geomean_c=geomean(rs), n=len(rs), geomean_st=geomean(st), n_st=len(st),
                               geomean_own=geomean(list(own.values())), own=own,
                               stdio=R[STDIO][u].get("instr_ratio") if STDIO in wl else None)
        for w in wl:
            st = R[w][u].get("wall_ratio")
            if st:
                out["wall"].append(dict(workload=w, config=u, median=st["median"], lo=st["lo"], hi=st["hi"],
                                        coverage=st["coverage"], met=st["median"] <= WALL_MAX))

    def crit(cid, text, u, value, limit, met, detail):
        out["criteria"].append(dict(id=cid, text=text, config=u, value=value, limit=limit, met=met, detail=detail))

    je = out["rss_mean"].get("jemalloc-prof")
    for u in have:
        rows = [r for r in out["rss"] if r["config"] == u]
        bad = [r for r in rows if not r["met"]]
        worst = max(rows, key=lambda r: r["median_kib"] - r["limit_kib"]) if rows else None
        crit("R1", "extra peak RSS over stopped <= 1.5 MiB + 1 KiB per live sample, every workload", u,
             "%d of %d workloads over" % (len(bad), len(rows)), "0", not bad if rows else None,
             "worst %s: %+.0f KiB (limit %d KiB)" % (worst["workload"], worst["median_kib"], worst["limit_kib"]) if worst else "")
        m = out["rss_mean"].get(u)
        crit("R2", "mean extra peak RSS <= jemalloc prof's (over jemalloc), same run", u,
             "%+.0f KiB" % m if m is not None else "-", "%+.0f KiB" % je if je is not None else "-",
             m <= je if m is not None and je is not None else None, "")
        g = out["instr"][u]
        crit("I1", "instructions sampling / stopped, geomean over the %d C workloads" % g["n"], u,
             "%.4f" % g["geomean_c"] if g["geomean_c"] else "-", "%.4f" % INSTR_GEOMEAN_C,
             g["geomean_c"] <= INSTR_GEOMEAN_C if g["geomean_c"] else None, "")
        crit("I1st", "  the same over the %d single-threaded C workloads (A/A: exact)" % g["n_st"], u,
             "%.4f" % g["geomean_st"] if g["geomean_st"] else "-", "%.4f" % INSTR_GEOMEAN_C,
             g["geomean_st"] <= INSTR_GEOMEAN_C if g["geomean_st"] else None, "")
        crit("I1own", "  the profiler's own instructions (%s) / stopped, geomean over the C workloads" % ", ".join(
            o.rstrip(".") for o in OWN_OBJECTS), u, "%.4f" % g["geomean_own"] if g["geomean_own"] else "-",
             "%.4f" % INSTR_GEOMEAN_C, g["geomean_own"] <= INSTR_GEOMEAN_C if g["geomean_own"] else None,
             "worst %s %.4f" % max(g["own"].items(), key=lambda kv: kv[1]) if g["own"] else "")
        crit("I2", "instructions sampling / stopped, %s" % STDIO, u, "%.4f" % g["stdio"] if g["stdio"] else "-",
             "%.4f" % INSTR_STDIO, g["stdio"] <= INSTR_STDIO if g["stdio"] else None, "")
        rows = [r for r in out["wall"] if r["config"] == u]
        bad = [r for r in rows if not r["met"]]
        worst = max(rows, key=lambda r: r["median"]) if rows else None
        crit("W1", "wall sampling / stopped <= %.2f, every workload (median of per-round ratios)" % WALL_MAX, u,
             "%d of %d workloads over" % (len(bad), len(rows)), "0", not bad if rows else None,
             "worst %s: %.3f [%.3f, %.3f]" % (worst["workload"], worst["median"], worst["lo"], worst["hi"]) if worst else "")
    return out


def build_report(a, configs, workloads, cg, tm, samples, micro_cost, scale_rows, meta, timings):
    cfg = {c["name"]: c for c in configs}
    names = [c["name"] for c in configs]
    wl = [w["name"] for w in workloads]
    R = {}          # R[w][c] = figures and ratios
    for w in wl:
        R[w] = {}
        for c in names:
            x = {}
            g = cg.get(w, {}).get(c)
            x["instructions"] = g["instructions"] if g else None
            x["output"] = g["output"] if g else None
            x["timed"] = cfg[c]["timed"]
            t = tm.get(w, {}).get(c) if tm else None
            if t:
                x["wall_ms"] = med(t["wall"])
                x["cpu_ms"] = med(t["cpu"])
                x["rss_kib"] = med(t["rss"])
                x["minflt"] = med(t["minflt"])
                x["rounds"] = dict(wall_ms=t["wall"], cpu_ms=t["cpu"], rss_kib=t["rss"], minflt=t["minflt"])
                x["failures"] = t["fail"]
            R[w][c] = x

    def iratio(w, c, ref):
        a_, b_ = R[w][c].get("instructions"), R[w][ref].get("instructions") if ref else None
        return a_ / b_ if a_ and b_ else None

    def tratio(w, c, ref, key):
        if not tm or ref is None or c not in tm[w] or ref not in tm[w]:
            return None
        return ratio_stats(tm[w][c][key], tm[w][ref][key])

    for w in wl:
        for c in names:
            ref = cfg[c]["ref"]
            x = R[w][c]
            x["ref"] = ref
            x["instr_ratio"] = iratio(w, c, ref) if ref else None
            x["wall_ratio"] = tratio(w, c, ref, "wall")
            x["cpu_ratio"] = tratio(w, c, ref, "cpu")
            x["rss_delta"] = diff_stats(tm[w][c]["rss"], tm[w][ref]["rss"]) if tm and ref and c in tm[w] and ref in tm[w] else None
            if c in UNWINDERS + ["stopped", "plant", "aa"] and "mimalloc" in names:
                x["instr_vs_mimalloc"] = iratio(w, c, "mimalloc")
                x["wall_vs_mimalloc"] = tratio(w, c, "mimalloc", "wall")

    # The programs must print the same under every allocator (the C workloads print address bits, which differ).
    same_output = {}
    for w in workloads:
        if w["kind"] == "real" or w["name"] == "xthread":
            ds = {c: cg.get(w["name"], {}).get(c, {}).get("digest") for c in names}
            ds = {c: d for c, d in ds.items() if d}
            if ds:
                common = max(set(ds.values()), key=list(ds.values()).count)
                same_output[w["name"]] = sorted(c for c, d in ds.items() if d != common)

    # Where the extra instructions go: self instructions per object and function (callgrind_annotate).
    breakdown = {}
    for w in wl:
        f = {c: cg.get(w, {}).get(c, {}).get("functions") for c in ANNOTATED}

        def delta(c, ref):
            if not f.get(c) or not f.get(ref):
                return None
            keys = set(f[c]) | set(f[ref])
            d = {k: f[c].get(k, 0) - f[ref].get(k, 0) for k in keys}
            objs = {}
            for k, v in d.items():
                o = k.split("\t")[0]
                objs[o] = objs.get(o, 0) + v
            top = sorted(((v, k) for k, v in d.items()), reverse=True)[:8]
            rs = sum(v for k, v in d.items() if k.endswith("\tmprof_realloc_slow"))
            copies = rs + sum(v for k, v in d.items() if k.startswith("libc.so") and re.search(r"mem(cpy|move)", k))
            return dict(total=sum(d.values()), realloc_slow=rs, copies=copies,
                        by_object=dict(sorted(objs.items(), key=lambda kv: -abs(kv[1]))),
                        top=[dict(object=k.split("\t")[0], function=k.split("\t")[1], delta=v) for v, k in top if v > 0])

        b = dict(stopped=delta("stopped", "mimalloc"))
        for c in ["armed"] + UNWINDERS:
            b[c] = delta(c, "stopped")
        # Our entry points in the stopped run: the fast paths (4 instructions per malloc, 3 per free).
        if f.get("stopped"):
            ent = {}
            for k, v in f["stopped"].items():
                o, fn = k.split("\t")
                if o.startswith("libmimalloc-prof") and fn in a.exported:
                    ent[fn] = ent.get(fn, 0) + v
            b["entry_points"] = dict(sorted(ent.items(), key=lambda kv: -kv[1]))
            b["calls_est"] = dict(malloc=ent.get("malloc", 0) // 4, free=ent.get("free", 0) // 3)
        breakdown[w] = b

    # A/A noise floor of instruction counts, per workload.
    aa = {w: abs(R[w]["aa"]["instructions"] / R[w]["stopped"]["instructions"] - 1)
          if R[w].get("aa", {}).get("instructions") and R[w].get("stopped", {}).get("instructions") else None
          for w in wl}

    # Targets.
    targets = []

    def target(tid, text, value, limit, where, note=None):
        targets.append(dict(id=tid, text=text, value=value, limit=limit, where=where, note=note,
                            met=None if value is None else value <= limit))

    def stopped_targets(c, prefix):
        if "malloc_loop" in wl:
            target(prefix + "1", "%s / plain mimalloc, instructions, malloc_loop" % c, R["malloc_loop"][c].get("instr_vs_mimalloc"), 1.08, "malloc_loop")
        for w in REAL:
            if w in wl:
                target(prefix + "2", "%s / plain mimalloc, instructions, %s" % (c, w), R[w][c].get("instr_vs_mimalloc"), 1.005, w)

    if "stopped" in names:
        stopped_targets("stopped", "T")
    for u in UNWINDERS:
        if u in names:
            for w in REAL:
                if w in wl:
                    note = None
                    bd = breakdown.get(w, {}).get(u)
                    ist = R[w]["stopped"].get("instructions")
                    if bd and ist and R[w][u].get("instructions") and bd["copies"] > 0.0005 * ist:
                        note = "%.4f without the extra memory copies (%+d instructions: mprof_realloc_slow %+d, libc memcpy/memmove %+d; valgrind counts a rep movsb per byte)" % (
                            (R[w][u]["instructions"] - bd["copies"]) / ist, bd["copies"], bd["realloc_slow"],
                            bd["copies"] - bd["realloc_slow"])
                    target("T3", "sampling (%s) / stopped, instructions, %s" % (u, w), R[w][u]["instr_ratio"], 1.01, w, note)
    for row in micro_cost:
        if row["unwinder"] == "fp" and row["depth"] == 32:
            target("T4", "cost per sample, fp, depth 32, CPU ns (median)", row["cpu_ns"], 500, "sample_cost")
    plant_targets = []
    if "plant" in names:
        before = len(targets)
        stopped_targets("plant", "P")
        plant_targets = targets[before:]
        del targets[before:]

    # The planted control: flagged when it misses the stopped targets, and when the paired comparison
    # with "stopped" sees it beyond the A/A noise floor.
    plant = None
    if "plant" in names and "stopped" in names:
        per = []
        for w in wl:
            ir = R[w]["plant"]["instr_ratio"]
            thr = max(3 * aa[w], 0.0005) if aa.get(w) is not None else 0.0005
            ws = R[w]["plant"]["wall_ratio"]
            cs = R[w]["plant"]["cpu_ratio"]
            per.append(dict(workload=w, instr_ratio=ir, threshold=1 + thr,
                            instr_detected=ir is not None and ir > 1 + thr,
                            wall=ws, cpu=cs,
                            wall_detected=bool(ws and ws["verdict"] == "slower"),
                            cpu_detected=bool(cs and cs["verdict"] == "slower")))
        missed = [t for t in plant_targets if t["met"] is False]
        instr_all = all(p["instr_detected"] for p in per)
        plant = dict(method=a.plant_method, nops=a.plant, preload=a.plant_preload, per_workload=per,
                     targets=plant_targets, targets_missed=len(missed), targets_total=len(plant_targets),
                     instr_detected=sum(p["instr_detected"] for p in per),
                     wall_detected=sum(p["wall_detected"] for p in per),
                     cpu_detected=sum(p["cpu_detected"] for p in per), workloads=len(per),
                     flagged=instr_all and len(missed) > 0)

    # A/A control: must not be flagged.
    aa_ctl = None
    if "aa" in names and tm:
        covs = [R[w]["aa"]["wall_ratio"]["coverage"] for w in wl if R[w]["aa"]["wall_ratio"]]
        aa_ctl = dict(coverage=min(covs) if covs else None, wall_slower_or_faster=sum(1 for w in wl if R[w]["aa"]["wall_ratio"] and R[w]["aa"]["wall_ratio"]["verdict"] != "same"),
                      cpu_slower_or_faster=sum(1 for w in wl if R[w]["aa"]["cpu_ratio"] and R[w]["aa"]["cpu_ratio"]["verdict"] != "same"),
                      workloads=len(wl), instr_noise=aa)

    accept = acceptance(wl, {w["name"]: w["kind"] for w in workloads}, names, R, samples, breakdown)

    doc = dict(
        meta=dict(machine=meta, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  command=a.command, quick=a.quick, rounds=a.rounds, cg_samples=a.cg_samples, jobs=a.jobs, scale=a.scale, rate=RATE,
                  plant=dict(method=a.plant_method, nops=a.plant, preload=a.plant_preload),
                  interval="median of per-round paired ratios; 95% distribution-free order-statistic (sign-test) "
                           "interval for that median (coverage given; [min, max] when fewer than 6 rounds)",
                  phases_seconds=timings, load_average=a.loadavg),
        configs=[dict(name=c["name"], label=c["label"], ref=c["ref"], env=env_words(c)) for c in configs],
        workloads=[dict(name=w["name"], kind=w["kind"], desc=w["desc"], callgrind_argv=w["cg"], timing_argv=w["time"]) for w in workloads],
        results=R, acceptance=accept, aa_instruction_noise=aa, breakdown=breakdown, output_differs=same_output, samples=samples, targets=targets, plant=plant, aa_control=aa_ctl,
        micro=dict(sample_cost=micro_cost, prof_scale=scale_rows))
    return doc


def markdown(doc, a):
    L = []
    meta, m = doc["meta"], doc["meta"]["machine"]
    names = [c["name"] for c in doc["configs"]]
    labels = {c["name"]: c["label"] for c in doc["configs"]}
    refs = {c["name"]: c["ref"] for c in doc["configs"]}
    wl = [w["name"] for w in doc["workloads"]]
    R = doc["results"]
    add = L.append

    add("# libmimalloc-prof benchmark report")
    add("")
    add("Generated by `%s` on %s%s." % (meta["command"], meta["date"], " (QUICK mode)" if meta["quick"] else ""))
    add("")
    add("Machine: %s, %s cores, %s, kernel %s, Debian %s, virtualization: %s, CPU governor: %s; %s.  "
        "Library: commit %s%s, libunwind %s.  Load average before/after the timed rounds: %s." % (
            m["cpu"], m["cores"], m["memory"], m["kernel"], m["debian"], m["virtualization"], m["governor"], m["gcc"],
            m["commit"] or "?", " (uncommitted changes in lib/)" if m["dirty"] else "", "yes" if m["libunwind"] else "no",
            " / ".join(meta["load_average"])))
    add("")
    add("Packages: " + ", ".join("%s %s" % kv for kv in sorted(m["packages"].items())) + ".")
    add("")
    add("Sample rate %d bytes everywhere (ours `MIMALLOC_PROF_SAMPLE_RATE`, jemalloc `lg_prof_sample:19`, tcmalloc "
        "`TCMALLOC_SAMPLE_PARAMETER`).  Instructions: callgrind, whole process, one run each.  Wall/CPU: %d interleaved "
        "rounds; ratio = %s.  `+`/`-` after an interval: the interval lies above/below 1.  Time: %s." % (
            meta["rate"], meta["rounds"], meta["interval"],
            ", ".join("%s %.0f s" % kv for kv in meta["phases_seconds"].items())))
    add("")

    # Targets
    add("## Targets")
    add("")
    add("| target | measured | limit | | note |")
    add("|---|---|---|---|---|")
    for t in doc["targets"]:
        v = "-" if t["value"] is None else ("%.0f" % t["value"] if t["id"] == "T4" else "%.4f" % t["value"])
        lim = "%g" % t["limit"]
        add("| %s: %s | %s | <= %s | %s | %s |" % (t["id"], t["text"], v, lim, {True: "met", False: "**missed**", None: "n/a"}[t["met"]],
                                                t.get("note") or ""))
    add("")

    # Issue 13's acceptance
    acc = doc.get("acceptance") or {}
    if acc.get("criteria"):
        add("## Acceptance (issue 13): sampling at %d against ours stopped" % meta["rate"])
        add("")
        add("| criterion | configuration | measured | limit | | detail |")
        add("|---|---|---|---|---|---|")
        for c in acc["criteria"]:
            add("| %s: %s | %s | %s | %s | %s | %s |" % (c["id"], c["text"], c["config"], c["value"], c["limit"],
                                                       {True: "pass", False: "**FAIL**", None: "n/a"}[c["met"]], c["detail"]))
        add("")
        add("Per workload (fp; libunwind), against ours stopped: instructions (whole process; the profiler's own "
            "objects only); extra peak RSS, KiB [interval] and its limit; wall time [interval].")
        add("")
        add("| workload | instructions fp; libunwind | own fp; libunwind | extra RSS fp | extra RSS libunwind | limit | wall fp | wall libunwind |")
        add("|---|---|---|---|---|---:|---|---|")
        rss = {(r["workload"], r["config"]): r for r in acc["rss"]}
        wall = {(r["workload"], r["config"]): r for r in acc["wall"]}
        for w in wl:
            def rcell(u):
                r = rss.get((w, u))
                if not r:
                    return "-"
                cell = "%+.0f [%+.0f, %+.0f]" % (r["median_kib"], r["lo_kib"], r["hi_kib"])
                return cell if r["met"] else "**%s**" % cell

            def wcell(u):
                r = wall.get((w, u))
                if not r:
                    return "-"
                cell = "%.3f [%.3f, %.3f]" % (r["median"], r["lo"], r["hi"])
                return cell if r["met"] else "**%s**" % cell

            def icell(key):
                vals = []
                for u in ("fp", "libunwind"):
                    v = R[w][u].get("instr_ratio") if key == "all" else acc["instr"].get(u, {}).get("own", {}).get(w)
                    vals.append("%.4f" % v if v else "-")
                return "; ".join(vals)
            lim = rss.get((w, "fp"), rss.get((w, "libunwind"), {})).get("limit_kib")
            add("| %s | %s | %s | %s | %s | %s | %s | %s |" % (w, icell("all"), icell("own"), rcell("fp"), rcell("libunwind"),
                                                          "%d" % lim if lim else "-", wcell("fp"), wcell("libunwind")))
        add("")
        add("Extra peak RSS: median over rounds of the per-round difference of `ru_maxrss` (configuration - stopped), "
            "its interval as for the ratios; live samples: the most live at once in a separate run with "
            "`bench/stats_report.c` (timed size, same seed).  libgcc is reported below but not held to the criteria "
            "(not the default unwinder: `auto` takes libunwind).")
        add("")

    # Controls
    p = doc["plant"]
    if p:
        add("## Controls")
        add("")
        add("Planted control (`plant`: ours stopped plus %d `nop`s per call, %s): **%s**.  It misses %d of the %d "
            "stopped-profiler targets it is held to; its instruction count is above stopped's by more than the A/A "
            "noise floor on %d of %d workloads; its wall-time interval lies above 1 on %d and its CPU-time interval on %d of %d." % (
                p["nops"], "LD_PRELOAD shim `bench/plant_shim.c` in front of the library" if p["method"] == "shim"
                else "library built with `-DMPROF_BENCH_PLANT=%d`" % p["nops"],
                "FLAGGED" if p["flagged"] else "NOT FLAGGED", p["targets_missed"], p["targets_total"],
                p["instr_detected"], p["workloads"], p["wall_detected"], p["cpu_detected"], p["workloads"]))
        add("")
        add("| workload | plant/stopped instructions | threshold (1 + max(3 x A/A, 0.0005)) | plant/stopped wall | plant/stopped CPU |")
        add("|---|---|---|---|---|")
        for x in p["per_workload"]:
            add("| %s | %s%s | %.4f | %s | %s |" % (x["workload"], fmt_ratio(x["instr_ratio"], 4), " (detected)" if x["instr_detected"] else "",
                                                 x["threshold"], fmt_ci(x["wall"]), fmt_ci(x["cpu"])))
        add("")
    if doc["aa_control"]:
        c = doc["aa_control"]
        add("A/A control (`aa`: ours stopped, a second time in the same rounds): its wall-time interval excludes 1 on %d "
            "and its CPU-time interval on %d of %d workloads (with intervals of %.1f%% coverage, about %.0f%% of them "
            "exclude 1 by chance).  Instruction counts repeat to within: %s." % (
                c["wall_slower_or_faster"], c["cpu_slower_or_faster"], c["workloads"], 100 * (c["coverage"] or 0),
                100 * (1 - (c["coverage"] or 0)),
                ", ".join("%s %.2g%%" % (w, 100 * v) for w, v in c["instr_noise"].items() if v is not None)))
        add("")

    # Main tables
    ratio_cols = [c for c in names if refs[c]]
    head = "| workload | glibc Minstr | " + " | ".join("%s / %s" % (c, refs[c]) for c in ratio_cols) + " |"
    add("## Instructions (callgrind): ratio to each configuration's reference")
    add("")
    add(head)
    add("|---|---:|" + "---:|" * len(ratio_cols))
    for w in wl:
        g = R[w].get("glibc", {}).get("instructions")
        cells = []
        for c in ratio_cols:
            r = R[w][c]["instr_ratio"]
            over = None
            if c == "stopped":
                over = 1.08 if w == "malloc_loop" else 1.005 if w in REAL else None
            if c in UNWINDERS and w in REAL:
                over = 1.01
            cell = fmt_ratio(r, 4, over)
            if c == "plant" and doc["plant"] and r is not None:
                hit = [x for x in doc["plant"]["per_workload"] if x["workload"] == w and x["instr_detected"]]
                cell = "**%.4f**" % r if hit else cell
            cells.append(cell)
        add("| %s | %s | %s |" % (w, "%.1f" % (g / 1e6) if g else "-", " | ".join(cells)))
    add("")
    add("Reference of each column: after the `/`.  Bold: above its target (stopped: 1.08 on malloc_loop, 1.005 on "
        "the real programs; sampling: 1.01 over stopped on the real programs), and the planted control where it is "
        "detected.")
    add("")

    for key, title in (("wall_ratio", "Wall time"), ("cpu_ratio", "CPU time (user + sys)")):
        add("## %s: median per-round ratio [95%% interval]" % title)
        add("")
        add("| workload | glibc ms | " + " | ".join("%s / %s" % (c, refs[c]) for c in ratio_cols) + " |")
        add("|---|---:|" + "---:|" * len(ratio_cols))
        for w in wl:
            g = R[w].get("glibc", {}).get("wall_ms" if key == "wall_ratio" else "cpu_ms")
            add("| %s | %s | %s |" % (w, "%.1f" % g if g is not None else "-",
                                      " | ".join(fmt_ci(R[w][c][key]) for c in ratio_cols)))
        add("")

    add("## Profilers side by side: sampling at %d against the same allocator without it" % meta["rate"])
    add("")
    add("| workload | ours fp / mimalloc | ours libunwind / mimalloc | ours libgcc / mimalloc | jemalloc prof / jemalloc | tcmalloc sample / tcmalloc | ours stopped / mimalloc |")
    add("|---|---:|---:|---:|---:|---:|---:|")
    for w in wl:
        def both(c, ref):
            if c not in R[w] or ref not in R[w]:
                return "-"
            i = R[w][c]["instructions"] / R[w][ref]["instructions"] if R[w][c]["instructions"] and R[w][ref]["instructions"] else None
            t = None
            if "rounds" in R[w][c]:
                t = ratio_stats(R[w][c]["rounds"]["wall_ms"], R[w][ref]["rounds"]["wall_ms"])
            return "%s instr, %s wall" % (fmt_ratio(i, 4), "%.3f" % t["median"] if t else "-")
        add("| %s | %s | %s | %s | %s | %s | %s |" % (w, both("fp", "mimalloc"), both("libunwind", "mimalloc"), both("libgcc", "mimalloc"),
                                                      both("jemalloc-prof", "jemalloc"), both("tcmalloc-sample", "tcmalloc"), both("stopped", "mimalloc")))
    add("")

    add("## Absolute figures: instructions (M) / wall ms / CPU ms / peak RSS MiB (medians)")
    add("")
    add("| configuration | " + " | ".join(wl) + " |")
    add("|---|" + "---:|" * len(wl))
    for c in names:
        cells = []
        for w in wl:
            x = R[w][c]
            i = "%.1f" % (x["instructions"] / 1e6) if x.get("instructions") else "-"
            t = "%.1f" % x["wall_ms"] if x.get("wall_ms") is not None else "-"
            cp = "%.1f" % x["cpu_ms"] if x.get("cpu_ms") is not None else "-"
            r = "%.1f" % (x["rss_kib"] / 1024) if x.get("rss_kib") is not None else "-"
            cells.append("%s / %s / %s / %s" % (i, t, cp, r))
        add("| %s | %s |" % (c, " | ".join(cells)))
    add("")
    add("## Peak RSS: ratio to glibc (medians)")
    add("")
    add("| workload | glibc MiB | " + " | ".join(c for c in names if c != "glibc") + " |")
    add("|---|---:|" + "---:|" * (len(names) - 1))
    for w in wl:
        g = R[w].get("glibc", {}).get("rss_kib")
        add("| %s | %s | %s |" % (w, "%.1f" % (g / 1024) if g else "-", " | ".join(
            "%.2f" % (R[w][c]["rss_kib"] / g) if g and R[w][c].get("rss_kib") else "-" for c in names if c != "glibc")))
    add("")

    add("## Extra peak RSS over the reference, KiB: median of per-round differences [interval]")
    add("")
    dcols = [c for c in names if refs[c] and c not in ("glibc",)]
    add("| workload | stopped MiB | " + " | ".join("%s - %s" % (c, refs[c]) for c in dcols) + " |")
    add("|---|---:|" + "---:|" * len(dcols))
    for w in wl:
        st = R[w].get("stopped", {}).get("rss_kib")

        def dcell(c):
            d = R[w][c].get("rss_delta")
            if d is None:
                return "-"
            return "%+.0f [%+.0f, %+.0f]" % (d["median"], d["lo"], d["hi"])
        add("| %s | %s | %s |" % (w, "%.1f" % (st / 1024) if st else "-", " | ".join(dcell(c) for c in dcols)))
    add("")
    am = (doc.get("acceptance") or {}).get("rss_mean") or {}
    if am:
        add("Mean over the workloads of the medians: " + ", ".join("%s %+.0f KiB" % kv for kv in am.items()) + ".")
        add("")

    if doc["samples"]:
        add("## Samples and memory per run (separate runs with bench/stats_report.c, timed size, seed 1)")
        add("")
        add("| workload | configuration | samples | peak live | live at exit | arena resident KiB | sampled KiB | profiler tables KiB (mapped) | VmHWM KiB | threads at exit (single-threaded throughout) | RSS KiB at exit: arena / mimalloc / other anon / libunwind+lzma / libgcc_s / ours / other files |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for w in wl:
            for u in ["stopped"] + UNWINDERS:
                s_ = (doc["samples"].get(w, {}).get(u, {}).get("time") or {}).get("memory")
                if not s_:
                    continue
                add("| %s | %s | %d | %d | %d | %.0f | %.0f | %.0f | %d | %d%s | %d / %d / %d / %d / %d / %d / %d |" % (
                    w, u, s_.get("samples", 0), s_.get("peak_live", 0), s_.get("live_samples", 0),
                    s_.get("arena_resident_bytes", 0) / 1024, s_.get("sampled_bytes", 0) / 1024,
                    s_.get("profiler_bytes", 0) / 1024, s_.get("hwm_kib", 0), s_.get("threads", 0),
                    " (yes)" if s_.get("single_threaded") == 1 else "",
                    s_.get("rss_arena_kib", 0), s_.get("rss_mi_kib", 0), s_.get("rss_anon_kib", 0),
                    s_.get("rss_unw_kib", 0), s_.get("rss_gcc_kib", 0), s_.get("rss_prof_kib", 0), s_.get("rss_file_kib", 0)))
        add("")
        add("Arena resident: `arena_resident_bytes` (an upper bound: touched pages of page chunks, live and cached chunk "
            "runs); the RSS split is `/proc/self/smaps` at exit, after the program freed its blocks (the arena's pages "
            "stay until a later heap operation).  One run each: the per-round figures are in the RSS tables above.")
        add("")

    B = doc.get("breakdown") or {}
    add("## Minor page faults (thousands, medians)")
    add("")
    add("| workload | " + " | ".join(c for c in names if R[wl[0]][c].get("minflt") is not None) + " |")
    add("|---|" + "---:|" * len([c for c in names if R[wl[0]][c].get("minflt") is not None]))
    for w in wl:
        add("| %s | %s |" % (w, " | ".join("%.1f" % (R[w][c]["minflt"] / 1e3) for c in names if R[w][c].get("minflt") is not None)))
    add("")

    if any(B.get(w, {}).get("stopped") for w in wl):
        def objshort(o):
            for pre, name in (("libmimalloc-prof", "ours"), ("libmimalloc", "mimalloc"), ("ld-linux", "ld.so"),
                              ("libc.so", "libc"), ("libunwind", "libunwind"), ("libgcc_s", "libgcc_s"),
                              ("libpthread", "libc"), ("libm.so", "libm")):
                if o.startswith(pre):
                    return name
            return "program" if o in wl + ["python3.11"] else "other"

        def grouped(by_object):
            g = {}
            for o, v in by_object.items():
                k = objshort(o)
                g[k] = g.get(k, 0) + v
            return g

        add("## Where the stopped profiler's extra instructions go (stopped - plain mimalloc, callgrind self counts)")
        add("")
        add("| workload | extra instructions | in our entry points (fast paths) | rest of ours (start-up, slow paths) | ld.so | mimalloc | libc | other | malloc / free calls (est.) | floor 4/malloc + 3/free, share of mimalloc's count |")
        add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for w in wl:
            b = B.get(w, {})
            st = b.get("stopped")
            if not st:
                continue
            g = grouped(st["by_object"])
            ent = sum(b.get("entry_points", {}).values())
            calls = b.get("calls_est", {})
            floor = 4 * calls.get("malloc", 0) + 3 * calls.get("free", 0)
            mi = R[w].get("mimalloc", {}).get("instructions")
            add("| %s | %d | %d | %d | %d | %d | %d | %d | %d / %d | %s |" % (
                w, st["total"], ent, g.get("ours", 0) - ent, g.get("ld.so", 0), g.get("mimalloc", 0), g.get("libc", 0),
                st["total"] - g.get("ours", 0) - g.get("ld.so", 0) - g.get("mimalloc", 0) - g.get("libc", 0),
                calls.get("malloc", 0), calls.get("free", 0), "%.4f" % (floor / mi) if mi else "-"))
        add("")
        add("Entry points: the library's exported functions (malloc, free, calloc, realloc, ...), self instructions; "
            "calls estimated as malloc's instructions / 4 and free's / 3.  The floor column is what the design's "
            "4 + 3 instructions cost by themselves, as a fraction of plain mimalloc's whole count: the least the "
            "stopped ratio can be above 1 with this fast path.")
        add("")
        add("## Where sampling's extra instructions go (configuration - stopped, callgrind self counts)")
        add("")
        add("| workload | configuration | extra instructions | ours | unwinder library | libc | mimalloc | ld.so | top functions (self instructions added) |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for w in wl:
            for c in ["armed"] + UNWINDERS:
                d = B.get(w, {}).get(c)
                if not d:
                    continue
                g = grouped(d["by_object"])
                top = "; ".join("%s %s +%d" % (objshort(t["object"]), t["function"], t["delta"]) for t in d["top"][:3])
                add("| %s | %s | %d | %d | %d | %d | %d | %d | %s |" % (
                    w, c, d["total"], g.get("ours", 0), g.get("libunwind", 0) + g.get("libgcc_s", 0), g.get("libc", 0),
                    g.get("mimalloc", 0), g.get("ld.so", 0), top))
        add("")
        add("Valgrind counts each byte that a `rep movsb` copies as one instruction: where `mprof_realloc_slow` "
            "(whose memcpy gcc compiles to `rep movsb`, the function being cold) shows up above, its count mostly "
            "stands for bytes copied, not for time.")
        add("")

    if doc["samples"]:
        add("## Samples taken by ours (separate run with bench/unwind_report.c; seed 1)")
        add("")
        add("| workload | unwinder | samples (callgrind size) | samples (timed size) | stacks | median depth | max depth | start-up (armed - stopped) Minstr | instructions per sample beyond armed | instructions per sample (all) | wall us per sample (all) |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for w in wl:
            for u in UNWINDERS:
                s = doc["samples"].get(w, {}).get(u)
                if not s:
                    continue
                sc, st = s["cg"], s["time"]
                ips = ipa = fixed = "-"
                iu, ist, iar = R[w][u].get("instructions"), R[w]["stopped"].get("instructions"), R[w].get("armed", {}).get("instructions")
                if sc["samples"] and iu and ist:
                    ips = "%.0f" % ((iu - ist) / sc["samples"])
                if iar and ist:
                    fixed = "%.2f" % ((iar - ist) / 1e6)
                if sc["samples"] and iu and iar:
                    ipa = "%.0f" % ((iu - iar) / sc["samples"])
                wps = "-"
                if st["samples"] and R[w][u].get("wall_ms") is not None and R[w]["stopped"].get("wall_ms") is not None:
                    wps = "%.1f" % ((R[w][u]["wall_ms"] - R[w]["stopped"]["wall_ms"]) * 1e3 / st["samples"])
                add("| %s | %s | %d | %d | %d | %d | %d | %s | %s | %s | %s |" % (
                    w, u, sc["samples"], st["samples"], sc["stacks"], sc["depth_median"], sc["depth_max"], fixed, ipa, ips, wps))
        add("")
        add("Start-up: what starting the profiler costs with no sample taken (the `armed` run: rate 2^40).  Per sample "
            "beyond armed = (sampling - armed) / samples; (all) = (sampling - stopped) / samples, start-up included; "
            "wall us per sample = (median wall sampling - median wall stopped) / samples at the timed size (noisy where "
            "the difference is small).")
        add("")

    mc = doc["micro"]["sample_cost"]
    if mc:
        add("## Microbenchmark: cost per sample (capture + record + later free), bench/sample_cost.c")
        add("")
        add("| unwinder | depth | frames recorded | CPU ns/sample [interval] | wall ns/sample [interval] | instructions/sample | batch | pairs |")
        add("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in mc:
            add("| %s | %d | %d | %.0f [%.0f, %.0f] | %.0f [%.0f, %.0f] | %s | %d | %d |" % (
                r["unwinder"], r["depth"], r["frames"], r["cpu_ns"], r["cpu_lo"], r["cpu_hi"], r["wall_ns"], r["wall_lo"],
                r["wall_hi"], "%.0f" % r["instructions"] if r["instructions"] else "-", r["n"], r["pairs"]))
        add("")
        add("Per pair of batches (one sampling every allocation at rate 1 byte, one stopped, same loop): (on - off) / samples; "
            "median over pairs and its order-statistic interval (coverage %.1f%%).  Instructions: callgrind, %d iterations." % (
                100 * mc[0]["coverage"], a.cg_samples))
        add("")
    ps = doc["micro"]["prof_scale"]
    if ps:
        add("## Microbenchmark: dump time and profiler memory, bench/prof_scale.c (fp unwinder)")
        add("")
        add("| live samples | distinct stacks | dump ms (median) | visit ms | profile bytes (gzip) | profiler memory MiB | bytes per live sample |")
        add("|---:|---:|---:|---:|---:|---:|---:|")
        for r in ps:
            add("| %d | %d | %.2f | %.3f | %d | %.2f | %s |" % (r["live_samples"], r["stacks_seen"], r["dump_ms"], r["visit_ms"],
                                                           r["dump_bytes"], r["profiler_bytes"] / 1048576,
                                                           "%.0f" % r["bytes_per_sample"] if r["bytes_per_sample"] else "-"))
        add("")

    add("## Configurations")
    add("")
    add("| name | what | reference | environment (besides the common one) |")
    add("|---|---|---|---|")
    for c in doc["configs"]:
        add("| %s | %s | %s | `%s` |" % (c["name"], c["label"], c["ref"] or "-", c["env"] or "(none)"))
    add("")
    add("Common environment of every run: `env -i %s`." % " ".join("%s=%s" % kv for kv in sorted(BASE_ENV.items())))
    add("")
    add("## Workloads")
    add("")
    add("| workload | what | command (callgrind) | command (timed) |")
    add("|---|---|---|---|")
    for w in doc["workloads"]:
        add("| %s | %s | `%s` | `%s` |" % (w["name"], w["desc"], " ".join(shlex.quote(x) for x in w["callgrind_argv"]),
                                       " ".join(shlex.quote(x) for x in w["timing_argv"])))
    add("")
    add("Callgrind: `valgrind --tool=callgrind --callgrind-out-file=/dev/null COMMAND` with the configuration's environment "
        "(the annotated configurations write the profile to a file and run `callgrind_annotate --threshold=100` on it).")
    od = doc.get("output_differs") or {}
    if od:
        add("")
        add("Output check (the whole output of the callgrind run, which must not depend on the allocator): " + "; ".join(
            "%s: %s" % (w, "identical under every configuration" if not v else "**differs** under " + ", ".join(v))
            for w, v in od.items()) + ".")
    outputs = sorted({(w, R[w][c]["output"]) for w in wl for c in names if R[w][c].get("output") and "misaligned=" in R[w][c]["output"]
                      and not R[w][c]["output"].endswith("misaligned=0")})
    if outputs:
        add("")
        add("Misaligned blocks seen by the aligned workload: " + "; ".join(
            "%s: `%s`" % (c, R[w][c]["output"]) for w in wl for c in names
            if R[w][c].get("output") and "misaligned=" in R[w][c]["output"] and not R[w][c]["output"].endswith("misaligned=0")) + ".")
    add("")
    return "\n".join(L)


# ---------------------------------------------------------------------------------------------------

def rerender(a):
    """The report of an earlier run again, with this version's acceptance checks and tables."""
    with open(a.rerender) as fh:
        doc = json.load(fh)
    wl = [w["name"] for w in doc["workloads"]]
    doc["acceptance"] = acceptance(wl, {w["name"]: w["kind"] for w in doc["workloads"]},
                                   [c["name"] for c in doc["configs"]], doc["results"], doc["samples"] or {},
                                   doc.get("breakdown") or {})
    a.cg_samples = doc["meta"].get("cg_samples", 3000)
    os.makedirs(a.out, exist_ok=True)
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
        print("harness: timing, %d rounds of %d workloads x %d configurations" % (a.rounds, len(workloads), len(configs)), flush=True)
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
        samples = phase_samples(a, configs, workloads)
        timings["samples"] = time.time() - t
    micro_cost, scale_rows = [], []
    if "micro" in phases:
        t = time.time()
        print("harness: microbenchmarks (sample cost, dump and memory)", flush=True)
        micro_cost = micro_sample_cost(a, cg_micro)
        scale_rows = micro_prof_scale(a)
        timings["micro"] = time.time() - t

    doc = build_report(a, configs, workloads, cg, tm, samples, micro_cost, scale_rows, meta, timings)
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
    md = markdown(doc, a)
    with open(os.path.join(a.out, "results.md"), "w") as fh:
        fh.write(md)
    print(md)
    print("harness: wrote %s and %s" % (os.path.join(a.out, "results.json"), os.path.join(a.out, "results.md")))


if __name__ == "__main__":
    main()
