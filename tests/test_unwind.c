/* test_unwind.c - the unwinders' hazards (lib/unwind.c): the first start against a module constructor
 * (the loader's lock), the stack budget (alternate signal stacks, small thread stacks), the fp walk's
 * reads (the main stack's guard gap, no process_vm_readv) and fork while an unwind is under way.
 *
 * Each case runs tests/unwind_probe, fork_probe or loader_probe in a subprocess, one unwinder per run, with a
 * watchdog (alarm(2) through exec): a deadlock ends as SIGALRM and a failed test, never a hung suite.
 * Nothing here sleeps: the probes synchronise with pipes and the kernel's view of their threads.
 * The constructor and 8 KiB alternate stack cases, whose outcome can depend on timing, run RUNS times each.
 */
#define _GNU_SOURCE 1   /* dl_iterate_phdr */

#include <dlfcn.h>
#include <inttypes.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "mimalloc-prof.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF

#define RUNS 50

static const char *const all_unwinders[] = {
  "fp", "libgcc",
#if HAVE_LIBUNWIND
  "libunwind",
#endif
#if MPROF_TEST_TABLE
  "table",
#endif
};
#define N_UNWINDERS (sizeof all_unwinders / sizeof all_unwinders[0])

/* The stack budget mimalloc_prof(3) documents (STACK TRACES) for x86-64, per unwinder, besides 8 bytes
 * per frame of MIMALLOC_PROF_BT_MAX + 16; and what a thread's first sample needs to look its stack up
 * (the process's first sample also maps the sampled heap's first chunk and the tables: 2.2 KiB measured
 * with fp, rounded up). */
#define BUDGET_FP        1536u
#define BUDGET_TABLE     2560u
#define BUDGET_LIBGCC    3072u
#define BUDGET_LIBUNWIND 7040u
#define BUDGET_LOOKUP    2560u

static unsigned budget(const char *unwinder)
{
  if (strcmp(unwinder, "fp") == 0) return BUDGET_FP;
  if (strcmp(unwinder, "table") == 0) return BUDGET_TABLE;
  return strcmp(unwinder, "libgcc") == 0 ? BUDGET_LIBGCC : BUDGET_LIBUNWIND;
}

static probe_run_t run_probe_as(const char *probe, const char *unwinder, const char *const *extra_env,
                                 const char *const *args, rlim_t stack_limit)
{
  char var[64];
  const char *env[8] = {NULL};
  size_t n = 0;
  snprintf(var, sizeof var, "MIMALLOC_PROF_UNWIND=%s", unwinder);
  env[n++] = var;
  for (size_t i = 0; extra_env != NULL && extra_env[i] != NULL && n < 7; i++) env[n++] = extra_env[i];
  probe_opts_t opts = {.env = env, .stack_limit = stack_limit, .watchdog_s = 60};
  return probe_run(probe_getenv(probe), args, &opts);
}

static probe_run_t run_unwind_probe(const char *unwinder, const char *const *extra_env,
                                    const char *const *args, rlim_t stack_limit)
{
  return run_probe_as("MPROF_TEST_UNWIND_PROBE", unwinder, extra_env, args, stack_limit);
}

static probe_run_t run_fork_probe(const char *unwinder, const char *const *args)
{
  return run_probe_as("MPROF_TEST_FORK_PROBE", unwinder, NULL, args, 0);
}

/* The same with libgcc_s loaded before the session starts (as in a C++ program) or not (a C program):
 * priming loads it either way, with libunwind too (lib/unwind.c), so a fork child can unwind with it. */
static probe_run_t run_fork_probe_gcc(const char *unwinder, bool libgcc_s, const char *const *args)
{
  return run_probe_as("MPROF_TEST_FORK_PROBE", unwinder,
                      libgcc_s ? (const char *const[]){"FORK_PROBE_LIBGCC_S=1", NULL} : NULL, args, 0);
}

/* ---------------------------------------------------------------------------------------------------
   The first start against a constructor
--------------------------------------------------------------------------------------------------- */

/* A module constructor (loader lock held) waits while another thread makes the process's first
 * mi_prof_start(), which must load the unwinder and so waits for the loader; then the constructor calls
 * mi_prof_stats() or mi_prof_start().  Everything finishes (start does not hold the API lock while it
 * loads the unwinder: with libunwind and libgcc that would hang).  With libunwind and libgcc the starting
 * thread is always seen waiting inside the loader first (the probe's b_blocked: the interleaving really
 * happened); fp loads nothing, nor does the table unwinder in this C program (no libgcc_s to prime; it
 * asks dl_iterate_phdr, which the constructor does not hold).  Allocations made once both are done are
 * sampled with their stacks. */
