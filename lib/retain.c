/* retain.c - MIMALLOC_PROF_KEEP: of the periodic, interval and peak profiles (kinds p, i, u) of this
 * process, only the newest N of each kind stay; older ones are removed.
 *
 * Called after each such profile is renamed into place, with dump_lock held (dump.c), so no other dump of
 * ours renames or removes meanwhile.  The directory of MIMALLOC_PROF_PREFIX is listed with getdents64(2)
 * into a static buffer (opendir allocates, and this runs on the profiler thread, which must not): files
 * named <prefix>.<pid>.<seq>.<kind>.pb.gz of this process and kind are counted, and while there are more
 * than N the one with the lowest sequence number goes.  Listing the directory rather than remembering the
 * names written covers what an earlier program of the same process wrote before it exec'ed this one, and
 * needs no memory per file.  Files being written (.tmp), other kinds (m, f, s) and other processes' files
 * are never touched.
 */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Alignas(8) unsigned char dents[8192];   /* dump_lock */

/* The sequence number of `name` if it is "<base>.<pid>.<seq>.<kind>.pb.gz" with these parts. */
static bool match(const char *name, const char *base, size_t base_len, const char *pid, size_t pid_len, char kind,
                  uint64_t *seq)
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
      if (match(e->d_name, base, base_len, pid, pid_len, kind, &seq)) {
        n++;
        if (seq < *oldest) *oldest = seq;
      }
      at += e->d_reclen;
    }
  }
  return n;
}

void mprof_retain(char kind)
{
  uint64_t keep = mprof_option(MPROF_OPT_KEEP);
  if (keep == 0) return;
  const char *prefix = mprof_option_str(MPROF_OPT_PREFIX), *slash = strrchr(prefix, '/');
  char dir_path[4096], pid[24];
  const char *base = slash != NULL ? slash + 1 : prefix;
  if (slash == NULL) snprintf(dir_path, sizeof dir_path, ".");
  else if (slash == prefix) snprintf(dir_path, sizeof dir_path, "/");
  else snprintf(dir_path, sizeof dir_path, "%.*s", (int)(slash - prefix), prefix);
  size_t base_len = strlen(base), pid_len = (size_t)snprintf(pid, sizeof pid, "%d", (int)getpid());
  int dir = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  uint64_t oldest;
  for (uint64_t n = count(dir, base, base_len, pid, pid_len, kind, &oldest); n > keep; n--) {
    char name[4096];
    int len = snprintf(name, sizeof name, "%s.%s." MPROF_SEQ_FORMAT ".%c.pb.gz", base, pid,
                       (unsigned long long)oldest, kind);
    if (len <= 0 || (size_t)len >= sizeof name || unlinkat(dir, name, 0) != 0) break;
    if (n - 1 > keep) count(dir, base, base_len, pid, pid_len, kind, &oldest);
  }
  close(dir);
}
