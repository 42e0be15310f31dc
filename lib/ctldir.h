/* ctldir.h - where control sockets are (shared with the mimalloc-prof command, which compiles it in).
 * dir: MIMALLOC_PROF_CONTROL's directory, NULL for the default ($XDG_RUNTIME_DIR/mimalloc-prof, else
 * /tmp/mimalloc-prof-UID); the socket is DIR/PID.sock, at most MPROF_CONTROL_PATH_MAX - 1 bytes (false:
 * too long). */
#ifndef MPROF_CTLDIR_H
#define MPROF_CTLDIR_H

#include "internal.h"

#define MPROF_CONTROL_PATH_MAX 108            /* sockaddr_un's sun_path, its NUL included */
bool mprof_control_dir(const char *dir, const char *xdg_runtime_dir, unsigned uid, char *out, size_t len);
bool mprof_control_socket(const char *dir, int pid, char *out, size_t len);

#endif /* MPROF_CTLDIR_H */
