/* objects.h - the loaded objects, copied from the loader's list before any profiler lock is taken */
#ifndef MPROF_OBJECTS_H
#define MPROF_OBJECTS_H

#include "internal.h"

typedef struct mprof_segment_s {
  uintptr_t start, limit;        /* an executable PT_LOAD segment: [start, limit) */
  uint64_t  file_offset;
  uint32_t  object;              /* index into mprof_objects_t.object */
} mprof_segment_t;

typedef struct mprof_object_s {
  const char *path;              /* absolute path (the program's from /proc/self/exe) */
  const char *build_id;          /* GNU build ID in lower-case hex, "" when none */
  uintptr_t   base;              /* load bias (dlpi_addr) */
  uintptr_t   map_start;         /* lowest mapped address (dladdr's dli_fbase) */
  uint32_t    first_segment, n_segments;   /* its executable segments in mprof_objects_t.segment */
  uintptr_t   symtab, strtab;    /* .dynsym and .dynstr in memory; symtab 0: no names */
  size_t      strsz;
  uint32_t    nsyms;
} mprof_object_t;

typedef struct mprof_objects_s {
  mprof_object_t  *object;       /* in the loader's order, the program first */
  size_t           n_objects;
  mprof_segment_t *segment;      /* executable segments in the same order: mapping id = index + 1 */
  size_t           n_segments;
  uint32_t        *by_start;     /* segment indices sorted by start */
  void            *mem;          /* temporary profiler memory holding it all */
  size_t           bytes;
} mprof_objects_t;

/* A name: (object index + 1) << 32 | offset into its .dynstr; 0 = none. */
#define MPROF_NAME_KEY(object, name) ((((uint64_t)(object) + 1) << 32) | (uint32_t)(name))

bool   mprof_objects_take(mprof_objects_t *o);     /* no profiler lock held (takes the loader's); ENOMEM */
void   mprof_objects_release(mprof_objects_t *o);
size_t mprof_objects_find(const mprof_objects_t *o, uintptr_t addr);   /* segment index + 1, 0 = none */
/* The GNU build ID among the ELF notes in [at, stop), each read through read (false: unreadable): the
 * descriptor's address in *desc and its length, 0 when there is none. */
size_t mprof_objects_note_build_id(uintptr_t at, uintptr_t stop, bool (*read)(uintptr_t, void *, size_t),
                                   uintptr_t *desc);
/* names[i]: the key of the exported function holding pcs[i] - 1 (pcs sorted, distinct), 0 when none;
 * offsets (NULL: not wanted): pcs[i] minus the function's start, 0 when none. */
void   mprof_objects_name(const mprof_objects_t *o, const uintptr_t *pcs, size_t n, uint64_t *names,
                          uint32_t *offsets);
bool   mprof_objects_key_name(const mprof_objects_t *o, uint64_t key, char *buf, size_t len);

/* The first index i with a[i] >= v in the sorted a[0..n) (objects.c, pprof.c). */
static inline size_t mprof_lower_bound(const uintptr_t *a, size_t n, uintptr_t v)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

#endif /* MPROF_OBJECTS_H */
