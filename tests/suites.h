/* suites.h - one Suite per concern; tests/check_prof.c runs them all. */
#ifndef MPROF_TEST_SUITES_H
#define MPROF_TEST_SUITES_H

#include <check.h>

#include "config.h"
#include "cxx_helper.h"

/* Skips the running test, saying why: check_prof.c reports it as "ok N - NAME # SKIP reason" in TAP.  For
 * a premise the machine lacks (qemu-user enforces no RLIMIT_AS), never for a failure. */
void mprof_test_skip(const char *fn, const char *reason);
#define MPROF_TEST_SKIP(reason) \
  do {                                 \
    mprof_test_skip(__func__, reason); \
    return;                            \
  } while (0)

/* The library has its table unwinder (MIMALLOC_PROF_UNWIND=table, lib/unwtab.h): x86-64 and aarch64 with
 * glibc 2.35 or later.  Elsewhere asking for it warns and takes auto's choice. */
#include <limits.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)) && \
    (defined(__x86_64__) || defined(__aarch64__))
#define MPROF_TEST_TABLE 1
#else
#define MPROF_TEST_TABLE 0
#endif

Suite *alloc_suite(void);
Suite *interpose_suite(void);
Suite *cxx_suite(void);
Suite *threads_suite(void);
#if MPROF_PPROF
Suite *sampler_suite(void);    /* test_sampler.c: sampling distribution and weights */
Suite *estimator_suite(void);  /* test_estimator.c: no bias in the weights, per entry point */
Suite *sheap_suite(void);      /* test_sheap.c: the sampled-block heap's resident bytes, give-back */
Suite *lazylib_suite(void);    /* test_lazylib.c: zlib, protobuf-c loaded at the first dump, or said */
Suite *mathfn_suite(void);     /* test_mathfn.c: the sampler's log and expm1 against libm's */
Suite *real_programs_suite(void); /* test_real_programs.c: python3, sort, perl, sqlite3 under LD_PRELOAD */
Suite *mi_api_suite(void);     /* test_mi_api.c: mimalloc's own API and heaps, sampled */
Suite *record_suite(void);     /* test_record.c: records, realloc, stale records, start/stop */
Suite *observer_suite(void);   /* test_observer.c: observer contract, stats, races */
Suite *options_suite(void);    /* test_options.c: MIMALLOC_PROF_* options, seeds, budget (subprocesses) */
Suite *hazards_suite(void);    /* test_hazards.c: threads, fork, TSD destructors, mi_collect, huge */
Suite *stacks_suite(void);     /* test_stacks.c: unwinders, stack table, mi_prof_visit (subprocesses) */
Suite *unwind_suite(void);     /* test_unwind.c: loader lock, stack budget, fp reads, fork (subprocesses) */
Suite *pprof_suite(void);      /* test_pprof.c: the profile format, timestamps, dropped frames, go tool pprof */
Suite *dump_suite(void);       /* test_dump.c: dumps, triggers, leak report, errors, full budget */
Suite *peak_suite(void);       /* test_peak.c: the peak in profiles and stats, mi_prof_reset, the timeline */
Suite *labels_suite(void);     /* test_labels.c: thread and bytes labels, label-set bound, lifetimes */
Suite *profiler_suite(void);   /* test_profiler.c: the profiler thread, final signals, fork under dlopen */
Suite *control_suite(void);    /* test_control.c: the control socket: requests, peers, fuzzing, descriptors */
Suite *security_suite(void);   /* test_security.c: secure mode (setuid), planted links, names, -o */
Suite *periodic_suite(void);   /* test_periodic.c: periodic profiles, retention of p, i and u files */
Suite *tool_cli_suite(void);   /* test_tool_cli.c: mimalloc-prof's option checks, usage errors, -o DIR */
Suite *tool_run_suite(void);   /* test_tool_run.c: mimalloc-prof run: signals, final profile */
Suite *tool_report_suite(void);/* test_tool_report.c: top, tree, diff, merge, folded on known profiles */
Suite *tool_model_suite(void); /* test_tool_model.c: drop_frames, folding, lines: ours against pprof's */
Suite *tool_hostile_suite(void); /* test_tool_hostile.c: every command on hostile profiles, in bounds */
Suite *symbolize_suite(void);  /* test_symbolize.c: names, lines, inlines: -g, stripped, debuginfod, python3 */
Suite *tool_flame_suite(void); /* test_tool_flame.c: the flame graph in headless Chromium */
Suite *tool_memtime_suite(void); /* test_tool_memtime.c: peak, lifetimes, labels, timeline (synthetic) */
Suite *tool_memreal_suite(void); /* test_tool_memreal.c: the same on real programs (tests/memtime_probe) */
Suite *tool_service_suite(void); /* test_tool_service.c: ctl, ps, top PID, serve with curl and go tool pprof */
Suite *tool_access_suite(void);  /* test_tool_access.c: ctl, ps, top PID, serve against hostile peers */
#else
Suite *disabled_suite(void);   /* test_disabled.c: the --disable-pprof API */
#endif

#endif
