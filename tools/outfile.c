/* outfile.c - writing the command's output files (-o): complete or not at all, and never replacing what
 * is not a regular file.
 *
 * A regular file, or a path that does not exist yet, is written to a temporary file beside it (hidden:
 * .NAME.XXXXXX) that is renamed over the path once complete, so a reader never sees half a profile and a
 * failed write leaves the old file.  Anything else that exists (/dev/null, /dev/stdout, a FIFO, a
 * terminal, or a symbolic link to one) is opened and written in place: renaming over it would replace
 * the device with a regular file (`-o /dev/null` run as root did exactly that).
 */
#define _GNU_SOURCE
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tool_out_open(tool_out_t *o, const char *path)
{
  struct stat st;
  o->tmp[0] = '\0';
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      return o->fd = -1;
    }
    return o->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
  }
  const char *slash = strrchr(path, '/');
  int n = slash ? snprintf(o->tmp, sizeof o->tmp, "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
                : snprintf(o->tmp, sizeof o->tmp, ".%s.XXXXXX", path);
  if (n < 0 || (size_t)n >= sizeof o->tmp) {
    o->tmp[0] = '\0';
    errno = ENAMETOOLONG;
    return o->fd = -1;
  }
  if ((o->fd = mkostemp(o->tmp, O_CLOEXEC)) < 0) {
    o->tmp[0] = '\0';
    return -1;
  }
  mode_t mask = umask(0);                 /* mkostemp made it 0600: give it a new file's mode */
  umask(mask);
  if (fchmod(o->fd, 0666 & ~mask) != 0) {
    /* keep 0600 */
  }
  return o->fd;
}

int tool_out_close(tool_out_t *o, const char *path, bool ok)
{
  int err = ok ? 0 : errno;
  if (o->fd >= 0 && close(o->fd) != 0 && ok) ok = false, err = errno;
  o->fd = -1;
  if (o->tmp[0] != '\0') {
    if (ok && rename(o->tmp, path) != 0) ok = false, err = errno;
    if (!ok) unlink(o->tmp);
    o->tmp[0] = '\0';
  }
  errno = err;
  return ok ? 0 : -1;
}
