/* xmalloc_like.c - producer/consumer with the shape of xmalloc-test (our own program, not its code):
 * PAIRS (2) producer threads allocate blocks of 8..256 bytes one at a time and pass each through a
 * lock-free single-producer single-consumer ring of RING (1024) pointers to its consumer thread, which
 * reads and frees it: every block is freed by another thread, one at a time, with no batching (unlike
 * xthread.c, whose batches of 256 go through a mutex queue).  A thread that finds its ring full (or
 * empty) spins briefly, then sleeps on the ring's condition variable until the other side has made room
 * (or put something in); the other side takes the ring's mutex only when a sleeper has said so.
 *
 * Usage: xmalloc_like [blocks]  (default 4000000, in total over all producers) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIRS 2
#define RING  1024

#define SPINS 200

typedef struct ring_s {
  _Alignas(64) unsigned long head;   /* next to read: written by the consumer */
  _Alignas(64) unsigned long tail;   /* next to write: written by the producer */
  _Alignas(64) int sleeping[2];      /* [0]: the producer waits on wake[0], [1]: the consumer on wake[1] */
  pthread_mutex_t lock;
  pthread_cond_t wake[2];
  void *slot[RING];
} ring_t;

static ring_t ring[PAIRS];
static long per_producer;

/* Side `me` (0 producer, 1 consumer) waits until ready(q, arg) holds: spins, then sleeps until the
 * other side pokes it. */
static void wait_for(ring_t *q, int me, int (*ready)(ring_t *, unsigned long), unsigned long arg)
{
  for (int i = 0; i < SPINS; i++) {
    if (ready(q, arg)) return;
    __builtin_ia32_pause();
  }
  pthread_mutex_lock(&q->lock);
  __atomic_store_n(&q->sleeping[me], 1, __ATOMIC_SEQ_CST);
  while (!ready(q, arg)) pthread_cond_wait(&q->wake[me], &q->lock);
  __atomic_store_n(&q->sleeping[me], 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&q->lock);
}

/* After publishing a change: wakes side `other` if it sleeps. */
static void poke(ring_t *q, int other)
{
  if (__atomic_load_n(&q->sleeping[other], __ATOMIC_SEQ_CST)) {
    pthread_mutex_lock(&q->lock);
    pthread_cond_signal(&q->wake[other]);
    pthread_mutex_unlock(&q->lock);
  }
}

static int has_room(ring_t *q, unsigned long tail) { return tail - __atomic_load_n(&q->head, __ATOMIC_SEQ_CST) < RING; }
static int has_item(ring_t *q, unsigned long head) { return __atomic_load_n(&q->tail, __ATOMIC_SEQ_CST) != head; }

static void *producer(void *arg)
{
  ring_t *q = &ring[(uintptr_t)arg];
  uint64_t x = 0x2545f4914f6cdd1dull + (uintptr_t)arg;
  for (long i = 0; i < per_producer; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t size = 8 + (size_t)(x % 249);         /* 8..256 */
    char *p = malloc(size);
    if (p == NULL) abort();
    memset(p, (int)(x >> 56), 8);
    unsigned long t = q->tail;
    if (!has_room(q, t)) wait_for(q, 0, has_room, t);
    q->slot[t % RING] = p;
    __atomic_store_n(&q->tail, t + 1, __ATOMIC_SEQ_CST);
    poke(q, 1);
  }
  return NULL;
}

static void *consumer(void *arg)
{
  ring_t *q = &ring[(uintptr_t)arg];
  uint64_t sum = 0;
  for (long i = 0; i < per_producer; i++) {
    unsigned long h = q->head;
    if (!has_item(q, h)) wait_for(q, 1, has_item, h);
    char *p = q->slot[h % RING];
    __atomic_store_n(&q->head, h + 1, __ATOMIC_SEQ_CST);
    poke(q, 0);
    sum += (unsigned char)p[7];
    free(p);
  }
  return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 4000000;
  per_producer = n / PAIRS;
  pthread_t prod[PAIRS], cons[PAIRS];
  uint64_t sum = 0;
  for (uintptr_t i = 0; i < PAIRS; i++) {
    pthread_mutex_init(&ring[i].lock, NULL);
    pthread_cond_init(&ring[i].wake[0], NULL);
    pthread_cond_init(&ring[i].wake[1], NULL);
    if (pthread_create(&cons[i], NULL, consumer, (void *)i) != 0) return 1;
    if (pthread_create(&prod[i], NULL, producer, (void *)i) != 0) return 1;
  }
  for (int i = 0; i < PAIRS; i++) pthread_join(prod[i], NULL);
  for (int i = 0; i < PAIRS; i++) {
    void *r;
    pthread_join(cons[i], &r);
    sum += (uintptr_t)r;
  }
  printf("blocks=%ld sum=%llu\n", per_producer * PAIRS, (unsigned long long)(sum & 0xffff));
  return 0;
}
