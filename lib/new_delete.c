/* new_delete.c - C++ operator new/delete, exported because libmimalloc.so.2 exports them.
 *
 * Why: whenever libmimalloc.so.2 comes before libstdc++ in the dynamic linker's lookup order (a program
 * linked with -lmimalloc, or a library that pulls it in early), the process gets *mimalloc's* operators,
 * which call mi_new directly: those allocations would bypass this library (never sampled) and aligned new
 * hits mimalloc 2.0.9's misalignment bug (see mireal.h).  Exporting the operators ourselves puts every
 * C++ allocation through the same paths as malloc.
 *
 * Failure, without linking a C++ runtime: when the allocation fails, the operator hands the request to
 * the C++ runtime's own definition of the same operator (libstdc++'s, or libc++'s), looked up when first
 * needed, so a runtime dlopen'ed after start-up is found too.  That definition allocates through our
 * malloc/aligned_alloc, runs the new_handler loop and throws std::bad_alloc, or for the nothrow forms
 * catches whatever the handler throws and returns NULL: exactly the runtime's semantics.  The exception
 * unwinds through this file's frames (compiled with -fexceptions).  With no C++ runtime loaded at all
 * nothing can have called operator new expecting an exception, and a failure aborts.
 */
#include "internal.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

/* The operators, by their Itanium-ABI names, which spell size_t's type: MPROF_SIZE_T_MANGLING (config.h)
 * is m where size_t is unsigned long (x86-64, arm64: _Znwm) and j where it is unsigned int (i386, armhf:
 * _Znwj).  SZNAME(head, tail) is head, that letter, tail: the name as one identifier. */
#define SZNAME_(head, letter, tail) head##letter##tail
#define SZNAME_X(head, letter, tail) SZNAME_(head, letter, tail)
#define SZNAME(head, tail) SZNAME_X(head, MPROF_SIZE_T_MANGLING, tail)
#define STRING_(x) #x
#define STRING(x) STRING_(x)

#define NEW_PLAIN                 SZNAME(_Znw, )
#define NEW_ARRAY                 SZNAME(_Zna, )
#define NEW_PLAIN_NOTHROW         SZNAME(_Znw, RKSt9nothrow_t)
#define NEW_ARRAY_NOTHROW         SZNAME(_Zna, RKSt9nothrow_t)
#define NEW_PLAIN_ALIGNED         SZNAME(_Znw, St11align_val_t)
#define NEW_ARRAY_ALIGNED         SZNAME(_Zna, St11align_val_t)
#define NEW_PLAIN_ALIGNED_NOTHROW SZNAME(_Znw, St11align_val_tRKSt9nothrow_t)
#define NEW_ARRAY_ALIGNED_NOTHROW SZNAME(_Zna, St11align_val_tRKSt9nothrow_t)
#define DELETE_PLAIN_SIZED         SZNAME(_ZdlPv, )
#define DELETE_ARRAY_SIZED         SZNAME(_ZdaPv, )
#define DELETE_PLAIN_SIZED_ALIGNED SZNAME(_ZdlPv, St11align_val_t)
#define DELETE_ARRAY_SIZED_ALIGNED SZNAME(_ZdaPv, St11align_val_t)

enum {
  OP_NEW_PLAIN, OP_NEW_ARRAY, OP_NEW_PLAIN_NOTHROW, OP_NEW_ARRAY_NOTHROW,
  OP_NEW_PLAIN_ALIGNED, OP_NEW_ARRAY_ALIGNED, OP_NEW_PLAIN_ALIGNED_NOTHROW, OP_NEW_ARRAY_ALIGNED_NOTHROW,
  OP_COUNT
};

static const char *const op_name[OP_COUNT] = {
  [OP_NEW_PLAIN] = STRING(NEW_PLAIN),
  [OP_NEW_ARRAY] = STRING(NEW_ARRAY),
  [OP_NEW_PLAIN_NOTHROW] = STRING(NEW_PLAIN_NOTHROW),
  [OP_NEW_ARRAY_NOTHROW] = STRING(NEW_ARRAY_NOTHROW),
  [OP_NEW_PLAIN_ALIGNED] = STRING(NEW_PLAIN_ALIGNED),
  [OP_NEW_ARRAY_ALIGNED] = STRING(NEW_ARRAY_ALIGNED),
  [OP_NEW_PLAIN_ALIGNED_NOTHROW] = STRING(NEW_PLAIN_ALIGNED_NOTHROW),
  [OP_NEW_ARRAY_ALIGNED_NOTHROW] = STRING(NEW_ARRAY_ALIGNED_NOTHROW),
};

static void *runtime_op[OP_COUNT];   /* the C++ runtime's definitions, once found (atomic) */

/* The C++ runtime's own definition of operator `op`, or NULL when no C++ runtime is loaded. */
static void *runtime_operator(int op)
{
  void *fn = __atomic_load_n(&runtime_op[op], __ATOMIC_ACQUIRE);
  if (fn != NULL) return fn;
  static const char *const runtimes[] = {"libstdc++.so.6", "libc++.so.1"};
  for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0] && fn == NULL; i++) {
    void *h = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);   /* only if already loaded */
    if (h != NULL) {
      fn = dlsym(h, op_name[op]);
      dlclose(h);
    }
  }
  if (fn != NULL) __atomic_store_n(&runtime_op[op], fn, __ATOMIC_RELEASE);
  return fn;
}

typedef void *plain_op_t(size_t);
typedef void *plain_nothrow_op_t(size_t, const void *);
typedef void *aligned_op_t(size_t, size_t);
typedef void *aligned_nothrow_op_t(size_t, size_t, const void *);

