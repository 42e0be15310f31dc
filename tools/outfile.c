/* outfile.c - writing the command's output files (-o): complete or not at all, never through a symbolic
 * link another user made, and never replacing what is not a regular file.
 *
 * A regular file, or a path where nothing is yet, is written to a new temporary file beside it (hidden:
 * .NAME.XXXXXX, made by mkostemp(3): O_CREAT | O_EXCL, an unpredictable name, so nothing planted there
 * is ever opened) that is renamed to the path once complete: a reader never sees half a profile, a
 * failed write leaves the old file, and what is replaced is the name, never what a link there points to.
 *
 * Anything else that exists (/dev/null, /dev/stdout, a FIFO, a terminal) is opened and written in place:
 * renaming over it would replace the device with a regular file (as root, `-o /dev/null` would make /dev/null
 * a regular file for every program).  It must belong to us or to root, and a symbolic link at the path is
 * followed to it only when the link belongs to us or to root (/dev/stdout is root's, /proc/self/fd/1 ours): a
 * link or FIFO that another user planted where the command is told to write (a shared directory) would
 * otherwise make it write into whatever that user chose, a device of root's when the command runs as
 * root.  Those are refused with EPERM, and so is an object that changed between the check and the open.
 */
#define _GNU_SOURCE
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Made by us or by root: the links -o follows, the devices, FIFOs and terminals it writes into. */
static bool trusted(const struct stat *st) { return st->st_uid == geteuid() || st->st_uid == 0; }

/* The existing non-regular file at path (lst: lstat's, st: stat's), opened in place. */
static int open_in_place(const char *path, const struct stat *lst, const struct stat *st)
{
  if (S_ISDIR(st->st_mode)) {
    errno = EISDIR;
    return -1;
  }
  if (!trusted(st)) {
    errno = EPERM;
    return -1;
  }
  int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY | (S_ISLNK(lst->st_mode) ? 0 : O_NOFOLLOW));
  struct stat now;
  if (fd >= 0 && (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)) {
    close(fd);
    errno = EPERM;                          /* not what was checked: replaced meanwhile */
    return -1;
  }
  return fd;
}

int tool_out_open(tool_out_t *o, const char *path)
{
  struct stat lst, st;
  o->tmp[0] = '\0';
  if (lstat(path, &lst) == 0) {
    if (S_ISLNK(lst.st_mode) && !trusted(&lst)) {
      errno = EPERM;
      return o->fd = -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return o->fd = open_in_place(path, &lst, &st);
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
