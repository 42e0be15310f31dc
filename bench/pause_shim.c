/* pause_shim.c - a control for threaded workloads' peak RSS: the profiler's pauses without the profiler.
 *
 * Preloaded in front of a stopped library (LD_PRELOAD="pause_shim.so libmimalloc-prof.so.0"), its malloc
 * counts bytes down as a sampler does (an exponential draw per thread, mean PAUSE_RATE bytes, default
 * 524288) and, at every PAUSE_EVERY-th of those points across the process (default 1), pauses before it
 * passes the request on:
 *   PAUSE_MODE=spin   busy-waits PAUSE_NS nanoseconds: the CPU time a sample takes, the thread running
 *   PAUSE_MODE=yield  sched_yield(): hands the CPU to another runnable thread
 *   PAUSE_MODE=sleep  nanosleep(PAUSE_NS): sleeps, as a thread does that waits for a lock or an mmap
 * It holds no memory.  bench/hwm_rounds.py compares the peaks (doc/performance.md, issue 24's sleeps). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SPIN, YIELD, SLEEP };
static void *(*next_malloc)(size_t);
static int mode;
static long pause_ns, every = 1;
static double rate = 524288;
static long _Atomic points;
static __thread int64_t left __attribute__((tls_model("initial-exec")));
static __thread uint64_t rng __attribute__((tls_model("initial-exec")));

__attribute__((constructor)) static void pause_init(void)
{
  next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  const char *m = getenv("PAUSE_MODE"), *ns = getenv("PAUSE_NS"), *e = getenv("PAUSE_EVERY");
  const char *r = getenv("PAUSE_RATE");
  mode = m == NULL || strcmp(m, "spin") == 0 ? SPIN : strcmp(m, "yield") == 0 ? YIELD : SLEEP;
  pause_ns = ns != NULL ? atol(ns) : 0;
  if (e != NULL && atol(e) > 0) every = atol(e);
  if (r != NULL && atof(r) > 0) rate = atof(r);
}

static int64_t draw(void)
{
  if (rng == 0) rng = (uint64_t)(uintptr_t)&left * 0x9e3779b97f4a7c15ull | 1;
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (int64_t)(-log(((double)(rng >> 11) + 0.5) / 9007199254740992.0) * rate) + 1;
}

static void pause_now(void)
{
  if (mode == YIELD) {
    sched_yield();
  } else if (mode == SLEEP) {
    struct timespec t = {pause_ns / 1000000000, pause_ns % 1000000000};
    nanosleep(&t, NULL);
  } else {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < pause_ns);
  }
}

void *malloc(size_t n)
{
  if (left == 0) left = draw();
  left -= (int64_t)n;
  if (left <= 0) {
    left = draw();
    if (++points % every == 0) pause_now();
  }
  return next_malloc(n);
}
