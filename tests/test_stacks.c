/* test_stacks.c - stack traces of samples (lib/unwind.c, lib/stacktab.c, lib/snapshot.c): each unwinder
 * through a known call chain, the library's own frames never reported, truncation at
 * MIMALLOC_PROF_BT_MAX, a full stack table, mi_prof_visit()'s sums against mi_prof_stats() (catalogue
 * C20), a visitor that allocates, frees and stops (C21), dlopen/dlclose while sampling, and samples
 * taken on a thread's stack and on a makecontext() stack.
 *
 * The unwinder, the depth cap, the budget and MIMALLOC_PROF_ACCUM are read once, when the library loads,
 * so most tests run tests/stack_probe (MPROF_TEST_STACK_PROBE) in a subprocess with a chosen environment
 * and read the "key value" lines it prints.  The visitor and stats tests run in-process with the check
 * runner's defaults (in-use counts only, so MIMALLOC_PROF_ACCUM does not matter); most sample at rate 1,
 * where every request of 39 bytes or more is sampled with weight exactly one object of its own size
 * (p = 1 - e^-s rounds to 1.0), so their numbers are exact.
 * Check's passing assertions allocate too (and at rate 1 are sampled), so measurements are taken first
 * and asserted afterwards.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-prof.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF

#define SEED 0x57ac45ull

/* Unwinders every build has, then libunwind when built with it, the table unwinder where the platform
 * has it, then auto. */
static const char *const all_unwinders[] = {
  "fp", "libgcc",
#if HAVE_LIBUNWIND
  "libunwind",
#endif
#if MPROF_TEST_TABLE
  "table",
#endif
  "auto"};
#define N_UNWINDERS (sizeof all_unwinders / sizeof all_unwinders[0])

/* ---------------------------------------------------------------------------------------------------
   Running tests/stack_probe
--------------------------------------------------------------------------------------------------- */

/* Runs the probe with `args` after its name and `vars` in its environment.  `watchdog_s` seconds of
 * alarm(2) go with it through exec: a probe that hangs (a deadlock) dies of SIGALRM instead of
 * outliving the test. */
static probe_run_t run_probe(const char *const *vars, const char *const *args, unsigned watchdog_s)
{
  probe_opts_t opts = {.env = vars, .watchdog_s = watchdog_s};
  return probe_run(probe_getenv("MPROF_TEST_STACK_PROBE"), args, &opts);
}

/* The value of the line "<phase><name>". */
static uint64_t phase_value(const probe_run_t *run, const char *phase, const char *name)
{
  char key[64];
  snprintf(key, sizeof key, "%s%s", phase, name);
  return probe_value(run, key);
}

/* "MIMALLOC_PROF_UNWIND=<u>" in a caller's buffer. */
static const char *unwind_var(char *buf, size_t size, const char *unwinder)
{
  snprintf(buf, size, "MIMALLOC_PROF_UNWIND=%s", unwinder);
  return buf;
}

/* ---------------------------------------------------------------------------------------------------
   The known chain a -> b -> c -> malloc, per unwinder
--------------------------------------------------------------------------------------------------- */

/* The stack of the one allocation made in probe_chain_c starts with c, b, a (the program's own frames,
 * innermost first) and no frame of it, or of any other visited stack, lies in the library.  `thread`:
 * the chain runs on a new thread (whose stack bounds the fp walk looks up on its first sample). */
static void check_known_chain(const char *unwinder, const char *thread)
{
  char var[64];
  probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, unwinder), NULL},
                              (const char *const[]){"chain", thread, NULL}, 60);
  probe_assert_exit0(&run, unwinder);
  ck_assert_msg(run.err[0] == '\0', "%s: unexpected stderr:\n%s", unwinder, run.err);
  ck_assert_msg(probe_value(&run, "lib_frames") == 0, "%s: %" PRIu64 " frames in the library", unwinder,
                probe_value(&run, "lib_frames"));
  ck_assert_msg(probe_value(&run, "chain_found") == 1, "%s: no stack starts in probe_chain_c", unwinder);
  ck_assert_uint_ge(probe_value(&run, "chain_program_frames"), 3);
  size_t len;
  const char *names = probe_text(&run, "chain_names", &len);
  static const char want[] = "probe_chain_c,probe_chain_b,probe_chain_a,";
  ck_assert_msg(len >= sizeof want - 1 && strncmp(names, want, sizeof want - 1) == 0,
                "%s: the stack starts %.*s (depth %" PRIu64 "), want %s...", unwinder, (int)len, names,
                probe_value(&run, "chain_depth"), want);
  probe_run_free(&run);
}

START_TEST(stacks_known_chain_fp)
{
  check_known_chain("fp", NULL);
}
END_TEST

START_TEST(stacks_known_chain_libgcc)
{
  check_known_chain("libgcc", NULL);
}
END_TEST

#if HAVE_LIBUNWIND
START_TEST(stacks_known_chain_libunwind)
{
  check_known_chain("libunwind", NULL);
}
END_TEST
#endif

