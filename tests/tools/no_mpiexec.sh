#!/bin/sh
# Stands in for mpiexec in a build without MPI (DTRAIN_WITH_MPI=OFF, or no MPI
# found): every test that would start an MPI job is skipped (exit 77), not failed.
echo "SKIPPED: this build of dtrain has no MPI (DTRAIN_WITH_MPI=OFF or MPI not found): the MPI job '$*' does not run"
exit 77
