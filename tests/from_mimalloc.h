/* from_mimalloc.h - whether the calling thread got a block from mimalloc (the alloc, interpose and cxx
 * suites).  Not mi_is_in_heap_region(): mimalloc 2.0.9's segment map covers only the first 2 GiB of a
 * 32-bit address space, and a 32-bit process maps its heap above that.  The thread's default heap knows
 * every block it handed out, wherever it lies. */
#ifndef MPROF_TEST_FROM_MIMALLOC_H
#define MPROF_TEST_FROM_MIMALLOC_H

#include <mimalloc.h>

static inline bool mprof_test_from_mimalloc(const void *p)
{
  return mi_heap_check_owned(mi_heap_get_default(), p);
}

#endif