#if MPROF_TEST_TABLE
START_TEST(stacks_known_chain_table)
{
  check_known_chain("table", NULL);
}
END_TEST
#endif

START_TEST(stacks_known_chain_auto)
{
  check_known_chain("auto", NULL);
}
END_TEST

START_TEST(stacks_known_chain_on_thread)
{
  for (size_t u = 0; u < N_UNWINDERS; u++) check_known_chain(all_unwinders[u], "thread");
}
END_TEST

/* A function running on a stack of its own (makecontext: coroutines, fibers) mallocs at rate 1: the
 * sample is kept and its stack starts in that function.  libgcc and libunwind follow the unwind tables
 * there; the fp walk reads frames outside the thread's stack through process_vm_readv instead of dropping
 * the sample as MI_PROF_DROP_UNWIND. */
START_TEST(stacks_coroutine_stack_sampled)
{
  char failed[256] = "";         /* every unwinder runs; the failing ones are named at the end */
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    char var[64];
    const char *unwinder = all_unwinders[u];
    probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, unwinder), NULL},
                                (const char *const[]){"coroutine", NULL}, 60);
    probe_assert_exit0(&run, unwinder);
    ck_assert_uint_eq(probe_value(&run, "lib_frames"), 0);
    if (probe_value(&run, "dropped_unwind") != 0 || probe_value(&run, "co_found") != 1 ||
        probe_value(&run, "co_depth") < 1) {
      size_t len = strlen(failed);
      snprintf(failed + len, sizeof failed - len, " %s (dropped_unwind %" PRIu64 ", found %" PRIu64 ")",
               unwinder, probe_value(&run, "dropped_unwind"), probe_value(&run, "co_found"));
    }
    probe_run_free(&run);
  }
  ck_assert_msg(failed[0] == '\0', "the sample taken on a makecontext stack was lost with:%s", failed);
}
END_TEST

/* A frame pointer holding junk near 2^64 (x86-64: code without frame pointers uses rbp freely) stops the
 * fp walk instead of faulting (there `at + 16` wraps to 0, which a naive stack-bounds check passes). */
START_TEST(stacks_fp_junk_frame_pointer)
{
  char var[64];
  probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, "fp"), NULL},
                              (const char *const[]){"junkfp", NULL}, 60);
  probe_assert_exit0(&run, "fp");
  ck_assert_uint_eq(probe_value(&run, "allocations"), 100);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   The library's own frames, across the malloc family
--------------------------------------------------------------------------------------------------- */

#define OWN_KINDS  14            /* stack_probe's probe_own_alloc: entry points exercised */
#define OWN_ROUNDS 100

/* Rate 1 samples every request of the probe (all are of 48 bytes or more): OWN_ROUNDS allocations of
 * each kind, from one call site per kind, all live at the visit.  So exactly OWN_KINDS stacks are in
 * use (kinds 3 and 4 malloc a block and realloc it, moved or in place: a realloc is an allocation of its
 * own, so the block then belongs to the realloc's stack and the malloc's stack is idle, which
 * MIMALLOC_PROF_ACCUM=0 leaves out), each starting in probe_own_alloc, none with a frame in the
 * library.  Samples: one per allocation plus the mallocs of kinds 3 and 4. */
START_TEST(stacks_own_frames_never_appear)
{
  char n_arg[32];
  snprintf(n_arg, sizeof n_arg, "%d", OWN_KINDS * OWN_ROUNDS);
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    char var[64];
    const char *unwinder = all_unwinders[u];
    probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, unwinder),
                                                      "MIMALLOC_PROF_ACCUM=0", NULL},
                                (const char *const[]){"own", n_arg, NULL}, 60);
    probe_assert_exit0(&run, unwinder);
    ck_assert_msg(probe_value(&run, "lib_frames") == 0, "%s: %" PRIu64 " frames in the library", unwinder,
                  probe_value(&run, "lib_frames"));
    ck_assert_msg(probe_value(&run, "first_not_probe") == 0, "%s: %" PRIu64 " stacks start elsewhere",
                  unwinder, probe_value(&run, "first_not_probe"));
    ck_assert_msg(probe_value(&run, "stacks") == OWN_KINDS, "%s: %" PRIu64 " stacks in use, want %d", unwinder,
                  probe_value(&run, "stacks"), OWN_KINDS);
    ck_assert_uint_ge(probe_value(&run, "min_depth"), 2);   /* probe_own_alloc and its caller */
    ck_assert_msg(probe_value(&run, "samples") == OWN_KINDS * OWN_ROUNDS + 2 * OWN_ROUNDS &&
                  probe_value(&run, "live_samples") == OWN_KINDS * OWN_ROUNDS &&
                  probe_value(&run, "dropped_unwind") == 0, "%s: stdout:\n%s", unwinder, run.out);
    probe_run_free(&run);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Truncation at MIMALLOC_PROF_BT_MAX
--------------------------------------------------------------------------------------------------- */

