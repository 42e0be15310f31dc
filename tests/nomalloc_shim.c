/* nomalloc_shim.c - preloaded in front of the library (LD_PRELOAD) by test_profiler.c: aborts the process
 * when the profiler's own thread (named "mimalloc-prof") calls any allocation function.
 *
 * That thread writes every interval, peak, signal and final-signal profile, and it must never call malloc:
 * the profile's memory comes from the profiler's own mappings, and a malloc there would land in the heap
 * the profiler is describing (or, sampled, in its tables).  Each entry point below asks once per thread
 * whether it runs on that thread (the thread names itself before doing anything else, and only its own
 * first allocation would classify it), then forwards to the next definition: the library's.  So a future
 * protobuf-c, zlib or glibc function that allocates while a dump is written fails the suite.
 *
 * While the next definitions are being looked up (dlsym may allocate), requests are served from a small
 * static buffer, whose blocks free() then ignores.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define IE __attribute__((tls_model("initial-exec")))

static __thread int thread_kind IE;         /* 0: not asked yet, 1: the profiler's thread, 2: another */
static __thread int resolving IE;

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void *(*next_reallocarray)(void *, size_t, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);
static void *(*next_aligned_alloc)(size_t, size_t);
static void *(*next_memalign)(size_t, size_t);
static void *(*next_valloc)(size_t);
static void *(*next_pvalloc)(size_t);
static void (*next_free)(void *);

static _Alignas(64) unsigned char boot[64 << 10];
static size_t boot_used;

static void *boot_alloc(size_t size)
{
  size_t at = __atomic_fetch_add(&boot_used, (size + 63) & ~(size_t)63, __ATOMIC_RELAXED);
  if (at + size > sizeof boot) abort();
  return boot + at;
}

static int in_boot(const void *p)
{
  return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot;
}

static void resolve(void)
{
  resolving = 1;
  next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  next_reallocarray = (void *(*)(void *, size_t, size_t))dlsym(RTLD_NEXT, "reallocarray");
  next_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  next_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  next_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  next_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  next_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  resolving = 0;
}

/* Returns false while the next definitions are being looked up (serve from the static buffer). */
static int check(const char *fn)
{
  if (thread_kind == 0) {
    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    thread_kind = strcmp(name, "mimalloc-prof") == 0 ? 1 : 2;
  }
  if (thread_kind == 1) {
    static const char head[] = "nomalloc_shim: ", tail[] = " called on the profiler thread\n";
    ssize_t w = write(2, head, sizeof head - 1);
    w = write(2, fn, strlen(fn));
    w = write(2, tail, sizeof tail - 1);
    (void)w;
    abort();
  }
  if (resolving) return 0;
  if (next_free == NULL) resolve();
  return 1;
}

void *malloc(size_t size) { return check("malloc") ? next_malloc(size) : boot_alloc(size); }

void *calloc(size_t n, size_t size)
{
  if (check("calloc")) return next_calloc(n, size);
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  return boot_alloc(n * size);               /* static: zeroed */
}

void *realloc(void *p, size_t size)
{
  if (!check("realloc")) return boot_alloc(size);
  if (!in_boot(p)) return next_realloc(p, size);
  size_t room = (size_t)(boot + sizeof boot - (unsigned char *)p);   /* a boot block's size is not kept */
  void *q = next_malloc(size);
  if (q != NULL) memcpy(q, p, size < room ? size : room);
  return q;
}

/* The aligned entry points are not expected while looking up (boot blocks are 64-aligned only). */
static void must_check(const char *fn)
{
  if (!check(fn)) abort();
}

void *reallocarray(void *p, size_t n, size_t size)
{
  must_check("reallocarray");
  return next_reallocarray(p, n, size);
}

int posix_memalign(void **out, size_t alignment, size_t size)
{
  must_check("posix_memalign");
  return next_posix_memalign(out, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
  must_check("aligned_alloc");
  return next_aligned_alloc(alignment, size);
}

void *memalign(size_t alignment, size_t size)
{
  must_check("memalign");
  return next_memalign(alignment, size);
}

void *valloc(size_t size)
{
  must_check("valloc");
  return next_valloc(size);
}

void *pvalloc(size_t size)
{
  must_check("pvalloc");
  return next_pvalloc(size);
}

void free(void *p)
{
  if (p == NULL || in_boot(p)) return;
  if (next_free == NULL) resolve();
  next_free(p);
}
