/* new_delete.c - C++ operator new/delete, exported because libmimalloc.so.2 exports them.
 *
 * Why: whenever libmimalloc.so.2 comes before libstdc++ in the dynamic linker's lookup order (a program
 * linked with -lmimalloc, or a library that pulls it in early), the process gets *mimalloc's* operators,
 * which call mi_new directly: those allocations would bypass this library (never sampled) and aligned new
 * hits mimalloc 2.0.9's misalignment bug (see internal.h).  Exporting the operators ourselves puts every
 * C++ allocation through the same paths as malloc.
 *
 * C++ rules, without linking libstdc++: a failed new calls the installed new_handler and retries; with no
 * handler it throws std::bad_alloc (through libstdc++'s own std::__throw_bad_alloc, found as a weak
 * reference: any program that calls operator new has libstdc++ loaded).  The nothrow forms return NULL.
 * This file is compiled with -fexceptions so the exception can unwind through it.
 */
#include "internal.h"

#include <stdlib.h>

typedef void (*mprof_new_handler_t)(void);
extern mprof_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));  /* std::get_new_handler */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));      /* std::__throw_bad_alloc */

static void *new_alloc(size_t size, size_t alignment)
{
  if (alignment <= 16) return malloc(size);
  return aligned_alloc(alignment, size);
}

/* The failure path of every new: new_handler loop, then bad_alloc (or NULL for nothrow). */
static MPROF_NOINLINE MPROF_COLD void *new_retry(size_t size, size_t alignment, bool nothrow)
{
  for (;;) {
    mprof_new_handler_t handler = _ZSt15get_new_handlerv != NULL ? _ZSt15get_new_handlerv() : NULL;
    if (handler == NULL) {
      if (nothrow) return NULL;
      if (_ZSt17__throw_bad_allocv != NULL) _ZSt17__throw_bad_allocv();
      abort();
    }
    handler();
    void *p = new_alloc(size, alignment);
    if (p != NULL) return p;
  }
}

static inline void *new_impl(size_t size, size_t alignment, bool nothrow)
{
  void *p = new_alloc(size, alignment);
  if (mprof_likely(p != NULL)) return p;
  return new_retry(size, alignment, nothrow);
}

/* Mangled names, as libmimalloc.so.2 exports them (x86-64/aarch64: size_t = unsigned long = 'm'). */
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

void *_Znwm(size_t size) { return new_impl(size, 0, false); }
void *_Znam(size_t size) { return new_impl(size, 0, false); }
void *_ZnwmRKSt9nothrow_t(size_t size, const void *tag) { (void)tag; return new_impl(size, 0, true); }
void *_ZnamRKSt9nothrow_t(size_t size, const void *tag) { (void)tag; return new_impl(size, 0, true); }
void *_ZnwmSt11align_val_t(size_t size, size_t alignment) { return new_impl(size, alignment, false); }
void *_ZnamSt11align_val_t(size_t size, size_t alignment) { return new_impl(size, alignment, false); }
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void *tag)
{
  (void)tag;
  return new_impl(size, alignment, true);
}
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void *tag)
{
  (void)tag;
  return new_impl(size, alignment, true);
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
