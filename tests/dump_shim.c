/* dump_shim.c - preloaded in front of the library by tests that need to control what its dumps meet in
 * the file system, where the library itself leaves nothing to chance (lib/fsout.c):
 *
 *   MPROF_TEST_GETRANDOM=zero   getrandom(3) fills its buffer with zero bytes: every temporary file of a
 *                               dump gets the same known name, so a test can plant a link there and see
 *                               every attempt collide (test_security.c);
 *   MPROF_TEST_GETRANDOM=fail   getrandom(3) fails with ENOSYS, as under a seccomp filter older than the
 *                               call: the library falls back to its own mix;
 *   MPROF_TEST_DUMP_FIFO=PATH, MPROF_TEST_DUMP_FIFO_KIND=K
 *                               the first temporary file the library creates for an automatic dump of
 *                               kind K (<base>.<pid>.K.<16 hex>.tmp) is created as ever, but the
 *                               descriptor the library gets is the FIFO at PATH, opened for writing: the
 *                               dump then waits in write(2) until the test reads, and the empty file is
 *                               renamed into place when the dump completes (test_profiler.c's final
 *                               signals during a dump; pprof_probe's fork in a constructor during one).
 *
 * Everything else goes to the kernel unchanged (raw system calls: no lookup of the next definition).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
  const char *mode = getenv("MPROF_TEST_GETRANDOM");
  if (mode != NULL && strcmp(mode, "zero") == 0) {
    memset(buf, 0, len);
    return (ssize_t)len;
  }
  if (mode != NULL && strcmp(mode, "fail") == 0) {
    errno = ENOSYS;
    return -1;
  }
  return syscall(SYS_getrandom, buf, len, flags);
}

/* Whether name is a dump's temporary file of this kind: <base>.<pid>.<kind>.<16 hex digits>.tmp */
static bool temp_of_kind(const char *name, const char *kind)
{
  size_t n = strlen(name), tail = 1 + 16 + 4;            /* ".<16 hex>.tmp" */
  if (kind == NULL || kind[0] == '\0' || n < tail + 2 || strcmp(name + n - 4, ".tmp") != 0) return false;
  return name[n - tail] == '.' && name[n - tail - 1] == kind[0] && name[n - tail - 2] == '.';
}

static int redirect(int fd, const char *name, int flags)
{
  static bool done;
  const char *fifo = getenv("MPROF_TEST_DUMP_FIFO"), *kind = getenv("MPROF_TEST_DUMP_FIFO_KIND");
  if (fd < 0 || done || fifo == NULL || !(flags & O_CREAT) || !temp_of_kind(name, kind)) return fd;
  done = true;
  int w = (int)syscall(SYS_openat, AT_FDCWD, fifo, O_WRONLY | O_CLOEXEC);
  if (w >= 0) {
    dup3(w, fd, O_CLOEXEC);
    close(w);
  }
  return fd;
}

static int open_at(int dir, const char *name, int flags, va_list ap)
{
  mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
  return redirect((int)syscall(SYS_openat, dir, name, flags, mode), name, flags);
}

int openat(int dir, const char *name, int flags, ...)
{
  va_list ap;
  va_start(ap, flags);
  int fd = open_at(dir, name, flags, ap);
  va_end(ap);
  return fd;
}

int openat64(int dir, const char *name, int flags, ...)
{
  va_list ap;
  va_start(ap, flags);
  int fd = open_at(dir, name, flags | O_LARGEFILE, ap);
  va_end(ap);
  return fd;
}
