#!/usr/bin/env bash
# The cuda backend's GPU checks live in tests/gpu/run.sh (issue 7); this name stays for habit.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../tests/gpu/run.sh" "$@"
