/* test_sheap.c - where sampled blocks live, as a program sees it through mi_prof_stats and its own
 * memory map: the bytes kept resident, and that idle memory goes back.
 *
 * Sampled blocks of up to two slices live in slots of the profiler's window (lib/sheap.c); a free slot
 * keeps its pages for one purge period (25 ms), at most 512 KiB of them, and a stop or reset gives back
 * every free one at once.  The time-driven case has no event to wait for, so that test polls: one
 * sampled allocation and a stats read per round, a 10 ms pause between rounds, and a 20 s deadline (800
 * times the period it needs).  The pause only paces the rounds; the outcome is decided by what the
 * stats say.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mimalloc-prof.h"
#include "sampling_util.h"
#include "subprocess.h"
#include "suites.h"

#if MPROF_PPROF == 1

#define SEED 0x5eedc0deu
#define SLICE (sizeof(void *) == 8 ? (size_t)64 << 10 : (size_t)32 << 10)   /* mimalloc's slices */

/* 8 MiB in 1 KiB blocks, all sampled at rate 1 (static: holding them allocates nothing). */
#define BLOCKS 8192
#define BLOCK  1024
static void *blocks[BLOCKS];

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 8 MiB of sampled blocks make at least 8 MiB resident (each 1 KiB block has a page of its slot); once
 * they are freed, polling with one sampled 100-byte block at a time, the resident bytes fall to what that
 * block's slot and the chunk headers need: at most 1 MiB (the 512 KiB kept at most, the headers of the
 * 547 chunks that held the blocks until they go, a page for the block; 8 MiB would be the failure). */
START_TEST(sheap_gives_idle_memory_back)
{
  start_seeded(1, SEED);
  for (size_t i = 0; i < BLOCKS; i++) blocks[i] = malloc(BLOCK);
  mi_prof_stats_t full = stats_or_abort();
  for (size_t i = 0; i < BLOCKS; i++) free(blocks[i]);
  mi_prof_stats_t after = full;
  uint64_t deadline = now_ns() + 20 * (uint64_t)1000000000u;
  int rounds = 0;
  while (now_ns() < deadline) {
    free(malloc(100));
    after = stats_or_abort();
    rounds++;
    if (after.arena_resident_bytes <= MiB) break;
    nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
  }
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  if (getenv("MPROF_TEST_VERBOSE") != NULL)
    fprintf(stderr, "full %llu, after %d rounds %llu\n", (unsigned long long)full.arena_resident_bytes, rounds,
            (unsigned long long)after.arena_resident_bytes);
  ck_assert_uint_ge(full.sampled_bytes, (uint64_t)BLOCKS * BLOCK);
  ck_assert_uint_ge(full.arena_resident_bytes, (uint64_t)BLOCKS * BLOCK);
  ck_assert_msg(after.arena_resident_bytes <= MiB, "still resident after %d rounds: %llu bytes", rounds,
                (unsigned long long)after.arena_resident_bytes);
  ck_assert_uint_eq(after.sampled_bytes, 0);
}
END_TEST

/* A program that samples one short-lived block at a time keeps its one slot and no more: the resident
 * bytes stay at a chunk's header and that slot's page (4 KiB each here; 64 KiB allowed) however long it
 * runs (checked over 300 ms: thirty purge periods, in which nothing is idle enough to give back). */
START_TEST(sheap_small_idle_kept_small)
{
  start_seeded(1, SEED);
  uint64_t end = now_ns() + 300 * (uint64_t)1000000;
  uint64_t most = 0;
  while (now_ns() < end) {
    free(malloc(100));
    mi_prof_stats_t st = stats_or_abort();
    if (st.arena_resident_bytes > most) most = st.arena_resident_bytes;
  }
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  if (getenv("MPROF_TEST_VERBOSE") != NULL) fprintf(stderr, "most resident %llu\n", (unsigned long long)most);
  ck_assert_uint_le(most, 64 * KiB);
}
END_TEST

/* Slots and blocks of mimalloc's under churn.  At rate 1 every block is sampled; 6000 seeded operations on
 * 512 slots allocate (half 1 B .. 4 KiB, half 4 KiB + 1 .. 256 KiB: slots of one slice and of two, and
 * blocks of mimalloc's above two slices; a fifth of all posix_memalign'ed to 8..128 KiB) or free, so
 * slots are reused by blocks of other sizes (their pages kept, trimmed or faulted in).  Exact checks:
 * every block keeps its own bytes (a slot handed out twice shows as another block's tag), starts a slice
 * (where free() looks for sampled blocks), is aligned as asked, malloc_usable_size() covers the request,
 * and once all is freed no sampled byte is left. */
