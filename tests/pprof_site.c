/* pprof_site.c - a small shared library with one allocation site, linked into tests/pprof_probe, so that
 * the pprof suite can check that a profile names a function of a shared library (its mapping, file
 * offset and build ID must let `go tool pprof` symbolize it from the .so file). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

size_t pprof_site_beta(void **blocks, size_t count, size_t size);

/* Allocates `count` blocks of `size` bytes into blocks[] and keeps them (the caller frees them or not).
 * Returns how many allocations succeeded.  Not inlined: this frame calls malloc itself. */
__attribute__((noinline)) size_t pprof_site_beta(void **blocks, size_t count, size_t size)
{
  size_t ok = 0;
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) continue;
    memset(blocks[i], 0xb5, size);
    ok++;
  }
  return ok;
}
