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

Suite *sheap_suite(void)
{
  Suite *s = suite_create("sheap");
  TCase *tc = tcase_create("sheap");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, sheap_gives_idle_memory_back);
  tcase_add_test(tc, sheap_small_idle_kept_small);
  suite_add_tcase(s, tc);
  return s;
}

#endif
