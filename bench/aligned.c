/* aligned.c - aligned allocation: a window of WINDOW (1024) live blocks refilled with posix_memalign,
 * aligned_alloc and memalign in turn, alignments 16..4096 (powers of two, smaller ones more often) and
 * sizes 16..8192 bytes.  Every block is checked for its alignment; the output line gives a checksum and
 * the number of misaligned blocks (plain mimalloc 2.0.9 returns some: mimalloc issue #700, see
 * doc/design/mi-api.md), and the run goes on.
 * Usage: aligned [steps]  (default 1000000) */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WINDOW 1024

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  static void *live[WINDOW];
  uint64_t x = 0xda942042e4dd58b5ull, sum = 0, misaligned = 0;
  for (long i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned slot = (unsigned)(x >> 40) % WINDOW;
    free(live[slot]);
    unsigned k = (unsigned)((x >> 8) % 64);
    size_t align = (size_t)16 << (k < 32 ? 0 : k < 48 ? 1 : k < 56 ? 2 : k < 60 ? 4 : k < 62 ? 6 : 8);
    size_t size = 16 + (size_t)((x >> 16) % 8177);     /* 16..8192 */
    void *p = NULL;
    switch (i % 3) {
      case 0: if (posix_memalign(&p, align, size) != 0) p = NULL; break;
      case 1: p = aligned_alloc(align, size); break;
      default: p = memalign(align, size); break;
    }
    if (p == NULL) {
      fprintf(stderr, "aligned: no block for alignment %zu size %zu\n", align, size);
      return 1;
    }
    if (((uintptr_t)p & (align - 1)) != 0) misaligned++;
    *(char *)p = (char)i;
    sum += ((uintptr_t)p >> 4) & 0xff;
    live[slot] = p;
  }
  for (unsigned i = 0; i < WINDOW; i++) free(live[i]);
  printf("%llu misaligned=%llu\n", (unsigned long long)(sum & 0xffff), (unsigned long long)misaligned);
  return 0;
}
