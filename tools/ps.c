/* ps.c - `mimalloc-prof ps`: the processes that offer a control socket, with their state.
 *
 * Every process whose environment we may read (our user's; every process for root) and that started with
 * MIMALLOC_PROF_CONTROL enabled is looked at: when its socket exists, it is asked for its statistics
 * (client.c).  A process that started with the variable but has no socket (it does not run the library,
 * as the shell that exported the variable) is not listed, nor is one that does not answer (a line on
 * standard error says so).  Every request is bounded by --timeout (client.c), so a stuck process costs ps
 * that long at most.
 *
 * Sockets left behind (their process exited without its exit handlers, or exec'd a program without the
 * library) are removed: those of the processes looked at, and then each PID.sock whose process is gone in
 * the directories of those processes' sockets and in our user's default control directory.  A socket is
 * left behind when connecting finds nobody listening and no socket of the system is bound to that name
 * (/proc/net/unix: a process between bind and listen refuses connections too).  Only a socket owned by
 * our effective user, in a directory of ours that others cannot write, is removed, by unlinkat(2) of that
 * one name, never through a link (the library's rules, lib/fsout.c).
 */
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctldir.h"

static const char usage[] =
  "usage: mimalloc-prof ps [--timeout SECONDS]\n"
  "List the processes that offer a control socket (MIMALLOC_PROF_CONTROL=1) and answer: process ID,\n"
  "whether they sample and at what rate, their estimated bytes in use (what a stopped session kept, when\n"
  "stopped), and their command line.  Control sockets of ours that nobody listens on are removed.\n"
  "  --timeout SECONDS  a process that has not answered within this time is not listed (default 10)\n"
  "See mimalloc-prof(1).\n";

/* The value of "key value" in a stats reply, or NULL. */
static const char *stat_value(const ctl_reply_t *r, const char *key, char *buf, size_t len)
{
  size_t n = strlen(key);
  for (const char *p = (const char *)r->data; *p != '\0';) {
    if (strncmp(p, key, n) == 0 && p[n] == ' ') {
      tool_escape(buf, len, p + n + 1, strcspn(p + n + 1, "\n"), false);
      return buf;
    }
    const char *nl = strchr(p, '\n');
    if (nl == NULL) break;
    p = nl + 1;
  }
  return NULL;
}

/* Whether some socket of the system is bound to a name that ends in "/name" (/proc/net/unix lists the
 * path a socket was bound by; the library binds through /proc/self/fd/N/, so only the name is compared).
 * True when the list cannot be read: nothing is removed then. */
static bool bound_somewhere(const char *name)
{
  FILE *f = fopen("/proc/net/unix", "re");
  if (f == NULL) return true;
  char line[4096];
  size_t n = strlen(name);
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    size_t len = strcspn(line, "\n");
    line[len] = '\0';
    found = len > n && line[len - n - 1] == '/' && strcmp(line + len - n, name) == 0;
  }
  fclose(f);
  return found;
}

/* Removes the socket `name` from directory `dir_path` when it is left behind and ours (see above); says
 * so on stderr.  True when it was removed. */
