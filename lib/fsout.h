/* fsout.h - everything the library creates or removes in the file system (the rules: fsout.c).  No
 * function here allocates; all set errno on failure.
 *
 * A profile is written to o->fd between one of the openings and mprof_fsout_end: mprof_fsout_create makes
 * a temporary file `<stem>.<16 hex digits>.tmp` in the directory of `prefix` (its last component is not
 * used), to be published under a name of that directory; mprof_fsout_open_path opens the path the
 * program named: in place when it exists (never through a symbolic link: ELOOP), else as a temporary
 * file beside it, to be published under its name.  mprof_fsout_publish renames the temporary file to
 * `name` in the directory, replacing what is there only with `replace` (else -1 with EEXIST: the caller
 * tries another name); nothing to do in place.  mprof_fsout_close closes o->fd (close(2)'s result);
 * mprof_fsout_end closes what is open and removes the temporary file if it was not published. */
#ifndef MPROF_FSOUT_H
#define MPROF_FSOUT_H

#include "internal.h"
#include <sys/types.h>

typedef struct mprof_fsout_s {
  int   dir;                    /* the directory, O_PATH; -1: none */
  int   fd;                     /* the file being written; -1: none */
  bool  in_place;               /* fd is the existing file the program named */
  char  tmp[256];               /* the temporary file's name in dir; "" when none is left to remove */
  dev_t tmp_dev;                /* and its identity, checked before removing it */
  ino_t tmp_ino;
} mprof_fsout_t;

bool mprof_fsout_create(mprof_fsout_t *o, const char *prefix, const char *stem);
bool mprof_fsout_open_path(mprof_fsout_t *o, const char *path);
int  mprof_fsout_publish(mprof_fsout_t *o, const char *name, bool replace);
int  mprof_fsout_close(mprof_fsout_t *o);
void mprof_fsout_end(mprof_fsout_t *o);
/* Whether `name` in `dir` is, without following a link, of `type` (S_IFREG, S_IFSOCK) and owned by our
 * effective user; the removal of such a name only (unlinkat).  Retention and the control socket. */
bool mprof_fsout_is_own(int dir, const char *name, unsigned type);
bool mprof_fsout_remove_own(int dir, const char *name, unsigned type);
/* The control socket's directory `path`: made 0700 if missing, opened without following a link (O_PATH)
 * and checked: a directory of our effective user, closed to others (`named`, MIMALLOC_PROF_CONTROL's: to
 * others' writing).  Its descriptor; or -1 with *why ("is not a directory", ...; "cannot be created" with
 * mkdir's errno). */
int  mprof_fsout_private_dir(const char *path, bool named, const char **why);
/* Binds `sock` to `name` inside the checked directory `dir` (whose path is dir_path), after removing a
 * socket of ours left there; mode 0600.  Anything else at name stays: EADDRINUSE. */
bool mprof_fsout_bind(int sock, int dir, const char *dir_path, const char *name);
/* Removes the socket `name` of ours from the directory dir_path (not through a link), at exit. */
void mprof_fsout_unbind(const char *dir_path, const char *name);

#endif /* MPROF_FSOUT_H */
