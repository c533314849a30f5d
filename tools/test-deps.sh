#!/usr/bin/env bash
# Debian packages some tests need: fuse and libfuse2 for the real FUSE mount of
# tests/test_hffuse.py (they skip without them). Installed only when missing, only as
# root with apt-get; a failure here is a note, never a failed run.
set -u
need=()
command -v fusermount >/dev/null 2>&1 || need+=(fuse)
ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2' || need+=(libfuse2)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "note: ${need[*]} missing and not root with apt-get: the FUSE tests will skip"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${need[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${need[@]}" >/dev/null 2>&1; } \
    || echo "note: could not install ${need[*]}: the FUSE tests will skip"
exit 0
