/* xthread.c - producer/consumer with cross-thread frees: PAIRS (2) producer threads allocate blocks of
 * 16..512 bytes, fill their first 16 bytes and hand them over in batches of BATCH (256) through a
 * bounded queue (mutex + condition variables, QCAP batches) to PAIRS consumer threads, which read and
 * free them: every block is freed by a thread other than the one that allocated it.
 * Usage: xthread [blocks]  (default 2000000, in total over all producers) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIRS 2
#define BATCH 256
#define QCAP  16

typedef struct batch_s {
  void *p[BATCH];
  int n;
} batch_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  batch_t *q[QCAP];
  unsigned head, count;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static long per_producer;

static void push(batch_t *b)
{
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QCAP) pthread_cond_wait(&queue.not_full, &queue.lock);
  queue.q[(queue.head + queue.count++) % QCAP] = b;
  pthread_cond_signal(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

static batch_t *pop(void)
{
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0) pthread_cond_wait(&queue.not_empty, &queue.lock);
  batch_t *b = queue.q[queue.head];
  queue.head = (queue.head + 1) % QCAP;
  queue.count--;
  pthread_cond_signal(&queue.not_full);
  pthread_mutex_unlock(&queue.lock);
  return b;
}

static void *producer(void *arg)
{
  uint64_t x = 0x2545f4914f6cdd1dull + (uintptr_t)arg;
  long left = per_producer;
  while (left > 0) {
    batch_t *b = malloc(sizeof *b);
    b->n = left < BATCH ? (int)left : BATCH;
    for (int i = 0; i < b->n; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t size = 16 + (size_t)(x % 497);        /* 16..512 */
      char *p = malloc(size);
      memset(p, (int)(x >> 56), 16);
      b->p[i] = p;
    }
    left -= b->n;
    push(b);
  }
  push(NULL);                                      /* one end marker per producer */
  return NULL;
}

static void *consumer(void *arg)
{
  uint64_t sum = 0;
  batch_t *b;
  while ((b = pop()) != NULL) {
    for (int i = 0; i < b->n; i++) {
      sum += (unsigned char)((char *)b->p[i])[15];
      free(b->p[i]);
    }
    free(b);
  }
  *(uint64_t *)arg = sum;
  return NULL;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  per_producer = n / PAIRS;
  pthread_t prod[PAIRS], cons[PAIRS];
  uint64_t sums[PAIRS] = {0}, sum = 0;
  for (uintptr_t i = 0; i < PAIRS; i++) {
    pthread_create(&cons[i], NULL, consumer, &sums[i]);
    pthread_create(&prod[i], NULL, producer, (void *)i);
  }
  for (int i = 0; i < PAIRS; i++) pthread_join(prod[i], NULL);
  for (int i = 0; i < PAIRS; i++) pthread_join(cons[i], NULL);
  for (int i = 0; i < PAIRS; i++) sum += sums[i];
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
