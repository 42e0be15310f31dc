/* cli.c - messages and option values shared by the subcommands.
 *
 * Every message is one line on stderr, "mimalloc-prof CMD: what was wrong"; a usage error adds a second
 * line pointing to --help, and the command exits with 2.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *tool_cmd;

static void vmessage(const char *fmt, va_list ap)
{
  fprintf(stderr, "mimalloc-prof%s%s: ", tool_cmd ? " " : "", tool_cmd ? tool_cmd : "");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int tool_usage_error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
  fprintf(stderr, "Try 'mimalloc-prof %s%s--help'.\n", tool_cmd ? tool_cmd : "", tool_cmd ? " " : "");
  return EXIT_USAGE;
}

int tool_error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
  return EXIT_FAILURE;
}

void tool_note(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmessage(fmt, ap);
  va_end(ap);
}

int tool_getopt_error(int c, char *const *argv)
{
  const char *arg = argv[optind - 1];
  if (c == ':') {
    if (optopt != 0 && optopt < 0x100 && strncmp(arg, "--", 2) != 0)
      return tool_usage_error("option -%c needs a value", optopt);
    return tool_usage_error("option %s needs a value", arg);
  }
  if (optopt != 0 && optopt < 0x100 && strncmp(arg, "--", 2) != 0)
    return tool_usage_error("unknown option -%c", optopt);
  return tool_usage_error("unknown option %s", arg);
}

bool tool_parse_count(const char *text, long min, long max, long *out)
{
  if (text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char *end;
  long v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

int tool_one_profile(int argc, char *const *argv, const char *more)
{
  if (optind == argc) return tool_usage_error("no profile given");
  if (optind + 1 < argc)
    return tool_usage_error("one profile at a time ('%s' is one too many%s)", argv[optind + 1], more);
  return 0;
}

int tool_help(const char *text)
{
  fputs(text, stdout);
  return EXIT_SUCCESS;
}

const char *tool_bytes(int64_t bytes, char *buf, size_t len)
{
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  uint64_t mag = bytes < 0 ? -(uint64_t)bytes : (uint64_t)bytes;   /* INT64_MIN has no int64_t opposite */
  double v = (double)mag;
  const char *sign = bytes < 0 ? "-" : "";
  size_t u = 0;
  while (v >= 1024 && u < 5) v /= 1024, u++;
  if (u == 0) snprintf(buf, len, "%s%llu B", sign, (unsigned long long)mag);
  else if (v < 9.995) snprintf(buf, len, "%s%.2f %s", sign, v, unit[u]);
  else if (v < 99.95) snprintf(buf, len, "%s%.1f %s", sign, v, unit[u]);
  else snprintf(buf, len, "%s%.0f %s", sign, v, unit[u]);
  return buf;
}

const char *tool_count(int64_t n, char *buf, size_t len)
{
  char digits[32];
  int d = snprintf(digits, sizeof digits, "%llu", (unsigned long long)(n < 0 ? -(uint64_t)n : (uint64_t)n));
  size_t o = 0;
  if (n < 0 && o + 1 < len) buf[o++] = '-';
  for (int i = 0; i < d && o + 1 < len; i++) {
    if (i > 0 && (d - i) % 3 == 0 && o + 1 < len) buf[o++] = ',';
    if (o + 1 < len) buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}
