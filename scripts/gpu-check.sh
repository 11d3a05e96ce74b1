#!/usr/bin/env bash
# The cuda backend's GPU checks live in tests/gpu/run.sh; this script only runs it.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../tests/gpu/run.sh" "$@"
