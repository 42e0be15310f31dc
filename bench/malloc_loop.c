/* malloc_loop.c - the benchmark's allocation loop: malloc/free of 16..256-byte blocks, keeping a
 * window of 1024 live blocks so frees are not just of the block allocated last.  Built with -DMI_API it
 * calls mimalloc's mi_malloc/mi_free instead (link with -lmimalloc: the profiler's exports take them when
 * it is preloaded).
 * Usage: malloc_loop [iterations]  (default 2000000) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef MI_API
#include <mimalloc.h>
#define malloc mi_malloc
#define free   mi_free
#endif

#define WINDOW 1024

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  void *live[WINDOW] = {0};
  uint64_t x = 0x2545f4914f6cdd1dull, sum = 0;
  for (long i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t size = 16 + (size_t)(x % 241);         /* 16..256 bytes */
    unsigned slot = (unsigned)(x >> 32) % WINDOW;
    free(live[slot]);
    char *p = malloc(size);
    p[0] = (char)i;
    sum += (uintptr_t)p & 0xff;
    live[slot] = p;
  }
  for (unsigned i = 0; i < WINDOW; i++) free(live[i]);
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
