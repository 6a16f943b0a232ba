/* What the MPI library says about itself; see mpi_info.h. */
#include "job/mpi_info.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

void sb_job_mpi_library(char *out, size_t cap)
{
    char buf[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    out[0] = '\0';
    if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return;
    if (len < 0) len = 0;
    if (len >= (int)sizeof buf) len = (int)sizeof buf - 1;
    buf[len] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(out, cap, "%s", buf);
}

void sb_job_mpi_cvar(const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    int inited = 0, finalized = 0, provided = 0, n = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized || MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n && !out[0]; i++) {
        char vname[256], desc[8];
        int name_len = sizeof vname, desc_len = sizeof desc, verbosity, binding, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_cvar_get_info(i, vname, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                                &binding, &scope) != MPI_SUCCESS ||
            strcmp(vname, name) != 0 ||
            (type != MPI_INT && type != MPI_UNSIGNED && type != MPI_C_BOOL &&
             type != MPI_UNSIGNED_LONG && type != MPI_UNSIGNED_LONG_LONG))
            continue;
        MPI_T_cvar_handle h;
        int count = 0;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) continue;
        if (count == 1) {
            if (type == MPI_INT) {
                int v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(out, cap, "%d", v);
            } else if (type == MPI_C_BOOL) {
                _Bool v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(out, cap, "%d", (int)v);
            } else if (type == MPI_UNSIGNED_LONG) { /* Open MPI's size_t variables */
                unsigned long v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(out, cap, "%lu", v);
            } else if (type == MPI_UNSIGNED_LONG_LONG) {
                unsigned long long v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(out, cap, "%llu", v);
            } else {
                unsigned v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(out, cap, "%u", v);
            }
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
}

