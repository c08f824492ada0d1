/* gemmkit: single-precision GEMM and convolution for CPUs. Public C API. */
#ifndef GEMMKIT_H
#define GEMMKIT_H

#include <stdint.h>

#include "gemmkit_cblas.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GEMMKIT_VERSION_MAJOR 0
#define GEMMKIT_VERSION_MINOR 1
#define GEMMKIT_VERSION_PATCH 0
#define GEMMKIT_VERSION_STRING "0.1.0"

typedef enum {
  GK_OK = 0,
  GK_ERR_INVALID_ARGUMENT,
  GK_ERR_UNSUPPORTED,
  GK_ERR_OUT_OF_MEMORY,
  GK_ERR_IO,
  GK_ERR_INTERNAL
} gk_status;

/* Threads used by every following call from any thread of the process. n < 1 restores
 * the default (GEMMKIT_NUM_THREADS, then OMP_NUM_THREADS, then the number of CPUs).
 * Calls made inside an OpenMP parallel region, and calls in a child forked from a
 * threaded parent (libgomp is not fork-safe), always run on one thread. */
void gk_set_num_threads(int n);
int gk_get_num_threads(void);

/* One line describing what runs: ISA and kernel, MR x NR, MC/KC/NC, detected caches,
 * threads. Valid until the next call that changes the configuration. */
const char *gk_config_string(void);

/* Name of the micro-kernel in use ("avx512", "avx2", "neon", "generic"). */
const char *gk_kernel_name(void);

/* Forces a micro-kernel by name (as GEMMKIT_KERNEL does); NULL or "" returns to automatic
 * selection. Returns GK_ERR_UNSUPPORTED when this CPU cannot run it. Not thread-safe
 * with concurrent GEMM calls: meant for tests and experiments. */
gk_status gk_set_kernel(const char *name);

const char *gk_status_string(gk_status s);
/* This thread's last error message ("" when none). */
const char *gk_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
