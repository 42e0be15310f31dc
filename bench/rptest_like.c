/* rptest_like.c - a rate-heavy multi-threaded benchmark with the shape of rpmalloc's rptest (our own
 * program, not its code): THREADS (4) threads each keep a working set of SLOTS (2048) blocks and in
 * every step free a random slot's block and allocate a new one there, touching both ends.  Sizes are
 * spread over 16..16384 bytes with every octave drawn equally often (so most bytes, and most samples,
 * come from the larger sizes: about 3 KiB per allocation on average).  Every BATCH (256) steps a thread
 * hands BATCH of its blocks to the next thread through a one-slot mailbox and frees the batch the
 * previous thread handed it, if one is waiting: about 1 block in 2 is freed by a thread other than the
 * one that allocated it.  Each thread makes STEPS/THREADS steps; the program prints the steps and a
 * checksum.
 *
 * At a sample rate of 512 KiB a thread takes a sample every ~170 allocations: sampled blocks are
 * allocated and freed at a high rate, from many size classes, and freed across threads.
 *
 * Usage: rptest_like [steps]  (default 8000000, over all threads) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define SLOTS   2048
#define BATCH   256

typedef struct mailbox_s {
  void *_Atomic batch;          /* a malloc'ed array of BATCH blocks, or NULL */
  char pad[64 - sizeof(void *)];
} mailbox_t;

static mailbox_t mailbox[THREADS];   /* mailbox[i]: handed to thread i */
static long steps_per_thread;

static uint64_t next(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* 16..16384 bytes: an octave 2^k..2^(k+1) (k = 4..13) chosen uniformly, then a size within it. */
static size_t pick_size(uint64_t *x)
{
  uint64_t r = next(x);
  unsigned k = 4 + (unsigned)(r % 10);
  size_t lo = (size_t)1 << k;
  return lo + (size_t)((r >> 8) % (lo + 1));
}

static uint64_t release(void **blocks, size_t n)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (blocks[i] == NULL) continue;
    sum += *(unsigned char *)blocks[i];
    free(blocks[i]);
  }
  return sum;
}

static void *worker(void *arg)
{
  unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t x = 0x9e3779b97f4a7c15ull * (id + 1), sum = 0;
  void **slot = calloc(SLOTS, sizeof *slot);
  if (slot == NULL) abort();
  for (long i = 0; i < steps_per_thread; i++) {
    unsigned s = (unsigned)(next(&x) >> 40) % SLOTS;
    if (slot[s] != NULL) sum += *(unsigned char *)slot[s];
    free(slot[s]);
    size_t size = pick_size(&x);
    char *p = malloc(size);
    if (p == NULL) abort();
    p[0] = (char)i;
    p[size - 1] = (char)s;
    slot[s] = p;
    if (i % BATCH == BATCH - 1) {
      void **out = malloc(BATCH * sizeof *out);      /* a stretch of slots goes to the next thread */
      if (out == NULL) abort();
      unsigned from = (unsigned)(next(&x) % (SLOTS - BATCH));
      for (unsigned k = 0; k < BATCH; k++) {
        out[k] = slot[from + k];
        slot[from + k] = NULL;
      }
      void **old = __atomic_exchange_n(&mailbox[(id + 1) % THREADS].batch, out, __ATOMIC_ACQ_REL);
      if (old != NULL) {                              /* the next thread has not taken the last one: */
        sum += release(old, BATCH);                   /* free it here */
        free(old);
      }
      void **in = __atomic_exchange_n(&mailbox[id].batch, NULL, __ATOMIC_ACQ_REL);
      if (in != NULL) {
        sum += release(in, BATCH);
        free(in);
      }
    }
  }
  sum += release(slot, SLOTS);
  free(slot);
  return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 8000000;
  steps_per_thread = n / THREADS;
  pthread_t t[THREADS];
  uint64_t sum = 0;
  for (uintptr_t i = 0; i < THREADS; i++)
    if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) return 1;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    sum += (uintptr_t)r;
  }
  for (int i = 0; i < THREADS; i++) {
    void **left = mailbox[i].batch;
    if (left != NULL) {
      sum += release(left, BATCH);
      free(left);
    }
  }
  printf("steps=%ld sum=%llu\n", steps_per_thread * THREADS, (unsigned long long)(sum & 0xffff));
  return 0;
}
