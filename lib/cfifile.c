/* cfifile.c - an object's call-frame information read from its file (pread) rather than where the loader
 * mapped it, for the table unwinder's compiler (ehframe.c reads a view with a pager through here).
 *
 * Why.  A load from a page of a file mapping that is not mapped yet makes the kernel map the pages of the
 * page cache around it too (fault-around: 64 KiB a fault on this kernel; process_vm_readv of 8 bytes made
 * 128 KiB resident), and every one of them counts in the process's resident set: compiled in place, the
 * chunks bench/run.sh's workloads need leave 100-500 KiB more file pages resident than fp does.  pread
 * copies the bytes into a window of profiler memory and maps nothing.
 *
 * The file.  unwtab.c names it (the program: /proc/self/exe; a library: the absolute name the loader opened
 * it by) and where the call-frame information and the GNU build ID lie in it.  Each compile opens it,
 * checks that the build ID at its place in the file is the one in memory (a package upgrade replaces a file
 * under a running program; /proc/self/exe is the very file mapped), reads, and closes.  A file that is not
 * a regular file, cannot be opened (no such name in a chroot, no descriptor left, a sandbox) or reads
 * otherwise is not used: unwtab.c then reads an object that is never unloaded in place, and leaves
 * another's chunk to a later walk (or FALLBACK, once its name holds another file).  The file is only read:
 * its bytes are parsed with ehframe.c's bounds like any other input, and the name is the loader's own, so
 * the caller of a privileged program chooses nothing here.
 *
 * Windows.  MPROF_CFI_SLOTS windows of MPROF_CFI_SLOT bytes, each filled by one pread and reused least
 * recently used first.  A compile reads its search-table entries (a window aligned to a page, so a binary
 * search's last steps share it), then its FDEs in order and their CIE (a window starting at the record, so
 * the record is whole: any FDE under MPROF_CFI_SLOT - 64 bytes; Debian's largest is 1.5 KiB).  A reader
 * that holds a window while it asks for another (an FDE while its CIE is parsed) costs at most one
 * eviction, of the least recently used window, never the one it holds: so a compile takes 3-6 preads.
 * A record longer than a window holds, or a read that fails, is noted in the pager: unwtab.c compiles such
 * a chunk again in place where that is safe (an object never unloaded), so the rows never depend on which
 * way the bytes were read.
 *
 * Async-signal-safe (open, fstat, pread, close; errno kept); no lock, no allocation: the windows are the
 * caller's memory.
 */
#include "unwtab.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if MPROF_HAVE_TABLE

static int refused;                      /* atomic: open was refused (a sandbox): files are not tried */

bool mprof_cfi_file_open(mprof_cfi_pager_t *pg, const mprof_cfi_file_t *f, uint8_t *windows)
{
  memset(pg, 0, sizeof *pg);
  pg->fd = -1;
  if (f->path == NULL || __atomic_load_n(&refused, __ATOMIC_RELAXED)) return false;
  pg->saved_errno = errno;
  pg->fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (pg->fd < 0 && (errno == EPERM || errno == ENOSYS)) __atomic_store_n(&refused, 1, __ATOMIC_RELAXED);
  struct stat st;
  uint8_t id[MPROF_UOBJ_ID_MAX];
  bool ok = pg->fd >= 0 && fstat(pg->fd, &st) == 0 && S_ISREG(st.st_mode) && f->id_len <= sizeof id &&
            pread(pg->fd, id, f->id_len, (off_t)f->id_off) == (ssize_t)f->id_len &&
            memcmp(id, f->id, f->id_len) == 0;
  if (!ok) {
    pg->another = pg->fd >= 0;
    if (pg->fd >= 0) close(pg->fd);
    pg->fd = -1;
    errno = pg->saved_errno;
    return false;
  }
  pg->lo_off = f->lo_off;
  pg->windows = windows;
  return true;
}

void mprof_cfi_file_close(mprof_cfi_pager_t *pg)
{
  close(pg->fd);
  pg->fd = -1;
  errno = pg->saved_errno;
}

const uint8_t *mprof_cfi_fetch_slow(const mprof_cfi_view_t *v, uintptr_t at, size_t need, size_t *avail)
{
  mprof_cfi_pager_t *pg = v->pager;
  if (at < v->lo || at > v->hi || need > v->hi - at) return NULL;    /* outside the view: read in place too */
  if (need > MPROF_CFI_SLOT - 64) {               /* more than a window holds */
    pg->too_long = true;
    return NULL;
  }
  unsigned victim = 0;
  for (unsigned i = 0; i < MPROF_CFI_SLOTS; i++) {
    size_t in = at - pg->at[i];                   /* wraps above any length when at is below the window */
    if (pg->len[i] != 0 && in <= pg->len[i] && need <= pg->len[i] - in) {
      pg->used[i] = ++pg->clock;
      pg->prev = pg->last, pg->last = i;
      *avail = pg->len[i] - in;
      return pg->windows + (size_t)i * MPROF_CFI_SLOT + in;
    }
    if (pg->used[i] < pg->used[victim]) victim = i;
  }
  uintptr_t from = at & ~(uintptr_t)(MPROF_CFI_SLOT - 1);   /* a table entry: its page */
  if (need > 8 || at + need > from + MPROF_CFI_SLOT) from = at & ~(uintptr_t)63;   /* a record: from it */
  if (from < v->lo) from = v->lo;
  size_t n = v->hi - from < MPROF_CFI_SLOT ? v->hi - from : MPROF_CFI_SLOT;
  uint8_t *w = pg->windows + (size_t)victim * MPROF_CFI_SLOT;
  pg->len[victim] = 0;
  if (pread(pg->fd, w, n, (off_t)(pg->lo_off + (from - v->lo))) != (ssize_t)n) {
    pg->failed = true;                            /* the file changed or cannot be read */
    return NULL;
  }
  pg->preads++;
  pg->at[victim] = from;
  pg->len[victim] = (uint32_t)n;
  pg->used[victim] = ++pg->clock;
  pg->prev = pg->last, pg->last = victim;
  *avail = n - (at - from);
  return w + (at - from);
}

#endif /* MPROF_HAVE_TABLE */
