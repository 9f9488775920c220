#!/bin/sh
# Runs a test program with a /run of its own: a tmpfs in a private mount
# namespace, so that it may start the system gpulimitd on its fixed paths
# (/run/gpulimit/...) without touching the machine's, and beside other such
# tests. Needs root; without it the program runs as is, told so by
# GPULIMIT_TEST_NO_PRIVATE_RUN=1, and skips what needs the namespace.
if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
  exec unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o mode=0755 tmpfs /run && exec "$@"' sh "$@"
fi
GPULIMIT_TEST_NO_PRIVATE_RUN=1 exec "$@"
