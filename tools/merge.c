/* merge.c - `mimalloc-prof merge`: several profiles as one, such as the per-process profiles of one
 * program (pbuild.c says how parts are matched: pprof's rules). */
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>

static const char usage[] =
  "usage: mimalloc-prof merge -o OUT FILE...\n"
  "Merge heap profiles (such as one per process of a program) into OUT: values of equal stacks add\n"
  "up.  The profiles must have the same sample types.\n"
  "See mimalloc-prof(1).\n";

int cmd_merge(int argc, char **argv)
{
  static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                       {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  const char *out = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
    if (c == 'h') return tool_help(usage);
    if (c == 'o') out = optarg;
    else return tool_getopt_error(c, argv);
  }
  if (out == NULL) return tool_usage_error("no output given (-o OUT)");
  if (optind == argc) return tool_usage_error("no profiles given");
  char err[512], why[512];
  pbuild_t *b = NULL;
  profile_t *first = NULL;
  int rc = EXIT_SUCCESS;
  for (int i = optind; i < argc && rc == EXIT_SUCCESS; i++) {
    profile_t *p = profile_read(argv[i], err, sizeof err);
    if (p == NULL) {
      rc = tool_error("%s", err);
      break;
    }
    if (b == NULL) {                       /* several processes: no one peak or timeline (peak.c) */
      profile_t h;
      int64_t *kept = NULL;
      b = pbuild_new(argc - optind > 1 ? heap_header_alone(p, &h, &kept) : p);
      free(kept);
      first = p;
    } else if (!profile_compatible(first, p, why, sizeof why)) {
      rc = tool_error("%s and %s cannot be merged: %s", argv[optind], argv[i], why);
    } else {
      pb_keep_max_period(b, p);
    }
    if (rc == EXIT_SUCCESS && (b == NULL || !pb_add_profile(b, p, 1))) rc = tool_error("out of memory");
    if (p != first) profile_free(p);
  }
  if (rc == EXIT_SUCCESS) {
    char note[64];
    snprintf(note, sizeof note, "merged from %d profiles by mimalloc-prof merge", argc - optind);
    pb_comment(b, note);
    if (profile_write(pbuild_profile(b), out, err, sizeof err) != 0) rc = tool_error("%s", err);
  }
  pbuild_free(b);
  profile_free(first);
  return rc;
}