#define NO_PROC_SYSCALL "/proc/self/task/TID/syscall does not show the program's own system calls (qemu-user " \
                        "shows the emulator's): the interleaving cannot be observed"

/* False when the probe could not watch (NO_PROC_SYSCALL): the test skips. */
static bool check_constructor(const char *call)
{
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    char var[64];
    snprintf(var, sizeof var, "MIMALLOC_PROF_UNWIND=%s", all_unwinders[u]);
    bool dwarf = strcmp(all_unwinders[u], "fp") != 0 && strcmp(all_unwinders[u], "table") != 0;
    for (int r = 0; r < RUNS; r++) {
      probe_opts_t opts = {.env = (const char *const[]){var, NULL}, .watchdog_s = 20};
      probe_run_t run = probe_run(probe_getenv("MPROF_TEST_LOADER_PROBE"),
                                  (const char *const[]){probe_getenv("MPROF_TEST_CTOR_PLUGIN"), call, NULL}, &opts);
      probe_assert_exit0(&run, all_unwinders[u]);
      if (strstr(run.out, "skipped 1") != NULL) {
        probe_run_free(&run);
        return false;
      }
      ck_assert_msg(probe_value(&run, "b_blocked") == (dwarf ? 1 : 0), "%s, %s, run %d: b_blocked %" PRIu64,
                    all_unwinders[u], call, r, probe_value(&run, "b_blocked"));
      ck_assert_uint_eq(probe_value(&run, "b_started"), 1);
      ck_assert_uint_eq(probe_value(&run, "ctor_ok"), 1);
      ck_assert_uint_eq(probe_value(&run, "late_samples"), 8);
      ck_assert_uint_eq(probe_value(&run, "late_dropped_unwind"), 0);
      probe_run_free(&run);
    }
  }
  return true;
}

START_TEST(unwind_first_start_vs_constructor_stats)
{
  if (!check_constructor("stats")) MPROF_TEST_SKIP(NO_PROC_SYSCALL);
}
END_TEST

START_TEST(unwind_first_start_vs_constructor_start)
{
  if (!check_constructor("start")) MPROF_TEST_SKIP(NO_PROC_SYSCALL);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Stack budget
--------------------------------------------------------------------------------------------------- */

/* Stack used below malloc's caller, on a thread whose stack is painted: a sample takes at most the
 * documented budget for its unwinder plus its frame buffer (a measurement from the caller includes the
 * library's entry frames too, so this is stricter than the check the library makes); a thread's first
 * sample also looks up its stack.  Nothing is dropped on a 1 MiB stack.  The budgets were measured on
 * x86-64; elsewhere the stack tests below check what matters: no overflow. */
START_TEST(unwind_stack_use_within_budget)
{
#if !defined(__x86_64__)
  return;
#endif
  static const unsigned bt_max[] = {64, 256};
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    for (size_t b = 0; b < 2; b++) {
      char var[64];
      snprintf(var, sizeof var, "MIMALLOC_PROF_BT_MAX=%u", bt_max[b]);
      probe_run_t run = run_unwind_probe(all_unwinders[u], (const char *const[]){var, NULL},
                                         (const char *const[]){"stackuse", NULL}, 0);
      probe_assert_exit0(&run, all_unwinders[u]);
      uint64_t frames = 8u * (bt_max[b] + 16), allowed = budget(all_unwinders[u]) + frames;
      uint64_t first_allowed = allowed > BUDGET_LOOKUP ? allowed : BUDGET_LOOKUP;
      ck_assert_msg(probe_value(&run, "sample") <= allowed && probe_value(&run, "sample_first") <= first_allowed,
                    "%s, BT_MAX %u: a sample used %" PRIu64 " bytes of stack (the first %" PRIu64 "), budget %"
                    PRIu64, all_unwinders[u], bt_max[b], probe_value(&run, "sample"),
                    probe_value(&run, "sample_first"), allowed);
      ck_assert_uint_eq(probe_value(&run, "dropped_unwind"), 0);
      probe_run_free(&run);
    }
  }
}
END_TEST

/* One altstack run; NULL unwinder: profiling stopped (the control). */
static probe_run_t run_altstack(const char *unwinder, size_t size)
{
  char arg[32];
  snprintf(arg, sizeof arg, "%zu", size);
  return run_unwind_probe(unwinder != NULL ? unwinder : "fp", NULL,
                          (const char *const[]){"altstack", arg, unwinder != NULL ? NULL : "stopped", NULL}, 0);
}

