# MPROF_CHECK_CFLAG(FLAG, ACTION-IF-OK, [ACTION-IF-NOT])
# Compiles an empty program with FLAG added (and -Werror so an ignored flag counts as unsupported).
AC_DEFUN([MPROF_CHECK_CFLAG], [
  AS_VAR_PUSHDEF([mprof_var], [mprof_cv_cflag_$1])
  AC_CACHE_CHECK([whether $CC accepts $1], [mprof_var], [
    mprof_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Werror $1"
    AC_LANG_PUSH([C])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])], [AS_VAR_SET([mprof_var], [yes])],
                      [AS_VAR_SET([mprof_var], [no])])
    AC_LANG_POP([C])
    CFLAGS=$mprof_save_CFLAGS])
  AS_VAR_IF([mprof_var], [yes], [$2], [$3])
  AS_VAR_POPDEF([mprof_var])
])

# MPROF_CHECK_LDFLAG(FLAG, ACTION-IF-OK, [ACTION-IF-NOT])
AC_DEFUN([MPROF_CHECK_LDFLAG], [
  AS_VAR_PUSHDEF([mprof_var], [mprof_cv_ldflag_$1])
  AC_CACHE_CHECK([whether the linker accepts $1], [mprof_var], [
    mprof_save_LDFLAGS=$LDFLAGS
    LDFLAGS="$LDFLAGS $1"
    AC_LANG_PUSH([C])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AS_VAR_SET([mprof_var], [yes])],
                   [AS_VAR_SET([mprof_var], [no])])
    AC_LANG_POP([C])
    LDFLAGS=$mprof_save_LDFLAGS])
  AS_VAR_IF([mprof_var], [yes], [$2], [$3])
  AS_VAR_POPDEF([mprof_var])
])