/* An allocation at the bottom of 300 nested calls of probe_recurse: the stack keeps the innermost
 * BT_MAX frames, all of them probe_recurse.  Unset means 64; 1000 is clipped to 256 with one warning.
 * The leaves: malloc, a realloc that moves a sampled block (the longest path through the library:
 * realloc -> move -> malloc -> sampling) and aligned operator new; the library's own frames never take
 * the place of the program's. */
START_TEST(stacks_truncated_at_cap)
{
  static const char *const leaves[] = {"malloc", "realloc", "new_aligned"};
  static const struct {
    const char *setting;     /* NULL: unset */
    uint64_t depth;
  } caps[] = {{"MIMALLOC_PROF_BT_MAX=16", 16}, {NULL, 64}, {"MIMALLOC_PROF_BT_MAX=1000", 256},
              {"MIMALLOC_PROF_BT_MAX=1", 1}};
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    for (size_t k = 0; k < sizeof caps / sizeof caps[0] * 3; k++) {
      char var[64];
      const char *unwinder = all_unwinders[u], *leaf = leaves[k % 3];
      size_t c = k / 3;
      probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, unwinder),
                                                        "MIMALLOC_PROF_ACCUM=0", caps[c].setting, NULL},
                                  (const char *const[]){"deep", "300", leaf, NULL}, 60);
      probe_assert_exit0(&run, unwinder);
      const char *what = caps[c].setting ? caps[c].setting : "BT_MAX unset";
      ck_assert_msg(probe_value(&run, "deep_found") == 1, "%s, %s, %s: %" PRIu64 " stacks start in "
                    "probe_recurse", unwinder, what, leaf, probe_value(&run, "deep_found"));
      ck_assert_msg(probe_value(&run, "deep_depth") == caps[c].depth, "%s, %s, %s: depth %" PRIu64 ", want %"
                    PRIu64, unwinder, what, leaf, probe_value(&run, "deep_depth"), caps[c].depth);
      ck_assert_uint_eq(probe_value(&run, "deep_recurse_frames"), caps[c].depth);
      ck_assert_uint_eq(probe_value(&run, "lib_frames"), 0);
      bool clipped = caps[c].depth == 256;
      ck_assert_msg(clipped ? strstr(run.err, "MIMALLOC_PROF_BT_MAX=\"1000\"") != NULL : run.err[0] == '\0',
                    "%s, %s: stderr:\n%s", unwinder, what, run.err);
      probe_run_free(&run);
    }
  }
}
END_TEST

/* Below the cap nothing is cut: 5 nested calls below the first give 6 probe_recurse frames, then the
 * probe's mode function and main at least. */
START_TEST(stacks_shallow_not_truncated)
{
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    char var[64];
    const char *unwinder = all_unwinders[u];
    probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, unwinder), NULL},
                                (const char *const[]){"deep", "5", NULL}, 60);
    probe_assert_exit0(&run, unwinder);
    ck_assert_uint_eq(probe_value(&run, "deep_found"), 1);
    ck_assert_uint_eq(probe_value(&run, "deep_recurse_frames"), 6);
    ck_assert_msg(probe_value(&run, "deep_depth") >= 8 && probe_value(&run, "deep_depth") < 64,
                  "%s: depth %" PRIu64, unwinder, probe_value(&run, "deep_depth"));
    ck_assert_uint_eq(probe_value(&run, "lib_frames"), 0);
    probe_run_free(&run);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   A full stack table
--------------------------------------------------------------------------------------------------- */

/* Rate 1 samples every 64-byte request (intervals are at most ~38 bytes), so each of the N requests is a
 * sample, exactly; the dropped ones (no stack, or no record) are among them, their weight kept under a
 * "dropped" stack; every request is served whatever happens to its sample. */
static void check_drop_accounting(const probe_run_t *run, uint64_t n)
{
  ck_assert_uint_eq(probe_value(run, "failed"), 0);
  ck_assert_uint_eq(probe_value(run, "bad_blocks"), 0);
  ck_assert_uint_eq(probe_value(run, "samples"), n);
  ck_assert_uint_le(probe_value(run, "dropped_total"), n);
  ck_assert_uint_eq(probe_value(run, "dropped_unwind"), 0);
  ck_assert_uint_le(probe_value(run, "profiler_bytes_peak"), probe_value(run, "profiler_bytes_max"));
}

/* Budget: 30000 distinct stacks (paths through 5 levels of 16 functions: 16^5 > 30000) of about ten
 * frames need ~4 MB of entries and frames, four times the 1 MiB budget: the table stops growing, later
 * samples are dropped for memory, and the first ones were kept.  With the budget used up, a visit of
 * every stack (MIMALLOC_PROF_ACCUM=1) still has room for its snapshot: the table leaves a dump's worth of
 * memory free (lib/pmem.c), and a visit needs less. */