static MPROF_NOINLINE MPROF_COLD void *new_failed(int op, size_t size, size_t alignment, const void *tag)
{
  void *fn = runtime_operator(op);
  if (fn == NULL) {
    if (tag != NULL) return NULL;    /* nothrow: no handler can exist without a C++ runtime */
    abort();
  }
  /* The runtime's aligned operators round the size up to the alignment, which wraps to a small size near
   * SIZE_MAX (libstdc++'s returned a 64-byte block for SIZE_MAX): a size no object can have is handed
   * over as PTRDIFF_MAX + 1, which fails as surely and cannot wrap. */
  if (size > (size_t)PTRDIFF_MAX) size = (size_t)PTRDIFF_MAX + 1;
  switch (op) {
  case OP_NEW_PLAIN: case OP_NEW_ARRAY: return ((plain_op_t *)fn)(size);
  case OP_NEW_PLAIN_NOTHROW: case OP_NEW_ARRAY_NOTHROW: return ((plain_nothrow_op_t *)fn)(size, tag);
  case OP_NEW_PLAIN_ALIGNED: case OP_NEW_ARRAY_ALIGNED: return ((aligned_op_t *)fn)(size, alignment);
  default: return ((aligned_nothrow_op_t *)fn)(size, alignment, tag);
  }
}

static inline void *new_plain(int op, size_t size, const void *tag)
{
  void *p = malloc(size);
  if (mprof_likely(p != NULL)) return p;
  return new_failed(op, size, 0, tag);
}

/* C++ only calls the aligned forms for alignments above __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16), but an
 * explicit call may pass any power of two; malloc only guarantees 8 for blocks of 8 bytes or less. */
static inline void *new_aligned(int op, size_t size, size_t alignment, const void *tag)
{
  void *p = alignment <= sizeof(void *) ? malloc(size) : aligned_alloc(alignment, size);
  if (mprof_likely(p != NULL)) return p;
  return new_failed(op, size, alignment, tag);
}

MPROF_EXPORT void *NEW_PLAIN(size_t size);
MPROF_EXPORT void *NEW_ARRAY(size_t size);
MPROF_EXPORT void *NEW_PLAIN_NOTHROW(size_t size, const void *tag);
MPROF_EXPORT void *NEW_ARRAY_NOTHROW(size_t size, const void *tag);
MPROF_EXPORT void *NEW_PLAIN_ALIGNED(size_t size, size_t alignment);
MPROF_EXPORT void *NEW_ARRAY_ALIGNED(size_t size, size_t alignment);
MPROF_EXPORT void *NEW_PLAIN_ALIGNED_NOTHROW(size_t size, size_t alignment, const void *tag);
MPROF_EXPORT void *NEW_ARRAY_ALIGNED_NOTHROW(size_t size, size_t alignment, const void *tag);
MPROF_EXPORT void _ZdlPv(void *p);
MPROF_EXPORT void _ZdaPv(void *p);
MPROF_EXPORT void DELETE_PLAIN_SIZED(void *p, size_t size);
MPROF_EXPORT void DELETE_ARRAY_SIZED(void *p, size_t size);
MPROF_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t alignment);
MPROF_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t alignment);
MPROF_EXPORT void DELETE_PLAIN_SIZED_ALIGNED(void *p, size_t size, size_t alignment);
MPROF_EXPORT void DELETE_ARRAY_SIZED_ALIGNED(void *p, size_t size, size_t alignment);

void *NEW_PLAIN(size_t size) { return new_plain(OP_NEW_PLAIN, size, NULL); }
void *NEW_ARRAY(size_t size) { return new_plain(OP_NEW_ARRAY, size, NULL); }
void *NEW_PLAIN_NOTHROW(size_t size, const void *tag) { return new_plain(OP_NEW_PLAIN_NOTHROW, size, tag); }
void *NEW_ARRAY_NOTHROW(size_t size, const void *tag) { return new_plain(OP_NEW_ARRAY_NOTHROW, size, tag); }
void *NEW_PLAIN_ALIGNED(size_t size, size_t alignment)
{
  return new_aligned(OP_NEW_PLAIN_ALIGNED, size, alignment, NULL);
}
void *NEW_ARRAY_ALIGNED(size_t size, size_t alignment)
{
  return new_aligned(OP_NEW_ARRAY_ALIGNED, size, alignment, NULL);
}
void *NEW_PLAIN_ALIGNED_NOTHROW(size_t size, size_t alignment, const void *tag)
{
  return new_aligned(OP_NEW_PLAIN_ALIGNED_NOTHROW, size, alignment, tag);
}
void *NEW_ARRAY_ALIGNED_NOTHROW(size_t size, size_t alignment, const void *tag)
{
  return new_aligned(OP_NEW_ARRAY_ALIGNED_NOTHROW, size, alignment, tag);
}

/* Every delete is free: mimalloc finds the size and alignment from the block itself. */
void _ZdlPv(void *p) { free(p); }
void _ZdaPv(void *p) { free(p); }
void DELETE_PLAIN_SIZED(void *p, size_t size) { (void)size; free(p); }
void DELETE_ARRAY_SIZED(void *p, size_t size) { (void)size; free(p); }
void _ZdlPvSt11align_val_t(void *p, size_t alignment) { (void)alignment; free(p); }
void _ZdaPvSt11align_val_t(void *p, size_t alignment) { (void)alignment; free(p); }
void DELETE_PLAIN_SIZED_ALIGNED(void *p, size_t size, size_t alignment)
{
  (void)size, (void)alignment;
  free(p);
}
void DELETE_ARRAY_SIZED_ALIGNED(void *p, size_t size, size_t alignment)
{
  (void)size, (void)alignment;
  free(p);
}
