"""harness_accept.py - the acceptance criteria (profiling cost and memory), checked by bench/harness.py
against the figures of a run (also when an earlier run is rendered again)."""
import statistics

from harness_setup import UNWINDERS
from harness_stats import geomean


SINGLE_THREADED = ["malloc_loop", "mixed_live", "realloc_heavy", "aligned", "stdio_lines"]  # C workloads with one thread
# The profiler's own code: what sampling runs besides the program, mimalloc and libc (whose counts in a
# multi-threaded program under valgrind move with the thread interleaving, see the A/A control).
OWN_OBJECTS = ("libmimalloc-prof", "libunwind", "liblzma", "libgcc_s", "ld-linux", "libm.so")
RSS_FIXED_KIB = 1536        # extra peak RSS <= 1.5 MiB + 1 KiB per live sample
RSS_PER_SAMPLE_KIB = 1
RSS_TRIVIAL_KIB = 128       # /bin/true's peak RSS, stopped, over plain mimalloc's
INSTR_GEOMEAN_C = 1.0015    # sampling / stopped instructions, geometric mean over the C workloads
INSTR_STDIO = 1.002         # ... and on the single-threaded stdio workload
WALL_MAX = 1.15             # sampling / stopped wall time, every workload
STDIO = "stdio_lines"
SAMPLING = ["fp", "table"]   # the acceptance's "sampling": the default unwinder (auto = table) and fp


def acceptance(wl, kinds, names, R, samples, breakdown, trivial=None):
    """The acceptance criteria, per sampling configuration (fp and table; libunwind and libgcc for
    information), and the stopped library's cost to a trivial program."""
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

    # VmHWM at exit, not ru_maxrss: /bin/true unmaps nothing, so its VmHWM at exit is its exact resident
    # size at its peak, while ru_maxrss comes from the kernel's approximate per-CPU counters (plain
    # mimalloc's median reads 200-odd KiB below VmHWM here, and differences move by 100 KiB with them).
    if trivial and (trivial.get("hwm_delta") or trivial.get("delta")):
        d = trivial.get("hwm_delta") or trivial["delta"]
        how = "VmHWM at exit" if trivial.get("hwm_delta") else "ru_maxrss"
        crit("S1", "peak RSS of /bin/true (%s), stopped - plain mimalloc (median of %d pairs)"
             % (how, d["n"]), "stopped", "%+.0f KiB [%+.0f, %+.0f]" % (d["median"], d["lo"], d["hi"]),
             "%+d KiB" % RSS_TRIVIAL_KIB,
             d["median"] <= RSS_TRIVIAL_KIB,
             "VmHWM: an empty object %+.0f KiB; ru_maxrss: ours %+.0f KiB, an empty object %+.0f" % (
                 trivial["hwm_delta_empty"]["median"], trivial["delta"]["median"],
                 trivial["delta_empty"]["median"])
             if trivial.get("delta_empty") and trivial.get("delta") and trivial.get("hwm_delta_empty") else "")
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
