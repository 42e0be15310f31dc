/* new_delete.c - C++ operator new/delete, exported because libmimalloc.so.2 exports them.
 *
 * Why: whenever libmimalloc.so.2 comes before libstdc++ in the dynamic linker's lookup order (a program
 * linked with -lmimalloc, or a library that pulls it in early), the process gets *mimalloc's* operators,
 * which call mi_new directly: those allocations would bypass this library (never sampled) and aligned new
 * hits mimalloc 2.0.9's misalignment bug (see internal.h).  Exporting the operators ourselves puts every
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
#include <stdlib.h>

/* The operators, by their Itanium-ABI names (x86-64/aarch64: size_t = unsigned long = 'm'). */
#define NEW_OPERATORS(X)                                  \
  X(0, _Znwm)                                             \
  X(1, _Znam)                                             \
  X(2, _ZnwmRKSt9nothrow_t)                               \
  X(3, _ZnamRKSt9nothrow_t)                               \
  X(4, _ZnwmSt11align_val_t)                              \
  X(5, _ZnamSt11align_val_t)                              \
  X(6, _ZnwmSt11align_val_tRKSt9nothrow_t)                \
  X(7, _ZnamSt11align_val_tRKSt9nothrow_t)

enum {
#define X(i, name) OP_##name = i,
  NEW_OPERATORS(X)
#undef X
  OP_COUNT
};

static const char *const op_name[OP_COUNT] = {
#define X(i, name) [i] = #name,
  NEW_OPERATORS(X)
#undef X
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
  switch (op) {
  case OP__Znwm: case OP__Znam: return ((plain_op_t *)fn)(size);
  case OP__ZnwmRKSt9nothrow_t: case OP__ZnamRKSt9nothrow_t: return ((plain_nothrow_op_t *)fn)(size, tag);
  case OP__ZnwmSt11align_val_t: case OP__ZnamSt11align_val_t: return ((aligned_op_t *)fn)(size, alignment);
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

MPROF_EXPORT void *_Znwm(size_t size);
MPROF_EXPORT void *_Znam(size_t size);
MPROF_EXPORT void *_ZnwmRKSt9nothrow_t(size_t size, const void *tag);
MPROF_EXPORT void *_ZnamRKSt9nothrow_t(size_t size, const void *tag);
MPROF_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t alignment);
MPROF_EXPORT void *_ZnamSt11align_val_t(size_t size, size_t alignment);
MPROF_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void *tag);
MPROF_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void *tag);
MPROF_EXPORT void _ZdlPv(void *p);
MPROF_EXPORT void _ZdaPv(void *p);
MPROF_EXPORT void _ZdlPvm(void *p, size_t size);
MPROF_EXPORT void _ZdaPvm(void *p, size_t size);
MPROF_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t alignment);
MPROF_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t alignment);
MPROF_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t alignment);
MPROF_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t alignment);

void *_Znwm(size_t size) { return new_plain(OP__Znwm, size, NULL); }
void *_Znam(size_t size) { return new_plain(OP__Znam, size, NULL); }
void *_ZnwmRKSt9nothrow_t(size_t size, const void *tag) { return new_plain(OP__ZnwmRKSt9nothrow_t, size, tag); }
void *_ZnamRKSt9nothrow_t(size_t size, const void *tag) { return new_plain(OP__ZnamRKSt9nothrow_t, size, tag); }
void *_ZnwmSt11align_val_t(size_t size, size_t alignment)
{
  return new_aligned(OP__ZnwmSt11align_val_t, size, alignment, NULL);
}
void *_ZnamSt11align_val_t(size_t size, size_t alignment)
{
  return new_aligned(OP__ZnamSt11align_val_t, size, alignment, NULL);
}
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void *tag)
{
  return new_aligned(OP__ZnwmSt11align_val_tRKSt9nothrow_t, size, alignment, tag);
}
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void *tag)
{
  return new_aligned(OP__ZnamSt11align_val_tRKSt9nothrow_t, size, alignment, tag);
}

/* Every delete is free: mimalloc finds the size and alignment from the block itself. */
void _ZdlPv(void *p) { free(p); }
void _ZdaPv(void *p) { free(p); }
void _ZdlPvm(void *p, size_t size) { (void)size; free(p); }
void _ZdaPvm(void *p, size_t size) { (void)size; free(p); }
void _ZdlPvSt11align_val_t(void *p, size_t alignment) { (void)alignment; free(p); }
void _ZdaPvSt11align_val_t(void *p, size_t alignment) { (void)alignment; free(p); }
void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t alignment)
{
  (void)size, (void)alignment;
  free(p);
}
void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t alignment)
{
  (void)size, (void)alignment;
  free(p);
}
