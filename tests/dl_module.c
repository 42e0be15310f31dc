/* dl_module.c - a small C module that tests/stack_probe dlopens, runs and dlcloses in a loop (stacks
 * suite): its allocations may be sampled, so stacks get frames inside a module that is then unloaded. */
#include <stdlib.h>
#include <string.h>

/* Allocates and frees `count` blocks of 1 KiB; returns the sum of their first bytes. */
long dl_module_run(unsigned count)
{
  long sum = 0;
  for (unsigned i = 0; i < count; i++) {
    unsigned char *p = malloc(1024);
    if (p == NULL) return -1;
    memset(p, (int)(i & 0x7f), 1024);
    sum += p[0];
    free(p);
  }
  return sum;
}
