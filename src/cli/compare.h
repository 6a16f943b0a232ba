/* `stratbench compare BASE NEW`: the CI regression gate. Each side is a run
 * report, a scaling.json of `stratbench sweep`, or a sweep directory. Runs
 * are matched by configuration; each matched point is called a regression,
 * an improvement or noise from the repeated measurements (two-sided
 * Mann-Whitney U test AND a minimum effect on the median), after checking
 * that both sides ran on the same environment. */
#ifndef SB_COMPARE_H
#define SB_COMPARE_H

/* Runs `stratbench compare` with argv[0] = "compare"; returns the exit
 * status: 0 no regression, 1 at least one regression (with both sides
 * quiet, or any under --on-noisy fail), 2 bad input (one line on stderr
 * naming the flag, file, or the environment field that differs), 3 only
 * regressions with a noisy side under --on-noisy rerun (the default): the
 * gate asks for the noisy repeats to be run again. */
int sb_compare_main(int argc, char **argv);

#endif
