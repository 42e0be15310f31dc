/* mstress_like.c - a stress test with the shape of mimalloc's test-stress (our own program, not its
 * code): ROUNDS rounds; each starts THREADS (8) fresh threads, which allocate, free and exchange blocks
 * for STEPS steps and exit.  A thread keeps up to LOCAL (2000) blocks of its own; each step it
 *   - allocates a block into a random local slot (freeing what was there),   1 step in 2
 *   - frees a random local block,                                            1 in 4
 *   - swaps a random local block with a random slot of a shared TRANSFER     1 in 4
 *     (1000) array (an atomic exchange), so blocks wander between threads and rounds and most are
 *     freed by another thread than their allocator.
 * Sizes: 16..256 bytes, 1 in 100 1..64 KiB, 1 in 10,000 256 KiB..4 MiB: short-lived large blocks, which
 * a 512 KiB sample rate samples almost always.  Each thread leaves RETAIN (50) blocks for the next round's
 * thread of the same number to free.  The transfer array is emptied at the end.
 *
 * Usage: mstress_like [rounds]  (default 20) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS  8
#define STEPS    50000
#define LOCAL    2000
#define TRANSFER 1000
#define RETAIN   50

static void *_Atomic transfer[TRANSFER];
static void *retained[THREADS][RETAIN];

static uint64_t next(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static size_t pick_size(uint64_t *x)
{
  uint64_t r = next(x);
  unsigned u = (unsigned)(r % 10000);
  r >>= 16;
  if (u == 0) return ((size_t)256 << 10) + (size_t)(r % (((size_t)4 << 20) - ((size_t)256 << 10)));
  if (u < 100) return 1024 + (size_t)(r % (63 * 1024));
  return 16 + (size_t)(r % 241);
}

/* A block's first and last words hold its size, checked when it is freed. */
static void *make(size_t size)
{
  char *p = malloc(size);
  if (p == NULL) abort();
  *(size_t *)p = size;
  *(size_t *)(p + size - sizeof(size_t)) = size;
  return p;
}

static uint64_t drop(void *p)
{
  if (p == NULL) return 0;
  size_t size = *(size_t *)p;
  if (*(size_t *)((char *)p + size - sizeof(size_t)) != size) abort();
  free(p);
  return size & 0xff;
}

typedef struct job_s {
  unsigned id;
  uint64_t seed, sum;
} job_t;

static void *worker(void *arg)
{
  job_t *j = arg;
  uint64_t x = j->seed | 1, sum = 0;
  void **local = calloc(LOCAL, sizeof *local);
  if (local == NULL) abort();
  for (int i = 0; i < RETAIN; i++) {                  /* the previous round's leftovers */
    sum += drop(retained[j->id][i]);
    retained[j->id][i] = NULL;
  }
  for (long i = 0; i < STEPS; i++) {
    uint64_t r = next(&x);
    unsigned s = (unsigned)((r >> 32) % LOCAL);
    switch (r % 4) {
    case 0:
    case 1:
      sum += drop(local[s]);
      local[s] = make(pick_size(&x));
      break;
    case 2:
      sum += drop(local[s]);
      local[s] = NULL;
      break;
    default:
      local[s] = __atomic_exchange_n(&transfer[(r >> 16) % TRANSFER], local[s], __ATOMIC_ACQ_REL);
      break;
    }
  }
  unsigned kept = 0;
  for (unsigned s = 0; s < LOCAL; s++) {
    if (local[s] != NULL && kept < RETAIN) retained[j->id][kept++] = local[s];
    else sum += drop(local[s]);
  }
  free(local);
  j->sum = sum;
  return NULL;
}

int main(int argc, char **argv)
{
  long rounds = argc > 1 ? atol(argv[1]) : 20;
  uint64_t sum = 0;
  for (long r = 0; r < rounds; r++) {
    pthread_t t[THREADS];
    job_t jobs[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
      jobs[i] = (job_t){.id = i, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(r * THREADS + i + 1)};
      if (pthread_create(&t[i], NULL, worker, &jobs[i]) != 0) return 1;
    }
    for (unsigned i = 0; i < THREADS; i++) {
      pthread_join(t[i], NULL);
      sum += jobs[i].sum;
    }
  }
  for (unsigned i = 0; i < THREADS; i++)
    for (unsigned k = 0; k < RETAIN; k++) sum += drop(retained[i][k]);
  for (unsigned i = 0; i < TRANSFER; i++) sum += drop(transfer[i]);
  printf("rounds=%ld sum=%llu\n", rounds, (unsigned long long)(sum & 0xffff));
  return 0;
}
