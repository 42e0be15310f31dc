/* dl_mix.c - a module that tests/table_probe loads, samples inside and unloads ("dlmix"), built twice
 * (MIX_VARIANT 1 and 2) with different frames, so a table compiled for one would walk the other wrong
 * where dlclose and dlopen put them at one address.  Built without frame pointers.  Each function starts
 * on a 256-byte boundary, so both variants get one layout (the same mapping size and .eh_frame_hdr
 * offset): at one address, only their contents tell them apart. */
#include <stdlib.h>
#include <string.h>

volatile unsigned dl_mix_salt;

#if MIX_VARIANT == 1
/* A small frame. */
__attribute__((noinline, aligned(256))) void *dl_mix_helper(size_t n)
{
  void *p = malloc(n);
  dl_mix_salt++;
  return p;
}
#else
/* A large frame and more saved registers, with padding code before it: other offsets, other rows. */
__attribute__((noinline, aligned(256))) void *dl_mix_helper(size_t n)
{
  volatile char buf[3000];
  memset((char *)buf, (int)n, sizeof buf);
  void *p = malloc(n + buf[n % sizeof buf] % 2);
  dl_mix_salt += (unsigned)buf[7];
  return p;
}
#endif

__attribute__((aligned(256))) void *dl_mix_alloc(size_t n)
{
  void *p = dl_mix_helper(n);
  if (p != NULL) memset(p, 0, 1);       /* both variants import memset: one GOT, one data segment size */
  dl_mix_salt += 3;
  return p;
}
