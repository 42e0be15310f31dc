/* accuracy_threads.c - the workloads of bench/accuracy that need threads: cross-thread frees, a stop and
 * restart at a new rate with a thread that lives through both sessions, and fork while threads
 * allocate.  Truth is counted as in accuracy_work.c (accuracy.h).  Threads are created after the
 * session starts, except the restart workload's worker, which is the point of it.  Nothing here
 * synchronises by sleeping: queues, barriers and joins.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#include "accuracy.h"

ACC_SITE void *site_xthread_small(size_t n);   /* accuracy_work.c */
ACC_SITE void *site_xthread_big(size_t n);
ACC_SITE void *site_restart_old(size_t n);
ACC_SITE void *site_restart_both(size_t n);
ACC_SITE void *site_restart_new(size_t n);
ACC_SITE void *site_restart_warmup(size_t n);
ACC_SITE void *site_restart_worker(size_t n);
ACC_SITE void *site_fork_worker(size_t n);

static void create(pthread_t *t, void *(*fn)(void *), void *arg)
{
  if (pthread_create(t, NULL, fn, arg) != 0) acc_die("pthread_create");
}

static void join(pthread_t t)
{
  if (pthread_join(t, NULL) != 0) acc_die("pthread_join");
}

/* ---------------------------------------------------------------------------------------------------
   xthread: 2 producers allocate, 2 consumers free 3 blocks in 4 and keep the 4th
--------------------------------------------------------------------------------------------------- */

typedef struct item_s {
  void  *p;               /* NULL: the producer is done */
  size_t size;
  int    site;
  size_t index;
} item_t;

#define QUEUE_CAP 4096
static struct {
  pthread_mutex_t lock;
  pthread_cond_t  not_empty, not_full;
  item_t          item[QUEUE_CAP];   /* static: the queue is never sampled */
  size_t          head, count;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0}}, 0, 0};

static void push(item_t it)
{
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QUEUE_CAP) pthread_cond_wait(&queue.not_full, &queue.lock);
  queue.item[(queue.head + queue.count++) % QUEUE_CAP] = it;
  pthread_cond_signal(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

static item_t pop(void)
{
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0) pthread_cond_wait(&queue.not_empty, &queue.lock);
  item_t it = queue.item[queue.head];
  queue.head = (queue.head + 1) % QUEUE_CAP;
  queue.count--;
  pthread_cond_signal(&queue.not_full);
  pthread_mutex_unlock(&queue.lock);
  return it;
}

typedef struct producer_s {
  void *(*fn)(size_t);
  int    site;
  size_t n, size;
} producer_t;

static void *producer(void *arg)
{
  const producer_t *pr = arg;
  for (size_t i = 0; i < pr->n; i++) {
    void *p = acc_check(pr->fn(pr->size));
    acc_alloc(pr->site, pr->size);
    push((item_t){p, pr->size, pr->site, i});
  }
  push((item_t){NULL, 0, 0, 0});
  acc_flush();
  return NULL;
}

/* Each consumer stops at the first end marker it takes; the queue is FIFO, so the other consumer
 * takes everything pushed after it (the second marker is the last item of all). */
static void *consumer(void *arg)
{
  (void)arg;
  for (item_t it; (it = pop()).p != NULL;) {
    if (it.index % 4 == 0) acc_keep(it.p, it.size, it.site);
    else free(it.p);
  }
  return NULL;
}

/* About 32 MiB from each producer site. */
void acc_w_xthread(uint64_t rate, uint64_t seed, size_t div)
{
  producer_t pr[2] = {
    {site_xthread_small, ACC_xthread_small, acc_scaled(320000, div, 1), 100},
    {site_xthread_big, ACC_xthread_big, acc_scaled(10700, div, 1), 3000},
  };
  pthread_t t[4];
  acc_start(rate, seed);
  acc_use(ACC_xthread_small), acc_use(ACC_xthread_big);
  create(&t[0], consumer, NULL);
  create(&t[1], consumer, NULL);
  create(&t[2], producer, &pr[0]);
  create(&t[3], producer, &pr[1]);
  for (int i = 0; i < 4; i++) join(t[i]);
}

/* ---------------------------------------------------------------------------------------------------
   restart: session 1 at 4 x RATE, a stop, allocations while stopped, session 2 at RATE; the profile
   must show session 2 only.  A worker thread lives through both sessions.
--------------------------------------------------------------------------------------------------- */

#define OLD_MAX 8192
static void *old_blocks[OLD_MAX];       /* session 1's kept blocks (not counted) */
static void *worker_old[1024];          /* the worker's, from session 1 */
static size_t n_old;
static pthread_barrier_t phase;         /* main and the worker: end of session 1, start of session 2 */
static size_t restart_div;

static void keep_old(void *p)
{
  if (n_old == OLD_MAX) acc_die("too many session-1 blocks");
  old_blocks[n_old++] = p;
}

/* The worker allocates 4 MiB at site_restart_worker in session 1 (kept, never counted); in session 2
 * 2 MiB of warm-up (a thread that did not call mi_prof_start notices the new session only within
 * MI_PROF_RECHECK_BYTES = 1 MiB of its own allocation: what it allocates until then has no known
 * expectation), then 32 MiB at site_restart_worker, counted, half of it kept. */
