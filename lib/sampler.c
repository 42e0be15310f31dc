/* sampler.c - which allocations are sampled, what each sample stands for, and recording it.
 *
 * The rule.  The bytes a thread allocates are marked by a Poisson process with mean distance
 * R = sample_rate bytes, and an allocation that contains a mark is sampled.  So an allocation of s bytes
 * is sampled with probability p(s) = 1 - exp(-s/R), independently of every other allocation (the process
 * is memoryless), and a sample stands for 1/p objects and s/p bytes: unbiased estimates of what was
 * allocated.  Every entry point follows it: malloc, calloc (n*size), the aligned functions (the requested
 * size), C++ new, and realloc, which counts as the allocation of its new size (see slow.c).
 *
 * The countdown.  Each thread draws the distance to its next mark, X ~ Exp(R), and keeps
 * D = floor(X): the number of bytes it can allocate before the mark.  An allocation of s bytes contains
 * the mark exactly when s > D (for whole s, s > floor(X) <=> s > X), which is also exactly when the fast
 * path's subtraction `countdown -= s` borrows: fast and slow paths use one convention, and P(sampled) is
 * P(X < s) = p(s) exactly.  After a sample the next distance is drawn afresh from the end of the sampled
 * allocation: by memorylessness that is the same as carrying the overshoot past the mark, without a
 * loop of s/R draws for a very large allocation.  (Tests: sampled fractions at rate 1/size 1,
 * rate 8/size 4 and rate 64/size 64, and the fraction of consecutive samples, within 4 sigma of p(s)
 * and p(s)^2.)
 *
 * The countdown the fast path sees is D capped at MI_PROF_RECHECK_BYTES; the rest waits in `remaining`.
 * So every thread reaches the slow path at least once per MI_PROF_RECHECK_BYTES of its own allocation,
 * which is when it notices a start, stop or restart (a new session word): the bound documented for
 * mi_prof_start().  A thread whose session is out of date draws a full fresh distance (no phantom
 * period, no state from the old session); a new thread starts at countdown 0, so its first allocation
 * lands here and draws in full.
 *
 * Weights.  1/p objects and s/p bytes are rounded to whole units (1/MPROF_FX_ONE object, 1 byte) at
 * random, up with probability equal to the fraction: unbiased, and sums of integers still add and
 * subtract exactly, so in-use returns exactly to zero when every sampled block is freed.
 *
 * Labels.  Each sample is counted under a label set of its stack: the thread's label and the requested size,
 * bucketed (mprof_bytes_bucket).  A thread's label is its name (prctl(PR_GET_NAME)) when that differs
 * from the process's name (read at start from /proc/self/comm: threads inherit it, and an unnamed thread
 * is told by its id instead, "tid N"); the main thread's is its name.  Reading the name costs a system
 * call (350 ns here, more than the rest of a sample with the fp unwinder), so each thread keeps its label
 * in TLS and reads the name again at its 2nd, 4th, 8th, ... 1024th sample and then every 1024th: a
 * thread that names itself after its first allocations shows its name within a few samples, a later
 * rename within 1024 samples, and reading costs nothing measurable (a clock read per sample to recheck by
 * time would cost more than the reads it saves).
 *
 * Time.  A sample's time (CLOCK_MONOTONIC) is read only with MIMALLOC_PROF_LIFETIMES (its lifetime
 * starts then); the timeline reads the clock itself when it needs a point (peak_inline.h).
 *
 * Samples that cannot be fully recorded keep their weight.  Without a stack (unwinder failure, no stack
 * room, a fork in progress, the stack table full or out of memory) the sample is recorded under the
 * one-frame stack MI_PROF_FRAME_DROPPED(reason); when the block cannot be tracked at all (no sampled
 * block can be had for it, or the record table has no room) it is served unsampled and only its allocated
 * weight is counted, under that stack.  Totals stay unbiased, and the profile shows how much went
 * unattributed.  A request that fails anyway (mimalloc cannot serve it either) is not a sample: nothing
 * is counted.
 */
#include "sampler.h"
#include "internal.h"
#include "mathfn.h"
#include "mireal.h"
#include "observer.h"
#include "options.h"
#include "peak.h"
#include "record.h"
#include "sheap.h"
#include "stacktab.h"
#include "unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

__thread mprof_tls_t mprof_tls __attribute__((tls_model("initial-exec")));
mprof_session_t mprof_session;
bool mprof_frozen;

