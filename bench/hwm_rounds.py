#!/usr/bin/python3
"""hwm_rounds.py - peak RSS (VmHWM) of one program under several configurations, in interleaved rounds.

Usage: bench/hwm_rounds.py ROUNDS CONFIG... -- PROGRAM [ARGS...]
  CONFIG  NAME[:VAR=VALUE,...[:PRELOAD]]  environment over MIMALLOC_PROF_SAMPLE_RATE=524288 and
          MIMALLOC_PROF_SEED=1 (any other MIMALLOC_* of the caller's is dropped); LD_PRELOAD is PRELOAD (a
          shim, e.g. pause_shim.so), then $LIB (default _build/bench's library; LIB=... in a CONFIG's
          variables names another), then bench's hwm_probe.so.  NAME "mimalloc" runs plain libmimalloc.
Each round runs every configuration once, in a fresh random order, through bench's runone; the first
configuration is the reference.  Prints per configuration the median, mean and SD of VmHWM (KiB), the
median wall time, and over the reference the paired differences' median and mean with the mean's standard
error.  Build bench/ first (bench/run.sh, or PHASES=micro for a short one).  doc/performance.md has runs.
"""
import os
import random
import statistics as st
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(TOP, "_build/bench/bin")
LIB = os.environ.get("LIB", os.path.join(TOP, "_build/bench/lib/.libs/libmimalloc-prof.so.0"))


def parse(arg):
    parts = arg.split(":")
    env = dict(kv.split("=", 1) for kv in parts[1].split(",") if kv) if len(parts) > 1 else {}
    return parts[0], env, parts[2] if len(parts) > 2 else ""


def environment(name, env, preload, out):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC")}
    e.update(MIMALLOC_PROF_SAMPLE_RATE="524288", MIMALLOC_PROF_SEED="1", HWM_PROBE_OUT=out)
    lib = env.pop("LIB", LIB)
    e.update(env)
    first = "libmimalloc.so.2" if name == "mimalloc" else lib
    e["LD_PRELOAD"] = " ".join(x for x in (preload, first, os.path.join(BIN, "hwm_probe.so")) if x)
    return e


def run_once(name, env, preload, prog, tmp):
    res, hwm = os.path.join(tmp, "res"), os.path.join(tmp, "hwm")
    for f in (res, hwm):
        if os.path.exists(f):
            os.unlink(f)
    subprocess.run([os.path.join(BIN, "runone"), res] + prog, env=environment(name, dict(env), preload, hwm),
                   stdout=subprocess.DEVNULL, check=True)
    kv = dict(x.split("=") for x in open(res).read().split())
    line = [x for x in open(hwm) if x.startswith("pid=%s " % kv["pid"])][0]
    return int(line.split("hwm_kib=")[1]), int(kv["wall_ns"]) / 1e6


def main():
    if "--" not in sys.argv or len(sys.argv) < 5:
        sys.exit(__doc__)
    cut = sys.argv.index("--")
    rounds, configs, prog = int(sys.argv[1]), [parse(a) for a in sys.argv[2:cut]], sys.argv[cut + 1:]
    got = {c[0]: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for name, env, preload in random.sample(configs, len(configs)):
                got[name].append(run_once(name, env, preload, prog, tmp))
    ref = configs[0][0]
    for name, _, _ in configs:
        h = [x[0] for x in got[name]]
        sd = st.stdev(h) if len(h) > 1 else 0
        line = "%-14s VmHWM median %7d mean %7d sd %5d  wall median %7.1f ms" % (
            name, st.median(h), st.mean(h), sd, st.median(x[1] for x in got[name]))
        if name != ref and len(h) > 1:
            d = [a[0] - b[0] for a, b in zip(got[name], got[ref])]
            line += "  | over %s: median %+6d mean %+6d (se %d)" % (ref, st.median(d), st.mean(d),
                                                                    st.stdev(d) / len(d) ** 0.5)
        print(line)


if __name__ == "__main__":
    main()
