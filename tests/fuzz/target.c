/* target.c - the fuzz targets of the mimalloc-prof command: one per entry point that reads a profile.
 * Compiled once per target, named by MPROF_FUZZ_TARGET:
 *   decode     profile_read (gzip-compressed or not), then every lookup by id the commands make
 *   top        top FILE, top --lines --fold-alloc --sort cum -s alloc_space --focus . --stderr FILE, and
 *              the label and lifetime views: top --by thread --tag bytes=1-1m FILE, top --temporary FILE
 *   tree       tree FILE, and tree --callees --min 0 --lines --stderr --full-names FILE
 *   flame      flame -o /dev/null FILE
 *   folded     folded FILE
 *   diff       diff BASE NEW, and diff --sort cum --lines --noise 3 BASE NEW, of the two profiles the
 *              input holds (see split())
 *   merge      merge -o /dev/null A B, likewise
 *   symbolize  symbolize -q -o /dev/null FILE, with no debuginfod and files that do not exist
 *   timeline   timeline FILE, and timeline -o /dev/null FILE (the SVG)
 * The commands run in this process, as main() would run them, on a memfd holding the input
 * (/proc/self/fd/N): the whole command is what is fuzzed, with nothing changed for it.
 *
 * LLVMFuzzerTestOneInput is libFuzzer's entry point: link this file with clang -fsanitize=fuzzer for long
 * runs (tests/fuzz/libfuzzer.sh), or with driver.c for the bounded runs of make check.
 */
#define _GNU_SOURCE
#include "tool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MPROF_FUZZ_TARGET
#error "MPROF_FUZZ_TARGET names the target (decode, top, tree, flame, folded, diff, merge, symbolize, timeline)"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int  files[2] = {-1, -1};       /* memfds */
static char paths[2][64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  unsetenv("DEBUGINFOD_URLS");          /* symbolize asks no server */
  unsetenv("MIMALLOC_PROF_READ_LIMIT"); /* the default limits */
  for (int i = 0; i < 2; i++) {
    files[i] = memfd_create("mprof-fuzz", MFD_CLOEXEC);
    if (files[i] < 0) abort();
    snprintf(paths[i], sizeof paths[i], "/proc/self/fd/%d", files[i]);
  }
  return 0;
}

/* Makes memfd i hold data[0..size). */
static void hold(int i, const uint8_t *data, size_t size)
{
  if (ftruncate(files[i], 0) != 0) abort();
  for (size_t done = 0; done < size;) {
    ssize_t w = pwrite(files[i], data + done, size - done, (off_t)done);
    if (w <= 0) abort();
    done += (size_t)w;
  }
}

/* The two profiles of diff and merge: the first 4 bytes give the first one's length (little-endian,
 * modulo what follows), the rest is the second. */
static void split(const uint8_t *data, size_t size)
{
  uint32_t n = 0;
  if (size >= 4) {
    n = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    data += 4, size -= 4;
    n = size ? (uint32_t)(n % (size + 1)) : 0;
  }
  hold(0, data, n);
  hold(1, data + n, size - n);
}

/* A subcommand as main() runs it: argv[0] its name, then args (NULL-terminated, at most 14). */
static void run(int (*cmd)(int, char **), const char *name, const char *const *args)
{
  char *argv[16] = {(char *)name};
  int argc = 1;
  while (args[argc - 1] != NULL) argv[argc] = (char *)args[argc - 1], argc++;
  tool_cmd = name;
  cmd(argc, argv);
}

/* decode: the reader, and the lookups the commands make of what it read. */
static void decode(void)
{
  static volatile size_t sink;            /* what was read, so that every part is touched */
  char err[512];
  profile_t *p = profile_read(paths[0], err, sizeof err);
  if (p == NULL) return;
  pindex_t ix;
  pindex_init(&ix, p);
  for (size_t i = 0; i < p->n_sample; i++) {
    for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
      sink += pindex_location_pos(&ix, p->sample[i]->location_id[k]);
  }
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    for (size_t j = 0; j < l->n_line; j++) {
      const function_t *f = pindex_function(&ix, l->line[j]->function_id);
      if (f != NULL) sink += strlen(pstr(p, f->name)) + strlen(pstr(p, f->filename));
    }
    const mapping_t *m = pindex_mapping(&ix, l->mapping_id);
    if (m != NULL) sink += strlen(profile_mapping_base(p, m)) + strlen(pstr(p, m->build_id));
  }
  pindex_free(&ix);
  profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (files[0] < 0) LLVMFuzzerInitialize(NULL, NULL);
  const char *target = MPROF_FUZZ_TARGET;
  if (strcmp(target, "diff") == 0 || strcmp(target, "merge") == 0) split(data, size);
  else hold(0, data, size);
  const char *p = paths[0], *q = paths[1];
  if (strcmp(target, "decode") == 0) {
    decode();
  } else if (strcmp(target, "top") == 0) {
    run(cmd_top, "top", (const char *[]){p, NULL});
    run(cmd_top, "top", (const char *[]){"--lines", "--fold-alloc", "--sort", "cum", "-s", "alloc_space",
                                         "--focus", ".", "--stderr", p, NULL});
    run(cmd_top, "top", (const char *[]){"--by", "thread", "--tag", "bytes=1-1m", p, NULL});
    run(cmd_top, "top", (const char *[]){"--temporary", p, NULL});
  } else if (strcmp(target, "tree") == 0) {
    run(cmd_tree, "tree", (const char *[]){p, NULL});
    run(cmd_tree, "tree", (const char *[]){"--callees", "--min", "0", "--lines", "--stderr", "--full-names", p,
                                           NULL});
  } else if (strcmp(target, "flame") == 0) {
    run(cmd_flame, "flame", (const char *[]){"-o", "/dev/null", p, NULL});
  } else if (strcmp(target, "folded") == 0) {
    run(cmd_folded, "folded", (const char *[]){p, NULL});
  } else if (strcmp(target, "diff") == 0) {
    run(cmd_diff, "diff", (const char *[]){p, q, NULL});
    run(cmd_diff, "diff", (const char *[]){"--sort", "cum", "--lines", "--noise", "3", p, q, NULL});
  } else if (strcmp(target, "merge") == 0) {
    run(cmd_merge, "merge", (const char *[]){"-o", "/dev/null", p, q, NULL});
  } else if (strcmp(target, "symbolize") == 0) {
    run(cmd_symbolize, "symbolize", (const char *[]){"-q", "-o", "/dev/null", p, NULL});
  } else if (strcmp(target, "timeline") == 0) {
    run(cmd_timeline, "timeline", (const char *[]){p, NULL});
    run(cmd_timeline, "timeline", (const char *[]){"-o", "/dev/null", p, NULL});
  } else {
    abort();
  }
  fflush(stdout);
  return 0;
}