static uint32_t thread_ordinals;   /* last thread ordinal handed out (atomic) */
static uint64_t slow_path_calls;   /* countdowns that ran out while running (relaxed atomic) */
/* Fork children draw apart.  A child starts as a copy of its forking thread, generator state included, so
 * without this every child of one parent would take exactly the same samples (a preforking server's
 * workers fully correlated).  Each fork gets an index in the parent (prefork); a child forked while a
 * session runs mixes it into its salt, and every generator seeded for that session in the child mixes
 * the salt in: the forking thread at once, threads the child starts later when they first sample.  With
 * a fixed seed a child is reproducible (the same seed and the same order of forks give the same samples).
 * A session started after the fork is not salted: it samples as in a process no fork made. */
static uint64_t forks;             /* forks begun by this process (atomic) */
static uint64_t fork_salt;         /* 0 in a process no running session was forked into */
static uint64_t fork_salt_word;    /* the session word the salt is for */
static __thread uint64_t fork_index;

void mprof_session_publish(uint64_t id, bool running, uint64_t rate, uint64_t seed)
{
  __atomic_store_n(&mprof_session.rate, rate, __ATOMIC_RELAXED);
  __atomic_store_n(&mprof_session.seed, seed, __ATOMIC_RELAXED);
  __atomic_store_n(&mprof_session.word, (id << 1) | (running ? 1u : 0u), __ATOMIC_RELEASE);
}

uint64_t mprof_sampler_slow_path_calls(void) { return __atomic_load_n(&slow_path_calls, __ATOMIC_RELAXED); }
void mprof_sampler_reset_calls(void) { __atomic_store_n(&slow_path_calls, 0, __ATOMIC_RELAXED); }

/* ---------------------------------------------------------------------------------------------------
   Random numbers: distances and rounding
--------------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* xorshift64*: small state, good enough for drawing distances and rounding weights. */
static uint64_t rng_next(mprof_tls_t *t)
{
  uint64_t x = t->rng;
  x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
  t->rng = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* Uniform on [0, 1), 53 bits. */
static double rng_unit(mprof_tls_t *t) { return (double)(rng_next(t) >> 11) * 0x1.0p-53; }

/* Seeds this thread's generator for the session `word`: from (seed, thread ordinal, and the fork salt when
 * the session was forked into this process) when the session has a seed, so a single-threaded program
 * repeats its samples exactly; else from the kernel's entropy. */
static void rng_seed(mprof_tls_t *t, uint64_t seed, uint64_t word)
{
  uint64_t x;
  if (seed != 0) {
    if (t->ordinal == 0) t->ordinal = __atomic_add_fetch(&thread_ordinals, 1, __ATOMIC_RELAXED);
    x = splitmix64(seed ^ splitmix64(t->ordinal) ^ (word == fork_salt_word ? fork_salt : 0));
  } else {
    x = mprof_random64();
  }
  t->rng = x != 0 ? x : 0x853c49e6748fea9bull;   /* xorshift state must not be 0 */
}

static void thread_label_postfork_child(void);

void mprof_sampler_prefork(void) { fork_index = __atomic_add_fetch(&forks, 1, __ATOMIC_RELAXED); }

/* After fork only the forking thread exists in the child, with its parent's cached thread id and sampler
 * state.  In a running session it forgets its distance (a fresh draw at any point is exact: the marks are
 * memoryless) and reseeds, salted, at its next allocation.  True then: the caller sends that allocation
 * to the slow path (countdown 0). */
bool mprof_sampler_postfork_child(void)
{
  uint64_t word = __atomic_load_n(&mprof_session.word, __ATOMIC_RELAXED);
  __atomic_store_n(&forks, 0, __ATOMIC_RELAXED);
  mprof_tls.tid = 0;
  thread_label_postfork_child();
  if (!(word & 1)) return false;
  fork_salt = splitmix64((word == fork_salt_word ? fork_salt : 0) ^ splitmix64(fork_index));
  fork_salt_word = word;
  mprof_tls.session = 0;
  mprof_tls.remaining = 0;
  return true;
}

/* The kernel's entropy; where getrandom(2) is refused (ENOSYS under a seccomp filter older than it,
 * EAGAIN before the pool is ready at boot) both clocks in nanoseconds, the process and thread IDs, a
 * per-process count and an address on this thread's stack (randomised at exec), mixed: nothing secret,
 * but nothing another process can know in advance either. */
uint64_t mprof_random64(void)
{
  static uint64_t calls;
  uint64_t x;
  if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x) return x;
  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  uint64_t n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  x = splitmix64((uint64_t)rt.tv_nsec ^ ((uint64_t)rt.tv_sec << 30) ^ ((uint64_t)getpid() << 42));
  x = splitmix64(x ^ (uint64_t)mono.tv_nsec ^ ((uint64_t)mono.tv_sec << 32) ^ (uint64_t)(uintptr_t)&rt);
  return splitmix64(x ^ n * 0x9e3779b97f4a7c15ull ^ (uint64_t)gettid());
}

