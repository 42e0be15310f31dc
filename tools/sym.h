/* sym.h - between symbolize.c (the profile side) and dwarf.c (finding files, elfutils lookups). */
#ifndef MPROF_TOOL_SYM_H
#define MPROF_TOOL_SYM_H

#include "tool.h"

/* Why an object gave no names (the first that applies). */
typedef enum sym_status_e {
  SYM_FOUND,                    /* a file with symbols or debug information */
  SYM_NO_FILE,                  /* no file at the path, none with the build ID */
  SYM_MISMATCH,                 /* the file at the path has another build ID, none with the right one */
  SYM_NO_SYMBOLS,               /* found, but without symbol table or debug information */
  SYM_NOT_ELF,                  /* the file is not an ELF object, or its segments do not match */
  SYM_NOT_REGULAR,              /* something else is at the path (a FIFO, a device...: never opened), and no
                                   file has the build ID */
} sym_status_t;

typedef struct sym_obj_s sym_obj_t;

/* One frame of a symbolized address, innermost first.  Strings belong to the object (name and
 * system_name to the caller when allocated: free_name says so). */
typedef struct sym_frame_s {
  const char *name;             /* demangled */
  const char *system_name;      /* as in the file (mangled) */
  const char *file;             /* source file, "" unknown */
  int         line;             /* 0 unknown */
  const char *decl_file;        /* where the function is declared */
  int         decl_line;
  char       *owned;            /* the demangled name's memory, freed by sym_frames_free */
} sym_frame_t;

/* Opens the object of a mapping: the file at `path` when its build ID is `build_id` (hex; "" = any),
 * else one found by build ID (debug directories, then debuginfod).  NULL with *status set when none
 * has symbols; `found`, when not NULL, receives the file used or the build ID found at the path. */
sym_obj_t *sym_obj_open(const char *path, const char *build_id, const sym_opts_t *o, sym_status_t *status,
                        char *detail, size_t detail_len);
void       sym_obj_close(sym_obj_t *obj);

/* What the object can tell: function names; files and lines; inlined frames. */
void sym_obj_caps(const sym_obj_t *obj, bool *functions, bool *lines, bool *inlines);

/* The address in the object's own terms for `address` inside mapping `m`; false when the mapping's
 * file offset is in none of the object's loadable segments. */
bool sym_obj_addr(const sym_obj_t *obj, const mapping_t *m, uint64_t address, uint64_t *file_addr);

/* The frames of `file_addr`, innermost first (inlined functions, then the function that contains
 * them); 0 when no symbol or debug information covers it. */
size_t sym_obj_lookup(sym_obj_t *obj, uint64_t file_addr, sym_frame_t *frames, size_t max);
void   sym_frames_free(sym_frame_t *frames, size_t n);

/* The end of symbolization (closes the debuginfod client). */
void sym_finish(void);

#endif