START_TEST(stacks_table_full_drops)
{
  probe_run_t run = run_probe((const char *const[]){"MIMALLOC_PROF_MAX_BYTES=1m", "MIMALLOC_PROF_ACCUM=1", NULL},
                              (const char *const[]){"distinct", "30000", "4", NULL}, 60);
  probe_assert_exit0(&run, "budget");
  check_drop_accounting(&run, 30000);
  ck_assert_uint_gt(probe_value(&run, "dropped_memory"), 0);
  ck_assert_uint_gt(probe_value(&run, "samples"), 0);
  ck_assert_msg(strstr(run.err, "dropping samples") != NULL, "no drop warning; stderr:\n%s", run.err);
  ck_assert_uint_eq(probe_value(&run, "visit_ok"), 1);
  ck_assert_uint_gt(probe_value(&run, "visit_stacks"), 0);
  probe_run_free(&run);
}
END_TEST

/* Lookups without the shard's lock while the table grows (lib/stacktab.c): 4 threads allocate through the
 * same 20000 distinct stacks at once (rate 1: every 64-byte request is sampled), so a stack is added by
 * one thread while the others look it up, and indexes are replaced under their lookups (20000 stacks and
 * a set each, the threads sharing the program's name, are about 2500 entries a shard: three replacements
 * each).  Every sample is counted, none is dropped, and every stack is there (a set per stack and thread
 * at most). */
START_TEST(stacks_threads_share_growing_table)
{
  probe_run_t run = run_probe((const char *const[]){"MIMALLOC_PROF_UNWIND=fp", "MIMALLOC_PROF_ACCUM=1", NULL},
                              (const char *const[]){"distinct", "20000", "4", "4", NULL}, 60);
  probe_assert_exit0(&run, "threads");
  ck_assert_uint_eq(probe_value(&run, "failed"), 0);
  ck_assert_uint_eq(probe_value(&run, "bad_blocks"), 0);
  ck_assert_uint_ge(probe_value(&run, "samples"), 4 * 20000);     /* glibc's own thread set-up adds a few */
  ck_assert_uint_eq(probe_value(&run, "dropped_total"), 0);
  ck_assert_uint_eq(probe_value(&run, "visit_ok"), 1);
  ck_assert_uint_ge(probe_value(&run, "visit_stacks"), 20000);
  ck_assert_uint_le(probe_value(&run, "visit_stacks"), 4 * 20000 + 100);
  probe_run_free(&run);
}
END_TEST

/* Count: a shard of the stack table holds at most 131072 entries (a stack with its label set is two)
 * and there are 16 shards, so of 2200000 distinct stacks (7 levels of 16 functions; BT_MAX=8 keeps all
 * 7 walker frames) at most 2097152 (1048576 with their sets) can be interned and at least 102848
 * samples are dropped as MI_PROF_DROP_STACKS.  Frame
 * pointers keep it fast; the 2 GiB budget lets the stack table commit 1 GiB (its half, lib/pmem.c), which
 * covers the ~300 MB the full table takes with its dump reserve. */
#define COUNT_STACKS     2200000u
#define STACKS_PER_SHARD 131072u
#define STACK_SHARDS     16u
START_TEST(stacks_table_full_drops_count)
{
  char n_arg[32];
  snprintf(n_arg, sizeof n_arg, "%u", COUNT_STACKS);
  probe_run_t run = run_probe((const char *const[]){"MIMALLOC_PROF_UNWIND=fp", "MIMALLOC_PROF_BT_MAX=8",
                                                    "MIMALLOC_PROF_MAX_BYTES=2g", NULL},
                              (const char *const[]){"distinct", n_arg, "6", NULL}, 100);
  probe_assert_exit0(&run, "count");
  check_drop_accounting(&run, COUNT_STACKS);
  ck_assert_uint_ge(probe_value(&run, "dropped_stacks"), COUNT_STACKS - STACK_SHARDS * STACKS_PER_SHARD);
  ck_assert_uint_eq(probe_value(&run, "dropped_memory"), 0);
  probe_run_free(&run);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Visitor sums against the stats
--------------------------------------------------------------------------------------------------- */

typedef struct sums_s {
  uint64_t stacks, busy;           /* busy: something in use */
  uint64_t inuse_objects, inuse_bytes, alloc_objects, alloc_bytes;
  uint64_t lib_frames;
} sums_t;

static bool sum_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)depth;
  sums_t *s = arg;
  s->stacks++;
  s->busy += c->inuse_objects != 0;
  s->inuse_objects += c->inuse_objects;
  s->inuse_bytes += c->inuse_bytes;
  s->alloc_objects += c->alloc_objects;
  s->alloc_bytes += c->alloc_bytes;
  return true;
}

/* Stats, then a visit (nothing allocates between them). */
static bool stats_and_sums(mi_prof_stats_t *st, sums_t *s)
{
  memset(s, 0, sizeof *s);
  return mi_prof_stats(st, sizeof *st) && mi_prof_visit(sum_visitor, s);
}

/* Objects: each stack's count and the total are rounded from the same fixed-point sums (half an object
 * each at most), so they differ by at most stacks/2 + 1/2. */
