/* A small NVTX tool for tests/integration/test_nvtx.py: what Nsight Systems
 * sees of a run, observed through NVTX's documented injection interface.
 *
 * NVTX3 (header-only, in the program) loads the shared library named by
 * NVTX_INJECTION64_PATH at its first call and calls its
 * InitializeInjectionNvtx2(getExportTable); the library asks for the
 * callback export table (NVTX_ETID_CALLBACKS) and writes its own functions
 * into the module tables it wants (CORE: NameOsThreadA, RangePushA/Ex,
 * RangePop; CORE2: DomainCreateA, DomainNameCategoryA, DomainRangePushEx,
 * DomainRangePop). See nvtxDetail/nvtxTypes.h (NvtxExportTableCallbacks,
 * NVTX_CBID_*) and nvtxDetail/nvtxInit.h.
 *
 * Every event becomes one line of $NVTX_INJECT_DIR/nvtx.<pid>.log (one
 * write(2) per line on an O_APPEND descriptor, so threads never interleave
 * within a line), fields separated by tabs:
 *
 *   domain  <id> <name>
 *   category <domain id> <category> <name>
 *   thread  <tid> <name>
 *   push    <tid> <domain id> <category> <payload type> <payload> <message>
 *   pop     <tid> <domain id>
 *   mpi     <tid> <MPI function>
 *
 * tid is the Linux thread id (gettid, what nvtxNameOsThread takes), domain
 * id 0 is the default domain, payload type is NVTX's (1 = uint64) and the
 * payload the raw 64-bit value. The "mpi" lines come from the same library
 * preloaded (LD_PRELOAD): it defines the MPI calls stratbench issues to
 * move data, logs each and calls MPI's profiling entry (PMPI_*, looked up
 * with dlsym at the call, so the library needs no MPI to load: mpirun may
 * preload it too). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int log_fd = -1;
static atomic_int next_domain = 1;

/* A domain: its id in the log (handles are ours to define). */
struct nvtxDomainRegistration_st {
    int id;
};

static unsigned tid(void) { return (unsigned)syscall(SYS_gettid); }

/* Appends one formatted line to the log (no-op before initialisation). */
static void say(const char *fmt, ...)
{
    if (log_fd < 0) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, (size_t)n);
    (void)w;
}

static int domain_id(nvtxDomainHandle_t d) { return d ? d->id : 0; }

static void push(int domain, const nvtxEventAttributes_t *a)
{
    const char *msg = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii
                          ? a->message.ascii
                          : "";
    say("push\t%u\t%d\t%u\t%d\t%llu\t%s", tid(), domain, a ? a->category : 0u,
        a ? a->payloadType : 0, a ? (unsigned long long)a->payload.ullValue : 0ull, msg);
}

static int NVTX_API range_push_ex(const nvtxEventAttributes_t *a)
{
    push(0, a);
    return 0;
}

static int NVTX_API range_push_a(const char *message)
{
    nvtxEventAttributes_t a = {0};
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message;
    push(0, &a);
    return 0;
}

static int NVTX_API range_pop(void)
{
    say("pop\t%u\t0", tid());
    return 0;
}

static void NVTX_API name_os_thread(uint32_t thread, const char *name)
{
    say("thread\t%u\t%s", (unsigned)thread, name ? name : "");
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    nvtxDomainHandle_t d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->id = atomic_fetch_add(&next_domain, 1);
    say("domain\t%d\t%s", d->id, name ? name : "");
    return d;
}

static void NVTX_API domain_name_category(nvtxDomainHandle_t d, uint32_t category,
                                          const char *name)
{
    say("category\t%d\t%u\t%s", domain_id(d), (unsigned)category, name ? name : "");
}

static int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    push(domain_id(d), a);
    return 0;
}

static int NVTX_API domain_range_pop(nvtxDomainHandle_t d)
{
    say("pop\t%u\t%d", tid(), domain_id(d));
    return 0;
}

/* Writes fn into slot `id` of module `module`'s table; 0 when the program's
 * NVTX has no such table or slot. */
