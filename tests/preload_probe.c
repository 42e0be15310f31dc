/* preload_probe.c - prints which shared object provides each malloc-family name, one "name file" line
 * each.  Not linked with the library: tests run it with and without LD_PRELOAD. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
  static const char *const names[] = {"malloc", "free", "calloc", "realloc", "posix_memalign",
                                      "aligned_alloc", "malloc_usable_size"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, names[i]);
    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL) {
      printf("%s ?\n", names[i]);
      continue;
    }
    printf("%s %s\n", names[i], info.dli_fname);
  }
  /* And the block this program gets really comes from there: the library answers for it. */
  void *p = malloc(100);
  size_t (*usable)(void *) = (size_t (*)(void *))dlsym(RTLD_DEFAULT, "mi_usable_size");
  printf("mi_usable_size %s\n", usable != NULL && usable(p) >= 100 ? "yes" : "no");
  free(p);
  return 0;
}