static void assert_objects_close(uint64_t sum, uint64_t stat, uint64_t stacks)
{
  uint64_t diff = sum > stat ? sum - stat : stat - sum;
  ck_assert_msg(2 * diff <= stacks + 1, "objects: visitor sum %" PRIu64 ", stats %" PRIu64 ", %" PRIu64
                " stacks", sum, stat, stacks);
}

/* Allocation sites of the in-process tests.  Writing site_salt after the call keeps each site's frame
 * on the stack (a tail call would leave only its caller's), so each site is a stack of its own. */
static volatile unsigned site_salt;
#define SITE(name, call)                                                                          \
  __attribute__((noinline)) static void *name(void)                                                \
  {                                                                                               \
    void *p = call;                                                                               \
    site_salt++;                                                                                  \
    return p;                                                                                     \
  }
SITE(site_small, malloc(300))
SITE(site_large, calloc(1, 5000))
SITE(site_r0, malloc(128))
SITE(site_r1, malloc(256))
SITE(site_r2, calloc(2, 100))
SITE(site_r3, aligned_alloc(64, 512))
#undef SITE

/* In-process (ACCUM as the runner has it: only in-use bytes are comparable): rate 4096, seed SEED, 3000
 * blocks from two sites, a third freed.  E[samples] = 1500(1-e^(-300/4096)) + 1500(1-e^(-5000/4096))
 * ~ 106 + 1062, so some are live whatever the seed (P(none) < e^-700).
 * Then in a subprocess, with MIMALLOC_PROF_ACCUM=1 every stack sampled since start is visited, so the
 * allocated sums match too; with ACCUM=0 idle stacks (nothing in use, nor at the peak) are left out (the
 * probe's site c frees all its blocks before the peak, which site b's growing reallocs make later, 2000 x
 * ~3000 B more against c's 2000 x 256 B and a's 1500 x 256 B freed; E[samples at c] = 2000(1-e^(-256/4096))
 * ~ 121, never zero in practice). The peak's sums are the peak total of the stats, exactly in bytes, at
 * every step: all freed, the stacks of the peak stay (with ACCUM=0 too); after mi_prof_reset the peak is
 * what is in use then, nothing. */
START_TEST(stacks_visit_sums_equal_stats)
{
  enum { N = 3000 };
  static void *blocks[N];
  bool started = mi_prof_start_seeded(4096, SEED);   /* asserted later: ck_assert allocates */
  for (size_t i = 0; i < N; i++) blocks[i] = i % 2 ? site_small() : site_large();
  for (size_t i = 0; i < N; i += 3) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  mi_prof_stats_t st;
  sums_t s;
  bool ok = stats_and_sums(&st, &s);
  for (size_t i = 0; i < N; i++) free(blocks[i]);
  ck_assert(started);
  ck_assert(mi_prof_stop());
  ck_assert(ok);
  ck_assert_uint_gt(st.live_samples, 0);
  ck_assert_uint_ge(s.busy, 2);
  ck_assert_uint_eq(s.inuse_bytes, st.inuse_bytes);
  assert_objects_close(s.inuse_objects, st.inuse_objects, s.stacks);

  for (int accum = 0; accum <= 1; accum++) {
    probe_run_t run = run_probe((const char *const[]){accum ? "MIMALLOC_PROF_ACCUM=1" : "MIMALLOC_PROF_ACCUM=0",
                                                      NULL},
                                (const char *const[]){"sums", NULL}, 60);
    probe_assert_exit0(&run, accum ? "ACCUM=1" : "ACCUM=0");
    static const char *const phases[] = {"", "final_", "reset_"};   /* mixed, all freed, after reset */
    for (size_t p = 0; p < 3; p++) {
      const char *ph = phases[p];
      uint64_t stacks = phase_value(&run, ph, "stacks");
      ck_assert_uint_eq(phase_value(&run, ph, "sum_inuse_bytes"), phase_value(&run, ph, "stat_inuse_bytes"));
      assert_objects_close(phase_value(&run, ph, "sum_inuse_objects"),
                           phase_value(&run, ph, "stat_inuse_objects"), stacks);
      ck_assert_uint_eq(phase_value(&run, ph, "sum_peak_bytes"), phase_value(&run, ph, "stat_peak_bytes"));
      assert_objects_close(phase_value(&run, ph, "sum_peak_objects"),
                           phase_value(&run, ph, "stat_peak_objects"), stacks);
      if (accum) {
        ck_assert_uint_eq(phase_value(&run, ph, "sum_alloc_bytes"), phase_value(&run, ph, "stat_alloc_bytes"));
        assert_objects_close(phase_value(&run, ph, "sum_alloc_objects"),
                             phase_value(&run, ph, "stat_alloc_objects"), stacks);
        ck_assert_uint_eq(stacks, probe_value(&run, "stacks"));   /* the same stacks every time */
      } else {
        ck_assert_uint_eq(phase_value(&run, ph, "idle_stacks"), 0);
      }
    }
    if (accum) {
      ck_assert_uint_ge(probe_value(&run, "idle_stacks"), 1);          /* site c */
      ck_assert_uint_eq(probe_value(&run, "final_sum_inuse_bytes"), 0);
      ck_assert_uint_gt(probe_value(&run, "final_stat_alloc_bytes"), 0);
      ck_assert_uint_eq(probe_value(&run, "reset_stat_alloc_bytes"), 0);
    } else {
      ck_assert_uint_lt(probe_value(&run, "sum_alloc_bytes"), probe_value(&run, "stat_alloc_bytes"));
      ck_assert_uint_eq(probe_value(&run, "final_sum_inuse_bytes"), 0);   /* all freed: the stacks of the */
      ck_assert_uint_ge(probe_value(&run, "final_stacks"), 1);             /* peak, nothing else */
      ck_assert_uint_eq(probe_value(&run, "reset_stacks"), 0);             /* the peak restarts at 0 */
    }
    ck_assert_uint_eq(probe_value(&run, "final_stat_inuse_bytes"), 0);
    probe_run_free(&run);
  }
}
END_TEST

