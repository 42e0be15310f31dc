/* oddid_lib.c - liboddid.so, linked with a 5-byte GNU build ID (--build-id=0x0102030405, Makefile.am):
 * its only PT_NOTE ends with that note's descriptor, without the padding to 4 bytes a following note
 * would need.  oddid_probe allocates through it. */
#include <stdlib.h>

void *oddid_alloc(size_t size)
{
  void *p = malloc(size);
  __asm__ volatile("" ::"r"(p));
  return p;
}
