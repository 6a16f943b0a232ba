/* NVTX3 ranges and their --trace twins; see nvtx.h. */
#include "core/nvtx.h"

#include <stdatomic.h>
#include <stddef.h>

static _Atomic(const struct sb_nvtx_hook *) hook = NULL;
/* The payload of the last step range this thread opened. */
static _Thread_local uint64_t thread_step;

void sb_nvtx_set_hook(const struct sb_nvtx_hook *h) { atomic_store(&hook, h); }

static void hook_push(const char *name, int category, uint64_t payload, int is_bytes)
{
    const struct sb_nvtx_hook *h = atomic_load_explicit(&hook, memory_order_acquire);
    if (h) h->push(name, category, payload, is_bytes);
}

static void hook_pop(void)
{
    const struct sb_nvtx_hook *h = atomic_load_explicit(&hook, memory_order_acquire);
    if (h) h->pop();
}

static const char *const category_names[SB_NVTX_NCATEGORIES] = {
    "none", "epoch", "step", "data", "forward", "backward", "comm", "optimizer", "eval",
    "bubble",
};

const char *sb_nvtx_category_name(enum sb_nvtx_category c)
{
    return (unsigned)c < SB_NVTX_NCATEGORIES ? category_names[c] : category_names[0];
}

#ifdef SB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Distinct, colour-blind-safe hues (Okabe-Ito palette), and a light grey
 * for the bubble (idle time). */
static const uint32_t category_colors[SB_NVTX_NCATEGORIES] = {
    0xFF999999, 0xFF000000, 0xFF56B4E9, 0xFFF0E442, 0xFF009E73,
    0xFFD55E00, 0xFFCC79A7, 0xFF0072B2, 0xFFE69F00, 0xFFDDDDDD,
};

static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void domain_create(void)
{
    domain = nvtxDomainCreateA("stratbench");
    for (int c = 1; c < SB_NVTX_NCATEGORIES; c++)
        nvtxDomainNameCategoryA(domain, (uint32_t)c, category_names[c]);
}

static void push(const char *name, enum sb_nvtx_category category, uint64_t payload)
{
    pthread_once(&domain_once, domain_create);
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = (uint32_t)category;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = category_colors[(unsigned)category < SB_NVTX_NCATEGORIES ? category : 0];
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(domain, &a);
}

static void pop(void)
{
    pthread_once(&domain_once, domain_create);
    nvtxDomainRangePop(domain);
}

void sb_nvtx_name_thread(const char *name)
{
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), name);
}
#else
static void push(const char *name, enum sb_nvtx_category category, uint64_t payload)
{
    (void)name, (void)category, (void)payload;
}

static void pop(void) {}

void sb_nvtx_name_thread(const char *name) { (void)name; }
#endif

void sb_nvtx_push(const char *name, enum sb_nvtx_category category, uint64_t step)
{
    if (category == SB_NVTX_STEP) thread_step = step;
    hook_push(name, (int)category, step, 0);
    push(name, category, step);
}

void sb_nvtx_push_phase(const char *name, enum sb_nvtx_category category)
{
    sb_nvtx_push(name, category, thread_step);
}

void sb_nvtx_push_bytes(const char *name, enum sb_nvtx_category category, uint64_t bytes)
{
    hook_push(name, (int)category, bytes, 1);
    push(name, category, bytes);
}

void sb_nvtx_pop(void)
{
    pop();
    hook_pop();
}