static void *restart_worker(void *arg)
{
  (void)arg;
  for (size_t i = 0; i < 1024; i++) worker_old[i] = acc_check(site_restart_worker(4096));
  pthread_barrier_wait(&phase);         /* session 1 over */
  pthread_barrier_wait(&phase);         /* session 2 running */
  for (size_t i = 0; i < 512; i++) free(acc_check(site_restart_warmup(4096)));
  for (size_t i = 0, n = acc_scaled(8192, restart_div, 1); i < n; i++) {
    void *p = acc_check(site_restart_worker(4096));
    acc_alloc(ACC_restart_worker, 4096);
    if (i % 2 == 0) acc_keep(p, 4096, ACC_restart_worker);
    else free(p);
  }
  acc_flush();
  return NULL;
}

void acc_w_restart(uint64_t rate, uint64_t seed, size_t div)
{
  restart_div = div;
  acc_use(ACC_restart_old), acc_use(ACC_restart_both), acc_use(ACC_restart_new);
  acc_use(ACC_restart_worker), acc_use(ACC_restart_warmup);
  acc_no_truth(ACC_restart_warmup);
  if (pthread_barrier_init(&phase, NULL, 2) != 0) acc_die("pthread_barrier_init");
  if (!mi_prof_start_seeded(4 * rate, seed + 1000003)) acc_die("mi_prof_start_seeded");
  pthread_t worker;
  create(&worker, restart_worker, NULL);
  /* Session 1: 16 MiB kept at site_restart_old, 8 MiB at site_restart_both (half kept). */
  for (size_t i = 0; i < 4096; i++) keep_old(acc_check(site_restart_old(4000)));
  for (size_t i = 0; i < 2048; i++) {
    void *p = acc_check(site_restart_both(4000));
    if (i % 2 == 0) keep_old(p);
    else free(p);
  }
  pthread_barrier_wait(&phase);
  if (!mi_prof_stop()) acc_die("mi_prof_stop");
  /* Stopped: 8 MiB at site_restart_both, half kept. */
  for (size_t i = 0; i < 2048; i++) {
    void *p = acc_check(site_restart_both(4000));
    if (i % 2 == 0) keep_old(p);
    else free(p);
  }
  acc_start(rate, seed);                /* session 2 */
  pthread_barrier_wait(&phase);
  /* Session 2: 32 MiB each at site_restart_both and site_restart_new (half kept), and half of
   * session 1's blocks freed (the library stopped tracking them at the stop). */
  for (size_t i = 0, n = acc_scaled(8192, div, 1); i < n; i++) {
    void *p = acc_check(site_restart_both(4000));
    acc_alloc(ACC_restart_both, 4000);
    if (i % 2 == 0) acc_keep(p, 4000, ACC_restart_both);
    else free(p);
    p = acc_check(site_restart_new(4000));
    acc_alloc(ACC_restart_new, 4000);
    if (i % 2 == 0) acc_keep(p, 4000, ACC_restart_new);
    else free(p);
  }
  for (size_t i = 0; i < n_old; i += 2) free(old_blocks[i]);
  join(worker);
}

/* ---------------------------------------------------------------------------------------------------
   fork: 4 threads allocate 256-byte blocks (1 in 64 kept, up to 4096 each) while main forks 100 times
   back to back; each child exits at once and is reaped after the last fork.
--------------------------------------------------------------------------------------------------- */

#define FORK_WORKERS 4
#define FORKS        100
static atomic_bool fork_stop;
static pthread_barrier_t fork_go;       /* the workers and main: every worker is about to allocate */

static void *fork_worker(void *arg)
{
  (void)arg;
  size_t n = 0, kept = 0;
  pthread_barrier_wait(&fork_go);
  while (!atomic_load_explicit(&fork_stop, memory_order_relaxed)) {
    void *p = acc_check(site_fork_worker(256));
    acc_alloc(ACC_fork_worker, 256);
    if (n++ % 64 == 0 && kept < 4096) {
      acc_keep(p, 256, ACC_fork_worker);
      kept++;
    } else {
      free(p);
    }
  }
  acc_flush();
  return (void *)(uintptr_t)n;
}

void acc_w_fork(uint64_t rate, uint64_t seed, size_t div)
{
  (void)div;                            /* 100 forks take well under a second: not scaled */
  pthread_t t[FORK_WORKERS];
  acc_start(rate, seed);
  acc_use(ACC_fork_worker);
  if (pthread_barrier_init(&fork_go, NULL, FORK_WORKERS + 1) != 0) acc_die("pthread_barrier_init");
  for (int i = 0; i < FORK_WORKERS; i++) create(&t[i], fork_worker, NULL);
  pthread_barrier_wait(&fork_go);
  for (int i = 0; i < FORKS; i++) {   /* back to back: the children are reaped afterwards */
    pid_t pid = fork();
    if (pid < 0) acc_die("fork");
    if (pid == 0) _exit(0);             /* no atexit handler, no dump */
  }
  for (int i = 0; i < FORKS; i++) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) acc_die("wait");
  }
  atomic_store(&fork_stop, true);
  uint64_t total = 0;
  for (int i = 0; i < FORK_WORKERS; i++) {
    void *n;
    if (pthread_join(t[i], &n) != 0) acc_die("pthread_join");
    total += (uintptr_t)n;
  }
  acc_line("info worker_allocations %llu", (unsigned long long)total);
  if (rate == 4096) {
    acc_line("accept fork-alloc-space [total] alloc_space rel 0.03");
    acc_line("accept fork-alloc-objects [total] alloc_objects rel 0.03");
  }
}
