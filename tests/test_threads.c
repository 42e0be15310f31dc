/* test_threads.c - 8 threads allocate and free, each freeing blocks that other threads allocated. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"

#define THREADS 8
#define ROUNDS  20000
#define SLOTS   256

/* Each thread owns a mailbox of SLOTS blocks; thread t fills slot i of mailbox (t+1)%THREADS, so every
 * block it replaces was allocated by its neighbour: a cross-thread free. */
static struct mailbox {
  pthread_mutex_t lock;
  unsigned char *slot[SLOTS];
  size_t size[SLOTS];
} boxes[THREADS];

static unsigned long cross_frees[THREADS];
static unsigned long bad_contents[THREADS];

static void *worker(void *arg)
{
  unsigned t = (unsigned)(uintptr_t)arg;
  struct mailbox *box = &boxes[(t + 1) % THREADS];
  uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
  for (unsigned r = 0; r < ROUNDS; r++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t size = 16 + (size_t)(x % 4000);
    unsigned i = (unsigned)(x >> 40) % SLOTS;
    unsigned char *p = malloc(size);
    memset(p, (int)(size & 0xff), size);
    pthread_mutex_lock(&box->lock);
    unsigned char *old = box->slot[i];
    size_t old_size = box->size[i];
    box->slot[i] = p;
    box->size[i] = size;
    pthread_mutex_unlock(&box->lock);
    if (old != NULL) {
      if (old[0] != (unsigned char)(old_size & 0xff) || old[old_size - 1] != (unsigned char)(old_size & 0xff))
        bad_contents[t]++;
      free(old);
      cross_frees[t]++;
    }
  }
  return NULL;
}

START_TEST(threads_cross_thread_frees)
{
  pthread_t th[THREADS];
  for (unsigned t = 0; t < THREADS; t++) pthread_mutex_init(&boxes[t].lock, NULL);
  for (unsigned t = 0; t < THREADS; t++)
    ck_assert_int_eq(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t), 0);
  for (unsigned t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
  unsigned long frees = 0, live = 0;
  for (unsigned t = 0; t < THREADS; t++) {
    ck_assert_uint_eq(bad_contents[t], 0);
    frees += cross_frees[t];
    for (unsigned i = 0; i < SLOTS; i++) {
      if (boxes[t].slot[i] != NULL) {
        live++;
        free(boxes[t].slot[i]);
      }
    }
  }
  /* Every allocation was either freed by a thread that did not allocate it, or is still in a slot. */
  ck_assert_uint_eq(frees + live, (unsigned long)THREADS * ROUNDS);
  ck_assert_uint_le(live, (unsigned long)THREADS * SLOTS);
}
END_TEST

Suite *threads_suite(void)
{
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, threads_cross_thread_frees);
  suite_add_tcase(s, tc);
  return s;
}
