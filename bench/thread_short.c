/* thread_short.c - many short-lived threads: THREADS threads, at most LIVE (8) at once (a new one is
 * started as soon as the oldest is joined), each making STEPS (96) allocations of 16..2048 bytes over a
 * window of 16 blocks and exiting after handing its last window to the main thread, which frees those
 * blocks (frees of blocks whose thread is gone).  A thread lives for tens of microseconds and allocates
 * ~100 KB, so at a sample rate of 512 KiB about one thread in five takes a sample, and that sample is
 * the first on its thread: what a profiler pays per new thread (stack bounds, unwinder caches, its
 * thread-local state) shows here in full, unlike thread_churn, whose threads live 2000 steps.
 *
 * Usage: thread_short [threads]  (default 10000) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE  8
#define STEPS 96
#define WIN   16

typedef struct job_s {
  uint64_t seed;
  void *left[WIN];
  uint64_t sum;
} job_t;

static void *worker(void *arg)
{
  job_t *j = arg;
  uint64_t x = j->seed | 1, sum = 0;
  for (int i = 0; i < WIN; i++) j->left[i] = NULL;
  for (int i = 0; i < STEPS; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned slot = (unsigned)(x >> 40) % WIN;
    free(j->left[slot]);
    size_t size = 16 + (size_t)(x % 2033);      /* 16..2048 */
    char *p = malloc(size);
    p[0] = (char)i;
    p[size - 1] = (char)(i >> 3);
    sum += (uintptr_t)p & 0xff;
    j->left[slot] = p;
  }
  j->sum = sum;
  return NULL;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 10000;
  pthread_t t[LIVE];
  job_t *jobs[LIVE];
  uint64_t sum = 0;
  long started = 0, joined = 0;
  while (joined < n) {
    while (started < n && started - joined < LIVE) {
      unsigned k = (unsigned)(started % LIVE);
      jobs[k] = malloc(sizeof(job_t));
      jobs[k]->seed = 0x9e3779b97f4a7c15ull * (uint64_t)(started + 1);
      if (pthread_create(&t[k], NULL, worker, jobs[k]) != 0) return 1;
      started++;
    }
    unsigned k = (unsigned)(joined % LIVE);
    pthread_join(t[k], NULL);
    sum += jobs[k]->sum;
    for (int m = 0; m < WIN; m++) free(jobs[k]->left[m]);
    free(jobs[k]);
    joined++;
  }
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
