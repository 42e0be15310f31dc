/* lazylib_probe.c - which of zlib, protobuf-c and libm a process maps, before and after it samples and
 * dumps.  Not linked with the library (nor with those three): tests run it with LD_PRELOAD and reach the
 * API with dlsym.  It prints "key value" lines:
 *   stopped_libz 0|1, stopped_libprotobuf-c, stopped_libm     mapped after a malloc, before any start
 *   start 1|0, start_errno E                                  mi_prof_start(0) (errno when it failed)
 *   started_libz ...                                          mapped after the start and one malloc
 *   dump 1|0, dump_errno E                                    mi_prof_dump(PATH)
 *   dumped_libz ...                                           mapped after the dump
 *   stopped_rodata_kib N    resident KiB of the library's read-only data (.rodata, .eh_frame: the
 *                           mapping after its last code) after a malloc, before any start; -1 if not found
 *   stopped_code_segments N the library's executable mappings (3 when lib/stopped.ld links it), and at
 *   stopped_write_code_kib N   the same moment the resident KiB of the second (the code only writing a
 *   stopped_sampling_code_kib N  profile runs) and of the third (sampling's); -1 where there is none
 *   started_code_segments N, started_write_code_kib N, started_sampling_code_kib N   the same after the
 *                           start and one malloc and free
 * Usage: lazylib_probe PATH */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const libs[] = {"libz.so", "libprotobuf-c.so", "libm.so"};

static void mapped(const char *when)
{
  bool seen[3] = {false, false, false};
  FILE *f = fopen("/proc/self/maps", "r");
  char line[1024];
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    const char *name = strrchr(line, '/');
    for (int i = 0; i < 3 && name != NULL; i++) seen[i] |= strncmp(name + 1, libs[i], strlen(libs[i])) == 0;
  }
  if (f != NULL) fclose(f);
  for (int i = 0; i < 3; i++) printf("%s_%.*s %d\n", when, (int)(strlen(libs[i]) - 3), libs[i], seen[i]);
}

#define MAPPINGS 16

/* libmimalloc-prof's mappings in address order, from /proc/self/smaps: each one's permissions and Rss. */
static int our_mappings(char perms[MAPPINGS][8], long rss_kib[MAPPINGS])
{
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[1024];
  int n = 0;
  bool ours = false;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    char p[8] = "";
    bool header = strchr(line, '-') != NULL && sscanf(line, "%*x-%*x %7s", p) == 1 && strlen(p) == 4;
    if (header) {
      ours = strstr(line, "libmimalloc-prof") != NULL && n < MAPPINGS;
      if (ours) strcpy(perms[n], p), rss_kib[n++] = -1;
    } else if (ours && strncmp(line, "Rss:", 4) == 0) {
      sscanf(line + 4, "%ld", &rss_kib[n - 1]);
    }
  }
  if (f != NULL) fclose(f);
  return n;
}

/* Prints the WHEN_* lines about the library's code (and, stopped, its read-only data). */
static void resident(const char *when)
{
  char perms[MAPPINGS][8];
  long kib[MAPPINGS];
  int n = our_mappings(perms, kib), code = 0, last_code = -1;
  long write = -1, sampling = -1, rodata = -1;
  for (int i = 0; i < n; i++) {
    if (strcmp(perms[i], "r-xp") != 0) continue;
    if (++code == 2) write = kib[i];
    if (code == 3) sampling = kib[i];
    last_code = i;
  }
  if (last_code >= 0 && last_code + 1 < n && strcmp(perms[last_code + 1], "r--p") == 0)
    rodata = kib[last_code + 1];
  if (strcmp(when, "stopped") == 0) printf("stopped_rodata_kib %ld\n", rodata);
  printf("%s_code_segments %d\n", when, code);
  printf("%s_write_code_kib %ld\n%s_sampling_code_kib %ld\n", when, write, when, sampling);
}

int main(int argc, char **argv)
{
  if (argc < 2) return 2;
  bool (*start)(size_t) = (bool (*)(size_t))dlsym(RTLD_DEFAULT, "mi_prof_start");
  bool (*dump)(const char *) = (bool (*)(const char *))dlsym(RTLD_DEFAULT, "mi_prof_dump");
  if (start == NULL || dump == NULL) return 3;
  void *volatile p = malloc(1000);
  free(p);
  mapped("stopped");
  resident("stopped");
  errno = 0;
  bool ok = start(0);
  printf("start %d\nstart_errno %d\n", ok, ok ? 0 : errno);
  p = malloc(1000);
  free(p);
  mapped("started");
  resident("started");
  errno = 0;
  ok = dump(argv[1]);
  printf("dump %d\ndump_errno %d\n", ok, ok ? 0 : errno);
  mapped("dumped");
  return 0;
}
