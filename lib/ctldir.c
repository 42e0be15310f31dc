/* ctldir.c - where a process's control socket is (MIMALLOC_PROF_CONTROL): the one rule shared by the library
 * (control.c creates the socket there) and the mimalloc-prof command (which finds it from the environment
 * the process started with, /proc/PID/environ, and its effective user ID).
 *
 *   MIMALLOC_PROF_CONTROL=/some/dir    DIR = /some/dir
 *   MIMALLOC_PROF_CONTROL=1            DIR = $XDG_RUNTIME_DIR/mimalloc-prof when XDG_RUNTIME_DIR is an
 *                                      absolute path, else /tmp/mimalloc-prof-UID (UID: effective user ID)
 *
 * and the socket is DIR/PID.sock.  Nothing here allocates.
 */
#include "ctldir.h"

#include <stdio.h>

bool mprof_control_dir(const char *dir, const char *xdg_runtime_dir, unsigned uid, char *out, size_t len)
{
  int n;
  if (dir != NULL) n = snprintf(out, len, "%s", dir);
  else if (xdg_runtime_dir != NULL && xdg_runtime_dir[0] == '/')
    n = snprintf(out, len, "%s/mimalloc-prof", xdg_runtime_dir);
  else n = snprintf(out, len, "/tmp/mimalloc-prof-%u", uid);
  return n > 0 && (size_t)n < len;
}

bool mprof_control_socket(const char *dir, int pid, char *out, size_t len)
{
  int n = snprintf(out, len, "%s/%d.sock", dir, pid);
  return n > 0 && (size_t)n < len && (size_t)n < MPROF_CONTROL_PATH_MAX;
}
