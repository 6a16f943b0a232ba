/* The "environment" object of the run report: what the run ran on.
 *
 * Versions of stratbench and of every library it links (MPI, BLAS, cJSON,
 * zlib), the compiler, CPU, OS, hosts and the command line, so that two
 * reports can be told comparable or not (stratbench compare refuses
 * mismatched environments). */
#ifndef SB_ENVIRONMENT_H
#define SB_ENVIRONMENT_H

#include <cjson/cJSON.h>

#include "core/status.h"
#include "report/report.h"

/* Builds the "environment" object of `rec` into *out (caller frees with
 * cJSON_Delete). Keys: stratbench_version, git_commit, git_dirty (boolean:
 * core/build_info.h), start_utc, hosts,
 * cpu_model, cpu_cores, compiler, mpi, blas, cjson, zlib, os, launcher,
 * launched_by, slurm_job_id (job/launcher.h), argv; with
 * --device cuda also gpu_model, gpu_count, driver, cuda_runtime, cublas,
 * nccl and peak_device_memory_bytes (rank 0's process).
 * Information the system does not give is written as "unknown" (cpu_cores
 * as null), never an error. Errors: SB_ERR_NOMEM if cJSON cannot allocate. */
sb_status sb_environment_json(const struct sb_run_record *rec, cJSON **out);

#endif
