#!/usr/bin/env bash
# Gathers, from this machine's Debian packages, the build dependencies of the
# GPU suite's build that a GPU machine may lack (nothing can be installed
# there): the headers, shared libraries, CMake packages and pkg-config files
# of CLI11, nlohmann_json, spdlog with fmt, toml++ and cpp-httplib (with the
# OpenSSL, zlib and Brotli it was built against). They are copied under
# OUTDIR in the layout they have under /usr, so that their CMake packages,
# which find their files relative to themselves, work from there; the
# pkg-config files are rewritten to do the same (${pcfiledir}).
#
#   tests/gpu/bundle-deps.sh [OUTDIR]     default: .deps at the repository root
#
# run.sh uses .deps when it is there (--deps-prefix names another); git
# ignores it. Programs built against the bundle find its libraries through
# the RUNPATH CMake gives them in the build tree.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.deps}
arch=$(gcc -print-multiarch 2>/dev/null || true)
if [[ -z $arch || ! -d /usr/lib/$arch ]]; then
  echo "bundle-deps.sh: cannot tell this machine's library directory (gcc -print-multiarch)" >&2
  exit 2
fi

# Copies /usr/PATH (a file, a glob of files, or a directory) to OUTDIR/PATH;
# a missing one is named, and makes the bundle incomplete.
missing=()
take() {
  local pattern=$1 found=false path
  for path in /usr/$pattern; do
    [[ -e $path ]] || continue
    found=true
    mkdir -p "$out/$(dirname "${path#/usr/}")"
    cp -a "$path" "$out/${path#/usr/}"
  done
  $found || missing+=("/usr/$pattern")
}

rm -rf "$out"
mkdir -p "$out"

# Headers.
for header in CLI nlohmann spdlog fmt toml++ httplib.h openssl zlib.h zconf.h brotli; do
  take "include/$header"
done
take "include/$arch/openssl"

# Shared libraries: those linked, and those they need, for the linker to
# check at link time.
for library in libspdlog libfmt libtomlplusplus libcpp-httplib libssl libcrypto libz \
               libbrotlicommon libbrotlidec libbrotlienc; do
  take "lib/$arch/$library.so*"
done

# CMake packages and pkg-config files.
for package in spdlog fmt tomlplusplus; do take "lib/$arch/cmake/$package"; done
for package in CLI11 nlohmann_json; do take "share/cmake/$package"; done
for pc in cpp-httplib spdlog fmt tomlplusplus openssl libssl libcrypto zlib \
          libbrotlicommon libbrotlidec libbrotlienc; do
  take "lib/$arch/pkgconfig/$pc.pc"
done
take "share/pkgconfig/CLI11.pc"

# pkg-config files name /usr; make them name where they now are.
for pc in "$out/lib/$arch/pkgconfig/"*.pc "$out/share/pkgconfig/"*.pc; do
  [[ -f $pc ]] || continue
  sed -i -E 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|' "$pc"
  case $pc in "$out/share/pkgconfig/"*) sed -i -E 's|^prefix=\$\{pcfiledir\}/../../..$|prefix=${pcfiledir}/../..|' "$pc" ;; esac
done

if ((${#missing[@]})); then
  echo "bundle-deps.sh: not on this machine (install scripts/install-deps.sh's packages):" \
       "${missing[*]}" >&2
  exit 1
fi
echo "bundle-deps.sh: $(du -sh "$out" | cut -f1) in $out"
