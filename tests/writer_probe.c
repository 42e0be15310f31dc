/* writer_probe.c - the profile writer and the leak report fed with synthetic snapshots (test_pprof.c).
 * Linked statically with the library (libtool -static), so the library's internal functions (pprof.h,
 * dump.h, snapshot.h) are in reach: the snapshot is built here, not sampled, which lets a test give the
 * writer exactly the stacks it wants: every dropped sample's one-frame stack
 * (MI_PROF_FRAME_DROPPED(reason)), a frame in no mapping, or many distinct frames.
 *
 * Modes (argv[1]); "key value" lines on stdout, "writer_probe: ..." on stderr and exit 1 on a failure:
 *   dropped PATH         a profile of one stack per drop reason (stack r: r + 1 objects of 1000 bytes),
 *                        one stack at writer_site and one at an address in no mapping; then the leak
 *                        report of the same snapshot on stdout
 *   bound STACKS DEPTH PATH  a profile of STACKS stacks of DEPTH distinct frames each; the most temporary
 *                        profiler memory the write took against what pmem.c keeps free for it
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include "dump.h"
#include "lazyload.h"
#include "objects.h"
#include "pmem.h"
#include "pprof.h"
#include "snapshot.h"
#include "unwind.h"

#define PROBE_NAME "writer_probe"
#include "probe_util.h"

enum { SPECIAL = 2 };                        /* writer_site's stack and the unmapped one */

__attribute__((noinline)) void writer_site(void) { __asm__ volatile(""); }

static void meta_for(const mprof_snapshot_t *snap, mprof_pprof_meta_t *meta)
{
  memset(meta, 0, sizeof *meta);
  meta->sample_rate = 4096;
  meta->time_ns = 1;
  meta->totals = &snap->totals;
  for (size_t r = 0; r < MI_PROF_DROP_REASONS; r++) meta->dropped[r] = r + 1;
}

static void write_profile(const char *path, const mprof_snapshot_t *snap, const mprof_objects_t *objs)
{
  mprof_pprof_meta_t meta;
  meta_for(snap, &meta);
  if (!mprof_lazy_load(MPROF_LAZY_PPROF)) die("mprof_lazy_load");   /* dump.c's part: zlib, protobuf-c */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !mprof_pprof_write(fd, snap, objs, &meta) || close(fd) != 0) die("mprof_pprof_write");
}

static int mode_dropped(const char *path)
{
  static uintptr_t frames[MI_PROF_DROP_REASONS + SPECIAL];
  static mprof_snap_stack_t stacks[MI_PROF_DROP_REASONS + SPECIAL];
  void *page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   /* in no object */
  if (page == MAP_FAILED) die("mmap");
  for (size_t r = 0; r < MI_PROF_DROP_REASONS + SPECIAL; r++) {
    if (r < MI_PROF_DROP_REASONS) frames[r] = (uintptr_t)MI_PROF_FRAME_DROPPED(r);
    else if (r == MI_PROF_DROP_REASONS) frames[r] = (uintptr_t)writer_site + 1;   /* a return address */
    else frames[r] = (uintptr_t)page + 16;
    stacks[r].depth = 1;
    stacks[r].frames = &frames[r];
    stacks[r].counts.alloc_objects = stacks[r].counts.inuse_objects = r + 1;
    stacks[r].counts.alloc_bytes = stacks[r].counts.inuse_bytes = (r + 1) * 1000;
  }
  enum { N = MI_PROF_DROP_REASONS + SPECIAL };
  mprof_snapshot_t snap = {.stack = stacks, .n = N, .cap = N};
  snap.totals.live = snap.n;
  mprof_objects_t objs;
  if (!mprof_objects_take(&objs)) die("mprof_objects_take");
  write_profile(path, &snap, &objs);
  printf("unmapped %" PRIuPTR "\nwriter_site %" PRIuPTR "\n", frames[snap.n - 1] - 1, frames[snap.n - 2] - 1);
  fflush(stdout);
  if (!mprof_dump_leak_write(1, &snap, &objs)) die("mprof_dump_leak_write");
  mprof_objects_release(&objs);
  return 0;
}

static int mode_bound(size_t n, size_t depth, const char *path)
{
  if (depth == 0 || depth > MPROF_BT_MAX_CAP) die("depth 1..256");
  mprof_objects_t objs;
  if (!mprof_objects_take(&objs)) die("mprof_objects_take");
  size_t before = mprof_pmem_temp_peak();
  /* The snapshot as snapshot.c lays it out: the stacks, then their frames, in one temporary mapping. */
  size_t bytes = n * sizeof(mprof_snap_stack_t) + n * depth * sizeof(uintptr_t);
  mprof_snap_stack_t *stacks = mprof_pmem_map_temp(bytes);
  if (stacks == NULL) die("mprof_pmem_map_temp");
  uintptr_t *frames = (uintptr_t *)(stacks + n), base = (uintptr_t)writer_site & ~(uintptr_t)4095;
  for (size_t i = 0; i < n; i++) {
    stacks[i].depth = depth;
    stacks[i].frames = frames + i * depth;
    stacks[i].counts.alloc_objects = stacks[i].counts.inuse_objects = 1;
    stacks[i].counts.alloc_bytes = stacks[i].counts.inuse_bytes = 64 + i;
    for (size_t k = 0; k < depth; k++) frames[i * depth + k] = base + 1 + 4 * (i * depth + k);   /* all distinct */
  }
  mprof_snapshot_t snap = {.stack = stacks, .n = n, .cap = n};
  write_profile(path, &snap, &objs);
  size_t peak = mprof_pmem_temp_peak();
  printf("temp_peak %zu\nobjects_bytes %zu\npeak_before %zu\n", peak, objs.bytes, before);
  printf("reserve %zu\n",
         (size_t)(MPROF_DUMP_FIXED_BYTES + n * MPROF_DUMP_STACK_BYTES + n * depth * MPROF_DUMP_FRAME_BYTES));
  mprof_pmem_unmap_temp(stacks, bytes);
  mprof_objects_release(&objs);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc >= 3 && strcmp(argv[1], "dropped") == 0) return mode_dropped(argv[2]);
  if (argc >= 5 && strcmp(argv[1], "bound") == 0) return mode_bound(arg_size(argv[2]), arg_size(argv[3]), argv[4]);
  die("usage: writer_probe dropped PATH | bound STACKS DEPTH PATH");
}