/* A handler on an 8 KiB alternate stack (with a guard page below it) does 64 malloc/free pairs at rate
 * 1, four times: it runs with every unwinder, RUNS times each.  (Skipped where it does not run even
 * without sampling: a CPU whose signal frame leaves too little of 8 KiB.) */
START_TEST(unwind_altstack_8k)
{
  probe_run_t control = run_altstack(NULL, 8192);
  if (!WIFEXITED(control.status) || WEXITSTATUS(control.status) != 0) {
    fprintf(stderr, "unwind_altstack_8k: skipped: the handler cannot run on 8 KiB here even unprofiled\n");
    probe_run_free(&control);
    return;
  }
  probe_run_free(&control);
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    for (int r = 0; r < RUNS; r++) {
      probe_run_t run = run_altstack(all_unwinders[u], 8192);
      probe_assert_exit0(&run, all_unwinders[u]);
      ck_assert_uint_eq(probe_value(&run, "pairs"), 256);
      probe_run_free(&run);
    }
  }
}
END_TEST

/* Smaller alternate stacks, sized from the control: plain_use = what the signal frame, the handler and
 * mimalloc take of an 8 KiB stack unprofiled; then stacks that leave SPARE bytes beyond that.  A sample
 * that does not fit its unwinder is recorded without a stack; that itself needs about 0.5 KiB
 * (mimalloc_prof(3)), so from 1 KiB of spare up every unwinder runs, and every handler allocation is a
 * sample (dropped samples keep their weight), with a stack or for want of stack without. */
START_TEST(unwind_altstack_sweep)
{
  static const size_t spare[] = {1024, 1536, 2048, 3072, 4096};
  probe_run_t control = run_altstack(NULL, 8192);
  if (!WIFEXITED(control.status) || WEXITSTATUS(control.status) != 0) {
    probe_run_free(&control);
    return;                        /* said by unwind_altstack_8k */
  }
  size_t plain_use = 8192 - probe_value(&control, "alt_untouched");
  probe_run_free(&control);
  for (size_t s = 0; s < sizeof spare / sizeof spare[0]; s++) {
    size_t size = (plain_use + spare[s] + 15) & ~(size_t)15;
    for (size_t u = 0; u < N_UNWINDERS; u++) {
      probe_run_t run = run_altstack(all_unwinders[u], size);
      probe_assert_exit0(&run, all_unwinders[u]);
      ck_assert_uint_eq(probe_value(&run, "pairs"), 256);
      ck_assert_msg(probe_value(&run, "samples") == 256 && probe_value(&run, "dropped_unwind") <= 256,
                    "%s, %zu-byte stack: %" PRIu64 " samples, %" PRIu64 " without a stack", all_unwinders[u],
                    size, probe_value(&run, "samples"), probe_value(&run, "dropped_unwind"));
      probe_run_free(&run);
    }
  }
}
END_TEST

/* Threads with the smallest stack pthread allows nest calls until 8 KiB down to 1 KiB of it remain, then
 * do 64 malloc/free pairs at rate 1: they run unprofiled (the premise), and so they do with every
 * unwinder.  Each thread's first allocation is pthread_getattr_np()'s own (the probe asks for its stack
 * bounds first thing): a lookup of ours from inside it would deadlock. */