#define FRAG_SLOTS 512
#define FRAG_OPS   6000

static unsigned char *frag_block[FRAG_SLOTS];
static size_t frag_size[FRAG_SLOTS];

static uint64_t frag_next(uint64_t *x)
{
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* The first, middle and last 64 bytes of slot k carry its tag: enough to see a block that overlaps it. */
static void frag_mark(size_t k, bool check)
{
  size_t n = frag_size[k], span = n < 64 ? n : 64, at[3] = {0, n / 2 - span / 2, n - span};   /* may overlap */
  unsigned char tag = (unsigned char)(k * 7 + 1);
  for (int j = 0; j < 3; j++) {
    for (size_t b = 0; b < span; b++) {
      if (!check) frag_block[k][at[j] + b] = tag;
      else if (frag_block[k][at[j] + b] != tag)
        ck_abort_msg("slot %zu (%zu bytes): byte %zu overwritten", k, n, at[j] + b);
    }
  }
}

START_TEST(sheap_fragmented_runs)
{
  start_seeded(1, SEED);
  uint64_t x = SEED;
  for (int op = 0; op < FRAG_OPS; op++) {
    size_t k = frag_next(&x) % FRAG_SLOTS;
    if (frag_block[k] != NULL) {
      frag_mark(k, true);
      free(frag_block[k]);
      frag_block[k] = NULL;
      continue;
    }
    size_t n = frag_next(&x) % 2 ? 1 + frag_next(&x) % 4096 : 4097 + frag_next(&x) % (256 * KiB - 4096);
    if (frag_next(&x) % 5 == 0) {
      size_t alignment = (size_t)8192 << (frag_next(&x) % 5);   /* 8 KiB .. 128 KiB */
      void *p = NULL;
      ck_assert_int_eq(posix_memalign(&p, alignment, n), 0);
      ck_assert_uint_eq((uintptr_t)p % alignment, 0);
      frag_block[k] = p;
    } else {
      frag_block[k] = malloc(n);
      ck_assert_ptr_nonnull(frag_block[k]);
    }
    ck_assert_uint_ge(malloc_usable_size(frag_block[k]), n);
    ck_assert_uint_eq((uintptr_t)frag_block[k] % SLICE, 0);
    frag_size[k] = n;
    frag_mark(k, false);
  }
  for (size_t k = 0; k < FRAG_SLOTS; k++) {
    if (frag_block[k] == NULL) continue;
    frag_mark(k, true);
    free(frag_block[k]);
    frag_block[k] = NULL;
  }
  mi_prof_stats_t st = stats_or_abort();
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  ck_assert_uint_ge(st.samples, FRAG_OPS / 4);   /* about half the operations allocate, all sampled */
  ck_assert_uint_eq(st.sampled_bytes, 0);
}
END_TEST

/* Resident KiB of the profiler's window for slots (the default: from 4 GiB, below 1 TiB on 64-bit
 * platforms; from 16 MiB, below 128 MiB on 32-bit ones), from /proc/self/smaps. */
/* The resident KiB of the mappings in the arena's window range, or -1 when that range holds a file's
 * mapping too (qemu-user puts the guest's program and libraries there: then smaps cannot tell the arena's
 * pages from theirs). */
static long window_rss_kib(void)
{
  uintptr_t lo = sizeof(void *) == 8 ? (uintptr_t)4 << 30 : (uintptr_t)16 << 20;
  uintptr_t hi = sizeof(void *) == 8 ? (uintptr_t)((uint64_t)1 << 40) : (uintptr_t)128 << 20;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return -1;
  char line[512];
  long kib = 0, rss;
  bool in = false;
  while (fgets(line, sizeof line, f) != NULL) {
    uintptr_t a, b;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = a >= lo && b <= hi;
      if (in && strchr(line, '/') != NULL) {             /* a pathname: not the arena's */
        fclose(f);
        return -1;
      }
    } else if (in && sscanf(line, "Rss: %ld kB", &rss) == 1) {
      kib += rss;
    }
  }
  fclose(f);
  return kib;
}

/* Memory given back at a stop: 2000 blocks of 1..200 KB (seeded), all sampled at rate 1 and written in full,
 * all freed, then the session stopped (and again with the stop first: the blocks are freed as orphans).
 * Right after the stop (and after the last free) the profiler keeps at most 256 KiB resident for them:
 * by its own count (arena_resident_bytes, which counts every page a slot may hold) and by the window's
 * resident pages (smaps); 100 MiB would be the failure.  The blocks above two slices are mimalloc's, and
 * go back by mimalloc's rules, as unsampled ones do. */
