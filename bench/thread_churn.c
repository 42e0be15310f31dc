/* thread_churn.c - thread churn: THREADS threads in waves of WAVE (4) at a time; each one does STEPS
 * (2000) malloc/free steps over a window of 64 blocks of 16..1024 bytes and exits leaving half of its
 * last window behind, which the main thread frees after joining it (frees of blocks whose thread is gone).
 * Usage: thread_churn [threads]  (default 1000) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WAVE   4
#define STEPS  2000
#define WIN    64

typedef struct job_s {
  uint64_t seed;
  void *left[WIN / 2];
  uint64_t sum;
} job_t;

static void *worker(void *arg)
{
  job_t *j = arg;
  void *win[WIN] = {0};
  uint64_t x = j->seed | 1, sum = 0;
  for (int i = 0; i < STEPS; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned slot = (unsigned)(x >> 40) % WIN;
    free(win[slot]);
    size_t size = 16 + (size_t)(x % 1009);      /* 16..1024 */
    char *p = malloc(size);
    p[0] = (char)i;
    sum += (uintptr_t)p & 0xff;
    win[slot] = p;
  }
  for (int i = 0; i < WIN; i++) {
    if (i % 2) free(win[i]);
    else j->left[i / 2] = win[i];
  }
  j->sum = sum;
  return NULL;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 1000;
  uint64_t sum = 0;
  for (long done = 0; done < n; done += WAVE) {
    pthread_t t[WAVE];
    job_t *jobs[WAVE];
    int k = n - done < WAVE ? (int)(n - done) : WAVE;
    for (int i = 0; i < k; i++) {
      jobs[i] = calloc(1, sizeof(job_t));
      jobs[i]->seed = 0x9e3779b97f4a7c15ull * (uint64_t)(done + i + 1);
      if (pthread_create(&t[i], NULL, worker, jobs[i]) != 0) return 1;
    }
    for (int i = 0; i < k; i++) {
      pthread_join(t[i], NULL);
      sum += jobs[i]->sum;
      for (int m = 0; m < WIN / 2; m++) free(jobs[i]->left[m]);
      free(jobs[i]);
    }
  }
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
