/* realloc_heavy.c - realloc-heavy string building: BUFS (512) buffers each grow by 1..64 bytes per
 * step through realloc (as a string builder without its own capacity doubling would), up to a random
 * limit of 64 bytes..8 KiB; one that reaches its limit is sometimes shrunk to a quarter (realloc down)
 * and otherwise freed and restarted empty.
 * Usage: realloc_heavy [steps]  (default 2000000) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BUFS 512

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  static char *buf[BUFS];
  static size_t len[BUFS], limit[BUFS];
  uint64_t x = 0x853c49e6748fea9bull, sum = 0;
  for (long i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned b = (unsigned)(x >> 40) % BUFS;
    if (limit[b] == 0) limit[b] = 64 + (size_t)((x >> 8) % (8192 - 64));
    size_t grow = 1 + (size_t)(x % 64);
    char *p = realloc(buf[b], len[b] + grow);
    if (p == NULL) return 1;
    p[len[b]] = (char)i;
    p[len[b] + grow - 1] = (char)x;
    buf[b] = p;
    len[b] += grow;
    if (len[b] >= limit[b]) {
      sum += (unsigned char)p[len[b] - 1];         /* written by the last step */
      if ((x >> 20) % 4 == 0) {               /* shrink to a quarter, keep building */
        len[b] /= 4;
        buf[b] = realloc(p, len[b]);
        limit[b] = len[b] + 64 + (size_t)((x >> 24) % 2048);
      } else {
        free(p);
        buf[b] = NULL;
        len[b] = limit[b] = 0;
      }
    }
  }
  for (unsigned b = 0; b < BUFS; b++) free(buf[b]);
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
