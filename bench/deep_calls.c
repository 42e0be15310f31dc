/* deep_calls.c - bench/unwind.sh's frame-pointer test program: malloc/free of 16..256-byte blocks (a
 * window of 1024 live blocks, as in malloc_loop.c) from the bottom of a chain of DEPTH (20) frames of
 * its own, so a full stack is 20 program frames + main + glibc's start-up frames.
 *
 * Build with frame pointers and without sibling calls, so every frame of the chain stays on the stack:
 *   cc -O2 -fno-builtin -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-optimize-sibling-calls
 * Usage: deep_calls [iterations]  (default 2000000); the work is split into batches of 1000 iterations,
 * each one descending the chain again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define DEPTH  20
#define WINDOW 1024
#define BATCH  1000

static void *live[WINDOW];
static uint64_t x = 0x2545f4914f6cdd1dull;

/* The leaf: BATCH allocations. */
static __attribute__((noinline)) uint64_t churn(long n)
{
  uint64_t sum = 0;
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
  return sum;
}

/* One frame per level: the work after the call keeps it from being a tail call, and noipa keeps gcc
 * from turning the recursion into a loop. */
static __attribute__((noipa)) uint64_t descend(int level, long n)
{
  uint64_t r = level == 0 ? churn(n) : descend(level - 1, n);
  return r * 31 + (uint64_t)level;
}

int main(int argc, char **argv)
{
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  uint64_t sum = 0;
  for (long done = 0; done < n; done += BATCH)
    sum += descend(DEPTH - 2, n - done < BATCH ? n - done : BATCH);   /* descend x19 + churn = 20 */
  for (unsigned i = 0; i < WINDOW; i++) free(live[i]);
  printf("%llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
