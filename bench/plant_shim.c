/* plant_shim.c - the planted control of bench/run.sh: libmimalloc-prof with a deliberate extra cost,
 * which the report must flag.
 *
 * Preloaded in front of the library (LD_PRELOAD="plant_shim.so libmimalloc-prof.so.0"), it wraps
 * malloc, free, calloc and realloc: each runs PLANT `nop`s (default 8) and forwards to the next
 * definition, the library's, found with dlsym(RTLD_NEXT).  So every call of these four pays PLANT nops
 * plus the forwarding (a load of the pointer, a test, an indirect jump: about 4 instructions, and one
 * range test more in free); the other entry points (posix_memalign, aligned_alloc, ...) reach the
 * library directly and pay nothing.  Nothing else changes: the profiler stays stopped.
 *
 * dlsym may allocate before the pointers are known (glibc's error path uses calloc): such requests are
 * served from a small static buffer, whose blocks are never freed.
 *
 * Build: cc -O2 -fno-builtin -fno-plt -fPIC -shared -DPLANT=8 -o plant_shim.so plant_shim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef PLANT
#define PLANT 8
#endif

#define PLANT_COST() __asm__ volatile(".rept %c0\n\tnop\n\t.endr" ::"i"(PLANT))
#define EXPORT       __attribute__((visibility("default")))

typedef void *malloc_fn(size_t);
typedef void free_fn(void *);
typedef void *calloc_fn(size_t, size_t);
typedef void *realloc_fn(void *, size_t);

static malloc_fn *next_malloc;
static free_fn *next_free;
static calloc_fn *next_calloc;
static realloc_fn *next_realloc;

/* Bootstrap buffer for allocations made while dlsym runs. */
static _Alignas(16) char boot[4096];
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t size)
{
  size = (size + 15) & ~(size_t)15;
  if (size > sizeof boot - boot_used) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = boot + boot_used;
  boot_used += size;
  return p;                                  /* static storage: already zero */
}

static inline int in_boot(const void *p) { return (uintptr_t)p - (uintptr_t)boot < sizeof boot; }

static __attribute__((noinline, cold)) int resolve(void)
{
  if (resolving) return 0;
  resolving = 1;
  next_calloc = (calloc_fn *)dlsym(RTLD_NEXT, "calloc");
  next_realloc = (realloc_fn *)dlsym(RTLD_NEXT, "realloc");
  next_free = (free_fn *)dlsym(RTLD_NEXT, "free");
  next_malloc = (malloc_fn *)dlsym(RTLD_NEXT, "malloc");
  resolving = 0;
  return next_malloc != NULL && next_free != NULL && next_calloc != NULL && next_realloc != NULL;
}

__attribute__((constructor)) static void plant_init(void) { (void)resolve(); }

EXPORT void *malloc(size_t size)
{
  PLANT_COST();
  malloc_fn *f = next_malloc;
  if (__builtin_expect(f == NULL, 0)) {
    if (!resolve()) return boot_alloc(size);
    f = next_malloc;
  }
  return f(size);
}

EXPORT void free(void *p)
{
  PLANT_COST();
  if (__builtin_expect(in_boot(p), 0)) return;
  free_fn *f = next_free;
  if (__builtin_expect(f == NULL, 0)) {
    if (!resolve()) return;
    f = next_free;
  }
  f(p);
}

EXPORT void *calloc(size_t n, size_t size)
{
  PLANT_COST();
  calloc_fn *f = next_calloc;
  if (__builtin_expect(f == NULL, 0)) {
    size_t total;
    if (!resolve()) return __builtin_mul_overflow(n, size, &total) ? NULL : boot_alloc(total);
    f = next_calloc;
  }
  return f(n, size);
}

EXPORT void *realloc(void *p, size_t size)
{
  PLANT_COST();
  if (__builtin_expect(in_boot(p), 0)) {     /* a bootstrap block moves to the real heap */
    void *q = malloc(size);
    if (q != NULL) memcpy(q, p, size < sizeof boot - (size_t)((char *)p - boot) ? size : sizeof boot - (size_t)((char *)p - boot));
    return q;
  }
  realloc_fn *f = next_realloc;
  if (__builtin_expect(f == NULL, 0)) {
    if (!resolve()) return NULL;
    f = next_realloc;
  }
  return f(p, size);
}
