/* warn.h - the library's lines on stderr: a warning, a warning without formatting, once-only flags. */
#ifndef MPROF_WARN_H
#define MPROF_WARN_H

#include "internal.h"

void mprof_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mprof_warn_strs(const char *s, ...) __attribute__((sentinel));   /* no formatting: small stacks */
bool mprof_warn_once_claim(int *flag);

#endif /* MPROF_WARN_H */