START_TEST(unwind_tiny_thread_stacks)
{
  static const char *const args[] = {"tinystack", "8192", "4096", "3072", "2048", "1536", "1024", NULL};
  probe_run_t control = run_unwind_probe("fp", (const char *const[]){"TINY_SAMPLING=0", NULL}, args, 0);
  probe_assert_exit0(&control, "unprofiled");
  probe_run_free(&control);
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    probe_run_t run = run_unwind_probe(all_unwinders[u], NULL, args, 0);
    probe_assert_exit0(&run, all_unwinders[u]);
    ck_assert_uint_eq(probe_value(&run, "pairs"), 6 * 64);
    probe_run_free(&run);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   What the fp walk reads (the main stack's guard gap, process_vm_readv)
--------------------------------------------------------------------------------------------------- */

/* Under `ulimit -s unlimited` pthread_getattr_np() reports the main thread's stack as reaching down to
 * the previous mapping (checked: unmapped_in_attr).  A frame pointer into the kernel's guard gap there,
 * and one into the range the stack could grow into, reached from a makecontext() stack below: the walk
 * keeps the one frame before it, does not fault and does not grow the stack.  Skipped where the stack
 * has a mapping right below it (qemu-user's fixed stack and guard page): there is no gap. */
START_TEST(unwind_fp_guard_gap)
{
  probe_run_t run = run_unwind_probe("fp", NULL, (const char *const[]){"guardgap", NULL}, RLIM_INFINITY);
  probe_assert_exit0(&run, "guardgap");
  if (probe_value(&run, "unmapped_in_attr") == 0 && probe_value(&run, "prev_hi") == probe_value(&run, "stack_lo")) {
    probe_run_free(&run);
    MPROF_TEST_SKIP("the main thread's stack has another mapping right below it (qemu-user maps a fixed stack "
                    "with its guard page there): no gap to walk into");
  }
  ck_assert_uint_eq(probe_value(&run, "unmapped_in_attr"), 1);
  if (strstr(run.out, "skipped 1") == NULL) {
    ck_assert_uint_eq(probe_value(&run, "gap_depth"), 1);
    ck_assert_uint_eq(probe_value(&run, "grow_depth"), 1);
    ck_assert_uint_eq(probe_value(&run, "stack_grew"), 0);
  }
  probe_run_free(&run);
}
END_TEST

/* process_vm_readv refused by a seccomp filter, as ENOSYS (qemu-user) and EPERM (container policies):
 * the main stack's chain is walked in full, a makecontext() stack's sample keeps its first frame (it is
 * not dropped), a frame pointer into unmapped memory still ends the walk. */
START_TEST(unwind_fp_without_process_vm_readv)
{
  static const char *const errs[] = {"ENOSYS", "EPERM"};
  for (size_t e = 0; e < 2; e++) {
    probe_run_t run = run_unwind_probe("fp", NULL, (const char *const[]){"novmreadv", errs[e], NULL}, 0);
    probe_assert_exit0(&run, errs[e]);
    if (strstr(run.out, "skipped 1") != NULL) {
      probe_run_free(&run);
      MPROF_TEST_SKIP("no seccomp filters here (qemu-user does not emulate them)");
    }
    ck_assert_uint_eq(probe_value(&run, "refused"), 1);
    ck_assert_uint_eq(probe_value(&run, "main_found"), 1);
    ck_assert_uint_ge(probe_value(&run, "main_depth"), 3);   /* probe_main_leaf, mode, main */
    ck_assert_uint_eq(probe_value(&run, "co_found"), 1);
    ck_assert_uint_ge(probe_value(&run, "co_depth"), 1);
    ck_assert_uint_le(probe_value(&run, "junk_depth"), 1);
    ck_assert_uint_eq(probe_value(&run, "dropped_unwind"), 0);
    probe_run_free(&run);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   libunwind's cost: a thread's first samples are unwound by libgcc
--------------------------------------------------------------------------------------------------- */

#if HAVE_LIBUNWIND
/* With libunwind, a new thread's first 8 samples are unwound by libgcc (libunwind's first unwind on a
 * thread maps and fills a 256 KiB cache).  A thread samples three sites 8 times each, interleaved, so
 * each site gets samples from both: a shallow call, 40 nested calls, and a signal handler (the signal
 * frame is where unwinders differ most).  The stack table keeps one entry per distinct frame list, so
 * one stack per site means both gave the same frames. */
START_TEST(unwind_libgcc_and_libunwind_agree)
{
  probe_run_t run = run_unwind_probe("libunwind", NULL, (const char *const[]){"hybrid", NULL}, 0);
  probe_assert_exit0(&run, "libunwind");
  ck_assert_uint_eq(probe_value(&run, "stacks_probe_hyb_shallow"), 1);
  ck_assert_uint_eq(probe_value(&run, "stacks_probe_hyb_deep"), 1);
  ck_assert_uint_eq(probe_value(&run, "stacks_probe_hyb_handler"), 1);
  ck_assert_uint_eq(probe_value(&run, "dropped_unwind"), 0);
  probe_run_free(&run);
}
END_TEST
#endif

/* ---------------------------------------------------------------------------------------------------
   fork
--------------------------------------------------------------------------------------------------- */

/* fork() from a signal handler that interrupted the forking thread's own unwind: the fork handlers must
 * not wait for that unwind, which can only end once the handler returns.  Parent and child go on; the
 * child's samples get stacks (its only thread was the one unwinding) from libgcc, which priming loaded
 * whether or not the program had libgcc_s before.  libgcc and libunwind only: the probe recognises
 * their code by its object, and fp takes no lock that anything waits for. */
START_TEST(unwind_fork_in_handler_during_unwind)
{
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    if (strcmp(all_unwinders[u], "fp") == 0 || strcmp(all_unwinders[u], "table") == 0) continue;
    for (int gcc = 0; gcc < 2; gcc++) {
      probe_run_t run = run_fork_probe_gcc(all_unwinders[u], gcc, (const char *const[]){"forksig", NULL});
      probe_assert_exit0(&run, all_unwinders[u]);
      ck_assert_uint_eq(probe_value(&run, "child_exit"), 0);
      ck_assert_uint_eq(probe_value(&run, "child_samples"), 8);
      ck_assert_uint_eq(probe_value(&run, "child_dropped_fork"), 0);
      ck_assert_uint_eq(probe_value(&run, "parent_dropped_fork") + probe_value(&run, "parent_dropped_unwind"), 0);
      probe_run_free(&run);
    }
  }
}
END_TEST

/* fork while another thread is stopped inside the unwinder (with whatever it holds, for good in the
 * child): the child never hangs; with libgcc it records its samples without a stack (MI_PROF_DROP_FORK),
 * with libunwind it unwinds with libgcc where libgcc_s was loaded, else records them without a stack
 * too; the parent loses nothing. */
START_TEST(unwind_fork_while_another_thread_unwinds)
{
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    if (strcmp(all_unwinders[u], "fp") == 0 || strcmp(all_unwinders[u], "table") == 0)
      continue;                                /* take no lock: nothing to stop inside */
    bool libgcc = strcmp(all_unwinders[u], "libgcc") == 0;
    for (int gcc = 0; gcc < 2; gcc++) {
      probe_run_t run = run_fork_probe_gcc(all_unwinders[u], gcc, (const char *const[]){"forkinside", NULL});
      probe_assert_exit0(&run, all_unwinders[u]);
      ck_assert_uint_eq(probe_value(&run, "child_exit"), 0);
      ck_assert_uint_eq(probe_value(&run, "child_samples"), 8);   /* dropped samples keep their weight */
      ck_assert_uint_eq(probe_value(&run, "child_dropped_fork"), libgcc ? 8 : 0);
      ck_assert_uint_eq(probe_value(&run, "parent_dropped_fork") + probe_value(&run, "parent_dropped_unwind"), 0);
      probe_run_free(&run);
    }
  }
}
END_TEST

/* Samples around fork(): 4 threads allocating at rate 4096 while the main thread forks 20 times back to
 * back.  The parent keeps every sample's stack (nothing waits or drops at fork); each child
 * either gets a stack or drops as MI_PROF_DROP_FORK (another thread was inside libgcc), and exits. */
START_TEST(unwind_fork_storm_parent_keeps_stacks)
{
  for (size_t u = 0; u < N_UNWINDERS; u++) {
    probe_run_t run = run_fork_probe(all_unwinders[u], (const char *const[]){"forkstorm", "20", "4096", NULL});
    probe_assert_exit0(&run, all_unwinders[u]);
    ck_assert_uint_gt(probe_value(&run, "samples"), 0);
    ck_assert_uint_eq(probe_value(&run, "dropped"), 0);
    ck_assert_uint_eq(probe_value(&run, "children_other"), 0);
    ck_assert_uint_eq(probe_value(&run, "children_with_stack") + probe_value(&run, "children_dropped_fork"), 20);
    if (strcmp(all_unwinders[u], "fp") == 0 || strcmp(all_unwinders[u], "table") == 0)
      ck_assert_uint_eq(probe_value(&run, "children_dropped_fork"), 0);   /* no lock to inherit */
    probe_run_free(&run);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   The table unwinder: its compiler against readelf, programs without frame pointers, dlclose
--------------------------------------------------------------------------------------------------- */

#if MPROF_TEST_TABLE
/* dl_iterate_phdr callback: the path of the first object whose name contains arg[0] (into arg[1]). */
static int object_named(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  char **want = arg;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, want[0]) == NULL) return 0;
  snprintf(want[1], PATH_MAX, "%s", info->dlpi_name);
  return 1;
}

/* Every row readelf -wF prints for an object (the state at each change, FDE by FDE) against the row the
 * compiled chunk holds there, under rules restated in the probe; the end of every FDE no other starts at
 * must be NONE.  Objects: the probe itself, the C library, the loader, libstdc++ (this test program is C++
 * too) and python3 when installed (10 k FDEs, 66 k rows).  Each read twice: through a mapping of the file,
 * and through the file itself (lib/cfifile.c's windows), which must give the same rows, the probe's FDE
 * longer than a window included (its chunks compiled again in place). */
START_TEST(unwind_table_rows_match_readelf)
{
  static const char *const names[] = {"libc.so", "ld-linux", "libstdc++"};
  char paths[5][PATH_MAX];
  size_t n = 0;
  snprintf(paths[n++], PATH_MAX, "%s", probe_getenv("MPROF_TEST_CFI_PROBE"));
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char *want[2] = {(char *)names[i], paths[n]};
    if (dl_iterate_phdr(object_named, want)) n++;
  }
  char *python = realpath("/usr/bin/python3", NULL);
  if (python != NULL) snprintf(paths[n++], PATH_MAX, "%s", python);
  free(python);
  for (size_t i = 0; i < n; i++) {
    uint64_t rows = 0;
    for (int through_file = 0; through_file < 2; through_file++) {
      const char *env[] = {through_file ? "CFI_PROBE_FILE=1" : "CFI_PROBE_FILE", NULL};
      probe_opts_t opts = {.env = env, .watchdog_s = 120};
      probe_run_t run =
        probe_run(probe_getenv("MPROF_TEST_CFI_PROBE"), (const char *const[]){paths[i], NULL}, &opts);
      probe_assert_exit0(&run, paths[i]);
      ck_assert_msg(probe_value(&run, "rows") > 0 && probe_value(&run, "mismatches") == 0,
                    "%s%s: %" PRIu64 " of %" PRIu64 " rows differ from readelf's:\n%s", paths[i],
                    through_file ? " (read from the file)" : "", probe_value(&run, "mismatches"),
                    probe_value(&run, "rows"), run.out);
      /* The file's reads: under 8 a chunk (windows reused: about 5 here).  Only the probe's own long FDE
       * (x86-64) has chunks compiled again in place. */
      uint64_t chunks = probe_value(&run, "chunks"), preads = probe_value(&run, "preads");
      uint64_t redone = probe_value(&run, "redone");
      ck_assert_msg(through_file ? preads > 0 && preads < 8 * chunks : preads == 0,
                    "%s: %" PRIu64 " reads for %" PRIu64 " chunks", paths[i], preads, chunks);
#if defined(__x86_64__)
      bool long_fde = through_file && i == 0;
#else
      bool long_fde = false;
#endif
      ck_assert_msg(long_fde ? redone > 0 : redone == 0, "%s: %" PRIu64 " chunks compiled again in place",
                    paths[i], redone);
      if (through_file) ck_assert_uint_eq(probe_value(&run, "rows"), rows);
      rows = probe_value(&run, "rows");
      probe_run_free(&run);
    }
  }
}
END_TEST

static probe_run_t run_table_probe(const char *unwinder, const char *const *extra_env,
                                   const char *const *args)
{
  return run_probe_as("MPROF_TEST_TABLE_PROBE", unwinder, extra_env, args, 0);
}

/* The report MIMALLOC_PROF_UNWIND_CHECK writes at exit: samples compared, and how many were identical. */
static void check_report(const probe_run_t *run, const char *what, uint64_t *samples, uint64_t *same)
{
  const char *line = strstr(run->err, "unwind check: pid ");
  ck_assert_msg(line != NULL, "%s: no check report; stderr:\n%s", what, run->err);
  unsigned long long s = 0, i = 0;
  ck_assert_msg(sscanf(strchr(line, ':') + 1, " pid %*d: %llu samples, %llu identical", &s, &i) == 2,
                "%s: %s", what, line);
  *samples = s, *same = i;
}

/* The same report's chunks compiled from files and in place, the objects copied instead, and the objects
 * registered with the process_vm_readv calls made on their memory. */
typedef struct file_counts_s {
  unsigned long long from_files, in_place, copied, objects, object_reads;
} file_counts_t;

__attribute__((unused)) static file_counts_t check_report_files(const probe_run_t *run)
{
  file_counts_t n = {0};
  const char *tables = strstr(run->err, "; tables: "), *line = strstr(run->err, "read from files ");
  ck_assert_msg(tables != NULL && sscanf(tables, "; tables: %llu objects", &n.objects) == 1 && line != NULL &&
                sscanf(line, "read from files %llu (%*u reads), in place %llu, objects copied %llu, "
                       "object reads %llu", &n.from_files, &n.in_place, &n.copied, &n.object_reads) == 4,
                "no file counts; stderr:\n%s", run->err);
  return n;
}

/* A program without frame pointers: the table unwinder walks its frames to main; fp stops in its first
 * frame (the program keeps no chain).  Each mode run again with MIMALLOC_PROF_UNWIND_CHECK: every sample's
 * stack identical to libunwind's. */
START_TEST(unwind_table_without_frame_pointers)
{
  probe_run_t run = run_table_probe("table", NULL, (const char *const[]){"chain", NULL});
  probe_assert_exit0(&run, "table");
  size_t len;
  const char *names = probe_text(&run, "chain", &len);
  ck_assert_msg(strncmp(names, "probe_tbl_c,probe_tbl_b,probe_tbl_a,", 36) == 0 &&
                strstr(names, ",main,") != NULL, "table: %.*s", (int)len, names);
  probe_run_free(&run);

  run = run_table_probe("fp", NULL, (const char *const[]){"chain", NULL});
  probe_assert_exit0(&run, "fp");
  names = probe_text(&run, "chain", &len);
  ck_assert_msg(strstr(names, "probe_tbl_a,") == NULL, "fp walked a chain that has no frame pointers: %.*s",
                (int)len, names);
  probe_run_free(&run);

#if HAVE_LIBUNWIND
  static const char *const modes[][3] = {{"chain"}, {"signal"}, {"signal", "alt"}, {"threads", "8"}};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    run = run_table_probe("table", (const char *const[]){"MIMALLOC_PROF_UNWIND_CHECK=1", NULL}, modes[m]);
    probe_assert_exit0(&run, modes[m][0]);
    uint64_t samples, same;
    check_report(&run, modes[m][0], &samples, &same);
    ck_assert_msg(samples > 0 && same == samples, "%s: %" PRIu64 " of %" PRIu64 " samples identical:\n%s",
                  modes[m][0], same, samples, run.err);
    probe_run_free(&run);
  }
#endif
}
END_TEST

