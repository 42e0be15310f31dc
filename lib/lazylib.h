/* lazylib.h - the libraries the library loads when it first needs them: zlib and protobuf-c, for heap
 * profiles (lazylib.c).
 *
 * A file that calls them includes this after its other headers: the names it calls (declared by
 * <zlib.h> and <protobuf-c/protobuf-c.h>, which this includes first) become calls through
 * mprof_lazy, filled by mprof_lazy_load() (lazyload.h).  The generated protobuf-c code is compiled the
 * same way (profile_pb.c).
 */
#ifndef MPROF_LAZYLIB_H
#define MPROF_LAZYLIB_H

#include "internal.h"

#include <protobuf-c/protobuf-c.h>
#include <zlib.h>

typedef struct mprof_lazy_s {
  __typeof__(&deflateInit2_)                      z_deflate_init2;
  __typeof__(&deflate)                            z_deflate;
  __typeof__(&deflateEnd)                         z_deflate_end;
  __typeof__(&protobuf_c_message_pack_to_buffer)  pb_pack_to_buffer;
  __typeof__(&protobuf_c_message_pack)            pb_pack;
  __typeof__(&protobuf_c_message_get_packed_size) pb_packed_size;
  __typeof__(&protobuf_c_message_unpack)          pb_unpack;
  __typeof__(&protobuf_c_message_free_unpacked)   pb_free_unpacked;
} mprof_lazy_t;

extern mprof_lazy_t mprof_lazy MPROF_HIDDEN;
extern const char mprof_lazy_empty_string[] MPROF_HIDDEN;

#endif /* MPROF_LAZYLIB_H */

#ifndef MPROF_LAZYLIB_IMPL
#define deflateInit2_(...)                       mprof_lazy.z_deflate_init2(__VA_ARGS__)
#define deflate(...)                             mprof_lazy.z_deflate(__VA_ARGS__)
#define deflateEnd(...)                          mprof_lazy.z_deflate_end(__VA_ARGS__)
#define protobuf_c_message_pack_to_buffer(...)   mprof_lazy.pb_pack_to_buffer(__VA_ARGS__)
#define protobuf_c_message_pack(...)             mprof_lazy.pb_pack(__VA_ARGS__)
#define protobuf_c_message_get_packed_size(...)  mprof_lazy.pb_packed_size(__VA_ARGS__)
#define protobuf_c_message_unpack(...)           mprof_lazy.pb_unpack(__VA_ARGS__)
#define protobuf_c_message_free_unpacked(...)    mprof_lazy.pb_free_unpacked(__VA_ARGS__)
#define protobuf_c_empty_string                  mprof_lazy_empty_string
#endif
