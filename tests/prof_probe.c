/* prof_probe.c - a small program linked with the library, run by tests in a subprocess with a chosen
 * environment (options are read once at load).  (being written) */
#include <stdio.h>

#include "mimalloc-prof.h"

int main(int argc, char **argv)
{
  (void)argc, (void)argv;
  printf("version %d\n", mi_prof_version());
  return 0;
}
