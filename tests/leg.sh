#!/bin/sh
# One leg of `make test`: runs the command, then appends "<seconds> <exit status> <name>" to
# $LEGS_LOG (if set), so that the summary at the end says how long each leg took. Exits as the
# command did.
name=$1
shift
started=$(date +%s)
"$@"
status=$?
[ -z "$LEGS_LOG" ] || echo "$(($(date +%s) - started)) $status $name" >> "$LEGS_LOG"
exit $status
