/* pmem.c - profiler memory: raw anonymous mmap, never malloc, under one byte budget.
 *
 * Every table of the profiler (records, later stacks and dump buffers) maps its memory here, so the
 * profiler can never recurse into the allocator it hooks, and MIMALLOC_PROF_MAX_BYTES bounds all of it.
 * Pages are touched only when used (mmap gives demand-zero pages).  The budget is one atomic counter:
 * no lock, so any lock may be held while mapping.
 */
#include "internal.h"

#include <sys/mman.h>

static size_t pmem_mapped;   /* bytes mapped now (atomic) */

static size_t page_round(size_t bytes) { return (bytes + 4095) & ~(size_t)4095; }

void *mprof_pmem_map(size_t bytes)
{
  bytes = page_round(bytes);
  size_t budget = (size_t)mprof_option(MPROF_OPT_MAX_BYTES);
  size_t cur = __atomic_load_n(&pmem_mapped, __ATOMIC_RELAXED);
  do {
    if (cur + bytes > budget || cur + bytes < cur) return NULL;
  } while (!__atomic_compare_exchange_n(&pmem_mapped, &cur, cur + bytes, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mprof_unlikely(p == MAP_FAILED)) {
    __atomic_fetch_sub(&pmem_mapped, bytes, __ATOMIC_RELAXED);
    return NULL;
  }
  return p;
}

void mprof_pmem_unmap(void *p, size_t bytes)
{
  if (p == NULL) return;
  bytes = page_round(bytes);
  munmap(p, bytes);
  __atomic_fetch_sub(&pmem_mapped, bytes, __ATOMIC_RELAXED);
}

size_t mprof_pmem_mapped(void) { return __atomic_load_n(&pmem_mapped, __ATOMIC_RELAXED); }

/* ---------------------------------------------------------------------------------------------------
   Scratch: a bump allocator over profiler memory for one dump (tables, protobuf-c messages, zlib's
   state), released at once.  Memory comes zeroed (anonymous mmap).
--------------------------------------------------------------------------------------------------- */

#define SCRATCH_CHUNK ((size_t)256 << 10)

typedef struct scratch_chunk_s {
  struct scratch_chunk_s *next;
  size_t                  bytes;
} scratch_chunk_t;

void *mprof_scratch_alloc(mprof_scratch_t *s, size_t bytes)
{
  bytes = (bytes + 15) & ~(size_t)15;
  if (bytes > s->left) {
    size_t size = bytes + sizeof(scratch_chunk_t) > SCRATCH_CHUNK ? bytes + sizeof(scratch_chunk_t) : SCRATCH_CHUNK;
    scratch_chunk_t *c = mprof_pmem_map(size);
    if (c == NULL) return NULL;
    c->bytes = size;
    c->next = s->chunks;
    s->chunks = c;
    s->next = (char *)(c + 1);
    s->left = size - sizeof *c;
  }
  void *p = s->next;
  s->next += bytes;
  s->left -= bytes;
  return p;
}

void mprof_scratch_release(mprof_scratch_t *s)
{
  scratch_chunk_t *c = s->chunks;
  while (c != NULL) {
    scratch_chunk_t *next = c->next;
    mprof_pmem_unmap(c, c->bytes);
    c = next;
  }
  s->chunks = NULL;
  s->next = NULL;
  s->left = 0;
}
