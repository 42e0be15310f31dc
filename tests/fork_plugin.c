/* fork_plugin.c - a plugin whose constructor calls fork() while the profiler thread writes a dump
 * (test_profiler.c, profiler_fork_in_constructor; loaded by tests/pprof_probe's forkplugin mode).
 *
 * A constructor runs inside dlopen(), which holds the dynamic loader's lock (dl_load_lock) meanwhile.
 * MPROF_TEST_FIFO_FD is the read end of the FIFO the dump writes to (tests/dump_shim); its buffer is 4 KiB,
 * so a dump larger than that waits in write(2) until this reads, holding dump_lock.  The constructor waits
 * until the dump's first bytes arrive (the dump has begun), forks, lets the child write a profile of its
 * own (MPROF_TEST_CHILD_DUMP) and waits for it, notes whether the dump was still unfinished (not yet
 * renamed to MPROF_TEST_FINAL_NAME), then reads the dump to its end into MPROF_TEST_DRAIN.  Nothing here
 * waits for time: each step waits for an event the previous one causes.
 *
 * Before dumps stopped holding their lock across loader calls and fork stopped waiting for it, this hung:
 * fork's prepare handler waited for dump_lock, held by a dump that waited for this thread to read (or for
 * dl_load_lock, in dladdr).  Results go to stdout as "key value" lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mimalloc-prof.h"

__attribute__((constructor)) static void fork_under_loader_lock(void)
{
  const char *fd_text = getenv("MPROF_TEST_FIFO_FD"), *final = getenv("MPROF_TEST_FINAL_NAME");
  const char *child_dump = getenv("MPROF_TEST_CHILD_DUMP"), *drain = getenv("MPROF_TEST_DRAIN");
  if (fd_text == NULL || final == NULL || child_dump == NULL || drain == NULL) return;
  int fd = atoi(fd_text);
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  while (poll(&pf, 1, -1) < 0 && errno == EINTR) {
  }
  pid_t child = fork();
  if (child == 0) _exit(mi_prof_dump(child_dump) ? 0 : 1);
  int status = -1;
  if (child > 0) {
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  int in_progress = access(final, F_OK) != 0;
  int out = open(drain, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  fcntl(fd, F_SETFL, 0);                   /* blocking reads, to the writer's close */
  size_t drained = 0;
  char buf[4096];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (out >= 0 && write(out, buf, (size_t)r) != r) break;
    drained += (size_t)r;
  }
  if (out >= 0) close(out);
  printf("fork_pid %d\nfork_child_status %d\nin_progress_at_fork %d\ndrained_bytes %zu\n", (int)child, status,
         in_progress, drained);
}
