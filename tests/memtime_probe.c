/* memtime_probe.c - programs with a known heap over time, for the tests of the memory-over-time views
 * (tests/test_tool_memreal.c), run under `mimalloc-prof run`.  Every site is a function of its own
 * (built with -fno-inline and frame pointers), and every pointer reaches an asm input, so that no
 * allocation is optimized away.
 *   memtime_probe transient   build_big makes 100 blocks of 1 MiB and frees them; then keep_small makes
 *                             10 blocks of 1 MiB that stay until exit (the peak is build_big's)
 *   memtime_probe lifetimes   hold keeps 160 blocks of 64 KiB while churn allocates 1600 blocks of
 *                             64 KiB and frees each at once, until hold's blocks are 20 ms old; then hold
 *                             frees them (churn's blocks live microseconds, hold's at least 20 ms)
 *   memtime_probe threads     threads named alpha-worker and beta-worker keep 8 and 4 blocks of 1 MiB,
 *                             from alpha_site and beta_site
 * Each prints "done" at the end.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1024 * 1024)

static void keep(void *p)
{
  __asm__ volatile("" ::"r"(p) : "memory");
}

static void **build_big(size_t n)
{
  void **blocks = calloc(n, sizeof *blocks);
  for (size_t i = 0; blocks != NULL && i < n; i++) {
    blocks[i] = malloc(MiB);
    keep(blocks[i]);
  }
  return blocks;
}

static void **keep_small(size_t n)
{
  void **blocks = calloc(n, sizeof *blocks);
  for (size_t i = 0; blocks != NULL && i < n; i++) {
    blocks[i] = malloc(MiB);
    keep(blocks[i]);
  }
  return blocks;
}

static void free_all(void **blocks, size_t n)
{
  for (size_t i = 0; i < n; i++) free(blocks[i]);
  free(blocks);
}

static void *hold(void)
{
  void **blocks = calloc(160, sizeof *blocks);
  for (size_t i = 0; blocks != NULL && i < 160; i++) {
    blocks[i] = malloc(64 * 1024);
    keep(blocks[i]);
  }
  return blocks;
}

static void churn(void)
{
  void *p = malloc(64 * 1024);
  keep(p);
  free(p);
}

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *alpha_site(size_t n)
{
  void **blocks = calloc(n, sizeof *blocks);
  for (size_t i = 0; blocks != NULL && i < n; i++) {
    blocks[i] = malloc(MiB);
    keep(blocks[i]);
  }
  return blocks;
}

static void *beta_site(size_t n)
{
  void **blocks = calloc(n, sizeof *blocks);
  for (size_t i = 0; blocks != NULL && i < n; i++) {
    blocks[i] = malloc(MiB);
    keep(blocks[i]);
  }
  return blocks;
}

static void *alpha_main(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "alpha-worker");
  return alpha_site(8);
}

static void *beta_main(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "beta-worker");
  return beta_site(4);
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "transient") == 0) {
    void **big = build_big(100);
    free_all(big, 100);
    void **small = keep_small(10);
    keep(small);
  } else if (strcmp(mode, "lifetimes") == 0) {
    uint64_t start = now_ns();
    void **held = hold();
    for (int i = 0; i < 1600 || now_ns() - start < 20000000u; i++) churn();
    free_all(held, 160);
  } else if (strcmp(mode, "threads") == 0) {
    pthread_t a, b;
    void *ra, *rb;
    if (pthread_create(&a, NULL, alpha_main, NULL) != 0 || pthread_create(&b, NULL, beta_main, NULL) != 0)
      return 1;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    keep(ra);
    keep(rb);
  } else {
    fprintf(stderr, "usage: memtime_probe transient|lifetimes|threads\n");
    return 2;
  }
  printf("done\n");
  return 0;
}
