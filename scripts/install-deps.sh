#!/usr/bin/env bash
# Installs the Debian packages augur builds against, and only those not yet installed.
# Used by every make target (`make test`, `make tsan`, `make clang`, ...) on a fresh Debian 12
# machine.
set -euo pipefail

# libssl-dev: HMAC for the handshake; openmpi-bin: the mpirun cluster test.
pkgs=(pkg-config libuv1-dev libmsgpack-dev libck-dev libcmocka-dev libssl-dev openmpi-bin)
# `install-deps.sh clang`: also clang (make clang); `install-deps.sh fuzz`: clang and its
# libFuzzer runtime (make fuzz); `install-deps.sh report`: Chromium and libpng, with which
# test_report renders augur report's page and reads its screenshot (make test).
case "${1:-}" in
clang) pkgs+=(clang) ;;
report) pkgs+=(chromium libpng-dev) ;;
fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
"") ;;
*)
  echo "install-deps: unknown extra '$1' (expected clang, fuzz or report)" >&2
  exit 2
  ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet; refresh once if the install fails.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