/* D = floor(X) for X ~ Exp(rate): the bytes before the next mark.  -log(u) for u uniform on (0, 1]. */
static uint64_t draw_distance(mprof_tls_t *t)
{
  double u = (double)((rng_next(t) >> 11) + 1) * 0x1.0p-53;
  return (uint64_t)(-mprof_math_log(u) * (double)t->rate);    /* at most ~36.7 * rate */
}

/* w (0 <= w < 2^63) rounded to a whole number, up when the uniform u < frac(w): E = w exactly.  The
 * conversion truncates (floor() is a call into libm on x86-64 without SSE4.1). */
static inline uint64_t round_up_if(double w, double u)
{
  uint64_t whole = (uint64_t)w;
  return whole + (u < w - (double)whole);
}

static void set_distance(mprof_tls_t *t, uint64_t distance)
{
  t->countdown = distance < MI_PROF_RECHECK_BYTES ? (size_t)distance : MI_PROF_RECHECK_BYTES;
  t->remaining = (size_t)(distance - t->countdown);
}

/* Decides whether this allocation of `size` bytes, whose countdown ran out, is a sample, and re-arms the
 * countdown either way.  `before` is the countdown before this allocation (the fast path's subtraction
 * undone).  Guard up. */
bool mprof_take_sample(mprof_tls_t *t, size_t size, size_t before)
{
  uint64_t word = __atomic_load_n(&mprof_session.word, __ATOMIC_ACQUIRE);
  uint64_t distance = (uint64_t)before + t->remaining;    /* bytes left before the mark */
  if (mprof_unlikely(word != t->session)) {              /* new thread, or start/stop/restart */
    t->session = word;
    if (word & 1) {
      t->rate = __atomic_load_n(&mprof_session.rate, __ATOMIC_RELAXED);
      rng_seed(t, __atomic_load_n(&mprof_session.seed, __ATOMIC_RELAXED), word);
      distance = draw_distance(t);                      /* a full distance: no phantom period */
    }
  }
  if (!(word & 1)) {                                    /* stopped: look again after the recheck bound */
    t->countdown = MI_PROF_RECHECK_BYTES;
    t->remaining = 0;
    return false;
  }
  __atomic_fetch_add(&slow_path_calls, 1, __ATOMIC_RELAXED);
  if (size <= distance) {                               /* the mark is further on */
    set_distance(t, distance - size);
    return false;
  }
  set_distance(t, draw_distance(t));                    /* next mark, from the end of this allocation */
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   Samples
--------------------------------------------------------------------------------------------------- */

static uint32_t thread_id(mprof_tls_t *t)
{
  if (mprof_unlikely(t->tid == 0)) t->tid = (uint32_t)gettid();
  return t->tid;
}

/* ---------------------------------------------------------------------------------------------------
   Thread labels
--------------------------------------------------------------------------------------------------- */

#define MPROF_THREAD_RECHECK 1024u   /* samples between reads of a thread's name, at most */

/* The thread's label, its samples and the sample at which its name is read again (0: at the next; a fork
 * child keeps its parent thread's label until then). */
static __thread struct {
  char     label[MPROF_THREAD_LABEL];
  uint32_t samples, next_read;
  uint8_t  main;        /* the process's main thread: 0 unknown (a new thread, a fork child), 1 no, 2 yes */
} thread_label __attribute__((tls_model("initial-exec")));

/* The forking thread is the child's main thread. */
static void thread_label_postfork_child(void) { thread_label.main = 0; }

static char process_name[MPROF_THREAD_LABEL];   /* /proc/self/comm at the first start */
static bool process_name_read;

/* At a session's start (api_lock held): the process's name, once (later, samplers may be reading it). */
void mprof_sampler_session_begin(void)
{
  if (process_name_read) return;
  process_name_read = true;
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, process_name, sizeof process_name - 1);
  close(fd);
  if (n > 0 && process_name[n - 1] == '\n') process_name[n - 1] = '\0';
  if (n < 0) process_name[0] = '\0';
}

/* "tid N", NUL-padded (no stdio: a sample may be taken in a signal handler). */
static void tid_label(char out[MPROF_THREAD_LABEL], uint32_t tid)
{
  char digits[10];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + tid % 10);
    tid /= 10;
  } while (tid != 0);
  memset(out, 0, MPROF_THREAD_LABEL);
  memcpy(out, "tid ", 4);
  for (size_t i = 0; i < n; i++) out[4 + i] = digits[n - 1 - i];
}

