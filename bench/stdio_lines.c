/* stdio_lines.c - single-threaded, stdio-heavy: reads a text file a character at a time with getc() and
 * strndup()s each line into a window of WINDOW (4096) lines, the oldest freed as a new one comes in (a
 * log or config reader).  What it measures besides the allocator is glibc's stdio: getc() skips its
 * stream lock while the process is single-threaded (and locks on every character once it is not), so a
 * profiler that starts a thread shows here.
 *
 * Usage: stdio_lines gen FILE LINES   writes LINES lines of 8..120 printable characters (fixed seed)
 *        stdio_lines FILE [LINES]     reads at most LINES lines (default: all); prints lines and a checksum
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW  4096
#define LINEMAX 4096

static int gen(const char *path, long lines)
{
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (long i = 0; i < lines; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int len = 8 + (int)(x % 113);                 /* 8..120 characters, then the newline */
    for (int k = 0; k < len; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      putc(' ' + (int)(x % 95), f);
    }
    putc('\n', f);
  }
  return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
  if (argc >= 4 && strcmp(argv[1], "gen") == 0) return gen(argv[2], atol(argv[3]));
  if (argc < 2) {
    fprintf(stderr, "usage: stdio_lines gen FILE LINES | stdio_lines FILE [LINES]\n");
    return 2;
  }
  long max = argc > 2 ? atol(argv[2]) : -1;
  FILE *f = fopen(argv[1], "r");
  if (f == NULL) {
    perror(argv[1]);
    return 1;
  }
  static char *window[WINDOW];
  char buf[LINEMAX];
  size_t len = 0;
  long lines = 0;
  uint64_t sum = 0;
  int c;
  while (lines != max && (c = getc(f)) != EOF) {
    if (c != '\n' && len < LINEMAX) {
      buf[len++] = (char)c;
      continue;
    }
    if (c != '\n') continue;                      /* an overlong line is cut at LINEMAX */
    char *line = strndup(buf, len);
    if (line == NULL) return 1;
    unsigned slot = (unsigned)(lines % WINDOW);
    if (window[slot] != NULL) sum += (unsigned char)window[slot][0];
    free(window[slot]);
    window[slot] = line;
    len = 0;
    lines++;
  }
  fclose(f);
  for (unsigned i = 0; i < WINDOW; i++) free(window[i]);
  printf("lines=%ld sum=%llu\n", lines, (unsigned long long)(sum & 0xffff));
  return 0;
}