#define REPRO_BLOCKS 2000
static char *repro[REPRO_BLOCKS];

static void repro_fill(uint64_t *x)
{
  for (size_t i = 0; i < REPRO_BLOCKS; i++) {
    size_t n = 1000 + frag_next(x) % 199001;
    repro[i] = malloc(n);
    if (repro[i] != NULL) memset(repro[i], (int)i, n);
  }
}

START_TEST(sheap_stop_gives_back)
{
  uint64_t x = SEED;
  start_seeded(1, SEED);
  repro_fill(&x);
  mi_prof_stats_t full = stats_or_abort();
  for (size_t i = 0; i < REPRO_BLOCKS; i++) free(repro[i]);
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  mi_prof_stats_t freed_then_stopped = stats_or_abort();
  long rss_a = window_rss_kib();

  start_seeded(1, SEED);
  repro_fill(&x);
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  for (size_t i = 0; i < REPRO_BLOCKS; i++) free(repro[i]);
  mi_prof_stats_t stopped_then_freed = stats_or_abort();
  long rss_b = window_rss_kib();

  ck_assert_uint_ge(full.sampled_bytes, 100 * MiB);
  ck_assert_uint_le(freed_then_stopped.arena_resident_bytes, 256 * KiB);
  ck_assert_uint_le(stopped_then_freed.arena_resident_bytes, 256 * KiB);
  if (rss_a < 0 || rss_b < 0)
    MPROF_TEST_SKIP("a file is mapped in the arena's window range (qemu-user's guest layout): smaps cannot "
                    "single out the arena's pages; the library's own count above holds");
  ck_assert_int_le(rss_a, 256);
  ck_assert_int_le(rss_b, 256);
}
END_TEST

/* Half of 2000 blocks of 1..128 KiB (all in slots, rate 1, written in full) freed in every other order,
 * so no two free slots are neighbours: with no later operation, what stays resident is the live half's
 * pages, at most 512 KiB of the freed ones (kept for reuse), and a page per chunk header (a chunk holds
 * at least 7 slots). */
START_TEST(sheap_every_other_free_gives_back)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t x = SEED;
  start_seeded(1, SEED);
  size_t live = 0;
  for (size_t i = 0; i < REPRO_BLOCKS; i++) {
    size_t n = 1 + frag_next(&x) % (128 * KiB);
    repro[i] = malloc(n);
    if (repro[i] != NULL) memset(repro[i], (int)i, n);
    if (i % 2 == 0) live += (malloc_usable_size(repro[i]) + page - 1) / page * page;
  }
  for (size_t i = 1; i < REPRO_BLOCKS; i += 2) free(repro[i]);
  mi_prof_stats_t half = stats_or_abort();
  for (size_t i = 0; i < REPRO_BLOCKS; i += 2) free(repro[i]);
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  ck_assert_uint_le(half.arena_resident_bytes, live + 512 * KiB + (REPRO_BLOCKS / 7 + 1) * page);
}
END_TEST

/* A program that frees 400 KiB of sampled blocks (25 of 16 KiB: above the 256 KiB a purge is worth, below
 * the 512 KiB kept) and then allocates nothing more: with a profiler thread (MIMALLOC_PROF_INTERVAL, here
 * never reached) the thread gives them back once a period has passed (the probe polls 2 s at most, times
 * CK_TIMEOUT_MULTIPLIER);
 * without one they stay until the heap's next operation. */
START_TEST(sheap_thread_gives_idle_memory_back)
{
  probe_opts_t with = {.env = (const char *const[]){"MIMALLOC_PROF_INTERVAL=1t", NULL}};
  const char *const args[] = {"idle", "25", "16384", NULL};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"), args, &with);
  probe_assert_exit0(&run, "with a thread");
  ck_assert_uint_ge(probe_value(&run, "resident_after_free"), 400 * KiB);
  ck_assert_uint_le(probe_value(&run, "resident_end"), 64 * KiB);
  probe_run_free(&run);
  probe_opts_t without = {.env = (const char *const[]){"MIMALLOC_PROF_INTERVAL", NULL}};
  run = probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"), args, &without);
  probe_assert_exit0(&run, "without");
  ck_assert_uint_ge(probe_value(&run, "resident_end"), 400 * KiB);
  ck_assert_uint_eq(probe_value(&run, "rounds"), probe_value(&run, "rounds_max"));
  probe_run_free(&run);
}
END_TEST

