/* ctl.c - `mimalloc-prof ctl PID REQUEST`: start, stop or reset sampling in a running process, print its
 * statistics, or take a heap profile of it, through its control socket (client.c; the library's side is
 * lib/control.c).
 */
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "options.h"

static const char usage[] =
  "usage: mimalloc-prof ctl [--timeout SECONDS] PID start [RATE] | stop | reset | stats\n"
  "       mimalloc-prof ctl [--timeout SECONDS] PID dump -o FILE [--no-symbolize]\n"
  "Control the heap profiling of a running process through its control socket (the process runs with\n"
  "libmimalloc-prof and MIMALLOC_PROF_CONTROL=1).\n"
  "  start [RATE]   start sampling, one allocation per RATE bytes on average (default: the process's\n"
  "                 MIMALLOC_PROF_SAMPLE_RATE, else 524288; k, m, g suffixes)\n"
  "  stop           stop sampling; what the session recorded stays, and dumps show it, until the next\n"
  "                 start or reset (each says what it discards)\n"
  "  reset          sampling: restart the allocated totals (alloc_space, alloc_objects) and the peak\n"
  "                 from 0; stopped: discard what the stopped session kept\n"
  "  stats          print the process's statistics, one \"key value\" line each\n"
  "  dump -o FILE   write a heap profile of the process to FILE, symbolized (unless --no-symbolize)\n"
  "  --timeout SECONDS  give up when the process has not answered within this time (default 10)\n"
  "Exit status: 0 done; 1 the process refused, could not be asked, did not answer in time, or is not\n"
  "the process asked (its socket answers for another); 2 usage error.\n"
  "See mimalloc-prof(1).\n";

/* "  discarded WHAT: 12 live samples (1.50 MiB in use), 40 samples (5.00 MiB allocated), peak 2.00 MiB,
 * 9 stack traces", the parts the reply has that are not 0; nothing when everything is 0. */
static void print_discarded(const ctl_reply_t *r, const char *what)
{
  static const char *const keys[] = {"discarded_live_samples", "discarded_inuse_bytes", "discarded_samples",
                                     "discarded_alloc_bytes", "discarded_peak_bytes", "discarded_stacks"};
  uint64_t v[6] = {0};
  bool any = false;
  for (size_t i = 0; i < 6; i++) any |= ctl_reply_number(r, keys[i], &v[i]) && v[i] != 0;
  if (!any) return;
  char a[32], b[32], c[32], d[32], e[32], f[32];
  printf("  discarded %s: %s live samples (%s in use), %s samples (%s allocated), peak %s, %s stack traces\n",
         what, tool_count((int64_t)v[0], a, sizeof a), tool_bytes((int64_t)v[1], b, sizeof b),
         tool_count((int64_t)v[2], c, sizeof c), tool_bytes((int64_t)v[3], d, sizeof d),
         tool_bytes((int64_t)v[4], e, sizeof e), tool_count((int64_t)v[5], f, sizeof f));
}

static void print_stopped(pid_t pid, const ctl_reply_t *r)
{
  uint64_t live = 0, inuse = 0, samples = 0, alloc = 0;
  ctl_reply_number(r, "kept_live_samples", &live);
  ctl_reply_number(r, "kept_inuse_bytes", &inuse);
  ctl_reply_number(r, "kept_samples", &samples);
  ctl_reply_number(r, "kept_alloc_bytes", &alloc);
  char a[32], b[32], c[32], d[32];
  printf("process %d: sampling stopped; kept %s live samples (%s in use) and %s samples (%s allocated): "
         "dumps\n  show them until the next start or reset\n", (int)pid,
         tool_count((int64_t)live, a, sizeof a), tool_bytes((int64_t)inuse, b, sizeof b),
         tool_count((int64_t)samples, c, sizeof c), tool_bytes((int64_t)alloc, d, sizeof d));
}

int cmd_ctl(int argc, char **argv)
{
  enum { OPT_NOSYM = 0x200 };
  static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                       {"no-symbolize", no_argument, NULL, OPT_NOSYM},
                                       CTL_TIMEOUT_LONG_OPTION, {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *out = NULL;
  bool symbolize = true;
  int c, rc;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case OPT_NOSYM: symbolize = false; break;
    default:
      if ((rc = ctl_common_option(c, argv, usage)) >= 0) return rc;
    }
  }
  pid_t pid;
  if (optind == argc) return tool_usage_error("no process ID given");
  if (!tool_parse_pid(argv[optind], &pid)) return tool_usage_error("'%s' is not a process ID", argv[optind]);
  if (optind + 1 == argc) return tool_usage_error("no request given (start, stop, reset, stats or dump)");
  const char *what = argv[optind + 1], *rate = optind + 2 < argc ? argv[optind + 2] : NULL;
  bool is_start = strcmp(what, "start") == 0, is_dump = strcmp(what, "dump") == 0;
  if (!is_start && !is_dump && strcmp(what, "stop") != 0 && strcmp(what, "reset") != 0 &&
      strcmp(what, "stats") != 0)
    return tool_usage_error("unknown request '%s' (start, stop, reset, stats or dump)", what);
  if (optind + 2 + (is_start ? 1 : 0) < argc)
    return tool_usage_error("'%s' is one argument too many", argv[optind + 2 + (is_start ? 1 : 0)]);
  if (is_dump != (out != NULL))
    return tool_usage_error(is_dump ? "dump needs -o FILE" : "-o is for dump only");
  if (!symbolize && !is_dump) return tool_usage_error("--no-symbolize is for dump only");
  char text[MPROF_CONTROL_MAX_REQUEST + 1], err[1024], why[256];
  if (rate != NULL) {
    uint64_t v;
    if (mprof_option_parse("MIMALLOC_PROF_SAMPLE_RATE", rate, &v, why, sizeof why) != 1)
      return tool_usage_error("RATE '%s' %s", rate, why);
    snprintf(text, sizeof text, "start %llu", (unsigned long long)v);
  } else {
    snprintf(text, sizeof text, "%s", what);
  }

  if (is_dump) {
    if (ctl_dump_file(pid, out, symbolize, err, sizeof err) != 0) return tool_error("%s", err);
    printf("process %d: heap profile written to %s\n", (int)pid, out);
    return EXIT_SUCCESS;
  }
  ctl_reply_t r;
  if (ctl_request(pid, text, &r, err, sizeof err) != 0) return tool_error("%s", err);
  rc = EXIT_SUCCESS;
  if (!r.ok) {
    rc = tool_error("process %d: %s", (int)pid, ctl_reply_error(&r, why, sizeof why));
  } else if (strcmp(what, "stats") == 0) {
    tool_write_escaped(stdout, r.data, r.data_len, true);
  } else if (is_start) {
    uint64_t v = 0;
    ctl_reply_number(&r, "sample_rate", &v);
    printf("process %d: sampling, one allocation per %llu bytes on average\n", (int)pid,
           (unsigned long long)v);
    print_discarded(&r, "the stopped session's data");
  } else if (strcmp(what, "stop") == 0) {
    print_stopped(pid, &r);
  } else if (strstr((const char *)r.data, "state stopped\n") != NULL) {
    printf("process %d: sampling is stopped; its kept data is discarded\n", (int)pid);
    print_discarded(&r, "the stopped session's data");
  } else {
    printf("process %d: allocated totals and peak reset; live samples kept\n", (int)pid);
    print_discarded(&r, "the totals so far");
  }
  ctl_reply_free(&r);
  return rc;
}
