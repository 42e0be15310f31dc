/* options.h - the MIMALLOC_PROF_* options: their table (options.def), their values, the parser the
 * mimalloc-prof command shares, and secure mode. */
#ifndef MPROF_OPTIONS_H
#define MPROF_OPTIONS_H

#include "internal.h"

/* The unwinders (unwind.c), here because MIMALLOC_PROF_UNWIND's row of options.def names them. */
typedef enum mprof_unwinder_e {
  MPROF_UNWIND_FP, MPROF_UNWIND_LIBUNWIND, MPROF_UNWIND_LIBGCC, MPROF_UNWIND_TABLE, MPROF_UNWIND_AUTO
} mprof_unwinder_t;

/* Option bounds that are sizes of address space (options.def rows), for the platform's.  A 32-bit process
 * has 3-4 GiB in all: there the sampled-block window can only be the 112 MiB below a non-PIE program's
 * image and the arena's other chunks lie wherever the kernel has room (arena.c), at most half of it in
 * all; and the profiler's budget must stay well below 4 GiB, which a size_t cannot hold. */
#if UINTPTR_MAX > 0xffffffffu
#define MPROF_ARENA_DEFAULT ((uint64_t)64 << 30)
#define MPROF_ARENA_MAX     ((uint64_t)1 << 40)
#define MPROF_BUDGET_MAX    ((uint64_t)1 << 40)
#else
#define MPROF_ARENA_DEFAULT ((uint64_t)1 << 30)
#define MPROF_ARENA_MAX     ((uint64_t)2 << 30)
#define MPROF_BUDGET_MAX    ((uint64_t)2 << 30)
#endif

typedef enum mprof_option_e {
#define OPT(id, name, kind, dflt, min, max, range) MPROF_OPT_##id,
#include "options.def"
#undef OPT
  MPROF_OPT_COUNT
} mprof_option_t;

/* MIMALLOC_PROF_LIFETIMES, fixed at load (defined in peak.c, set by api.c). */
extern bool mprof_lifetimes;

void        mprof_options_init(void);
uint64_t    mprof_option(mprof_option_t id);
const char *mprof_option_str(mprof_option_t id);
/* Parses `text` as the value of the environment option `name` with the start-up parser, without
 * clipping: 1 valid (*value set; a string option's value points into text), 0 malformed or out of range
 * (why: a phrase such as "is not a byte count", to follow the value), -1 no option has that name.
 * For the mimalloc-prof command, which compiles options.c in; needs no initialisation, allocates nothing. */
int         mprof_option_parse(const char *name, const char *text, uint64_t *value, char *why,
                               size_t why_len);
/* Secure mode: the kernel set AT_SECURE (a set-user-ID or set-group-ID program, or one that gained
 * capabilities at exec).  Then no MIMALLOC_PROF_* variable is read: every option keeps its default. */
bool        mprof_options_secure(void);
bool        mprof_options_given(void);    /* a MIMALLOC_PROF variable was read at load */

#endif /* MPROF_OPTIONS_H */
