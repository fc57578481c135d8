#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR — installs augur from BUILD_DIR into a temporary
# prefix, then builds the docs' example worker program out of tree against it, once
# with CMake (find_package(augur), augur::augur) and once with pkg-config, and runs both.
set -euo pipefail
build=$1
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in include/augur.h lib/libaugur.a lib/pkgconfig/augur.pc lib/cmake/augur/augurConfig.cmake \
  bin/augur bin/augur-mf bin/augur-lda bin/augur-ring; do
  [ -f "$tmp/prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
# the installed demos run from there
"$tmp/prefix/bin/augur-mf" --help >/dev/null || { echo "installed augur-mf --help failed"; exit 1; }
out=$("$tmp/prefix/bin/augur-lda" --docs 200 --vocab-size 100 --iterations 2 --top-words 0 --check)
grep -q '^check=ok ' <<<"$out" || { echo "installed augur-lda did not train: $out"; exit 1; }

# 1. CMake package
mkdir -p "$tmp/cmake-consumer"
cat >"$tmp/cmake-consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(augur 0.1 REQUIRED)
add_executable(histogram "$src/docs/examples/histogram.c")
target_link_libraries(histogram PRIVATE augur::augur)
CMAKE
cmake -S "$tmp/cmake-consumer" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
out=$("$tmp/cmake-build/histogram")
echo "$out"
[ "$(echo "$out" | tail -n 1)" = ok ] || { echo "CMake-built example failed"; exit 1; }

# 2. pkg-config
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$src/docs/examples/histogram.c" \
  $(pkg-config --cflags --libs augur) -o "$tmp/histogram-pc"
out=$("$tmp/histogram-pc")
[ "$(echo "$out" | tail -n 1)" = ok ] || { echo "pkg-config-built example failed"; exit 1; }
echo "install: CMake package and pkg-config both build and run the example"