#if HAVE_LIBUNWIND
/* The objects loaded before the library are compiled from their files (no page of theirs mapped for it);
 * where no file can be opened (no descriptor left once the session runs), in place: either way every stack
 * is libunwind's. */
START_TEST(unwind_table_reads_files_else_in_place)
{
  for (int no_files = 0; no_files < 2; no_files++) {
    const char *env[] = {"MIMALLOC_PROF_UNWIND_CHECK=1", no_files ? "TABLE_PROBE_NO_FILES=1" : NULL, NULL};
    probe_run_t run = run_table_probe("table", env, (const char *const[]){"chain", NULL});
    probe_assert_exit0(&run, no_files ? "no files" : "files");
    uint64_t samples, same;
    check_report(&run, "chain", &samples, &same);
    file_counts_t n = check_report_files(&run);
    bool as_asked = no_files ? n.in_place > 0 : n.from_files > 0 && n.in_place == 0;
    /* Every object here is permanent: registering one reads its first bytes in one call, and its
     * .eh_frame_hdr's in one more when it has no build ID. */
    bool few_reads = n.objects > 0 && n.object_reads <= 2 * n.objects;
    ck_assert_msg(samples > 0 && same == samples && as_asked && few_reads,
                  "%s: %" PRIu64 " of %" PRIu64 " samples identical, %llu chunks from files, %llu in place, "
                  "%llu objects, %llu reads of their memory:\n%s", no_files ? "no files" : "files", same,
                  samples, n.from_files, n.in_place, n.objects, n.object_reads, run.err);
    probe_run_free(&run);
  }
}
END_TEST
#endif

