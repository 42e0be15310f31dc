/* cxx_names.h - C++ operator new by its Itanium name, so that C tests can call the library's definitions.
 * The names spell size_t's type, MPROF_SIZE_T_MANGLING (config.h): _Znwm where it is unsigned long
 * (amd64, arm64), _Znwj where it is unsigned int (i386). */
#ifndef MPROF_TEST_CXX_NAMES_H
#define MPROF_TEST_CXX_NAMES_H

#include <stddef.h>

#include "config.h"

#define MPROF_CXX_NAME_(head, letter, tail) head##letter##tail
#define MPROF_CXX_NAME(head, letter, tail) MPROF_CXX_NAME_(head, letter, tail)
#define operator_new         MPROF_CXX_NAME(_Znw, MPROF_SIZE_T_MANGLING, )
#define operator_new_array   MPROF_CXX_NAME(_Zna, MPROF_SIZE_T_MANGLING, )
#define operator_new_aligned MPROF_CXX_NAME(_Znw, MPROF_SIZE_T_MANGLING, St11align_val_t)

/* size_t as demangled names spell it: "make(" MPROF_SIZE_T_NAME ")". */
#define MPROF_SIZE_T_NAME_m "unsigned long"
#define MPROF_SIZE_T_NAME_j "unsigned int"
#define MPROF_SIZE_T_NAME   MPROF_CXX_NAME(MPROF_SIZE_T_NAME_, MPROF_SIZE_T_MANGLING, )

void *operator_new(size_t size);
void *operator_new_array(size_t size);
void *operator_new_aligned(size_t size, size_t alignment);

#endif
