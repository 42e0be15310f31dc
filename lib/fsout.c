/* fsout.c - everything the library creates or removes in the file system: heap profiles (automatically
 * named, or at a path the program gives), their temporary files, the control socket's directory and the
 * socket, and the removal of retained profiles.  dump.c, control.c and retain.c go through here, and
 * nothing else in the library creates, renames or removes a name.
 *
 * The rules, and why (doc/design/files-and-privileges.md):
 *   - A file is created only with O_CREAT | O_EXCL | O_NOFOLLOW (and O_CLOEXEC), under a temporary name
 *     nobody can predict (64 random bits: mprof_random64) in the directory it is meant for, and renamed
 *     into place once complete.  O_EXCL never opens what is there already, a symbolic link included
 *     (dangling or not), so a name planted in advance can make that attempt fail (another name is tried,
 *     up to TEMP_TRIES), never make us write through it; the random name only keeps such a flood from
 *     being a denial of service.
 *   - Every step after the directory is opened is relative to its descriptor (openat, renameat2,
 *     unlinkat): the file, its rename and the removal of a failed one happen in the same directory, even
 *     if the path's directories change meanwhile.  The directories of a path are resolved as open(2)
 *     does: they are the caller's path.
 *   - An automatic name is never taken from anyone: the rename is RENAME_NOREPLACE, and the caller tries
 *     its next name when one exists (whatever it is: a file, a planted link, which is left alone).
 *   - A path the program names (mi_prof_dump(path)) is that file: when it exists and is not a symbolic
 *     link it is truncated and written in place (a regular file keeps its owner, mode and links; a
 *     FIFO or device is simply written), as mi_prof_dump(3) documents; a symbolic link there is never
 *     followed (ELOOP); when nothing is there, the profile is made under a temporary name and renamed
 *     into place, replacing whatever appeared at path meanwhile (the program asked for that file).
 *   - Removals (a failed temporary file, retention, the control socket) are unlinkat(2) of one name, and
 *     only of what we could have made: a file of the expected type, owned by our effective user, checked
 *     with fstatat(AT_SYMLINK_NOFOLLOW) just before.  unlinkat never follows a link.
 *   - The control socket's directory is made 0700 if missing, then opened with O_NOFOLLOW and checked
 *     with fstat (a directory of ours, closed to others); the socket is bound through /proc/self/fd/N/
 *     of that descriptor, so it lands in the directory that was checked, not wherever its path points
 *     by then.
 *   - In secure mode (AT_SECURE) profiles are created 0600: a profile holds the process's memory layout.
 *
 * Nothing here allocates or uses stdio streams (snprintf into stack buffers only); everything is a system
 * call or a few lines around one.  Dumps run on the calling thread, the profiler thread or in an exit
 * handler, never in a signal handler.
 */
#include "fsout.h"
#include "options.h"
#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define TEMP_TRIES 64             /* temporary names tried before giving up with EEXIST */

/* The directory part of path (".", "/", or the text before the last slash) opened for the *at calls;
 * *name points to the last component.  With `file`, the path must name a file: -1 with ENOENT for "",
 * EISDIR when its last component names a directory by its form ("dir/", ".", ".."), ENAMETOOLONG when
 * it is too long.  Else -1 with open(2)'s errno. */
static int open_parent(const char *path, bool file, const char **name)
{
  const char *slash = strrchr(path, '/');
  const char *base = slash != NULL ? slash + 1 : path;
  char dir[PATH_MAX];
  if (file && path[0] == '\0') {
    errno = ENOENT;
    return -1;
  }
  if (file && (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)) {
    errno = EISDIR;
    return -1;
  }
  if (file && strlen(base) > NAME_MAX) {
    errno = ENAMETOOLONG;
    return -1;
  }
  size_t len = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);
  if (len >= sizeof dir) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(dir, slash == NULL ? "." : path, len);
  dir[len] = '\0';
  *name = base;
  return open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void init(mprof_fsout_t *o)
{
  o->dir = o->fd = -1;
  o->in_place = false;
  o->tmp[0] = '\0';
}

