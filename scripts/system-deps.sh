#!/usr/bin/env bash
# Installs the Debian packages the test suite uses, when they are missing and we may.
set -euo pipefail
need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# the C++ package (make test-cpp; make bench-cpp for Google Benchmark)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
[ -e /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
[ -e /usr/include/benchmark/benchmark.h ] || need+=(libbenchmark-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: missing ${need[*]}; not root or no apt-get, the tests that need them will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
apt-get update -qq >/dev/null || true
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || \
  echo "system-deps: could not install ${need[*]}; the tests that need them will skip" >&2