static MPROF_NOINLINE void read_thread_label(mprof_tls_t *t)
{
  char name[MPROF_THREAD_LABEL] = {0};
  uint32_t tid = thread_id(t);
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
  name[MPROF_THREAD_LABEL - 1] = '\0';
  if (thread_label.main == 0) thread_label.main = tid == (uint32_t)getpid() ? 2 : 1;   /* one system call */
  bool named = name[0] != '\0' && (thread_label.main == 2 || strcmp(name, process_name) != 0);
  if (named) {
    memcpy(thread_label.label, name, sizeof name);       /* NUL-padded: name[] started as zeros */
  } else {
    tid_label(thread_label.label, tid);
  }
  uint32_t n = thread_label.samples;
  thread_label.next_read = n < MPROF_THREAD_RECHECK ? 2 * n : n + MPROF_THREAD_RECHECK;
}

/* The labels of a sample of `size` bytes on this thread. */
static inline void sample_labels(mprof_tls_t *t, size_t size, mprof_labels_t *out)
{
  uint32_t n = ++thread_label.samples;
  if (mprof_unlikely((int32_t)(n - thread_label.next_read) >= 0)) read_thread_label(t);   /* wraps around */
  memcpy(out->thread, thread_label.label, sizeof out->thread);
  out->bytes = mprof_bytes_bucket(size);
}

/* Captures the stack of the allocation of `size` bytes being sampled and interns it with the sample's
 * labels (before any profiler lock); *now: with lifetimes, the sample's time, read once the stack is
 * captured (so a lifetime does not include the unwinding), else 0.  Returns its label set's id, with *why =
 * MI_PROF_DROP_REASONS; or the id of the "dropped (reason)" set with *why = the reason when it has none;
 * or 0 when the session ended meanwhile (nothing is to be counted). */
static MPROF_NOINLINE uint64_t sample_stack(mprof_tls_t *t, size_t size, uint64_t *now,
                                            mi_prof_drop_reason_t *why)
{
  size_t max = (size_t)mprof_option(MPROF_OPT_BT_MAX);     /* 1..MPROF_BT_MAX_CAP */
  *why = MI_PROF_DROP_UNWIND;
  if (mprof_likely(mprof_unwind_room(max))) {                 /* before frames[]: a small stack may end */
    uintptr_t frames[max + MPROF_UNWIND_SLACK];               /* 640 bytes at the default */
    size_t depth = mprof_unwind(frames, max, why);
    *now = mprof_lifetimes ? mprof_mono_ns() : 0;
    if (mprof_likely(depth != 0)) {
      mprof_labels_t labels;
      sample_labels(t, size, &labels);
      uint64_t id = mprof_stack_intern(frames, depth, &labels, t->session, why);
      if (id != 0) *why = MI_PROF_DROP_REASONS;
      if (id != 0 || *why == MI_PROF_DROP_REASONS) return id;
    }
  } else {
    *now = mprof_lifetimes ? mprof_mono_ns() : 0;
  }
  return mprof_stack_dropped(*why);
}

/* The weights of a sample of `size` bytes, with the rate its distance was drawn with. */
/* The halves (peak.c): each mark of the Poisson process that decides the samples goes to half A or half B
 * at random, so each half is such a process of rate 1/(2R), independent of the other, and a sampled
 * block holds marks of A only, of B only, or of both.  A half's mark misses s bytes with probability
 * q = e^(-s/2R) = sqrt(1 - p), so a half samples it with p_h = 1 - q = p / (1 + q), and given that it is
 * sampled the block is A's only, B's only, or both with probabilities q/(1+q), q/(1+q), (1-q)/(1+q).  In
 * its half (halves) a sample stands for s / p_h bytes. */
static void weigh(mprof_tls_t *t, size_t size, mprof_record_t *r)
{
  double x = -(double)size / (double)t->rate;
  double p = -mprof_math_expm1(x);                          /* p(s) = 1 - exp(-s/R) */
  double q = 1 + mprof_math_expm1(x / 2), one = q / (1 + q);   /* sqrt(1 - p) without libm's sqrt */
  double u_obj = rng_unit(t), u_bytes = rng_unit(t);        /* the half, and the bytes of both estimates,
                                                             * share a uniform: each is uniform */
  r->obj_fx = round_up_if(MPROF_FX_ONE / p, u_obj);
  r->inuse_bytes = round_up_if((double)size / p, u_bytes);
  r->half_bytes = round_up_if((double)size * (1 + q) / p, u_bytes);
  r->flags |= u_obj < one ? MPROF_RECORD_HALF_A : u_obj < 2 * one ? MPROF_RECORD_HALF_B
                                                                  : MPROF_RECORD_HALF_A | MPROF_RECORD_HALF_B;
}

