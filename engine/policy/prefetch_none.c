/*
** prefetch_none.c: never prefetches; adapters load on demand only.
*/
#include "policy.h"

const lsim_prefetch_ops lsim_prefetch_none = {
    /* .name       = */ "none",
    /* .state_size = */ 0,
    /* .init       = */ NULL,
    /* .propose    = */ NULL,
};
