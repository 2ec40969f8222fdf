/* Small file helpers shared by the loaders. */
#ifndef DSV4_IO_FILEIO_H
#define DSV4_IO_FILEIO_H
#include <stddef.h>

#include "dsv4.h"

/* "dir/name" in a new malloc'd string; NULL if out of memory. */
char *io_join(const char *dir, const char *name);
/* 1 if path names an existing regular file (following links). */
int io_is_file(const char *path);
/* Read a whole regular file into a malloc'd, NUL-terminated buffer. Files
 * larger than max bytes are refused (FORMAT); missing/unreadable => IO. */
dsv4_status io_read_all(const char *path, size_t max, char **out, size_t *len);

#endif
