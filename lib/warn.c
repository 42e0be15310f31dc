/* warn.c - the library's only output: one line on stderr per warning.
 *
 * Each message is formatted into a stack buffer and sent with one write(2) to fd 2 (or, unformatted,
 * gathered by one writev(2): mprof_warn_strs, for the sampling path): no stdio, no malloc
 * (glibc's vsnprintf does not allocate for the plain %s/%llu/%zu conversions used here).  The number of
 * lines per process is capped so a misbehaving program cannot flood its stderr.  The API never prints:
 * it returns an error code.
 */
#include "warn.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#define MPROF_MAX_WARNINGS 32

static unsigned warnings;   /* lines written so far (races may let one or two extra through: harmless) */

void mprof_warn(const char *fmt, ...)
{
  if (__atomic_fetch_add(&warnings, 1, __ATOMIC_RELAXED) >= MPROF_MAX_WARNINGS) return;
  char buf[512];
  static const char prefix[] = "mimalloc-prof: warning: ";
  size_t n = sizeof prefix - 1;
  __builtin_memcpy(buf, prefix, n);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  n += (size_t)m < sizeof buf - n - 1 ? (size_t)m : sizeof buf - n - 2;
  buf[n++] = '\n';
  ssize_t w = write(2, buf, n);
  (void)w;
}

/* mprof_warn without formatting and without a buffer: the strings given, up to a NULL (at most
 * WARN_PARTS), gathered by one writev(2).  For warnings from the sampling path, which may run near the
 * end of a small stack (a signal handler's, a thread's): vsnprintf alone needs about 2 KiB of it. */
#define WARN_PARTS 6

void mprof_warn_strs(const char *s, ...)
{
  if (__atomic_fetch_add(&warnings, 1, __ATOMIC_RELAXED) >= MPROF_MAX_WARNINGS) return;
  static const char prefix[] = "mimalloc-prof: warning: ";
  struct iovec iov[WARN_PARTS + 2] = {{(void *)prefix, sizeof prefix - 1}};
  int n = 1;
  va_list ap;
  va_start(ap, s);
  for (; s != NULL && n <= WARN_PARTS; s = va_arg(ap, const char *))
    iov[n++] = (struct iovec){(void *)s, __builtin_strlen(s)};
  va_end(ap);
  iov[n++] = (struct iovec){(void *)"\n", 1};
  ssize_t w = writev(2, iov, n);
  (void)w;
}

bool mprof_warn_once_claim(int *flag)
{
  return __atomic_exchange_n(flag, 1, __ATOMIC_RELAXED) == 0;
}