/* C20: the stats struct is checked by size, and after mallocs, frees and reallocs (in place and moved)
 * its fields agree with the visitor and, at rate 1, with the exact byte counts: every request here is
 * sampled with weight one object of its own size. */
enum { STRUCT_N = 300 };

typedef struct struct_run_s {
  mi_prof_stats_t st, st_end;
  sums_t s, s_end;
  size_t live_bytes, live_records;
  bool ok, ok_end;
} struct_run_t;

static void struct_traffic(struct_run_t *r, uint64_t *want_inuse, uint64_t *want_alloc, uint64_t *want_live)
{
  static char *x[STRUCT_N], *y[STRUCT_N];
  uint64_t inuse = 0, alloc = 0, live = 0;
  for (size_t i = 0; i < STRUCT_N; i++) {
    x[i] = site_small();                 /* 300 bytes */
    y[i] = malloc(3000);
    inuse += 3300, alloc += 3300, live += 2;
  }
  for (size_t i = 0; i < STRUCT_N / 3; i++) {
    char *q = realloc(x[i], 200);        /* at rate 1 every realloc is a sample, in place or moved */
    alloc += 200;
    x[i] = q;
    inuse -= 100;
    q = realloc(y[i], 100000);
    alloc += 100000;
    y[i] = q;
    inuse += 97000;
  }
  for (size_t i = STRUCT_N / 3; i < 2 * STRUCT_N / 3; i++) {
    free(x[i]);
    x[i] = NULL;
    inuse -= 300, live--;
  }
  r->ok = stats_and_sums(&r->st, &r->s);
  mi_prof_debug_stats(&r->live_records, &r->live_bytes);
  for (size_t i = 0; i < STRUCT_N; i++) free(x[i]), free(y[i]);
  r->ok_end = stats_and_sums(&r->st_end, &r->s_end);
  *want_inuse = inuse, *want_alloc = alloc, *want_live = live;
}

