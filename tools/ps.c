/* ps.c - `mimalloc-prof ps`: the processes that offer a control socket, with their state.
 *
 * Every process whose environment we may read (our user's; every process for root) and that started with
 * MIMALLOC_PROF_CONTROL enabled is looked at: when its socket exists, it is asked for its statistics
 * (client.c).  A process that started with the variable but has no socket (it does not run the library,
 * as the shell that exported the variable) is not listed; one whose socket does not answer is listed as
 * such.  Every request is bounded by --timeout (client.c), so a stuck process costs ps that long at most.
 */
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"   /* MPROF_CONTROL_PATH_MAX */

static const char usage[] =
  "usage: mimalloc-prof ps [--timeout SECONDS]\n"
  "List the processes that offer a control socket (MIMALLOC_PROF_CONTROL=1): process ID, whether they\n"
  "sample and at what rate, their estimated bytes in use, and their command line.\n"
  "  --timeout SECONDS  a process that has not answered within this time is \"no answer\" (default 10)\n"
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

static void print_one(pid_t pid)
{
  char path[MPROF_CONTROL_PATH_MAX], why[512], err[1024];
  struct stat st;
  if (ctl_socket_path(pid, path, sizeof path, why, sizeof why) != 0 || stat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
    return;
  ctl_reply_t r;
  char state[32] = "no answer", rate[32] = "-", inuse[32] = "-", v[32];
  if (ctl_request(pid, "stats", &r, err, sizeof err) == 0) {
    if (r.ok && stat_value(&r, "state", state, sizeof state) != NULL && strcmp(state, "sampling") == 0) {
      if (stat_value(&r, "sample_rate", v, sizeof v) != NULL) tool_bytes(strtoll(v, NULL, 10), rate, sizeof rate);
      if (stat_value(&r, "inuse_bytes", v, sizeof v) != NULL) tool_bytes(strtoll(v, NULL, 10), inuse, sizeof inuse);
    } else if (!r.ok) {
      snprintf(state, sizeof state, "error");
    }
    ctl_reply_free(&r);
  }
  char *cmd = ctl_command_line(pid);
  printf("%7d  %-9s  %9s  %10s  %s\n", (int)pid, state, rate, inuse, cmd);
  free(cmd);
}

int cmd_ps(int argc, char **argv)
{
  static const struct option opts[] = {CTL_TIMEOUT_LONG_OPTION, {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c != CTL_OPT_TIMEOUT) return tool_getopt_error(c, argv);
    if ((rc = ctl_timeout_option(optarg)) != 0) return rc;
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
  return EXIT_SUCCESS;
}