/* Frees that span purge periods: 20 blocks of 16 KiB (320 KiB, above the 256 KiB a purge is worth) freed
 * and given back by the thread, then 5 more (80 KiB, below it).  The thread gives those back too, after
 * its linger (100 ms; the probe polls 2 s at most, as above); at most 64 KiB stays, the headers'. */
START_TEST(sheap_thread_gives_back_below_the_floor)
{
  probe_opts_t with = {.env = (const char *const[]){"MIMALLOC_PROF_INTERVAL=1t", NULL}};
  const char *const args[] = {"idle", "25", "16384", "5", NULL};
  probe_run_t run = probe_run(probe_getenv("MPROF_TEST_PROF_PROBE"), args, &with);
  probe_assert_exit0(&run, "with a thread");
  ck_assert_uint_eq(probe_value(&run, "first_gone"), 1);
  ck_assert_uint_ge(probe_value(&run, "resident_after_free"), 80 * KiB);
  ck_assert_uint_le(probe_value(&run, "resident_end"), 64 * KiB);
  probe_run_free(&run);
}
END_TEST

/* A mapping of someone else's where the window's first chunk would go: the chunk mapped with sheap_lock
 * released finds it there (MAP_FIXED_NOREPLACE fails with EEXIST), marks it foreign and takes the next.
 * 48 sampled blocks of 1000 bytes (rate 1) need at least four chunks of 15 slots; none of them may lie in
 * the foreign MiB, each starts a slice, and the foreign bytes stay as written. */
#define FOREIGN_BLOCKS 48
static void *foreign_block[FOREIGN_BLOCKS];

START_TEST(sheap_foreign_mapping_skipped)
{
  const size_t mib = (size_t)1 << 20;
  uintptr_t at = sizeof(void *) == 8 ? (uintptr_t)4 << 30 : (uintptr_t)16 << 20;   /* arena.c's window */
  char *mine = MAP_FAILED;
  for (int i = 0; i < 8 && mine == MAP_FAILED; i++, at += mib) {   /* an earlier session's chunk there */
    mine = mmap((void *)at, mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   /* a hint */
    if (mine != MAP_FAILED && mine != (char *)at) {      /* taken: the kernel put it elsewhere */
      munmap(mine, mib);
      mine = MAP_FAILED;
    }
  }
  ck_assert_msg(mine != MAP_FAILED, "no free MiB at the window's start: errno %d", errno);
  memset(mine, 0x5a, mib);
  start_seeded(1, SEED);
  for (int i = 0; i < FOREIGN_BLOCKS; i++) {
    foreign_block[i] = malloc(1000);
    ck_assert_ptr_nonnull(foreign_block[i]);
    char *p = foreign_block[i];
    ck_assert_msg(p < mine || p >= mine + mib, "block %d at %p inside the foreign MiB", i, (void *)p);
    ck_assert_uint_eq((uintptr_t)p % SLICE, 0);
    memset(p, 0xa5, 1000);
  }
  mi_prof_stats_t st = stats_or_abort();
  for (int i = 0; i < FOREIGN_BLOCKS; i++) free(foreign_block[i]);
  if (!mi_prof_stop()) ck_abort_msg("mi_prof_stop failed: errno %d", errno);
  ck_assert_uint_ge(st.samples, FOREIGN_BLOCKS);
  for (size_t k = 0; k < mib; k++)
    if (mine[k] != 0x5a) ck_abort_msg("foreign byte %zu changed to %#x", k, (unsigned)(unsigned char)mine[k]);
  munmap(mine, mib);
}
END_TEST

Suite *sheap_suite(void)
{
  Suite *s = suite_create("sheap");
  TCase *tc = tcase_create("sheap");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, sheap_gives_idle_memory_back);
  tcase_add_test(tc, sheap_small_idle_kept_small);
  tcase_add_test(tc, sheap_fragmented_runs);
  tcase_add_test(tc, sheap_stop_gives_back);
  tcase_add_test(tc, sheap_every_other_free_gives_back);
  tcase_add_test(tc, sheap_thread_gives_idle_memory_back);
  tcase_add_test(tc, sheap_thread_gives_back_below_the_floor);
  tcase_add_test(tc, sheap_foreign_mapping_skipped);
  suite_add_tcase(s, tc);
  return s;
}

#endif
