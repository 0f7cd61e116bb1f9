#!/usr/bin/env bash
# Fetch Debian bullseye's Python 3.9.2 into a private folder (no system-wide install) and make a venv.
# Usage: scripts/bootstrap_py39.sh <prefix-dir> <venv-dir>
# Exit 3 (with a message on stderr) when the packages cannot be had, so callers can print a SKIP line.
set -euo pipefail
prefix=$(realpath -m "$1"); venv=$(realpath -m "$2")
if [ -x "$venv/bin/python" ] && LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu" "$venv/bin/python" -c 'import sys; assert sys.version_info[:2]==(3,9)' 2>/dev/null; then
  exit 0
fi
pkgs=(python3.9=3.9.2-1 python3.9-minimal=3.9.2-1 libpython3.9-stdlib=3.9.2-1 libpython3.9-minimal=3.9.2-1
      python3-distutils=3.9.2-1 python3-lib2to3=3.9.2-1 libssl1.1 libffi7 libmpdec3 python-pip-whl=20.3.4-4+deb11u1)
# Python's headers, in a folder of their own ($prefix/dev): scripts/matrix.py shows them
# to the package's install alone, which builds its C extension for 3.9 as a user's
# install with a compiler does (tfp_picklefix._speedups); the stacks' dependencies install
# as before (wrapt 1.12 without its C extension). Optional: without them the package
# installs its pure-Python cache, and the matrix's log says so.
dev_pkgs=(libpython3.9-dev=3.9.2-1 python3.9-dev=3.9.2-1)
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu"
py="$prefix/usr/bin/python3.9"
# The prefix is fetched once: re-extracting it would replace libpython3.9 under the
# processes of a Python 3.9 stack whose tests run while the next stack is set up.
if [ "$(cat "$prefix/.pkgs" 2>/dev/null)" != "${pkgs[*]} ${dev_pkgs[*]}" ] || ! "$py" -c 'import ssl' 2>/dev/null; then
command -v apt-get >/dev/null || { echo "no apt-get on this machine" >&2; exit 3; }
[ "$(uname -m)" = x86_64 ] || { echo "bullseye python3.9 bootstrap supports x86_64 only" >&2; exit 3; }
apt_dir="$prefix/.apt"; debs="$prefix/.debs"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$debs" "$apt_dir/etc/preferences.d" "$apt_dir/etc/apt.conf.d"
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
echo "deb [trusted=yes] $mirror bullseye main" > "$apt_dir/sources.list"
aptopts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=-" -o "Dir::Etc::Preferences=$apt_dir/etc/preferences" -o "Dir::Etc::PreferencesParts=$apt_dir/etc/preferences.d" -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Dir::Cache::archives=$apt_dir/cache/archives" -o "APT::Get::AllowUnauthenticated=true" -o "Acquire::AllowInsecureRepositories=true" -o "Debug::NoLocking=1")
if ! apt-get "${aptopts[@]}" update >"$prefix/apt-update.log" 2>&1; then
  echo "apt-get update of bullseye failed (see $prefix/apt-update.log)" >&2; exit 3
fi
if ! (cd "$debs" && apt-get "${aptopts[@]}" download "${pkgs[@]}" >"$prefix/apt-download.log" 2>&1); then
  echo "bullseye python3.9 packages not available from the mirror (see $prefix/apt-download.log)" >&2; exit 3
fi
for d in "$debs"/*.deb; do dpkg -x "$d" "$prefix"; done
devdebs="$prefix/.debs-dev"; mkdir -p "$devdebs"; rm -rf "$prefix/dev"
if (cd "$devdebs" && apt-get "${aptopts[@]}" download "${dev_pkgs[@]}" >"$prefix/apt-download-dev.log" 2>&1); then
  for d in "$devdebs"/*.deb; do dpkg -x "$d" "$prefix/dev"; done
  # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.9/pyconfig.h>: with
  # -I$prefix/dev/usr/include the compiler finds the prefix's own.
else
  echo "bullseye python3.9 headers not available (see $prefix/apt-download-dev.log): the package's C extension will not be built for 3.9" >&2
fi
"$py" -c 'import ssl, ctypes, sqlite3' 2>/dev/null || "$py" -c 'import ssl' || { echo "extracted python3.9 does not run" >&2; exit 3; }
echo "${pkgs[*]} ${dev_pkgs[*]}" > "$prefix/.pkgs"
fi
rm -rf "$venv"
"$py" -m venv --without-pip "$venv"
pipwhl=$(ls "$prefix"/usr/share/python-wheels/pip-*.whl | head -1)
# The venv python needs the private libs; record them in a wrapper-friendly env file.
echo "export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" > "$venv/env.sh"
"$venv/bin/python" "$pipwhl/pip" install -q "pip==24.0" "setuptools<70" wheel
echo "python3.9 ready in $venv"
