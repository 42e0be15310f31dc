/* oddid_probe.c - allocates through liboddid.so (oddid_lib.c: a 5-byte GNU build ID whose note ends its
 * segment unpadded).  Run with MIMALLOC_PROF=1 and MIMALLOC_PROF_SAMPLE_RATE=1, it samples 64 allocations
 * made in the library and dumps to argv[1]; test_pprof.c checks the library's mapping carries
 * "0102030405".
 */
#include <stdlib.h>

#include "mimalloc-prof.h"

void *oddid_alloc(size_t size);

int main(int argc, char **argv)
{
  if (argc != 2) return 2;
  for (int i = 0; i < 64; i++) {
    void *p = oddid_alloc(4096);
    __asm__ volatile("" ::"r"(p));
    free(p);
  }
  return mi_prof_dump(argv[1]) ? 0 : 1;
}
