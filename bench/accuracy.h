/* accuracy.h - what bench/accuracy_work.c (the C workloads) and bench/accuracy_cxx.cc (the C++ sites)
 * share: the allocation sites, and the exact truth each run keeps about them.
 *
 * A site is one exported, never-inlined function of the workload program that calls the allocator
 * directly, named site_<name>: the library names the innermost frame of each sample with dladdr, so
 * the profile attributes every sample to its site by that name.  ACC_SITES lists them; a name here
 * that no function has shows up in the report as a site that is never seen (estimate 0).
 *
 * Truth: for every allocation the workload counts, per site, 1 object and its size s (the size the
 * library is documented to count: calloc n*size, aligned requests the requested size, C++ new the size
 * operator new is called with, realloc its new size), and the variance the estimator has under the
 * documented sampling rule: sampled with p = 1 - exp(-s/R) independently of every other allocation,
 * weight w = 1/p objects or s/p bytes, so one allocation contributes variance (1-p)/p objects^2 and
 * s^2 (1-p)/p bytes^2, third cumulant w^3 p (1-p) (1-2p) (how skewed the estimate is), and p expected
 * samples.  In-use truth is counted the same way over the blocks still live when the profile is
 * written.  Each thread counts into its own table (acc_flush adds it to the program's), so counting
 * takes no lock.
 *
 * Freed blocks (MIMALLOC_PROF_LIFETIMES, which every run has): every block the workloads allocate is
 * either live at the dump or freed through the library before it, so a site's freed truth, variance and
 * expected samples are its allocated ones less its in-use ones (accuracy_read.c derives them).  The
 * lifetime workload also counts the freed blocks that lived less than ACC_TEMP_NS (acc_temp).
 *
 * The peak (the peak workloads, single-threaded): acc_peak_live follows the live blocks; at each new
 * high of their total their per-site counts are copied: the truth at the true peak.  The library's peak
 * is half B's estimate (lib/peak.c): each block sampled with p_h = 1 - exp(-s/2R), weight s/p_h, so its
 * variance there is s^2 (1 - p_h) / p_h per live block.
 */
#ifndef ACCURACY_H
#define ACCURACY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported (named by dladdr: the program is linked with -rdynamic), never inlined or folded. */
#define ACC_SITE __attribute__((noinline, used, visibility("default")))

#define ACC_SITES(X)                                                                                  \
  X(sizes_small) X(sizes_medium) X(sizes_large) X(sizes_huge)                                         \
  X(churn)                                                                                            \
  X(calloc_array) X(calloc_one) X(calloc_tiny)                                                        \
  X(aligned_posix) X(aligned_c11) X(aligned_memalign)                                                 \
  X(cxx_new) X(cxx_new_array) X(cxx_new_aligned) X(cxx_new_nothrow)                                   \
  X(xthread_small) X(xthread_big)                                                                     \
  X(varied)                                                                                           \
  X(restart_old) X(restart_both) X(restart_new) X(restart_warmup) X(restart_worker)                   \
  X(rip_malloc) X(rip_grow1) X(rip_grow2)                                                             \
  X(mx_malloc) X(mx_grow) X(mx_grow2) X(mx_shrink) X(mx_shrink2) X(mx_array) X(mx_array2)             \
  X(bun_small) X(bun_large)                                                                           \
  X(tiny_kept) X(tiny_freed)                                                                          \
  X(round_1) X(round_2) X(round_3) X(round_5)                                                         \
  X(fork_worker)                                                                                      \
  X(peak_build) X(peak_keep)                                                                          \
  X(life_short) X(life_long) X(life_kept)                                                             \
  X(budget)                                                                                           \
  X(fork_parent) X(fork_child)                                                                        \
  X(zero_malloc) X(zero_calloc) X(zero_aligned) X(zero_base) X(zero_realloc) X(zero_mix)

enum {
#define X(name) ACC_##name,
  ACC_SITES(X)
#undef X
  ACC_NSITES
};

extern uint64_t acc_rate;   /* the sample rate of the session whose allocations are counted, bytes */

void acc_start(uint64_t rate, uint64_t seed);   /* mi_prof_start_seeded; sets acc_rate */
void acc_use(int site);                  /* the run reports this site (its truth may be all 0) */
void acc_no_truth(int site);             /* ... but its estimate has no known expectation */
void acc_spills(int site);               /* ... its truth is known, but some of its samples go to the
                                          * "[dropped (REASON)]" rows: only [total] is gated */
void acc_alloc(int site, size_t size);   /* one allocation of `size` bytes at `site`, counted */
void acc_keep(void *p, size_t size, int site);   /* a counted block that stays live until the dump */
void acc_live(int site, size_t size);    /* a counted block live at its process's estimate, elsewhere (a
                                          * fork child's: fork_children) */
void acc_flush(void);                    /* adds this thread's counts to the program's */
void acc_peak_live(int site, size_t size, int sign);   /* a block enters (+1) or leaves (-1) the live set */
/* The lifetime under which a freed block counts as temporary: 2^20 ns, a power of two, so that the
 * profile's lifetime buckets ([2^k, 2^(k+1)) ns, labelled 2^k) are each wholly under it or not. */
#define ACC_TEMP_NS ((uint64_t)1 << 20)
void acc_temp(int site, size_t size);    /* a block of the site, freed, lived less than ACC_TEMP_NS */
void acc_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* a line for the truth */
void *acc_check(void *p);                /* dies when p is NULL; touches one byte of the block */
void acc_die(const char *what) __attribute__((noreturn));

/* The workloads with threads (accuracy_threads.c) and the C++ one (accuracy_cxx.cc).  `div` divides
 * their sizes (QUICK=1). */
void acc_w_xthread(uint64_t rate, uint64_t seed, size_t div);
void acc_w_restart(uint64_t rate, uint64_t seed, size_t div);
void acc_w_fork(uint64_t rate, uint64_t seed, size_t div);
void acc_w_cxx(uint64_t rate, uint64_t seed, size_t div);
/* accuracy_edges.c: a full budget, fork children (arg: NULL or "entropy"), 0-byte requests. */
void acc_w_budget(uint64_t rate, uint64_t seed, size_t div);
void acc_w_fork_children(uint64_t rate, uint64_t seed, size_t div, const char *arg);
void acc_w_zero(uint64_t rate, uint64_t seed, size_t div);
size_t acc_scaled(size_t n, size_t div, size_t min);   /* max(n / div, min) */

#ifdef __cplusplus
}
#endif

#endif