/* Records the sampled block p of `size` bytes, sampled at `now` (0: not read), under `stack_id` (a real label
 * set when why is MI_PROF_DROP_REASONS, else the "dropped (why)" set) and tells the observer.  False when
 * the budget had no room for its record (a drop, counted with its weight: p stays untracked).  Guard up. */
bool mprof_sample_record(mprof_tls_t *t, void *p, size_t size, mi_heap_t *heap, uint64_t stack_id,
                         mi_prof_drop_reason_t why, uint64_t now)
{
  mprof_observer_t obs;
  mprof_observer_get(&obs);
  mprof_record_t r = {
    .addr = (uintptr_t)p,
    .size = size,
    .stack_id = stack_id,
    .heap = heap,
    .flags = obs.on_sample != NULL ? MPROF_RECORD_OBSERVED : 0,
    .alloc_ns = now,
  };
  weigh(t, size, &r);
  mprof_insert_t rc = mprof_record_insert(&r, t->session);
  if (mprof_unlikely(rc == MPROF_INSERT_MEMORY)) {        /* the block stays, untracked */
    why = MI_PROF_DROP_MEMORY;
    mprof_record_count(mprof_stack_dropped(why), r.obj_fx, r.inuse_bytes, t->session);
  }
  if (rc == MPROF_INSERT_SESSION) {                       /* stopped meanwhile: not a sample */
    mprof_sheap_orphan(p, size, heap);
    return true;
  }
  if (rc == MPROF_INSERT_OK) mprof_sheap_track(p);
  if (mprof_unlikely(why != MI_PROF_DROP_REASONS)) mprof_drop(why);
  if (rc != MPROF_INSERT_OK) return false;
  if (obs.on_sample != NULL)
    obs.on_sample(p, size, (size_t)r.inuse_bytes, (size_t)t->rate, thread_id(t), obs.arg);
  return true;
}

/* Captures the stack of a sample of `size` bytes about to be recorded at an address decided later (realloc
 * in place); *now: when, for mprof_sample_record. */
uint64_t mprof_sample_stack(mprof_tls_t *t, size_t size, uint64_t *now, mi_prof_drop_reason_t *why)
{
  return sample_stack(t, size, now, why);
}

mi_heap_t *mprof_sample_heap(const mprof_req_t *r)
{
  return r->heap != NULL ? r->heap : mprof_mi.mi_heap_get_default();
}

/* A sampled allocation: the block from the sampled-block heap, recorded with its stack (served unsampled
 * after all when it is a slot's and its record does not fit the budget); or, when the heap cannot hold
 * it, served unsampled by the request's own path with its allocated weight counted under the "dropped"
 * stack; NULL (with the entry point's errno) when that fails too, and then nothing is counted.  Guard
 * up. */
void *mprof_sample_alloc(mprof_tls_t *t, const mprof_req_t *r)
{
  int saved_errno = errno;
  mi_prof_drop_reason_t why, arena_why;
  uint64_t now;
  uint64_t stack_id = sample_stack(t, r->size, &now, &why);
  void *p = mprof_sheap_alloc(r, &arena_why);
  if (mprof_likely(p != NULL)) {
    if (stack_id == 0) {
      mprof_sheap_orphan(p, r->size, mprof_sample_heap(r));   /* stopped meanwhile */
    } else if (!mprof_sample_record(t, p, r->size, mprof_sample_heap(r), stack_id, why, now) &&
               mprof_sheap_in_slot(p)) {
      /* No record (the budget is full): a slot would hold a page and 32-64 KiB of the arena's address
       * space for nothing, so the request is served as an unsampled one, if it can be. */
      void *q = r->plain(r);
      if (q != NULL) {
        mprof_sheap_free(p);
        p = q;
      }
    }
    errno = saved_errno;
    return p;
  }
  errno = saved_errno;
  p = r->plain(r);
  if (p == NULL) return NULL;                             /* failed anyway: not a sample */
  if (stack_id != 0) {                                    /* untracked: allocated weight only */
    int err = errno;
    mprof_record_t w = {.size = r->size};
    weigh(t, r->size, &w);
    if (mprof_record_count(mprof_stack_dropped(arena_why), w.obj_fx, w.inuse_bytes, t->session))
      mprof_drop(arena_why);
    errno = err;
  }
  return p;
}
