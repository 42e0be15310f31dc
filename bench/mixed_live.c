/* mixed_live.c - mixed sizes with a live set: LIVE (32768) slots hold blocks of a skewed size mix
 * (70% 16..128 bytes, 20% 129..1024, 8% 1 KiB..16 KiB, 2% 16 KiB..256 KiB); each step frees a random
 * slot and refills it with a fresh block, touching its first and last byte.  The live set stays around
 * 32768 blocks (about 60 MiB), so the heap is in steady state with mixed size classes and large blocks.
 * Usage: mixed_live [steps]  (default 2000000) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE 32768

static uint64_t x = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return x;
}

static size_t pick_size(void)
{
  uint64_t r = next();
  unsigned bucket = (unsigned)(r % 100);
  r >>= 8;
  if (bucket < 70) return 16 + (size_t)(r % 113);             /* 16..128 */
  if (bucket < 90) return 129 + (size_t)(r % 896);            /* 129..1024 */
  if (bucket < 98) return 1025 + (size_t)(r % 15360);         /* 1 KiB..16 KiB */
  return 16385 + (size_t)(r % 245760);                        /* 16 KiB..256 KiB */
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  static char *live[LIVE];
  static size_t len[LIVE];
  uint64_t sum = 0;
  for (long i = 0; i < n; i++) {
    unsigned slot = (unsigned)(next() >> 40) % LIVE;
    if (live[slot] != NULL) sum += (unsigned char)live[slot][len[slot] - 1];
    free(live[slot]);
    size_t size = pick_size();
    char *p = malloc(size);
    if (p == NULL) return 1;
    p[0] = (char)i;
    p[size - 1] = (char)(i >> 8);
    live[slot] = p;
    len[slot] = size;
  }
  for (unsigned i = 0; i < LIVE; i++) free(live[i]);
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