/* A new file `<stem>.<16 hex digits>.tmp` in o->dir. */
static bool create_temp(mprof_fsout_t *o, const char *stem)
{
  mode_t mode = mprof_options_secure() ? 0600 : 0644;
  for (int tries = 0; tries < TEMP_TRIES; tries++) {
    int n = snprintf(o->tmp, sizeof o->tmp, "%s.%016llx.tmp", stem, (unsigned long long)mprof_random64());
    if (n < 0 || (size_t)n >= sizeof o->tmp) {
      o->tmp[0] = '\0';
      errno = ENAMETOOLONG;
      return false;
    }
    o->fd = openat(o->dir, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
    struct stat st;
    if (o->fd >= 0 && fstat(o->fd, &st) == 0) {
      o->tmp_dev = st.st_dev;
      o->tmp_ino = st.st_ino;
      return true;
    }
    int err = errno;
    if (o->fd >= 0) {                      /* fstat failed: give the name back */
      close(o->fd);
      unlinkat(o->dir, o->tmp, 0);
      o->fd = -1;
    }
    o->tmp[0] = '\0';
    errno = err;
    if (err != EEXIST) return false;
  }
  errno = EEXIST;
  return false;
}

bool mprof_fsout_create(mprof_fsout_t *o, const char *prefix, const char *stem)
{
  const char *base;
  init(o);
  if ((o->dir = open_parent(prefix, false, &base)) < 0) return false;
  if (create_temp(o, stem)) return true;
  mprof_fsout_end(o);
  return false;
}

bool mprof_fsout_open_path(mprof_fsout_t *o, const char *path)
{
  const char *name;
  char stem[NAME_MAX + 2];
  init(o);
  if ((o->dir = open_parent(path, true, &name)) < 0) return false;
  o->fd = openat(o->dir, name, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  if (o->fd >= 0) {
    struct stat st;
    if (fstat(o->fd, &st) == 0 && (!S_ISREG(st.st_mode) || ftruncate(o->fd, 0) == 0)) {
      o->in_place = true;
      return true;
    }
  } else if (errno == ENOENT) {
    snprintf(stem, sizeof stem, ".%s", name);         /* hidden beside it, as editors do */
    if (create_temp(o, stem)) return true;
  }
  mprof_fsout_end(o);
  return false;
}

/* Renames the temporary file to name without replacing anything: renameat2's RENAME_NOREPLACE; where
 * the file system lacks it (EINVAL), a hard link, which never replaces either, and the temporary name's
 * removal; where it has no hard links either, rename(2) once fstatat finds nothing at name (the one
 * window in which something appearing at name is replaced: the name, never what a link there points to). */
static int rename_noreplace(int dir, const char *from, const char *to)
{
  if (renameat2(dir, from, dir, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  if (linkat(dir, from, dir, to, 0) == 0) {
    unlinkat(dir, from, 0);
    return 0;
  }
  if (errno != EPERM && errno != EOPNOTSUPP && errno != ENOSYS && errno != EMLINK) return -1;
  struct stat st;
  if (fstatat(dir, to, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    return -1;
  }
  return errno == ENOENT ? renameat(dir, from, dir, to) : -1;
}

int mprof_fsout_publish(mprof_fsout_t *o, const char *name, bool replace)
{
  if (o->in_place) return 0;
  if (o->tmp[0] == '\0') {
    errno = EBADF;
    return -1;
  }
  int rc = replace ? renameat(o->dir, o->tmp, o->dir, name) : rename_noreplace(o->dir, o->tmp, name);
  if (rc == 0) o->tmp[0] = '\0';
  return rc;
}

int mprof_fsout_close(mprof_fsout_t *o)
{
  int rc = 0;
  if (o->fd >= 0) rc = close(o->fd);
  o->fd = -1;
  return rc;
}

void mprof_fsout_end(mprof_fsout_t *o)
{
  int err = errno;
  mprof_fsout_close(o);
  struct stat st;
  if (o->tmp[0] != '\0' && fstatat(o->dir, o->tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      st.st_dev == o->tmp_dev && st.st_ino == o->tmp_ino)   /* still the file we made, not one put there */
    unlinkat(o->dir, o->tmp, 0);
  o->tmp[0] = '\0';
  if (o->dir >= 0) close(o->dir);
  o->dir = -1;
  errno = err;
}

/* ---------------------------------------------------------------------------------------------------
   Removing what we made
--------------------------------------------------------------------------------------------------- */

bool mprof_fsout_is_own(int dir, const char *name, unsigned type)
{
  struct stat st;
  return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == type &&
         st.st_uid == geteuid();
}

bool mprof_fsout_remove_own(int dir, const char *name, unsigned type)
{
  return mprof_fsout_is_own(dir, name, type) && unlinkat(dir, name, 0) == 0;
}

/* ---------------------------------------------------------------------------------------------------
   The control socket
--------------------------------------------------------------------------------------------------- */

int mprof_fsout_private_dir(const char *path, bool named, const char **why)
{
  struct stat st;
  *why = NULL;
  if (mkdir(path, 0700) != 0 && errno != EEXIST) {
    *why = "cannot be created";
    return -1;
  }
  int dir = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0 || fstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) *why = "is not a directory";
  else if (st.st_uid != geteuid()) *why = "belongs to another user";
  else if ((st.st_mode & (named ? 022 : 077)) != 0)
    *why = named ? "is writable by others" : "is open to others";
  if (*why == NULL) return dir;
  if (dir >= 0) close(dir);
  errno = EPERM;
  return -1;
}

bool mprof_fsout_bind(int sock, int dir, const char *dir_path, const char *name)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  mprof_fsout_remove_own(dir, name, S_IFSOCK);   /* left by an earlier program of this PID */
  int n = snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/%s", dir, name);
  int rc = -1;
  if (n > 0 && (size_t)n < sizeof a.sun_path) rc = bind(sock, (struct sockaddr *)&a, sizeof a);
  if (rc != 0 && errno != EADDRINUSE) {          /* no /proc: by the path that was checked */
    n = snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir_path, name);
    if (n <= 0 || (size_t)n >= sizeof a.sun_path) {
      errno = ENAMETOOLONG;
      return false;
    }
    rc = bind(sock, (struct sockaddr *)&a, sizeof a);
  }
  if (rc != 0) return false;
  /* Nobody else can put anything at name in the directory (checked: ours, closed to others' writing). */
  if (fchmodat(dir, name, 0600, 0) == 0) return true;
  int err = errno;
  unlinkat(dir, name, 0);
  errno = err;
  return false;
}

void mprof_fsout_unbind(const char *dir_path, const char *name)
{
  int dir = open(dir_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  mprof_fsout_remove_own(dir, name, S_IFSOCK);
  close(dir);
}
