"""harness_markdown.py - the tables of bench/harness.py (results.md), rendered from the results document."""
import shlex

from harness_run import NOISY_PEAK_RUNS
from harness_setup import BASE_ENV, REAL, UNWINDERS
from harness_stats import ratio_stats


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


# Workloads with the shape of mimalloc-bench's programs (xmalloc-test, rptest, mstress, and thread churn).
BENCH_LIKE = ["xthread", "thread_churn", "thread_short", "rptest_like", "mstress_like", "xmalloc_like"]
PEAK_CLASSES = [("window", "slots' window"), ("mimalloc", "mimalloc"), ("anon", "other anon (profiler tables, stacks)"),
                ("ours", "libmimalloc-prof"), ("unwinders", "libunwind, liblzma, libgcc_s"),
                ("lazy", "libm, zlib, protobuf-c"), ("files", "other files")]


def peak_tables(doc, wl, add):
    """Where the peak RSS is, by mapping class (polled), and the mimalloc-bench-like set against jemalloc."""
    S = doc["samples"]
    rows = [(w, u, (S.get(w, {}).get(u, {}).get("time") or {}).get("peak_rss")) for w in wl
            for u in ["stopped"] + UNWINDERS]
    if any(p for _, _, p in rows):
        add("## Peak RSS by mapping class (the samples runs: /proc/PID/smaps read every 2 ms, the composition at "
            "the largest resident total seen), KiB")
        add("")
        add("Each sampling configuration's row gives, after its total, the difference to stopped per class: where "
            "each extra KiB of peak RSS is.  A workload with more memory rounds (the noisy ones) has, per "
            "class, the median of %d interleaved runs without the report's shims "
            "(harness_run.NOISY_PEAK_RUNS): one run's mimalloc class moves by megabytes there."
            % NOISY_PEAK_RUNS)
        add("")
        add("| workload | configuration | total | " + " | ".join(name for _, name in PEAK_CLASSES) + " |")
        add("|---|---|---:|" + "---:|" * len(PEAK_CLASSES))
        for w in wl:
            st = (S.get(w, {}).get("stopped", {}).get("time") or {}).get("peak_rss")
            for u in ["stopped"] + UNWINDERS:
                p = (S.get(w, {}).get(u, {}).get("time") or {}).get("peak_rss")
                if not p:
                    continue
                cell = (lambda k: "%d" % p[k]) if u == "stopped" or not st else (lambda k: "%d (%+d)" % (p[k], p[k] - st[k]))
                total = sum(p.values())
                runs = (S[w][u]["time"] or {}).get("peak_runs", 1)
                name = w if runs == 1 else "%s (median of %d)" % (w, runs)
                add("| %s | %s | %s | %s |" % (name, u, "%d" % total if u == "stopped" or not st else
                                                 "%d (%+d)" % (total, total - sum(st.values())),
                                                 " | ".join(cell(k) for k, _ in PEAK_CLASSES)))
        add("")
    R = doc["results"]
    cols = [c for c in UNWINDERS + ["jemalloc-prof", "tcmalloc-sample"] if c in R[wl[0]]]
    bench = [w for w in BENCH_LIKE if w in wl]
    if bench and cols:
        add("## mimalloc-bench-like workloads: extra peak RSS over each allocator without its profiler, KiB "
            "(median of per-round differences)")
        add("")
        add("| workload | " + " | ".join(cols) + " |")
        add("|---|" + "---:|" * len(cols))
        means = {c: [] for c in cols}
        for w in bench:
            cells = []
            for c in cols:
                d = R[w][c].get("rss_delta")
                cells.append("%+.0f [%+.0f, %+.0f]" % (d["median"], d["lo"], d["hi"]) if d else "-")
                if d:
                    means[c].append(d["median"])
            add("| %s | %s |" % (w, " | ".join(cells)))
        add("| mean | %s |" % " | ".join("%+.0f" % (sum(v) / len(v)) if v else "-" for v in means.values()))
        add("")
    tr = (doc.get("micro") or {}).get("trivial_rss")
    if tr and tr.get("delta"):
        d = tr["delta"]
        add("## A program that does nothing (/bin/true): peak RSS, stopped against plain mimalloc")
        add("")
        add("Medians of %d interleaved rounds (`ru_maxrss`): plain mimalloc %d KiB, ours stopped %d KiB, difference "
            "%+.0f KiB [%+.0f, %+.0f]." % (d["n"], tr["mimalloc_kib"], tr["stopped_kib"], d["median"], d["lo"], d["hi"]))
        e, oe = tr.get("delta_empty"), tr.get("delta_over_empty")
        if e and oe:
            add("")
            add("An empty object (bench/empty_object.c, one function) preloaded after plain mimalloc: %d KiB, "
                "%+.0f KiB [%+.0f, %+.0f] over plain mimalloc, the floor any one more object pays; ours stopped over "
                "it: %+.0f KiB [%+.0f, %+.0f]." % (tr["empty_kib"], e["median"], e["lo"], e["hi"], oe["median"],
                                                    oe["lo"], oe["hi"]))
        h, he, hoe = tr.get("hwm_delta"), tr.get("hwm_delta_empty"), tr.get("hwm_delta_over_empty")
        if h and he and hoe:
            add("")
            add("VmHWM at exit (/proc, read by bench/hwm_probe.c preloaded last in each configuration; "
                "ru_maxrss reads the kernel's per-CPU RSS counters approximately): ours stopped %+.0f KiB [%+.0f, %+.0f] "
                "over plain mimalloc, the empty object %+.0f KiB [%+.0f, %+.0f], ours over the empty object "
                "%+.0f KiB [%+.0f, %+.0f]." % (h["median"], h["lo"], h["hi"], he["median"], he["lo"], he["hi"],
                                               hoe["median"], hoe["lo"], hoe["hi"]))
        add("")
        add("Resident KiB at exit by mapping (one run each, bench/stats_report.c, which also asks the library "
            "for its statistics):")
        add("")
        keys = sorted({k for c in tr["classes"].values() for k in c})
        add("| configuration | " + " | ".join(keys) + " |")
        add("|---|" + "---:|" * len(keys))
        for c, v in tr["classes"].items():
            add("| %s | %s |" % (c, " | ".join(str(v.get(k, "-")) for k in keys)))
        add("")