/* A signal interrupts a leaf of the program (on aarch64 its return address is still in the link register)
 * and the handler allocates: the stack goes from the handler through the signal frame to the leaf, its
 * caller and main, on the thread's stack and on an alternate signal stack. */
START_TEST(unwind_table_signal_frames)
{
  static const char *const alt[] = {NULL, "alt"};
  for (size_t a = 0; a < 2; a++) {
    probe_run_t run = run_table_probe("table", NULL, (const char *const[]){"signal", alt[a], NULL});
    probe_assert_exit0(&run, "signal");
    size_t len;
    const char *names = probe_text(&run, "signal", &len);
    ck_assert_msg(probe_value(&run, "signal_found") == 1 && strncmp(names, "probe_tbl_handler,", 18) == 0 &&
                  strstr(names, ",probe_tbl_spin,probe_tbl_spin_caller,") != NULL &&
                  strstr(names, ",main,") != NULL,
                  "%s: %.*s", alt[a] ? alt[a] : "thread's stack", (int)len, names);
    probe_run_free(&run);
  }
}
END_TEST

/* Threads' stacks end at the thread's start (start_thread, then clone's child frame, whose return address
 * is undefined): 8 threads, 8 stacks, each ending there. */
START_TEST(unwind_table_thread_stacks_end_at_start)
{
  probe_run_t run = run_table_probe("table", NULL, (const char *const[]){"threads", "8", NULL});
  probe_assert_exit0(&run, "threads");
  ck_assert_uint_eq(probe_value(&run, "thread_stacks"), 1);   /* one site: one stack */
  ck_assert_uint_eq(probe_value(&run, "thread_started"), 1);
  probe_run_free(&run);
}
END_TEST

