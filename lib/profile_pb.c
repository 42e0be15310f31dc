/* profile_pb.c - the C that protoc-c generates for proto/profile.proto, compiled into the library with
 * its calls into libprotobuf-c made through mprof_lazy (lazylib.h): the library is not linked to
 * libprotobuf-c, which is loaded at the first dump.  Only packing is ever called here (pprof.c). */
#include "lazylib.h"
#include "profile.pb-c.c"
