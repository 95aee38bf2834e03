#!/bin/sh
# The summary at the end of `make test`: each leg's duration and outcome ($LEGS_LOG, written by
# tests/leg.sh), and the whole command's, from its start ($1, seconds since the epoch).
started=$1
echo "== make test: each leg's duration"
awk '{ name = $3; for (i = 4; i <= NF; i++) name = name " " $i
       printf "   %3d:%02d  %-62s %s\n", $1 / 60, $1 % 60, name, ($2 == 0 ? "passed" : "FAILED (" $2 ")") }' "$LEGS_LOG"
total=$(($(date +%s) - started))
printf '   %3d:%02d  %s\n' $((total / 60)) $((total % 60)) "make test in all"
