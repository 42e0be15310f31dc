/* memtime_probe.c - programs with a known heap over time, for the tests of the memory-over-time views
 * (tests/test_tool_memreal.c), run under `mimalloc-prof run`.  Every site is a function of its own
 * (built with -fno-inline and frame pointers), and every pointer reaches an asm input, so that no
 * allocation is optimized away.
 *   memtime_probe transient   build_big makes 100 blocks of 1 MiB and frees them; then keep_small makes
 *                             10 blocks of 1 MiB that stay until exit (the peak is build_big's); 20 ms
 *                             pass before and after each phase, so that the phases stand apart in the
 *                             timeline however long the process takes to start and to exit
 *   memtime_probe lifetimes   hold keeps 160 blocks of 64 KiB while churn allocates 1600 blocks of
 *                             64 KiB and frees each at once, until hold's blocks are 20 ms old; then hold
 *                             frees them (churn's blocks live microseconds, hold's at least 20 ms)
 *   memtime_probe threads     threads named alpha-worker and beta-worker keep 8 and 4 blocks of 1 MiB,
 *                             from alpha_site and beta_site
 * Each writes "done" at the end.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024 * 1024)

static void keep(void *p)
{
  __asm__ volatile("" ::"r"(p) : "memory");
}

/* The blocks' pointers live in static arrays, not in allocated ones: nothing but the sites' blocks is
 * allocated, so the estimates are the sites' alone (a sampled small block weighs 64 KiB). */
static void *big[100], *small[10], *held[160], *alpha[8], *beta[4];

static void build_big(size_t n)
{
  for (size_t i = 0; i < n; i++) {
    big[i] = malloc(MiB);
    keep(big[i]);
  }
}

static void keep_small(size_t n)
{
  for (size_t i = 0; i < n; i++) {
    small[i] = malloc(MiB);
    keep(small[i]);
  }
}

static void free_all(void **blocks, size_t n)
{
  for (size_t i = 0; i < n; i++) free(blocks[i]);
}

static void hold(size_t n)
{
  for (size_t i = 0; i < n; i++) {
    held[i] = malloc(64 * 1024);
    keep(held[i]);
  }
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

/* 20 ms of the program's life with nothing allocated or freed. */
static void pause_20ms(void)
{
  struct timespec ts = {0, 20000000};
  while (nanosleep(&ts, &ts) != 0) {}
}

static void alpha_site(size_t n)
{
  for (size_t i = 0; i < n; i++) {
    alpha[i] = malloc(MiB);
    keep(alpha[i]);
  }
}

static void beta_site(size_t n)
{
  for (size_t i = 0; i < n; i++) {
    beta[i] = malloc(MiB);
    keep(beta[i]);
  }
}

static void *alpha_main(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "alpha-worker");
  alpha_site(8);
  return NULL;
}

static void *beta_main(void *arg)
{
  (void)arg;
  pthread_setname_np(pthread_self(), "beta-worker");
  beta_site(4);
  return NULL;
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "transient") == 0) {
    pause_20ms();
    build_big(100);
    pause_20ms();
    free_all(big, 100);
    pause_20ms();
    keep_small(10);
    pause_20ms();
  } else if (strcmp(mode, "lifetimes") == 0) {
    uint64_t start = now_ns();
    hold(160);
    for (int i = 0; i < 1600 || now_ns() - start < 20000000u; i++) churn();
    free_all(held, 160);
  } else if (strcmp(mode, "threads") == 0) {
    pthread_t a, b;
    if (pthread_create(&a, NULL, alpha_main, NULL) != 0 || pthread_create(&b, NULL, beta_main, NULL) != 0)
      return 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
  } else {
    static const char msg[] = "usage: memtime_probe transient|lifetimes|threads\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    return 2;
  }
  return write(1, "done\n", 5) == 5 ? 0 : 1;   /* not stdio: its buffer would be one more allocation */
}
