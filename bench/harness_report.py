"""harness_report.py - the results document of bench/harness.py (results.json): the machine, every figure
and ratio, where the extra instructions go, the targets and the controls."""
import datetime
import os
import platform
import re
import shlex
import subprocess

from harness_accept import acceptance
from harness_run import noisy_workloads
from harness_setup import ANNOTATED, RATE, REAL, UNWINDERS, env_words
from harness_stats import diff_stats, med, ratio_stats


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


def build_report(a, configs, workloads, cg, tm, samples, micro_cost, scale_rows, meta, timings, trivial=None):
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
                x["maxrss_kib"] = med(t["maxrss"])
                x["rounds"] = dict(wall_ms=t["wall"], cpu_ms=t["cpu"], rss_kib=t["rss"], minflt=t["minflt"],
                                   maxrss_kib=t["maxrss"], memory_rounds_rss_kib=t["mem"])
                x["failures"] = t["fail"]
            R[w][c] = x

    def iratio(w, c, ref):
        a_, b_ = R[w][c].get("instructions"), R[w][ref].get("instructions") if ref else None
        return a_ / b_ if a_ and b_ else None

    def tratio(w, c, ref, key):
        if not tm or ref is None or c not in tm[w] or ref not in tm[w]:
            return None
        return ratio_stats(tm[w][c][key], tm[w][ref][key])

    def peak_delta(w, c, ref):
        """Peak RSS (VmHWM) of c - ref over the paired rounds: the timed rounds, and the memory rounds when
        both ran in them."""
        if not tm or ref is None or c not in tm[w] or ref not in tm[w]:
            return None
        x, y = tm[w][c], tm[w][ref]
        both = x.get("mem") and len(x["mem"]) == len(y.get("mem") or [])
        return diff_stats(x["rss"] + (x["mem"] if both else []), y["rss"] + (y["mem"] if both else []))

    for w in wl:
        for c in names:
            ref = cfg[c]["ref"]
            x = R[w][c]
            x["ref"] = ref
            x["instr_ratio"] = iratio(w, c, ref) if ref else None
            x["wall_ratio"] = tratio(w, c, ref, "wall")
            x["cpu_ratio"] = tratio(w, c, ref, "cpu")
            x["rss_delta"] = peak_delta(w, c, ref)
            x["maxrss_delta"] = (diff_stats(tm[w][c]["maxrss"], tm[w][ref]["maxrss"])
                                 if tm and ref and c in tm[w] and ref in tm[w] else None)
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

    accept = acceptance(wl, {w["name"]: w["kind"] for w in workloads}, names, R, samples, breakdown, trivial)

    doc = dict(
        meta=dict(machine=meta, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  command=a.command, quick=a.quick, rounds=a.rounds,
                  memory_rounds=a.mem_rounds if tm else 0, cg_samples=a.cg_samples, jobs=a.jobs,
                  noisy_memory_rounds=noisy_workloads(tm, a.mem_rounds),
                  scale=a.scale, rate=RATE,
                  plant=dict(method=a.plant_method, nops=a.plant, preload=a.plant_preload),
                  interval="median of per-round paired ratios; 95% distribution-free order-statistic (sign-test) "
                           "interval for that median (coverage given; [min, max] when fewer than 6 rounds)",
                  phases_seconds=timings, load_average=a.loadavg),
        configs=[dict(name=c["name"], label=c["label"], ref=c["ref"], env=env_words(c)) for c in configs],
        workloads=[dict(name=w["name"], kind=w["kind"], desc=w["desc"], callgrind_argv=w["cg"], timing_argv=w["time"]) for w in workloads],
        results=R, acceptance=accept, aa_instruction_noise=aa, breakdown=breakdown, output_differs=same_output, samples=samples, targets=targets, plant=plant, aa_control=aa_ctl,
        micro=dict(sample_cost=micro_cost, prof_scale=scale_rows, trivial_rss=trivial))
    return doc
