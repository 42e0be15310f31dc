/* synth_profile.c - writes a heap profile with N distinct locations spread evenly over the executable
 * segment of an ELF file, for timing `mimalloc-prof symbolize` (bench/symbolize.sh).  N/10 samples of
 * 10 frames each, every location used once.
 *   synth_profile FILE BUILD_ID FILE_OFFSET VADDR MEMSZ N OUT
 */
#include "tool.h"

#include <stdlib.h>

int main(int argc, char **argv)
{
  if (argc != 8) {
    fprintf(stderr, "usage: synth_profile FILE BUILD_ID FILE_OFFSET VADDR MEMSZ N OUT\n");
    return 2;
  }
  uint64_t offset = strtoull(argv[3], NULL, 0), vaddr = strtoull(argv[4], NULL, 0), memsz = strtoull(argv[5], NULL, 0);
  size_t n = strtoull(argv[6], NULL, 0);
  pbuild_t *b = pbuild_new_heap(524288);
  if (b == NULL) return 1;
  mapping_t m = PERFTOOLS__PROFILES__MAPPING__INIT;
  profile_t mp = PERFTOOLS__PROFILES__PROFILE__INIT;    /* the mapping's strings */
  char *mstrings[] = {"", argv[1], argv[2]};
  mp.string_table = mstrings;
  mp.n_string_table = 3;
  uint64_t start = 0x555555554000ull + vaddr;     /* a PIE's load address */
  m.memory_start = start;
  m.memory_limit = start + memsz;
  m.file_offset = offset;
  m.filename = 1;
  m.build_id = 2;
  int64_t delta;
  uint64_t mid = pb_mapping(b, &mp, &m, &delta);
  for (size_t s = 0; s < n / 10; s++) {
    uint64_t ids[10];
    for (size_t k = 0; k < 10; k++) ids[k] = pb_location(b, mid, start + (s * 10 + k) * (memsz / n), NULL, 0);
    int64_t v[4] = {1, 4096, 1, 4096};
    pb_sample(b, ids, 10, v, 1);
  }
  char err[512];
  if (profile_write(pbuild_profile(b), argv[7], err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  pbuild_free(b);
  return 0;
}
