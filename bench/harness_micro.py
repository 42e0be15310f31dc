"""harness_micro.py - the microbenchmarks of bench/harness.py: cost per sample (bench/sample_cost.c, timed and
under callgrind), dump time and profiler memory (bench/prof_scale.c), and what the stopped library costs a
program that does nothing (/bin/true) in peak RSS."""
import os
import statistics

from harness_run import last_line, parse_kv, spawn, spawn_timed
from harness_setup import BASE_ENV, UNWINDERS, system_lib
from harness_stats import diff_stats, med, sign_interval


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


def micro_trivial_rss(a, rounds):
    """Peak RSS of /bin/true under plain mimalloc, plain mimalloc with an empty object preloaded too
    (bench/empty_object.c: what one more object costs at all) and the library stopped, in `rounds`
    interleaved rounds, two ways from each run (bench/runone.c with bench/hwm_probe.c preloaded last):
    VmHWM at exit and ru_maxrss.  The kernel here reads its per-CPU RSS counters approximately for
    ru_maxrss (below VmHWM by up to 68 KiB in the same run, and an empty object shows +120 KiB there but +20
    in VmHWM), so differences of a few pages are read from VmHWM.  One run of each with
    bench/stats_report.c gives the resident KiB by mapping class at exit."""
    mi = system_lib("libmimalloc.so.2")
    cfgs = dict(mimalloc=[mi], empty=[mi, a.bin + "/empty_object.so"], stopped=[a.lib])
    maxrss = {c: [] for c in cfgs}
    vmhwm = {c: [] for c in cfgs}
    classes = {}
    out = os.path.join(a.raw, "trivial.out")
    for r in range(rounds):
        for c in (sorted(cfgs) if r % 2 == 0 else sorted(cfgs, reverse=True)):
            env = dict(BASE_ENV, LD_PRELOAD=" ".join(cfgs[c]))
            code, _, _, peak, _, rss = spawn_timed(a, ["/bin/true"], env, out)
            maxrss[c].append(rss if code == 0 else None)
            vmhwm[c].append(peak if code == 0 else None)
    for c in cfgs:
        mem = os.path.join(a.raw, "trivial.%s.stats" % c)
        if os.path.exists(mem):
            os.unlink(mem)
        env = dict(BASE_ENV, LD_PRELOAD=" ".join(cfgs[c] + [a.bin + "/stats_report.so"]), STATS_REPORT_OUT=mem)
        spawn(["/bin/true"], env, out)
        classes[c] = {k: int(v) for k, v in parse_kv(last_line(mem)).items() if k.startswith(("rss_", "hwm_"))}
    return dict(rounds=rounds, mimalloc_kib=med(maxrss["mimalloc"]), stopped_kib=med(maxrss["stopped"]),
                empty_kib=med(maxrss["empty"]), delta=diff_stats(maxrss["stopped"], maxrss["mimalloc"]),
                delta_empty=diff_stats(maxrss["empty"], maxrss["mimalloc"]),
                delta_over_empty=diff_stats(maxrss["stopped"], maxrss["empty"]),
                hwm_kib={c: med(v) for c, v in vmhwm.items()},
                hwm_delta=diff_stats(vmhwm["stopped"], vmhwm["mimalloc"]),
                hwm_delta_empty=diff_stats(vmhwm["empty"], vmhwm["mimalloc"]),
                hwm_delta_over_empty=diff_stats(vmhwm["stopped"], vmhwm["empty"]), classes=classes)