static int install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module, unsigned id,
                   NvtxFunctionPointer fn)
{
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table || id >= size + 1u ||
        !table[id])
        return 0;
    *table[id] = fn;
    return 1;
}

/* NVTX's entry point into an injection library; returns 1 (success) once
 * the log is open and every callback is installed, else 0 (NVTX then
 * leaves the program's calls as no-ops). */
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const char *dir = getenv("NVTX_INJECT_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/nvtx.%ld.log", dir && *dir ? dir : ".", (long)getpid());
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return 0;
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb) return 0;
#define SLOT(m, id, fn) install(cb, m, id, (NvtxFunctionPointer)(fn))
    return SLOT(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, range_push_ex) &&
           SLOT(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, range_push_a) &&
           SLOT(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, range_pop) &&
           SLOT(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_NameOsThreadA, name_os_thread) &&
           SLOT(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, domain_create) &&
           SLOT(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainNameCategoryA, domain_name_category) &&
           SLOT(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, domain_range_push_ex) &&
           SLOT(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, domain_range_pop);
#undef SLOT
}

/* ---- MPI calls (LD_PRELOAD): log, then call PMPI_<name>. The MPI types
 * are opaque pointers in Open MPI's ABI; the wrappers pass every argument
 * through unchanged, so they are declared with the widths MPI's own
 * prototypes have on LP64 (pointers, int). */
typedef void *P;

/* The PMPI_ entry `name`, looked up once. */
#define PMPI_OF(name)                                                             \
    static __typeof__(&name) fn;                                                  \
    if (!fn) fn = (__typeof__(&name))dlsym(RTLD_NEXT, "P" #name);                 \
    say("mpi\t%u\t%s", tid(), #name);

int MPI_Iallreduce(const void *s, void *r, int n, P t, P op, P c, P req)
{
    PMPI_OF(MPI_Iallreduce);
    return fn(s, r, n, t, op, c, req);
}

int MPI_Allreduce(const void *s, void *r, int n, P t, P op, P c)
{
    PMPI_OF(MPI_Allreduce);
    return fn(s, r, n, t, op, c);
}

int MPI_Ireduce_scatter(const void *s, void *r, const int *counts, P t, P op, P c, P req)
{
    PMPI_OF(MPI_Ireduce_scatter);
    return fn(s, r, counts, t, op, c, req);
}

int MPI_Iallgatherv(const void *s, int sn, P st, void *r, const int *rc, const int *d, P rt, P c,
                    P req)
{
    PMPI_OF(MPI_Iallgatherv);
    return fn(s, sn, st, r, rc, d, rt, c, req);
}

int MPI_Ibcast(void *b, int n, P t, int root, P c, P req)
{
    PMPI_OF(MPI_Ibcast);
    return fn(b, n, t, root, c, req);
}

int MPI_Isend(const void *b, int n, P t, int dest, int tag, P c, P req)
{
    PMPI_OF(MPI_Isend);
    return fn(b, n, t, dest, tag, c, req);
}

int MPI_Irecv(void *b, int n, P t, int src, int tag, P c, P req)
{
    PMPI_OF(MPI_Irecv);
    return fn(b, n, t, src, tag, c, req);
}

int MPI_Send(const void *b, int n, P t, int dest, int tag, P c)
{
    PMPI_OF(MPI_Send);
    return fn(b, n, t, dest, tag, c);
}

int MPI_Recv(void *b, int n, P t, int src, int tag, P c, P status)
{
    PMPI_OF(MPI_Recv);
    return fn(b, n, t, src, tag, c, status);
}

int MPI_Bcast(void *b, int n, P t, int root, P c)
{
    PMPI_OF(MPI_Bcast);
    return fn(b, n, t, root, c);
}

int MPI_Allgather(const void *s, int sn, P st, void *r, int rn, P rt, P c)
{
    PMPI_OF(MPI_Allgather);
    return fn(s, sn, st, r, rn, rt, c);
}