static bool remove_left_behind(const char *dir_path, const char *name)
{
  struct stat st;
  int dir = open(dir_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  bool removed = false;
  if (dir >= 0 && fstat(dir, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 022) == 0 &&
      fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid() &&
      !bound_somewhere(name) && unlinkat(dir, name, 0) == 0) {
    char shown[4 * MPROF_CONTROL_PATH_MAX];
    char full[MPROF_CONTROL_PATH_MAX + 64];
    snprintf(full, sizeof full, "%s/%s", dir_path, name);
    tool_note("removed %s: a control socket left behind (nobody listens on it)",
              tool_escaped(full, shown, sizeof shown));
    removed = true;
  }
  if (dir >= 0) close(dir);
  return removed;
}

/* The directory part of a socket path, and its name. */
static void split_path(char *path, const char **name)
{
  char *slash = strrchr(path, '/');
  *name = slash + 1;
  *slash = '\0';
}

#define MAX_DIRS 16
static char dirs[MAX_DIRS][MPROF_CONTROL_PATH_MAX];   /* control directories seen, to look for the gone */
static size_t n_dirs;

static void dir_seen(const char *dir)
{
  for (size_t i = 0; i < n_dirs; i++)
    if (strcmp(dirs[i], dir) == 0) return;
  if (n_dirs < MAX_DIRS) snprintf(dirs[n_dirs++], sizeof dirs[0], "%s", dir);
}

static void print_one(pid_t pid)
{
  char path[MPROF_CONTROL_PATH_MAX], why[512], err[1024];
  struct stat st;
  if (ctl_socket_path(pid, path, sizeof path, why, sizeof why) != 0 || lstat(path, &st) != 0 ||
      !S_ISSOCK(st.st_mode))
    return;
  ctl_reply_t r;
  char state[32] = "stopped", rate[32] = "-", inuse[32] = "-", v[32];
  int asked = ctl_request(pid, "stats", &r, err, sizeof err);
  bool refused = asked != 0 && ctl_request_refused();
  const char *name;
  split_path(path, &name);
  dir_seen(path);
  if (asked != 0) {
    if (!refused || !remove_left_behind(path, name)) tool_note("process %d is not listed: %s", (int)pid, err);
    return;
  }
  if (!r.ok) {
    snprintf(state, sizeof state, "error");
  } else {
    stat_value(&r, "state", state, sizeof state);
    if (stat_value(&r, "inuse_bytes", v, sizeof v) != NULL)
      tool_bytes(strtoll(v, NULL, 10), inuse, sizeof inuse);
    if (strcmp(state, "sampling") == 0 && stat_value(&r, "sample_rate", v, sizeof v) != NULL)
      tool_bytes(strtoll(v, NULL, 10), rate, sizeof rate);
  }
  ctl_reply_free(&r);
  char *cmd = ctl_command_line(pid);
  printf("%7d  %-9s  %9s  %10s  %s\n", (int)pid, state, rate, inuse, cmd);
  free(cmd);
}

/* The sockets in control directory `dir` whose process is gone. */
static void remove_gone(const char *dir)
{
  DIR *d = opendir(dir);
  if (d == NULL) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char digits[32], *dot = strchr(e->d_name, '.');
    pid_t pid;
    if (dot == NULL || strcmp(dot, ".sock") != 0 || (size_t)(dot - e->d_name) >= sizeof digits) continue;
    snprintf(digits, sizeof digits, "%.*s", (int)(dot - e->d_name), e->d_name);
    if (tool_parse_pid(digits, &pid) && kill(pid, 0) != 0 && errno == ESRCH)
      remove_left_behind(dir, e->d_name);
  }
  closedir(d);
}

int cmd_ps(int argc, char **argv)
{
  static const struct option opts[] = {CTL_TIMEOUT_LONG_OPTION, {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if ((rc = ctl_common_option(c, argv, usage)) >= 0) return rc;
  }
  if (optind < argc) return tool_usage_error("no arguments expected ('%s')", argv[optind]);
  DIR *d = opendir("/proc");
  if (d == NULL) return tool_error("cannot list /proc: %s", strerror(errno));
  printf("%7s  %-9s  %9s  %10s  %s\n", "PID", "STATE", "RATE", "IN USE", "COMMAND");
  fflush(stdout);
  pid_t self = getpid();
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    pid_t pid;
    if (tool_parse_pid(e->d_name, &pid) && pid != self) print_one(pid);
  }
  closedir(d);
  char home[MPROF_CONTROL_PATH_MAX];
  if (mprof_control_dir(NULL, getenv("XDG_RUNTIME_DIR"), (unsigned)geteuid(), home, sizeof home))
    dir_seen(home);
  for (size_t i = 0; i < n_dirs; i++) remove_gone(dirs[i]);
  return EXIT_SUCCESS;
}
