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
 * more than one stops the whole job (dist_abort).
 *
 * Ranks that would not meet: at start-up dist_agree compares what each rank was
 * asked to do, so ranks given other options or other files stop before they
 * train apart. Every collective waits at most the run's timeout (transformers'
 * ddp_timeout, dist_set_timeout): a rank that stopped, hangs or is still busy
 * past it ends the job with a line naming it, instead of the others waiting
 * forever (dist/wait.c). */
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
/* This process among the ranks on its own machine (MPI-3's shared-memory split,
 * ordered as their world ranks): 0 of 1 in a world of one. One process per GPU
 * takes the GPU of its local rank (gpu_open_local). */
int dist_local_rank(void);
int dist_local_size(void);

/* Every collective from now on waits at most timeout_s (1800 until set; <= 0
 * keeps it) for the other ranks. Past it the job ends (MPI_Abort, status 1) and
 * the lowest rank that waited passes report one line, "rank 1 did not reach the
 * gradient sum within ddp_timeout 1800 s; stopping the job" (report prints it;
 * NULL: nothing is said). */
void dist_set_timeout(double timeout_s, void (*report)(const char *msg));

/* One thing every rank must have alike: an option's value, an input's contents. */
typedef struct {
    char name[128];  /* "--seed", "dataset d.jsonl" (shown as given: escape untrusted text first) */
    char shown[128]; /* the value shown in a message, "" for an item named only (a file's contents) */
    uint64_t digest[2]; /* what is compared: the whole value, a file's io/digest.h fingerprint */
} DistItem;

/* Collective, before anything else: every rank passes rc (0: it parsed its
 * command line; otherwise its exit status, its own message already printed) and
 * items[n] in the same order (items[0] the command). Returns 0 when every rc is
 * 0 and every rank's items equal rank 0's. Otherwise every rank gets the same
 * answer: 1 with *rc_out the largest rc when some rank's rc was not 0 (the rank
 * that refused its command line said why), else -1 with err
 * "ranks disagree: --seed is 1 on rank 0 and 2 on rank 1" (an item with a shown
 * value) or "ranks disagree: dataset d.jsonl differs between rank 0 and rank 1"
 * for the first item that differs and the lowest rank that differs from rank 0. */
int dist_agree(int rc, const DistItem *items, int n, int *rc_out, GrpoErr *err);

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
