/* mireal.h - libmimalloc.so.2's own functions (mireal.c).  This library exports the same names
 * (mi_api.c), so it never calls them by name: always through this table (each pointer starts at a stub
 * that looks its function up, stores it and calls it). */
#ifndef MPROF_MIREAL_H
#define MPROF_MIREAL_H

#include "internal.h"

typedef struct mprof_mi_s {
#define MI_FN(ret, name, params, args) ret(*name) params;
#define MI_VOID(name, params, args)    void(*name) params;
#include "mimalloc_api.def"
#undef MI_FN
#undef MI_VOID
} mprof_mi_t;

extern mprof_mi_t mprof_mi MPROF_HIDDEN;   /* hidden: addressed %rip-relative */

/* Only "leaf" functions of libmimalloc may be called after a fast path charged the countdown: some of its
 * functions call others of its exported functions through the PLT (mi_realloc tail-calls
 * mi_heap_realloc, mi_malloc_aligned_at tail-calls mi_heap_malloc_aligned_at, the aligned reallocs call
 * it to move, mi_strdup calls mi_heap_strdup, ...), and since this library exports those names too, such
 * a call would come back to our wrapper and be charged twice.  mi_heap_malloc_aligned_at and
 * mi_heap_zalloc_aligned_at are leaves (and take mimalloc's general aligned path: Debian's 2.0.9
 * mi_malloc_aligned() returns misaligned blocks for power-of-two sizes of 256..1024 bytes at alignments
 * 32..size: its aligned fast path), and so is mi_heap_realloc.  tests/test_mi_api.c checks every entry
 * point for a double charge. */
#define mprof_mi_malloc_aligned(size, alignment) \
  mprof_mi.mi_heap_malloc_aligned_at(mprof_mi.mi_heap_get_default(), (size), (alignment), 0)
#define mprof_mi_zalloc_aligned(size, alignment) \
  mprof_mi.mi_heap_zalloc_aligned_at(mprof_mi.mi_heap_get_default(), (size), (alignment), 0)
#define mprof_mi_realloc(p, size) mprof_mi.mi_heap_realloc(mprof_mi.mi_heap_get_default(), (p), (size))

/* Two composites are called on purpose (realloc -> mi_realloc, the aligned C functions ->
 * mi_malloc_aligned_at): their PLT call to our mi_heap_realloc / mi_heap_malloc_aligned_at charges the
 * countdown, once.  On x86-64 and aarch64 that call is a tail call; on i386 it cannot be (PIC code needs
 * %ebx, callee-saved, for the PLT), so the composite's frame, without a frame pointer, lies between ours
 * and the program's, and only inside it is the program's return address kept: were we to jump into the
 * composite, the fp walk would lose the program's function (the stack would start in libmimalloc, at the
 * program's caller).  MPROF_KEEP_FRAME(q) after such a call keeps it a call there: our frame, chained by
 * the frame pointer the composite leaves alone, holds the return address, and the unwinders skip the
 * composite as a leading frame (unwind.c). */
#if defined(__i386__)
#define MPROF_KEEP_FRAME(q) __asm__ volatile("" : "+r"(q))
#else
#define MPROF_KEEP_FRAME(q) ((void)0)
#endif

#endif /* MPROF_MIREAL_H */
