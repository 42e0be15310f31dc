/* test_sheap.c - the sampled-block heap as a program sees it through mi_prof_stats: the bytes it keeps
 * resident, and that it gives idle memory back.
 *
 * The heap gives memory back on the clock: pages free for a whole purge period (10 ms) go back at the
 * next operation on the heap, when more than 256 KiB is idle (lib/sheap.c).  There is no event to wait
 * for, so the give-back test polls: one sampled allocation and a stats read per round, a 10 ms pause
 * between rounds, and a 20 s deadline (200 times the two periods it needs).  The pause only paces the
 * rounds; the outcome is decided by what the stats say.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "mimalloc-prof.h"
#include "sampling_util.h"
#include "suites.h"

#if MPROF_PPROF == 1

#define SEED 0x5eedc0deu

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

/* 8 MiB of sampled blocks make at least 8 MiB resident (each 1 KiB block sits in a 1 KiB slot, its
 * slab's pages written); once they are freed, polling with one sampled 100-byte block at a time, the
 * resident bytes fall to what that block's slab and the chunk headers need: at most 1 MiB (the 256 KiB
 * floor plus a chunk's header and a slab of each size class used; 8 MiB would be the failure). */
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

/* A program that samples one short-lived block at a time keeps its one slab and no more: the resident
 * bytes stay at a chunk's header and that slab (1 page of 4 KiB each here; 64 KiB allowed) however long
 * it runs (checked over 300 ms: thirty purge periods, in which nothing is idle enough to give back). */
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

/* Page runs under fragmentation (lib/sheap.c: runs taken and given back a bitmap word at a time, a head
 * bitmap, a per-chunk bound on the longest free run).  At rate 1 every block is sampled; 6000 seeded
 * operations on 512 slots allocate (half 1 B .. 4 KiB: slabs of 1, 2 or 4 pages; half 4 KiB + 1 ..
 * 256 KiB: page runs; a fifth of all posix_memalign'ed to 8..128 KiB, which searches aligned starts) or
 * free, so runs and slabs are split, merged and reused across chunks.  Exact checks: every block keeps its own bytes (a run handed out twice, or a head lost, shows
 * as another block's tag), is aligned as asked, malloc_usable_size() covers the request, and once all
 * is freed no sampled byte is left. */
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

Suite *sheap_suite(void)
{
  Suite *s = suite_create("sheap");
  TCase *tc = tcase_create("sheap");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, sheap_gives_idle_memory_back);
  tcase_add_test(tc, sheap_small_idle_kept_small);
  tcase_add_test(tc, sheap_fragmented_runs);
  suite_add_tcase(s, tc);
  return s;
}

#endif
