/* alloc.h - the helpers every entry point shares (alloc.c): a power-of-two test, the page size and the
 * error returns that set errno. */
#ifndef MPROF_ALLOC_H
#define MPROF_ALLOC_H

#include "internal.h"

static inline bool mprof_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
size_t mprof_page_size(void);                  /* sysconf(_SC_PAGESIZE), read once */
bool   mprof_fail(int err) MPROF_NOINLINE MPROF_COLD;       /* sets errno to err; returns false */
void  *mprof_fail_null(int err) MPROF_NOINLINE MPROF_COLD;  /* sets errno to err; returns NULL */

#endif /* MPROF_ALLOC_H */
