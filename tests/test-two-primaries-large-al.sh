#!/usr/bin/env bash
# test-two-primaries-large.sh with an activity log of 16 extents of
# 1 MiB (a write of up to 4 MiB spans at most 5): the peer's writes and
# ours wait for room in it at once.
TWOPRIM_AL_EXTENTS=16 exec bash "$(dirname "$0")/test-two-primaries-large.sh"
