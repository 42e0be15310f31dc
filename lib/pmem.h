/* pmem.h - profiler memory, raw mmap under the MIMALLOC_PROF_MAX_BYTES budget.
 *
 * What one dump needs (dump.c, pprof.c, objects.c), kept free by the tables (see pmem.c): a fixed part and
 * a part per stack and per frame of the stack table.  Fixed: zlib's deflate at windowBits 14 and memLevel 6
 * ((1 << 16) + (1 << 15) bytes by zlib.h's formula, plus 16 KiB for its state; against windowBits 15 and
 * memLevel 8 it saves 160 KiB for profiles 2% larger at most, measured on python3's), pprof.c's staging
 * and output buffers, two copies of the loaded-object list (two dumps may prepare at once; a list of up
 * to MPROF_DUMP_OBJECTS_BYTES, about 150 objects, is covered), the page rounding of the dump's four
 * other mappings, and the "dropped (reason)" stacks, which live outside the stack table (128 bytes each
 * cover a one-frame stack's share; with MIMALLOC_PROF_LIFETIMES their lifetime buckets too).  Per frame of
 * a stack: the snapshot's copy, and pprof.c's sorted distinct return addresses and their names (one word
 * each).  Per label set and lifetime bucket (stacktab.c): its snapshot entry (snapshot.c) and pprof.c's
 * index of thread labels; a stack takes none of its own in a dump, and in a visit (one per stack) only
 * when it has a label set, which then takes none.  The timeline (peak.c) is copied whole, and once more by
 * pprof.c into the message's three arrays.  The leak report and a visit need less (a snapshot). */
#ifndef MPROF_PMEM_H
#define MPROF_PMEM_H

#include "internal.h"

#define MPROF_DUMP_ZLIB_WBITS    14
#define MPROF_DUMP_ZLIB_MEMLEVEL 6
#define MPROF_DUMP_ZLIB_BYTES    (((size_t)1 << (MPROF_DUMP_ZLIB_WBITS + 2)) + \
                                  ((size_t)1 << (MPROF_DUMP_ZLIB_MEMLEVEL + 9)) + ((size_t)16 << 10))
#define MPROF_DUMP_IO_BYTES      ((size_t)16 << 10)
#define MPROF_DUMP_OBJECTS_BYTES ((size_t)32 << 10)
#define MPROF_TIMELINE_POINTS    1024
#define MPROF_DUMP_TIMELINE_BYTES ((MPROF_TIMELINE_POINTS + 2) * 3 * sizeof(uint64_t))
#define MPROF_DUMP_FIXED_BYTES   (MPROF_DUMP_ZLIB_BYTES + MPROF_DUMP_IO_BYTES + \
                                  2 * MPROF_DUMP_OBJECTS_BYTES + 2 * MPROF_DUMP_TIMELINE_BYTES + \
                                  6 * (size_t)4096 + MI_PROF_DROP_REASONS * (size_t)128)
#define MPROF_DUMP_STACK_BYTES   (2 * sizeof(size_t) + 10 * sizeof(uint64_t) + 16 /* the snapshot's entry */ \
                                  + 16 + sizeof(uint64_t))   /* pprof.c: the thread label's index, 2 words */
#define MPROF_DUMP_FRAME_BYTES   (2 * sizeof(uintptr_t) + sizeof(uint64_t))
#define MPROF_DUMP_LIFETIMES_BYTES (MI_PROF_DROP_REASONS * 65 /* MPROF_LIFETIME_BUCKETS */ * \
                                    MPROF_DUMP_STACK_BYTES)

/* At a session's start: reserves the region small mappings come from (pmem.c), once; without it they are
 * mmaps of their own. */
void   mprof_pmem_begin(void);
void  *mprof_pmem_map(size_t bytes);           /* tables; NULL when over budget or mmap fails */
void   mprof_pmem_unmap(void *p, size_t bytes);
bool   mprof_pmem_reserve(size_t bytes);       /* keeps bytes free for dumps (a stack added); false: budget */
void   mprof_pmem_unreserve(size_t bytes);
/* The same for the stack table and the unwinder's tables, within their share of the budget (half of what
 * the tables may commit). */
void  *mprof_pmem_map_stacks(size_t bytes);
void   mprof_pmem_unmap_stacks(void *p, size_t bytes);
/* Gives back the pages of a mapping that stays mapped (and counted) until unmapped: it reads as zeros. */
void   mprof_pmem_discard(void *p, size_t bytes);
bool   mprof_pmem_reserve_stacks(size_t bytes);
void   mprof_pmem_unreserve_stacks(size_t bytes);
void  *mprof_pmem_map_temp(size_t bytes);      /* a dump's or a visit's temporaries */
void   mprof_pmem_unmap_temp(void *p, size_t bytes);
/* The one temporary kept mapped between uses (pmem.c): MPROF_PMEM_KEPT_BYTES, counted as a temporary while
 * taken.  take: the kept one (as its last user left it) or a fresh one (zeros); NULL over the budget.  give:
 * kept again, or unmapped when another is kept.  drop: unmapped now, when not taken (mi_prof_stop). */
#define MPROF_PMEM_KEPT_BYTES    ((size_t)52 << 10)
void  *mprof_pmem_take_kept(void);
void   mprof_pmem_give_kept(void *p);
void   mprof_pmem_drop_kept(void);
size_t mprof_pmem_mapped(void);
size_t mprof_pmem_temp_peak(void);
void   mprof_pmem_postfork_child(void);

#endif /* MPROF_PMEM_H */