/* Two modules with different frames, loaded and unloaded in turn (often at one address, which the probe
 * counts): a table compiled for one and used for the other would walk wrong; every stack goes from the
 * module's functions to the probe's and main.  100 rounds of each. */
START_TEST(unwind_table_dlclose_dlopen_same_address)
{
  const char *mix1 = probe_getenv("MPROF_TEST_DL_MIX1"), *mix2 = probe_getenv("MPROF_TEST_DL_MIX2");
  probe_run_t run = run_table_probe("table", NULL, (const char *const[]){"dlmix", mix1, mix2, "100", NULL});
  probe_assert_exit0(&run, "dlmix");
  ck_assert_msg(probe_value(&run, "dlmix_good") == 200 && probe_value(&run, "dlmix_bad") == 0, "stdout:\n%s",
                run.out);
  probe_run_free(&run);
#if HAVE_LIBUNWIND
  /* The modules (loaded by absolute name, with build IDs) are read from their files, never copied: every
   * stack libunwind's. */
  run = run_table_probe("table", (const char *const[]){"MIMALLOC_PROF_UNWIND_CHECK=1", NULL},
                        (const char *const[]){"dlmix", mix1, mix2, "20", NULL});
  probe_assert_exit0(&run, "dlmix, checked");
  uint64_t samples, same;
  check_report(&run, "dlmix", &samples, &same);
  file_counts_t n = check_report_files(&run);
  ck_assert_msg(samples > 0 && same == samples && n.from_files > 0 && n.copied == 0,
                "%" PRIu64 " of %" PRIu64 " samples identical, %llu chunks from files, %llu objects "
                "copied:\n%s", same, samples, n.from_files, n.copied, run.err);
  probe_run_free(&run);
#endif
}
END_TEST