START_TEST(stacks_stats_struct_with_stacks)
{
  mi_prof_stats_t st;
  errno = 0;
  ck_assert(!mi_prof_stats(NULL, sizeof st));
  ck_assert_int_eq(errno, EINVAL);
  errno = 0;
  ck_assert(!mi_prof_stats(&st, sizeof st - sizeof(uint64_t)));
  ck_assert_int_eq(errno, EINVAL);
  errno = 0;
  ck_assert(!mi_prof_stats(&st, sizeof st + sizeof(uint64_t)));
  ck_assert_int_eq(errno, EINVAL);

  struct_run_t r;
  uint64_t want_inuse, want_alloc, want_live;
  bool started = mi_prof_start_seeded(1, SEED);   /* asserted later: ck_assert allocates */
  struct_traffic(&r, &want_inuse, &want_alloc, &want_live);
  bool stopped = mi_prof_stop();
  ck_assert(started && stopped);
  ck_assert(r.ok && r.ok_end);
  ck_assert_uint_eq(r.st.inuse_bytes, want_inuse);
  ck_assert_uint_eq(r.st.live_samples, want_live);
  ck_assert_uint_eq(r.st.inuse_objects, want_live);
  ck_assert_uint_eq(r.live_records, want_live);
  ck_assert_uint_eq(r.live_bytes, want_inuse);
  ck_assert_uint_eq(r.st.alloc_bytes, want_alloc);
  ck_assert_uint_eq(r.s.inuse_bytes, r.st.inuse_bytes);
  ck_assert_uint_eq(r.s.inuse_objects, r.st.inuse_objects);   /* whole objects: no rounding at rate 1 */
  ck_assert_uint_ge(r.s.busy, 3);        /* site_small, malloc(3000), the reallocs */
  ck_assert_uint_eq(r.st_end.inuse_bytes, 0);
  ck_assert_uint_eq(r.st_end.inuse_objects, 0);
  ck_assert_uint_eq(r.st_end.live_samples, 0);
  ck_assert_uint_eq(r.s_end.inuse_bytes, 0);
  ck_assert_uint_eq(r.s_end.busy, 0);
  ck_assert_uint_eq(r.st_end.alloc_bytes, want_alloc);

  /* After stop: what was recorded is kept (the same stacks; nothing in use, all was freed); a reset
   * while stopped discards it: nothing to visit, every counter 0. */
  sums_t after;
  ck_assert(stats_and_sums(&st, &after));
  ck_assert_uint_eq(after.stacks, r.s_end.stacks);
  ck_assert_uint_gt(after.stacks, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_uint_eq(st.alloc_bytes, want_alloc);
  ck_assert(mi_prof_reset());
  ck_assert(stats_and_sums(&st, &after));
  ck_assert_uint_eq(after.stacks, 0);
  ck_assert_uint_eq(st.alloc_bytes, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C21: a reentrant visitor
--------------------------------------------------------------------------------------------------- */

enum { REENTRY_BLOCKS = 2000 };
static char *reentry_blocks[REENTRY_BLOCKS];


static void reentry_fill(void)
{
  void *(*const site[4])(void) = {site_r0, site_r1, site_r2, site_r3};
  for (size_t i = 0; i < REENTRY_BLOCKS; i++) reentry_blocks[i] = site[i % 4]();
}

typedef struct reentry_s {
  uint64_t calls, inuse_bytes;      /* what the visit delivered */
  uint64_t stats_ok, nested_ok, nested_calls, stop_ok, reset_ok;
  uint64_t stop_at, false_at;       /* 1-based call that stops the profiler / returns false (0: never) */
} reentry_t;

static bool count_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)depth, (void)c;
  ++*(uint64_t *)arg;
  return true;
}

/* Allocates and frees (sampled at rate 1), frees and reallocs sampled blocks of the snapshot, reads the
 * stats, resets, visits again inside, and may stop the profiler. */
static bool reentrant_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)depth;
  reentry_t *r = arg;
  r->calls++;
  r->inuse_bytes += c->inuse_bytes;
  void *tmp[8];
  for (size_t i = 0; i < 8; i++) tmp[i] = malloc(i % 2 ? 100 : 70000);
  for (size_t i = 0; i < 8; i++) free(tmp[i]);
  for (size_t i = r->calls - 1; i < REENTRY_BLOCKS; i += 7) {   /* frees a seventh of what is left */
    free(reentry_blocks[i]);
    reentry_blocks[i] = NULL;
  }
  if (r->calls == 2) {
    for (size_t i = 1; i < REENTRY_BLOCKS; i += 5) {
      char *q = realloc(reentry_blocks[i], 3000);
      if (q != NULL) reentry_blocks[i] = q;
    }
    r->reset_ok += mi_prof_reset() || errno == EALREADY;
  }
  mi_prof_stats_t st;
  r->stats_ok += mi_prof_stats(&st, sizeof st);
  uint64_t nested = 0;
  r->nested_ok += mi_prof_visit(count_visitor, &nested);
  r->nested_calls += nested;
  if (r->calls == r->stop_at) r->stop_ok += mi_prof_stop();
  return r->calls != r->false_at;
}

static void reentry_free_all(void)
{
  for (size_t i = 0; i < REENTRY_BLOCKS; i++) {
    free(reentry_blocks[i]);
    reentry_blocks[i] = NULL;
  }
}

