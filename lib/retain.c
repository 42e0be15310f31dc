/* retain.c - MIMALLOC_PROF_KEEP: of the periodic, interval and peak profiles (kinds p, i, u) of this
 * process, only the newest N of each kind stay; older ones are removed.
 *
 * Called after each such profile is renamed into place, with dump_lock held (dump.c), so no other dump of
 * ours renames or removes meanwhile, with the directory the profile went to (a descriptor: the very
 * directory, whatever its path names by now).  It is listed with getdents64(2) into a static buffer
 * (opendir allocates, and this runs on the profiler thread, which must not): the regular files of our
 * effective user named <prefix>.<pid>.<seq>.<kind>.pb.gz of this process and kind are counted, and while
 * there are more than N the one with the lowest sequence number goes.  Listing the directory rather than
 * remembering the names written covers what an earlier program of the same process wrote before it
 * exec'ed this one, and needs no memory per file.  Anything else is never touched, nor counted: files
 * being written (.tmp), other kinds (m, f, s), other processes' files, and, at a name of the pattern, a
 * symbolic link, a directory or another user's file (anyone may plant those: fsout.c checks each name
 * just before its unlinkat(2), which never follows a link).
 */
#include "dump.h"
#include "fsout.h"
#include "options.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static _Alignas(8) unsigned char dents[8192];   /* dump_lock */

/* The sequence number of `name` if it is "<base>.<pid>.<seq>.<kind>.pb.gz" with these parts. */
static bool match(const char *name, const char *base, size_t base_len, const char *pid, size_t pid_len,
                  char kind, uint64_t *seq)
{
  if (strncmp(name, base, base_len) != 0 || name[base_len] != '.') return false;
  name += base_len + 1;
  if (strncmp(name, pid, pid_len) != 0 || name[pid_len] != '.') return false;
  name += pid_len + 1;
  uint64_t v = 0;
  const char *digits = name;
  while (*name >= '0' && *name <= '9' && name - digits < 20) v = v * 10 + (uint64_t)(*name++ - '0');
  if (name == digits || name[0] != '.' || name[1] != kind || strcmp(name + 2, ".pb.gz") != 0) return false;
  *seq = v;
  return true;
}

/* One pass over the directory: how many files of the kind, and the lowest sequence number among them. */
static uint64_t count(int dir, const char *base, size_t base_len, const char *pid, size_t pid_len, char kind,
                      uint64_t *oldest)
{
  uint64_t n = 0;
  *oldest = UINT64_MAX;
  if (lseek(dir, 0, SEEK_SET) != 0) return 0;
  for (;;) {
    ssize_t got = getdents64(dir, dents, sizeof dents);
    if (got <= 0) break;
    for (ssize_t at = 0; at < got;) {
      const struct dirent64 *e = (const struct dirent64 *)(dents + at);
      uint64_t seq;
      if (match(e->d_name, base, base_len, pid, pid_len, kind, &seq) &&
          mprof_fsout_is_own(dir, e->d_name, S_IFREG)) {
        n++;
        if (seq < *oldest) *oldest = seq;
      }
      at += e->d_reclen;
    }
  }
  return n;
}

void mprof_retain(char kind, int at)
{
  uint64_t keep = mprof_option(MPROF_OPT_KEEP);
  if (keep == 0) return;
  const char *prefix = mprof_option_str(MPROF_OPT_PREFIX), *slash = strrchr(prefix, '/');
  const char *base = slash != NULL ? slash + 1 : prefix;
  char pid[24];
  size_t base_len = strlen(base), pid_len = (size_t)snprintf(pid, sizeof pid, "%d", (int)getpid());
  int dir = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  uint64_t oldest;
  for (uint64_t n = count(dir, base, base_len, pid, pid_len, kind, &oldest); n > keep; n--) {
    char name[4096];
    int len = snprintf(name, sizeof name, "%s.%s." MPROF_SEQ_FORMAT ".%c.pb.gz", base, pid,
                       (unsigned long long)oldest, kind);
    if (len <= 0 || (size_t)len >= sizeof name || !mprof_fsout_remove_own(dir, name, S_IFREG)) break;
    if (n - 1 > keep) count(dir, base, base_len, pid, pid_len, kind, &oldest);
  }
  close(dir);
}
