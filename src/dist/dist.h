/* dist/dist.h — the processes of a data-parallel run (OpenMPI).
 *
 * A program started by `mpirun -np N` is one of N ranks; started any other way
 * it is a world of one and MPI is never touched. Every collective below is
 * called by all ranks in the same order; with one rank each is a no-op.
 *
 * Results must not depend on how messages travel: sums are taken in rank order
 * (rank 0 + rank 1 + ...), the same on every rank, so the ranks' weights stay
 * bit-identical and a run is deterministic for a given N.
 *
 * Errors: a failure that one rank meets while the others carry on would leave
 * them waiting in the next collective. The places where a rank can fail on its
 * own (inputs, rewards, files rank 0 writes) end with dist_check, which tells
 * every rank and gives them all the same error; any other error in a world of
 * more than one stops the whole job (dist_abort). */
#ifndef GRPO_DIST_DIST_H
#define GRPO_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"

/* MPI_Init when this process was started by mpirun (OpenMPI's or a PMI/PMIx
 * launcher's environment); a world of one otherwise. Call once, early. */
void dist_init(int *argc, char ***argv);
/* MPI_Finalize when dist_init started MPI (registered with atexit). */
void dist_finalize(void);
int dist_rank(void);
int dist_size(void);

/* Stops every process of the job (MPI_Abort); exit(code) in a world of one. */
void dist_abort(int code) __attribute__((noreturn));

/* x[n] = the sum over ranks of x[n], added in rank order, identical on every
 * rank. f32: in pieces (reduce-scatter + all-gather, 2 (N-1)/N n floats sent
 * per rank), so the extra memory is bounded whatever n is. */
void dist_sum_f32(float *x, size_t n);
void dist_sum_f64(double *x, int n);

/* all[N * n] = every rank's mine[n], in rank order. */
void dist_gather_i64(int64_t *all, const int64_t *mine, int n);

/* Items 0..n-1 (arrays of elem-byte elements, item i holding len[i] of them) are
 * each owned by one rank (owner[i]); afterwards every rank holds all of them.
 * with_len: len[i] is known only to the owner and is shared first. Items a rank
 * receives are malloc'd into items[i] (free them as the owner's are freed). */
void dist_share_items(void **items, int *len, const int *owner, int n, size_t elem, int with_len);

/* Collective: every rank passes its rc. When any failed, every rank gets -1 and
 * the same err: the lowest failing rank's message, prefixed with "rank R: "
 * (no prefix when every rank failed alike). Returns 0 when none failed. */
int dist_check(int rc, GrpoErr *err);
/* The last error returned by this process went through dist_check (every rank
 * has it): the process may exit normally; otherwise it must dist_abort. */
int dist_error_shared(void);

#endif
