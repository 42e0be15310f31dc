/* lazylib_probe.c - which of zlib, protobuf-c and libm a process maps, before and after it samples and
 * dumps.  Not linked with the library (nor with those three): tests run it with LD_PRELOAD and reach the
 * API with dlsym.  It prints "key value" lines:
 *   stopped_libz 0|1, stopped_libprotobuf-c, stopped_libm     mapped after a malloc, before any start
 *   start 1|0, start_errno E                                  mi_prof_start(0) (errno when it failed)
 *   started_libz ...                                          mapped after the start and one malloc
 *   dump 1|0, dump_errno E                                    mi_prof_dump(PATH)
 *   dumped_libz ...                                           mapped after the dump
 *   stopped_rodata_kib N    resident KiB of the library's read-only data (.rodata, .eh_frame: the
 *                           mapping after its code) after a malloc, before any start; -1 if not found
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

/* The Rss of the mapping that follows libmimalloc-prof's executable one, from /proc/self/smaps. */
static long rodata_kib(void)
{
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[1024];
  int state = 0;                           /* 0: before our code, 1: in it, 2: in the mapping after it */
  long kib = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL && kib < 0) {
    char perms[8] = "";
    bool header = strchr(line, '-') != NULL && sscanf(line, "%*x-%*x %7s", perms) == 1 && strlen(perms) == 4;
    if (header) {
      bool ours = strstr(line, "libmimalloc-prof") != NULL;
      if (state == 1 && ours && strcmp(perms, "r--p") == 0) state = 2;
      else state = ours && strcmp(perms, "r-xp") == 0 ? 1 : 0;
    } else if (state == 2 && strncmp(line, "Rss:", 4) == 0) {
      sscanf(line + 4, "%ld", &kib);
    }
  }
  if (f != NULL) fclose(f);
  return kib;
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
  printf("stopped_rodata_kib %ld\n", rodata_kib());
  errno = 0;
  bool ok = start(0);
  printf("start %d\nstart_errno %d\n", ok, ok ? 0 : errno);
  p = malloc(1000);
  free(p);
  mapped("started");
  errno = 0;
  ok = dump(argv[1]);
  printf("dump %d\ndump_errno %d\n", ok, ok ? 0 : errno);
  mapped("dumped");
  return 0;
}
