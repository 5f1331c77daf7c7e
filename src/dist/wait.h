/* dist/wait.h — inside dist/: a non-blocking collective waited for with the
 * run's collective timeout (dist_set_timeout). */
#ifndef GRPO_DIST_WAIT_H
#define GRPO_DIST_WAIT_H

#include <mpi.h>

/* Waits for r to complete. Past the timeout (counted from this call) the ranks
 * still waiting name the ones that never came, the lowest waiting rank reports
 * "rank R did not reach WHAT within ddp_timeout T s; stopping the job", and the
 * job ends (MPI_Abort). what: the collective, as the message names it ("the
 * gradient sum"). */
void dist_wait(MPI_Request *r, const char *what);

#endif
