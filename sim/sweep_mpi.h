/*
** sweep_mpi.h: the MPI driver's own entry (sim/sweep_mpi.c, built only
** with LSIM_HAVE_MPI).  Its main entry, lsim_sweep_mpi_main, is declared in
** sweep.h; without MPI sim/sweep_cmd.c has a stub that refuses --mpi with
** exit status 2.
*/
#ifndef LSIM_SWEEP_MPI_H
#define LSIM_SWEEP_MPI_H

#include <stddef.h>

/* One line for `lorasim version` into out[n]: "built with Open MPI v4.1.4
** (lorasim sweep --mpi)".  Never initialises MPI. */
void lsim_sweep_mpi_describe(char *out, size_t n);

#endif /* LSIM_SWEEP_MPI_H */
