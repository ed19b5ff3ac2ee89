/* LD_PRELOAD shim that models a power cut: only what was fsync'ed survives.
 *
 * For a regular file under $FSYNC_SHIM_WATCH, fsync() and fdatasync() first copy the file's whole
 * current content to $FSYNC_SHIM_SHADOW/<basename> (through a temporary file and rename, so a copy
 * is never seen half-written), then call the real function. After the process is killed, the
 * shadow directory holds exactly the state a disk would have kept had the power gone at that
 * moment: each file as of its last sync, and nothing of the writes after it. A program that skips
 * a sync it needs therefore loses data in the shadow even though the page cache kept it.
 *
 * sync_file_range() is deliberately not treated as durable (it flushes no metadata and no disk
 * cache); SQLite does not call it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void copy_to_shadow(int fd) {
    const char *watch = getenv("FSYNC_SHIM_WATCH");
    const char *shadow = getenv("FSYNC_SHIM_SHADOW");
    if (!watch || !shadow) return;

    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = '\0';
    size_t wlen = strlen(watch);
    if (strncmp(path, watch, wlen) != 0 || path[wlen] != '/') return;

    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return; /* directories: nothing to copy */

    const char *base = strrchr(path, '/') + 1;
    char dst[PATH_MAX], tmp[PATH_MAX];
    snprintf(dst, sizeof dst, "%s/%s", shadow, base);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", shadow, base);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) abort(); /* a shadow we cannot write would make the test lie: stop loudly */
    char buf[1 << 16];
    off_t off = 0;
    ssize_t got;
    while ((got = pread(fd, buf, sizeof buf, off)) > 0) {
        if (write(out, buf, (size_t)got) != got) abort();
        off += got;
    }
    if (got < 0) abort();
    close(out);
    if (rename(tmp, dst) != 0) abort();
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    copy_to_shadow(fd);
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    copy_to_shadow(fd);
    return real(fd);
}
