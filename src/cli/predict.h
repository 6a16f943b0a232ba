/* `stratbench predict REPORT --replicas 8,64,512 [--bandwidth RATE]
 * [--latency TIME] [--json] [--out FILE]`: extrapolates a measured run to
 * other replica counts with the α–β cost model (src/comm/cost_model.h):
 * for each replica count and strategy (ddp with its ring / recursive
 * doubling, ddp with MPI's binomial all-reduce, central with 1 server and
 * with one server per worker) the predicted communication, exposed
 * communication, step time, samples/s and efficiency, from the run's
 * measured compute per step and its probed links (or --bandwidth and
 * --latency). Weak scaling: the per-replica batch stays the report's. */
#ifndef SB_PREDICT_H
#define SB_PREDICT_H

/* Runs `stratbench predict` with argv[0] = "predict"; returns the exit
 * status: 0 ok, 1 the output could not be written, 2 bad input (one line on
 * stderr naming the flag or the report and what is wrong; nothing
 * written). */
int sb_predict_main(int argc, char **argv);

#endif