/* A frame whose CFA comes from another register (no row holds it): without libgcc_s in the process the
 * stack stops there, after that frame; with it, libgcc unwinds the stack whole, to main. */
START_TEST(unwind_table_fallback_frame)
{
  probe_run_t run = run_table_probe("table", NULL, (const char *const[]){"odd", NULL});
  probe_assert_exit0(&run, "odd");
  size_t len;
  const char *names = probe_text(&run, "odd", &len);
  ck_assert_msg(probe_value(&run, "odd_found") == 1 && len == 31 &&
                strncmp(names, "probe_tbl_odd_cb,probe_odd_cfa,", 31) == 0, "without libgcc_s: %.*s",
                (int)len, names);
  probe_run_free(&run);

  run = run_table_probe("table", (const char *const[]){"TABLE_PROBE_LIBGCC=1", NULL},
                        (const char *const[]){"odd", NULL});
  probe_assert_exit0(&run, "odd, libgcc_s");
  names = probe_text(&run, "odd", &len);
  ck_assert_msg(strncmp(names, "probe_tbl_odd_cb,probe_odd_cfa,probe_tbl_odd_caller,", 52) == 0 &&
                strstr(names, ",main,") != NULL, "with libgcc_s: %.*s", (int)len, names);
  probe_run_free(&run);
}
END_TEST
#endif

Suite *unwind_suite(void)
{
  Suite *s = suite_create("unwind");
  TCase *tc = tcase_create("unwind");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, unwind_first_start_vs_constructor_stats);
  tcase_add_test(tc, unwind_first_start_vs_constructor_start);
  tcase_add_test(tc, unwind_stack_use_within_budget);
  tcase_add_test(tc, unwind_altstack_8k);
  tcase_add_test(tc, unwind_altstack_sweep);
  tcase_add_test(tc, unwind_tiny_thread_stacks);
  tcase_add_test(tc, unwind_fp_guard_gap);
  tcase_add_test(tc, unwind_fp_without_process_vm_readv);
#if HAVE_LIBUNWIND
  tcase_add_test(tc, unwind_libgcc_and_libunwind_agree);
#endif
  tcase_add_test(tc, unwind_fork_in_handler_during_unwind);
  tcase_add_test(tc, unwind_fork_while_another_thread_unwinds);
  tcase_add_test(tc, unwind_fork_storm_parent_keeps_stacks);
#if MPROF_TEST_TABLE
  tcase_add_test(tc, unwind_table_rows_match_readelf);
  tcase_add_test(tc, unwind_table_without_frame_pointers);
#if HAVE_LIBUNWIND
  tcase_add_test(tc, unwind_table_reads_files_else_in_place);
#endif
  tcase_add_test(tc, unwind_table_signal_frames);
  tcase_add_test(tc, unwind_table_thread_stacks_end_at_start);
  tcase_add_test(tc, unwind_table_dlclose_dlopen_same_address);
  tcase_add_test(tc, unwind_table_fallback_frame);
#endif
  suite_add_tcase(s, tc);
  return s;
}

#endif /* MPROF_PPROF */
