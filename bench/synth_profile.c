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
  char *strings[] = {"", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space", "space",
                     argv[1], argv[2]};
  value_type_t vt[4], *vtp[4], period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
  static const int64_t types[4][2] = {{1, 2}, {3, 4}, {5, 2}, {6, 4}};
  for (int i = 0; i < 4; i++) {
    perftools__profiles__value_type__init(&vt[i]);
    vt[i].type = types[i][0];
    vt[i].unit = types[i][1];
    vtp[i] = &vt[i];
  }
  period.type = 7;
  period.unit = 4;
  profile_t h = PERFTOOLS__PROFILES__PROFILE__INIT;
  h.string_table = strings;
  h.n_string_table = 10;
  h.sample_type = vtp;
  h.n_sample_type = 4;
  h.period_type = &period;
  h.period = 524288;
  pbuild_t *b = pbuild_new(&h);
  mapping_t m = PERFTOOLS__PROFILES__MAPPING__INIT;
  uint64_t start = 0x555555554000ull + vaddr;     /* a PIE's load address */
  m.memory_start = start;
  m.memory_limit = start + memsz;
  m.file_offset = offset;
  m.filename = 8;
  m.build_id = 9;
  int64_t delta;
  uint64_t mid = pb_mapping(b, &h, &m, &delta);
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
