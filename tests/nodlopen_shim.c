/* nodlopen_shim.c - preloaded in front of the library by test_lazylib.c: a process where dlopen() fails,
 * as in one whose seccomp policy or mount namespace leaves the libraries out of reach.  Every dlopen
 * returns NULL; dlerror() then has nothing to say. */
#include <stddef.h>

void *dlopen(const char *file, int mode);

void *dlopen(const char *file, int mode)
{
  (void)file, (void)mode;
  return NULL;
}