START_TEST(stacks_visit_reentrancy)
{
  /* Phase 1: the snapshot stays as taken while the visitor changes everything under it. */
  bool started = mi_prof_start_seeded(1, SEED);   /* asserted later: ck_assert allocates */
  reentry_fill();
  sums_t before;
  mi_prof_stats_t st_before;
  bool ok_before = stats_and_sums(&st_before, &before);
  reentry_t r = {0};
  bool ok = mi_prof_visit(reentrant_visitor, &r);
  mi_prof_stats_t st_after;
  sums_t after;
  bool ok_after = stats_and_sums(&st_after, &after);
  bool enabled = mi_prof_is_enabled();
  ck_assert(started && ok_before && ok && ok_after && enabled);
  ck_assert_uint_ge(before.stacks, 4);                 /* the four sites */
  ck_assert_uint_eq(r.calls, before.stacks);
  ck_assert_uint_eq(r.inuse_bytes, before.inuse_bytes);
  ck_assert_uint_eq(r.stats_ok, r.calls);
  ck_assert_uint_eq(r.nested_ok, r.calls);
  ck_assert_uint_gt(r.nested_calls, 0);
  ck_assert_uint_eq(r.reset_ok, 1);
  ck_assert_uint_eq(after.inuse_bytes, st_after.inuse_bytes);   /* consistent after the visitor's work */
  assert_objects_close(after.inuse_objects, st_after.inuse_objects, after.stacks);
  ck_assert_uint_eq(st_after.untracked_frees, 0);

  /* Phase 2: returning false ends the visit. */
  reentry_t first = {.false_at = 1};
  ck_assert(mi_prof_visit(reentrant_visitor, &first));
  ck_assert_uint_eq(first.calls, 1);

  /* Phase 3: stopping inside the visitor; the rest of the snapshot is still delivered. */
  reentry_free_all();
  reentry_fill();
  ok_before = stats_and_sums(&st_before, &before);
  reentry_t stop = {.stop_at = 1};
  ok = mi_prof_visit(reentrant_visitor, &stop);
  enabled = mi_prof_is_enabled();
  ok_after = stats_and_sums(&st_after, &after);
  reentry_free_all();
  ck_assert(ok_before && ok && ok_after);
  ck_assert(!enabled);
  ck_assert_uint_eq(stop.stop_ok, 1);
  ck_assert_uint_eq(stop.calls, before.stacks);
  ck_assert_uint_eq(stop.inuse_bytes, before.inuse_bytes);
  ck_assert_uint_eq(after.stacks, 0);
  ck_assert_uint_eq(st_after.inuse_bytes, 0);
  ck_assert_uint_eq(st_after.live_samples, 0);

  errno = 0;
  ck_assert(!mi_prof_visit(NULL, NULL));
  ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   dlopen/dlclose while sampling
--------------------------------------------------------------------------------------------------- */

/* One thread allocates (sampled at rate 256: most of its 64..1087-byte requests are) while the main
 * thread dlopens the test module, runs it (8 blocks of 1 KiB, summing 0+1+..+7 = 28) and dlcloses it
 * 2000 times.  The unwinders read the loader's state while it changes: no deadlock (the probe's 15 s
 * watchdog, then Check's 20 s timeout), no crash, no failed unwind. */
#define DL_ITERATIONS 2000
static void check_dlopen_loop(const char *unwinder)
{
  const char *module = probe_getenv("MPROF_TEST_DL_MODULE");
  char var[64], n_arg[32];
  snprintf(n_arg, sizeof n_arg, "%d", DL_ITERATIONS);
  probe_run_t run = run_probe((const char *const[]){unwind_var(var, sizeof var, unwinder), NULL},
                              (const char *const[]){"dlloop", module, n_arg, "256", NULL}, 15);
  probe_assert_exit0(&run, unwinder);
  ck_assert_uint_eq(probe_value(&run, "iterations"), DL_ITERATIONS);
  ck_assert_uint_eq(probe_value(&run, "module_sum"), 28 * DL_ITERATIONS);
  ck_assert_uint_gt(probe_value(&run, "samples"), 0);
  ck_assert_uint_eq(probe_value(&run, "dropped_unwind"), 0);
  probe_run_free(&run);
}

START_TEST(stacks_dlopen_loop_libgcc)
{
  check_dlopen_loop("libgcc");
}
END_TEST

#if HAVE_LIBUNWIND
START_TEST(stacks_dlopen_loop_libunwind)
{
  check_dlopen_loop("libunwind");
}
END_TEST
#endif

#if MPROF_TEST_TABLE
START_TEST(stacks_dlopen_loop_table)
{
  check_dlopen_loop("table");
}
END_TEST
#endif

Suite *stacks_suite(void)
{
  Suite *s = suite_create("stacks");
  TCase *tc = tcase_create("stacks");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, stacks_known_chain_fp);
  tcase_add_test(tc, stacks_known_chain_libgcc);
#if HAVE_LIBUNWIND
  tcase_add_test(tc, stacks_known_chain_libunwind);
#endif
#if MPROF_TEST_TABLE
  tcase_add_test(tc, stacks_known_chain_table);
#endif
  tcase_add_test(tc, stacks_known_chain_auto);
  tcase_add_test(tc, stacks_known_chain_on_thread);
  tcase_add_test(tc, stacks_coroutine_stack_sampled);
  tcase_add_test(tc, stacks_fp_junk_frame_pointer);
  tcase_add_test(tc, stacks_own_frames_never_appear);
  tcase_add_test(tc, stacks_truncated_at_cap);
  tcase_add_test(tc, stacks_shallow_not_truncated);
  tcase_add_test(tc, stacks_table_full_drops);
  tcase_add_test(tc, stacks_threads_share_growing_table);
  tcase_add_test(tc, stacks_table_full_drops_count);
  tcase_add_test(tc, stacks_visit_sums_equal_stats);
  tcase_add_test(tc, stacks_stats_struct_with_stacks);
  tcase_add_test(tc, stacks_visit_reentrancy);
  suite_add_tcase(s, tc);
  TCase *dl = tcase_create("stacks_dlopen");
  tcase_set_timeout(dl, 20);
  tcase_add_test(dl, stacks_dlopen_loop_libgcc);
#if HAVE_LIBUNWIND
  tcase_add_test(dl, stacks_dlopen_loop_libunwind);
#endif
#if MPROF_TEST_TABLE
  tcase_add_test(dl, stacks_dlopen_loop_table);
#endif
  suite_add_tcase(s, dl);
  return s;
}

#endif /* MPROF_PPROF */
