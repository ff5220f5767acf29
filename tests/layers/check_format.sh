#!/bin/sh
# check_format.sh ROOT — every C/C++/CUDA file of the project follows .clang-format
# (clang-format 14, Debian 12's: other versions format differently, so they are not used).
# Prints each file that differs with the first lines of the difference; exit 1 if any.
set -u
root=$1
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not installed (tools/deps installs it)"; exit 77; }
version=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
[ "$version" = 14 ] || { echo "clang-format $version: the tree is formatted with 14"; exit 77; }
cd "$root" || exit 2
if [ -d .git ] || git rev-parse --git-dir >/dev/null 2>&1; then
  files=$(git ls-files '*.h' '*.hpp' '*.cc' '*.cpp' '*.c' '*.cu' '*.cuh')
else
  files=$(find . -path './build*' -prune -o \( -name '*.h' -o -name '*.cc' -o -name '*.c' -o -name '*.cu' \) -print)
fi
# One clang-format process for the whole tree; it names each line that would change.
# shellcheck disable=SC2086
out=$(clang-format --dry-run --Werror $files 2>&1)
status=$?
echo "$out" | grep -aE '(error|warning): code should be clang-formatted' | head -40
bad=$(echo "$out" | LC_ALL=C sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: \(error\|warning\): code should be.*/\1/p' | sort -u)
echo "check_format: $(echo "$files" | wc -w) files, $(echo "$bad" | grep -c .) not formatted (clang-format -i FILE)"
echo "$bad"
[ "$status" -eq 0 ]
