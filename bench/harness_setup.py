"""harness_setup.py - what bench/harness.py measures: the allocator configurations, the workloads and the
environment each run gets."""
import glob
import os
import shlex
import subprocess
import sys


RATE = 524288                       # bytes: MIMALLOC_PROF_SAMPLE_RATE, lg_prof_sample:19, TCMALLOC_SAMPLE_PARAMETER
UNWINDERS = ["fp", "table", "libunwind", "libgcc"]
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