def noisy_text(meta):
    """The workloads that got more memory rounds (harness_run.NOISY_SD_KIB), as a clause."""
    noisy = meta.get("noisy_memory_rounds") or {}
    if not noisy:
        return ""
    return " (%s: %s in all, their paired differences' SD being above 1 MiB)" % (
        ", ".join(sorted(noisy)), ", ".join(str(noisy[w]) for w in sorted(noisy)))


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
        "rounds; peak RSS (VmHWM at exit): those, and %d memory rounds more of the threaded C workloads%s; "
        "ratio = %s.  `+`/`-` after an "
        "interval: the interval lies above/below 1.  Time: %s." % (
            meta["rate"], meta["rounds"], meta.get("memory_rounds", 0), noisy_text(meta), meta["interval"],
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

    # The acceptance criteria (harness_accept.py)
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
        add("Per workload (fp; table), against ours stopped: instructions (whole process; the profiler's own "
            "objects only); extra peak RSS, KiB [interval] and its limit; wall time [interval].")
        add("")
        add("| workload | instructions fp; table | own fp; table | extra RSS fp | extra RSS table | limit | wall fp | wall table |")
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
                for u in ("fp", "table"):
                    v = R[w][u].get("instr_ratio") if key == "all" else acc["instr"].get(u, {}).get("own", {}).get(w)
                    vals.append("%.4f" % v if v else "-")
                return "; ".join(vals)
            lim = rss.get((w, "fp"), rss.get((w, "table"), {})).get("limit_kib")
            add("| %s | %s | %s | %s | %s | %s | %s | %s |" % (w, icell("all"), icell("own"), rcell("fp"), rcell("table"),
                                                          "%d" % lim if lim else "-", wcell("fp"), wcell("table")))
        add("")
        add("Extra peak RSS: median over rounds (the timed rounds and the memory rounds) of the per-round "
            "difference of VmHWM at exit (configuration - stopped), its interval as for the ratios; live "
            "samples: the most live at once in a separate run with `bench/stats_report.c` (timed size, same "
            "seed).  libunwind and libgcc are reported below but not held to the criteria (not the default "
            "unwinder: `auto` takes table).")
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
    add("| workload | ours fp / mimalloc | ours table / mimalloc | ours libunwind / mimalloc | ours libgcc / mimalloc | jemalloc prof / jemalloc | tcmalloc sample / tcmalloc | ours stopped / mimalloc |")
    add("|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in wl:
        def both(c, ref):
            if c not in R[w] or ref not in R[w]:
                return "-"
            i = R[w][c]["instructions"] / R[w][ref]["instructions"] if R[w][c]["instructions"] and R[w][ref]["instructions"] else None
            t = None
            if "rounds" in R[w][c]:
                t = ratio_stats(R[w][c]["rounds"]["wall_ms"], R[w][ref]["rounds"]["wall_ms"])
            return "%s instr, %s wall" % (fmt_ratio(i, 4), "%.3f" % t["median"] if t else "-")
        cells = [both(c, "mimalloc") for c in ("fp", "table", "libunwind", "libgcc")]
        cells += [both("jemalloc-prof", "jemalloc"), both("tcmalloc-sample", "tcmalloc"), both("stopped", "mimalloc")]
        add("| %s | %s |" % (w, " | ".join(cells)))
    add("")

    add("## Absolute figures: instructions (M) / wall ms / CPU ms / peak RSS (VmHWM) MiB (medians)")
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
        add("| workload | configuration | samples | peak live | live at exit | arena resident KiB | sampled KiB | profiler tables KiB (mapped) | VmHWM KiB | threads at exit (single-threaded throughout) | RSS KiB at exit: arena / mimalloc / other anon / libunwind+lzma / libgcc_s / libm+zlib+protobuf-c / ours / other files |")
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for w in wl:
            for u in ["stopped"] + UNWINDERS:
                s_ = (doc["samples"].get(w, {}).get(u, {}).get("time") or {}).get("memory")
                if not s_:
                    continue
                add("| %s | %s | %d | %d | %d | %.0f | %.0f | %.0f | %d | %d%s | %d / %d / %d / %d / %d / %d / %d / %d |" % (
                    w, u, s_.get("samples", 0), s_.get("peak_live", 0), s_.get("live_samples", 0),
                    s_.get("arena_resident_bytes", 0) / 1024, s_.get("sampled_bytes", 0) / 1024,
                    s_.get("profiler_bytes", 0) / 1024, s_.get("hwm_kib", 0), s_.get("threads", 0),
                    " (yes)" if s_.get("single_threaded") == 1 else "",
                    s_.get("rss_arena_kib", 0), s_.get("rss_mi_kib", 0), s_.get("rss_anon_kib", 0),
                    s_.get("rss_unw_kib", 0), s_.get("rss_gcc_kib", 0), s_.get("rss_lazy_kib", 0), s_.get("rss_prof_kib", 0),
                    s_.get("rss_file_kib", 0)))
        add("")
        add("Arena resident: `arena_resident_bytes` (an upper bound: the slots' pages written and not given back, and "
            "the live sampled blocks that are mimalloc's); the RSS split is `/proc/self/smaps` at exit, after the "
            "program freed its blocks (\"arena\" is the slots' window).  One run each: the per-round figures are in "
            "the RSS tables above.")
        add("")

    peak_tables(doc, wl, add)

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
