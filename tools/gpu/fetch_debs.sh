#!/bin/sh
# tools/gpu/fetch_debs.sh [DIR] - fetch Open MPI's Debian packages (the
# library, mpirun, mpi.h and the shared libraries they load) into DIR
# (default .gpu-debs at the repository root, which git ignores), for a GPU
# machine that has no MPI and no package registry: tests/gpu/run_gpu_suite.sh
# unpacks them there outside / (dpkg -x) and uses them through OPAL_PREFIX,
# so the multi-process GPU tests (several ranks sharing a GPU: staged over
# MPI) run. Run it HERE, on a Debian machine with apt, before lending the
# tree to the GPU machine; nothing is installed. Also the libraries the build
# needs that such a machine may lack (jansson, zlib's headers, OpenBLAS and its
# Fortran run-time): the suite uses each only where the machine has none.
# About 21 MB (the device tool carries at most 64 MiB).
set -eu
cd "$(dirname "$0")/../.."
dir=${1:-.gpu-debs}
# Open MPI and its run-time libraries, the build's libraries; the base system (libc, libstdc++, zlib,
# libudev, openssl...) is left to the machine. The suite links only what the
# machine lacks (ldconfig -p), so a newer library there is never shadowed.
pkgs="openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libpmix2 libfabric1 libucx0
      libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm-infinipath1 libpsm2-2
      libnuma1 libltdl7 libmunge2 libpciaccess0
      libjansson4 libjansson-dev zlib1g zlib1g-dev
      libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0"
mkdir -p "$dir"
cd "$dir"
rm -f ./*.deb
# apt-get download runs as the _apt user where it can; it must be able to write here
chmod 0777 . 2>/dev/null || true
apt-get download $pkgs
ls -1 ./*.deb | wc -l | sed 's/^/fetch_debs: packages: /'
du -sh . | sed 's/^/fetch_debs: size: /'
