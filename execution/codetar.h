/*
 * codetar.h - an execution's code as a tar archive: how the warm path
 * (docs/warm-path.md) hands a claimed sandbox its program, its spec.files
 * and nothing else, through the exec's stdin, for the runner image's
 * `/airlock/bin/run --warm BYTES` to unpack with the image's own tar.
 *
 * POSIX ustar, regular files only, mode 0644, owner 0:0 (a non-root
 * extractor takes its own), mtime 0, no directory entries (tar makes the
 * parents). Paths are relative and were checked by the API server and
 * podspec (no "..", no leading "/", at most 255 bytes); this checks again
 * what the format needs: a path that cannot be stored (too long to split
 * into ustar's 155-byte prefix and 100-byte name, empty, absolute, or
 * with a ".." component) is refused, not mangled.
 */
#ifndef AIRLOCK_CODETAR_H
#define AIRLOCK_CODETAR_H

#include <stddef.h>

#include "buf.h"

#define CODETAR_BLOCK	512

struct codetar_entry {
	const char	*path;
	const char	*data;
	size_t		 len;
};

/*
 * Append the archive of entries e[0..n) to out (whose cap bounds it: a
 * 512-byte header per file, the content padded to 512, and 1024 bytes
 * of end). 0; -1 with *bad the index of a path that cannot be stored;
 * -2 when out's cap is reached.
 */
int codetar_build(const struct codetar_entry *e, size_t n, struct buf *out,
    size_t *bad)
    __attribute__((warn_unused_result));

/* The archive's size for entries e[0..n), to size a buffer or a pipe. */
size_t codetar_size(const struct codetar_entry *e, size_t n);

#endif
