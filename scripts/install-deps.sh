#!/usr/bin/env bash
# Installs the Debian 12 packages Tarantella needs to build, run and test.
# Runs apt-get only when something is missing, so repeated `make` calls are
# cheap. Needs root (or sudo) the first time.
set -euo pipefail

packages=(
  build-essential cmake pkg-config dpkg-dev
  libpmix-dev libucx-dev ucx-utils libhwloc-dev hwloc libnuma-dev
  libcmocka-dev
  clang libclang-rt-14-dev
  munge slurmctld slurmd slurm-client libslurm-dev
  openmpi-bin libopenmpi-dev
  python3-dev python3-venv python3-torch python3-numpy python3-sklearn python3-pytest
  python3-torchvision python3-matplotlib
  libtorch-dev pybind11-dev
  iproute2 procps util-linux
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends "${missing[@]}"
