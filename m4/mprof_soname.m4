# MPROF_SONAME(MODULE, LIBRARY, DEFAULT, DEFINE, DESCRIPTION)
# Defines DEFINE as a C string: the SONAME of LIBRARY.so in the libdir of pkg-config module MODULE (the
# name the library dlopens), or DEFAULT when it cannot be read.
AC_DEFUN([MPROF_SONAME], [
  mprof_soname_dir=`$PKG_CONFIG --variable=libdir $1 2>/dev/null`
  mprof_soname=`${OBJDUMP:-objdump} -p "$mprof_soname_dir/$2.so" 2>/dev/null | sed -n 's/^ *SONAME *//p'`
  AS_IF([test -z "$mprof_soname"], [mprof_soname=$3])
  AC_DEFINE_UNQUOTED([$4], ["$mprof_soname"], [$5])
])
