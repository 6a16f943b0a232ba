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

/* The index of `vname` in names[0..k), or -1. */
static int name_index(const char *vname, const char *const *names, int k)
{
    for (int j = 0; j < k; j++)
        if (strcmp(vname, names[j]) == 0) return j;
    return -1;
}

void sb_job_mpi_cvars(const char *const *names, int k, char (*out)[SB_MPI_CVAR_CHARS])
{
    for (int j = 0; j < k; j++) out[j][0] = '\0';
    int inited = 0, finalized = 0, provided = 0, n = 0, found = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (k <= 0 || !inited || finalized ||
        MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n && found < k; i++) {
        char vname[256], desc[8];
        int name_len = sizeof vname, desc_len = sizeof desc, verbosity, binding, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        int j = -1;
        if (MPI_T_cvar_get_info(i, vname, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                                &binding, &scope) != MPI_SUCCESS ||
            (j = name_index(vname, names, k)) < 0 || out[j][0] ||
            (type != MPI_INT && type != MPI_UNSIGNED && type != MPI_C_BOOL &&
             type != MPI_UNSIGNED_LONG && type != MPI_UNSIGNED_LONG_LONG))
            continue;
        found++;
        char *o = out[j];
        size_t cap = SB_MPI_CVAR_CHARS;
        MPI_T_cvar_handle h;
        int count = 0;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) continue;
        if (count == 1) {
            if (type == MPI_INT) {
                int v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(o, cap, "%d", v);
            } else if (type == MPI_C_BOOL) {
                _Bool v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(o, cap, "%d", (int)v);
            } else if (type == MPI_UNSIGNED_LONG) { /* Open MPI's size_t variables */
                unsigned long v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(o, cap, "%lu", v);
            } else if (type == MPI_UNSIGNED_LONG_LONG) {
                unsigned long long v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(o, cap, "%llu", v);
            } else {
                unsigned v = 0;
                if (MPI_T_cvar_read(h, &v) == MPI_SUCCESS) snprintf(o, cap, "%u", v);
            }
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
}

