/* htam backend plugin ABI: the ONE header between the evaluation host (htam-eval-worker) and a
 * backend plugin (libhtam_backend_<name>.so: cpu, cuda, hip).
 *
 * A backend turns a candidate's source into something runnable on its devices (compile, load),
 * manages device memory, runs the candidate's htam_kernel (sdk/include/htam/kernel_abi.h) and times
 * it. The verification gate, input generation and statistics live on the host side
 * (backends/common); a backend never judges correctness.
 *
 * ---------------------------------------------------------------------------------------------
 * VERSIONING
 *   HTAM_BACKEND_API_VERSION_MAJOR / _MINOR. An additive change (a new optional entry point, a
 *   field appended to a struct that carries struct_size) bumps MINOR; anything else bumps MAJOR.
 *   - The host calls htam_backend_api_version() first and refuses a plugin whose major differs
 *     from its own, or whose minor is newer than its own (the plugin may rely on what this host
 *     lacks). An older plugin minor is accepted; optional entry points it lacks are skipped.
 *   - The plugin checks the host's version again in htam_backend_initialize() and refuses (returns
 *     HTAM_ERR_VERSION) a different major or an older host minor than the one it was built for.
 *   - Every struct the host hands in starts with `uint32_t struct_size` (sizeof as the host
 *     compiled it); a plugin reads only fields that lie inside struct_size. Structs the plugin
 * fills are filled only up to the struct_size the host set.
 *
 * ENTRY POINTS are resolved by name with dlsym. Required ones (marked REQUIRED) missing => the load
 *   fails with a message naming the symbol. Optional ones (marked OPTIONAL) missing => the host
 * skips that stage (e.g. no profile report). Plugins export ONLY these symbols (linker version
 * script backends/common/plugin.map) and are loaded with dlopen(RTLD_NOW | RTLD_LOCAL).
 *
 * ERRORS are values. Every fallible entry point returns htam_backend_error* : NULL means success;
 *   otherwise an error the plugin allocated, which the CALLER owns and frees with
 *   htam_backend_error_free() (it calls the error's own release function, so plugin and host may
 *   use different allocators). Outputs through pointer arguments are valid only on success.
 *   The class (htam_backend_error_code) tells the host what happened; the message says why, in
 *   words a person can act on (for compile errors: the compiler's diagnostics, truncated by the
 *   plugin to a sane size).
 *
 * LIFECYCLE (one plugin instance per process in practice, but the ABI allows several):
 *   api_version -> initialize -> describe* -> device_open -> { compile -> load -> buffers ->
 *   run / time / profile -> module_release -> artifact_release }* -> device_close -> finalize;
 *   profile_command / profile_parse (API 1.3) any time between initialize and finalize.
 *   - Every object is released by the same plugin instance that created it, before finalize.
 *   - A module must be released before the device it was loaded on is closed; buffers too.
 *   - After an error of class HTAM_ERR_DEVICE_FAULT the device is unusable (CUDA sticky errors):
 *     the host only releases objects and exits the process; a fresh process recovers.
 *
 * THREADING: the host calls all entry points of one backend instance from ONE thread at a time
 *   (external synchronization; never concurrently for the same htam_backend). A plugin may create
 *   its own threads (e.g. a compile pool) but must join them before finalize returns. Candidate
 *   code may create threads; that is the host's concern (it checks thread counts).
 *
 * OWNERSHIP:
 *   - const char* / arrays the plugin returns inside describe/artifact/profile structs are owned by
 *     the plugin and stay valid until the object they came from is released (the backend for
 *     describe, the artifact for artifact_info). Copy them if you need them longer.
 *   - Pointers the host passes in (sources, options, tensors, host memory) are borrowed for the
 *     duration of the call only.
 *   - Device buffers: the plugin owns the memory; the host owns the handle until buffer_free.
 *
 * CONTAINMENT: the plugin runs inside the sandboxed worker process, never in the daemon. Candidate
 *   code runs in a separate *runner* process (its own plugin instance) whose buffers the verifier
 *   shares through buffer_export / buffer_import (API 1.1), so the process that holds the expected
 *   outputs never runs candidate code. Candidate code is hostile: a plugin must not trust anything the candidate leaves behind (stream state,
 *   pending errors) and must report launch/device failures as errors, not abort.
 * --------------------------------------------------------------------------------------------- */
#ifndef HTAM_BACKEND_H_
#define HTAM_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "htam/kernel_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HTAM_BACKEND_API_VERSION_MAJOR 1
#define HTAM_BACKEND_API_VERSION_MINOR 4

#if defined(__GNUC__)
#define HTAM_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define HTAM_BACKEND_EXPORT
#endif

/* ---- errors ------------------------------------------------------------------------------- */

typedef enum htam_backend_error_code {
  HTAM_ERR_UNKNOWN = 0,
  HTAM_ERR_INVALID_ARGUMENT = 1, /* bad handle, bad size, bad request from the host */
  HTAM_ERR_VERSION = 2,          /* API version mismatch (initialize) */
  HTAM_ERR_UNAVAILABLE = 3,      /* this backend/device cannot run here (no driver, no device) */
  HTAM_ERR_UNSUPPORTED = 4,      /* the stage or option is not implemented by this plugin */
  HTAM_ERR_COMPILE = 5,          /* the candidate did not compile; message = diagnostics */
  HTAM_ERR_LOAD = 6,             /* artifact could not be loaded (missing htam_kernel, bad image) */
  HTAM_ERR_KERNEL_FAILED = 7,    /* htam_kernel returned non-zero, or a launch failed cleanly */
  HTAM_ERR_DEVICE_FAULT = 8,  /* illegal address, trap, ECC...: device unusable in this process */
  HTAM_ERR_OUT_OF_MEMORY = 9, /* device or host allocation failed */
  HTAM_ERR_TIMEOUT = 10,      /* a stage exceeded a time limit the plugin enforces itself */
  HTAM_ERR_INTERNAL = 11      /* a bug or an unexpected state in the plugin */
} htam_backend_error_code;

typedef struct htam_backend_error htam_backend_error;
struct htam_backend_error {
  int32_t code;        /* htam_backend_error_code */
  const char* message; /* NUL-terminated, owned by the error */
  /* Frees the error and its message; set by whoever allocated it. Never NULL. */
  void (*release)(htam_backend_error* self);
};

static inline void htam_backend_error_free(htam_backend_error* e) {
  if (e) e->release(e);
}

/* ---- opaque handles (plugin-owned state) -------------------------------------------------- */

typedef struct htam_backend htam_backend;   /* one initialized plugin instance */
typedef struct htam_device htam_device;     /* an opened device: context + default stream */
typedef struct htam_artifact htam_artifact; /* a compiled candidate (file on disk, bytes) */
typedef struct htam_module htam_module;     /* an artifact loaded on a device; has htam_kernel */
typedef struct htam_buffer htam_buffer;     /* device memory */

/* ---- host services handed to the plugin --------------------------------------------------- */

typedef enum htam_backend_log_level {
  HTAM_LOG_DEBUG = 0,
  HTAM_LOG_INFO = 1,
  HTAM_LOG_WARN = 2,
  HTAM_LOG_ERROR = 3
} htam_backend_log_level;

typedef struct htam_backend_host {
  uint32_t struct_size;
  uint32_t api_major; /* the host's HTAM_BACKEND_API_VERSION_MAJOR */
  uint32_t api_minor; /* the host's HTAM_BACKEND_API_VERSION_MINOR */
  /* Log sink; may be NULL. Thread-safe; message borrowed for the call. */
  void (*log)(void* ctx, int32_t level, const char* message);
  void* log_ctx;
  /* Directory holding htam/kernel_abi.h (add it to the include path of every compile). */
  const char* sdk_include_dir;
  /* Writable directory for the compile cache (content-addressed); may be NULL = no caching. */
  const char* cache_dir;
  /* Private writable scratch directory of this worker (the process's cwd). */
  const char* work_dir;
  /* Backend options from the host's configuration, "key=value" strings, NULL-terminated
   * (e.g. "cxx=g++", "cxxflags=-O3 -march=native", "nvcc=/usr/local/cuda/bin/nvcc"). Borrowed for
   * the initialize call: copy what you keep. Unknown keys are ignored. */
  const char* const* options;
} htam_backend_host;

/* ---- describe ------------------------------------------------------------------------------- */

typedef struct htam_device_info {
  int32_t index;         /* 0..num_devices-1, the value device_open takes */
  const char* name;      /* "NVIDIA H100 80GB HBM3", "AMD EPYC 9554" */
  const char* arch;      /* "sm_90", "gfx90a", "x86_64" */
  uint64_t memory_bytes; /* device memory (host RAM for the CPU backend) */
  int32_t sm_clock_mhz;  /* current/max clock read (never set); -1 unknown */
  int32_t mem_clock_mhz; /* -1 unknown */
  uint64_t cache_bytes;  /* last-level cache size used for flushing; 0 unknown */
} htam_device_info;

typedef struct htam_backend_description {
  uint32_t struct_size;      /* set by the host */
  const char* name;          /* "cpu", "cuda", "hip": the backend name used in tasks and jobs */
  const char* language;      /* candidate language: "cpp", "cuda", "hip" */
  const char* source_suffix; /* ".cpp", ".cu", ".hip" */
  const char* version;       /* plugin + toolchain version text, e.g. "g++ 12.2.0" */
  const char* notes;         /* free text, e.g. "runtime path cannot run here: no device" */
  int32_t num_devices;       /* 0 is legal: compile-only backend */
  const htam_device_info* devices;
  int32_t can_run; /* 0 when the runtime path cannot run here (compile only) */
} htam_backend_description;

/* ---- compile -------------------------------------------------------------------------------- */

typedef struct htam_compile_request {
  uint32_t struct_size;
  const char* source; /* candidate source text, not necessarily NUL-terminated */
  size_t source_len;
  const char* language; /* must match describe().language */
  const char* arch;     /* target arch ("sm_90"); NULL or "" = the device's own */
  const char* options;  /* extra flags chosen by the host (from config), may be NULL */
  const char* name;     /* a file-name-safe label for logs and temp files ("candidate") */
  double timeout_s;     /* wall limit for the compiler process; <= 0 = plugin default */
} htam_compile_request;

typedef struct htam_artifact_info {
  uint32_t struct_size;     /* set by the host */
  const char* path;         /* file the artifact lives in (may be NULL for in-memory images) */
  const char* content_hash; /* hex hash of (source, language, arch, flags, toolchain): cache key */
  const char* diagnostics;  /* compiler warnings of a successful compile; may be "" */
  int32_t from_cache;       /* 1 when the compile was served from cache_dir */
  double compile_ms;        /* wall time of the compile (0 from cache) */
} htam_artifact_info;

/* ---- timing -----------------------------------------------------------------------------------
 */

typedef struct htam_timing_request {
  uint32_t struct_size;
  /* num_sets independent input/output sets, each with num_inputs / num_outputs tensors laid out
   * set-major: inputs[set * num_inputs + i]. Repetition r uses set (r % num_sets), so caching
   * across calls does not pay. Tensors point into buffers of the same device. */
  int32_t num_sets;
  const htam_tensor* inputs;
  int32_t num_inputs;
  htam_tensor* outputs;
  int32_t num_outputs;
  int32_t warmup_reps; /* at least this many untimed calls ... */
  double warmup_ms;    /* ... and at least this long (whichever ends later) */
  int32_t repetitions; /* timed calls; the plugin fills exactly this many times */
  /* Before EVERY timed repetition, outside the timed window: flush caches (touch / memset a
   * scratch buffer of flush_bytes; 0 = plugin chooses >= 2x last-level cache), and fill the
   * outputs of the set about to run with poison_byte when poison != 0, so that the host can
   * verify that each set's final outputs were written by a TIMED call. */
  uint64_t flush_bytes;
  int32_t poison;
  uint8_t poison_byte;
  /* Per-call limit: a call longer than this fails with HTAM_ERR_TIMEOUT where the plugin can
   * detect it (the host also enforces a wall limit by killing the process). <= 0 = none. */
  double call_timeout_ms;
} htam_timing_request;

typedef struct htam_timing_result {
  uint32_t struct_size; /* set by the host */
  double* rep_us;       /* host-allocated array of `repetitions` entries, filled per rep */
  int32_t warmup_done;  /* untimed calls actually made */
  int32_t all_streams;  /* 1 when the window covered every stream (device idle at end) */
  int32_t sm_clock_mhz; /* clocks read around the measurement; -1 unknown */
  int32_t mem_clock_mhz;
} htam_timing_result;

/* ---- profile (optional) ---------------------------------------------------------------------- */

typedef struct htam_profile_report {
  uint32_t struct_size; /* set by the host; every field preset to -1 by the host */
  int32_t registers;    /* per thread */
  int32_t shared_bytes; /* static + dynamic per block */
  int32_t spill_bytes;
  float dram_throughput; /* fraction of peak 0..1 */
  float sm_throughput;
  float occupancy;
  int32_t sm_clock_mhz;
  int32_t mem_clock_mhz;
} htam_profile_report;

/* ================================ ENTRY POINTS =============================================== */
/* Function pointer types are given so that a loader (and in-memory fakes) can hold them. */

/* REQUIRED. Callable before initialize, any thread. Never fails. */
HTAM_BACKEND_EXPORT void htam_backend_api_version(uint32_t* major, uint32_t* minor);
typedef void (*htam_backend_api_version_fn)(uint32_t*, uint32_t*);

/* REQUIRED. Creates an instance. Checks host->api_major/api_minor (HTAM_ERR_VERSION naming both
 * versions on mismatch). Probes devices; a backend whose runtime cannot run here still initializes
 * (can_run = 0, notes say why) so that compile-only use works. *out owned by the host until
 * finalize. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_initialize(const htam_backend_host* host,
                                                                htam_backend** out);
typedef htam_backend_error* (*htam_backend_initialize_fn)(const htam_backend_host*, htam_backend**);

/* REQUIRED. Releases the instance; all its devices/artifacts must have been released. */
HTAM_BACKEND_EXPORT void htam_backend_finalize(htam_backend* backend);
typedef void (*htam_backend_finalize_fn)(htam_backend*);

/* REQUIRED. Fills *out (up to out->struct_size). Strings valid until finalize. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_describe(htam_backend* backend,
                                                              htam_backend_description* out);
typedef htam_backend_error* (*htam_backend_describe_fn)(htam_backend*, htam_backend_description*);

/* REQUIRED. Compiles a candidate (or reference). On HTAM_ERR_COMPILE the message holds the
 * diagnostics. Runs the toolchain as a child process with the request's timeout; writes only under
 * host->work_dir and host->cache_dir. Does not need an opened device. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_compile(htam_backend* backend,
                                                             const htam_compile_request* request,
                                                             htam_artifact** out);
typedef htam_backend_error* (*htam_backend_compile_fn)(htam_backend*, const htam_compile_request*,
                                                       htam_artifact**);

/* REQUIRED. Fills *out (up to out->struct_size); strings valid until artifact_release. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_artifact_info(const htam_artifact* artifact,
                                                                   htam_artifact_info* out);
typedef htam_backend_error* (*htam_backend_artifact_info_fn)(const htam_artifact*,
                                                             htam_artifact_info*);

/* REQUIRED. */
HTAM_BACKEND_EXPORT void htam_backend_artifact_release(htam_artifact* artifact);
typedef void (*htam_backend_artifact_release_fn)(htam_artifact*);

/* REQUIRED. Opens device `index` (describe().devices[i].index): context and a default stream.
 * At most one open handle per device index per instance. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_open(htam_backend* backend,
                                                                 int32_t index, htam_device** out);
typedef htam_backend_error* (*htam_backend_device_open_fn)(htam_backend*, int32_t, htam_device**);

/* REQUIRED. Releases the device; its modules and buffers must have been released. */
HTAM_BACKEND_EXPORT void htam_backend_device_close(htam_device* device);
typedef void (*htam_backend_device_close_fn)(htam_device*);

/* REQUIRED. The stream handed to htam_kernel (cudaStream_t / hipStream_t; NULL for CPU). */
HTAM_BACKEND_EXPORT htam_stream htam_backend_device_stream(htam_device* device);
typedef htam_stream (*htam_backend_device_stream_fn)(htam_device*);

/* REQUIRED. Loads an artifact on a device and resolves its `htam_kernel` (HTAM_ERR_LOAD naming the
 * symbol when absent). The artifact may be released after this returns. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_load(htam_device* device,
                                                          const htam_artifact* artifact,
                                                          htam_module** out);
typedef htam_backend_error* (*htam_backend_load_fn)(htam_device*, const htam_artifact*,
                                                    htam_module**);

/* REQUIRED. Unloads (dlclose / cuModuleUnload). */
HTAM_BACKEND_EXPORT void htam_backend_module_release(htam_module* module);
typedef void (*htam_backend_module_release_fn)(htam_module*);

/* REQUIRED. Device memory. `bytes` may be 0 (a valid, unique, non-dereferenceable handle).
 * buffer_address() gives the device address of byte 0; base + k is a valid device address for
 * k < bytes (the host places tensors inside a buffer between guard regions). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_alloc(htam_device* device,
                                                                  uint64_t bytes,
                                                                  htam_buffer** out);
typedef htam_backend_error* (*htam_backend_buffer_alloc_fn)(htam_device*, uint64_t, htam_buffer**);
HTAM_BACKEND_EXPORT void htam_backend_buffer_free(htam_buffer* buffer);
typedef void (*htam_backend_buffer_free_fn)(htam_buffer*);
HTAM_BACKEND_EXPORT void* htam_backend_buffer_address(htam_buffer* buffer);
typedef void* (*htam_backend_buffer_address_fn)(htam_buffer*);

/* REQUIRED. Synchronous copies and fill (complete when they return), byte offsets into the
 * buffer; out-of-range => HTAM_ERR_INVALID_ARGUMENT. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_device(htam_buffer* dst,
                                                                    uint64_t offset,
                                                                    const void* src,
                                                                    uint64_t bytes);
typedef htam_backend_error* (*htam_backend_copy_to_device_fn)(htam_buffer*, uint64_t, const void*,
                                                              uint64_t);
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_copy_to_host(void* dst, htam_buffer* src,
                                                                  uint64_t offset, uint64_t bytes);
typedef htam_backend_error* (*htam_backend_copy_to_host_fn)(void*, htam_buffer*, uint64_t,
                                                            uint64_t);
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_memset(htam_buffer* dst, uint64_t offset,
                                                            uint8_t value, uint64_t bytes);
typedef htam_backend_error* (*htam_backend_memset_fn)(htam_buffer*, uint64_t, uint8_t, uint64_t);

/* REQUIRED. One call of the module's htam_kernel on the device's stream, then a synchronization of
 * the WHOLE device (every stream), then an error check. A non-zero return of htam_kernel is
 * HTAM_ERR_KERNEL_FAILED with the value in *kernel_rc (may be NULL). Faults are classed
 * (HTAM_ERR_DEVICE_FAULT, HTAM_ERR_OUT_OF_MEMORY, HTAM_ERR_KERNEL_FAILED for a failed launch).
 * Tensors are borrowed for the call; their data pointers lie in this device's buffers. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_run(htam_module* module,
                                                         const htam_tensor* inputs,
                                                         int32_t num_inputs, htam_tensor* outputs,
                                                         int32_t num_outputs, int32_t* kernel_rc);
typedef htam_backend_error* (*htam_backend_run_fn)(htam_module*, const htam_tensor*, int32_t,
                                                   htam_tensor*, int32_t, int32_t*);

/* REQUIRED. Times the module per htam_timing_request: warm-up, then `repetitions` timed calls,
 * each preceded (outside the window) by a cache flush and optional output poisoning; each window
 * ends only when the whole device is idle (work on every stream counted). Fills
 * result->rep_us[0..repetitions-1] in microseconds. Errors as in run (the first failing call
 * stops the measurement). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_time(htam_module* module,
                                                          const htam_timing_request* request,
                                                          htam_timing_result* result);
typedef htam_backend_error* (*htam_backend_time_fn)(htam_module*, const htam_timing_request*,
                                                    htam_timing_result*);

/* OPTIONAL. Resource report of one call (registers, shared memory, spills, throughput) with the
 * given tensors; fields it cannot measure stay -1. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile(
    htam_module* module, const htam_tensor* inputs, int32_t num_inputs, htam_tensor* outputs,
    int32_t num_outputs, htam_profile_report* out);
typedef htam_backend_error* (*htam_backend_profile_fn)(htam_module*, const htam_tensor*, int32_t,
                                                       htam_tensor*, int32_t, htam_profile_report*);

/* ---- sharing buffers with a runner process (API 1.1) ----------------------------------------
 * The verifier process allocates buffers and shares them with the runner process that executes
 * candidate code: export in one process, import in the other (the host carries the handle and, for
 * backends that use one, the file descriptor over a Unix socket). CPU: a memfd; CUDA: an IPC
 * memory handle. An imported buffer is released with buffer_free (it unmaps; the memory stays the
 * exporter's). A backend without these entry points evaluates candidates in the verifier's process. */
typedef struct htam_buffer_handle {
  uint32_t struct_size;
  uint64_t bytes;      /* size of the buffer */
  int32_t fd;          /* a file descriptor the host must pass along (-1 = none); owned by the
                          exporter's buffer in the exporting process, by the host after transfer */
  uint32_t data_len;   /* bytes of `data` in use */
  uint8_t data[128];   /* opaque handle bytes (e.g. cudaIpcMemHandle_t) */
} htam_buffer_handle;

/* OPTIONAL (both or neither). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_export(htam_buffer* buffer,
                                                                   htam_buffer_handle* out);
typedef htam_backend_error* (*htam_backend_buffer_export_fn)(htam_buffer*, htam_buffer_handle*);
/* The import takes ownership of handle->fd (closes it) whether it succeeds or not. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_import(htam_device* device,
                                                                   const htam_buffer_handle* handle,
                                                                   htam_buffer** out);
typedef htam_backend_error* (*htam_backend_buffer_import_fn)(htam_device*,
                                                             const htam_buffer_handle*,
                                                             htam_buffer**);

/* ---- speed of light (API 1.1) ----------------------------------------------------------------
 * The ceilings a plugin measured when the device was opened, so that the host computes
 * Profile.sol_fraction from a task's FLOPs and bytes (and flags results faster than possible). */
typedef struct htam_roofline_report {
  uint32_t struct_size;    /* set by the host */
  double copy_bytes_per_s; /* large device-to-device copy, bytes read + written; 0 unknown */
  double fp32_flops;       /* FMA-bound probe kernel; 0 unknown */
  double tensor16_flops;   /* 16-bit tensor-core probe; 0 unknown */
  int32_t sm_clock_mhz;    /* clocks read after the probes; -1 unknown */
  int32_t mem_clock_mhz;
} htam_roofline_report;

/* OPTIONAL. Ceilings of an opened device (measured once at device_open). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_roofline(htam_device* device,
                                                                     htam_roofline_report* out);
typedef htam_backend_error* (*htam_backend_device_roofline_fn)(htam_device*, htam_roofline_report*);

/* ---- test data on the device (API 1.2) --------------------------------------------------------
 * The gate's input generation and output comparison, run where the data is: without them the host
 * generates every input, copies it over, and copies every output back to compare it (seconds per
 * candidate for tensors of 10^7 elements). All three (fill, compare, copy) or none. Values are a pure function of (seed,
 * element index, distribution): any thread count, any device, the same bits. */
typedef struct htam_fill_request {
  uint32_t struct_size;
  int32_t dtype;        /* htam_dtype */
  uint64_t count;       /* elements from `offset` */
  int32_t dist;         /* 0 normal(a, b), 1 uniform[a, b), 2 integers in [ceil a, floor b] */
  int32_t round;        /* 1: round each value to an integer (integer dtypes) */
  double a, b;
  uint64_t seed;
  int32_t num_special;  /* 0..8 values of `special`, each element one of them with `fraction` */
  double fraction;
  double special[8];
} htam_fill_request;

/* OPTIONAL (1.2). Fills `count` elements of `dtype` at `offset` of `buffer`. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_fill(htam_buffer* buffer,
                                                                 uint64_t offset,
                                                                 const htam_fill_request* request);
typedef htam_backend_error* (*htam_backend_buffer_fill_fn)(htam_buffer*, uint64_t,
                                                           const htam_fill_request*);

typedef struct htam_compare_request {
  uint32_t struct_size;
  int32_t dtype;
  uint64_t count;
  htam_buffer* a; /* the candidate's output (or an input after a call) */
  uint64_t a_offset;
  htam_buffer* b; /* the expected values (or the input as generated) */
  uint64_t b_offset;
  int32_t mode;   /* 0: a against expected b: |a-b| <= atol + rtol*|b|; NaN/Inf must match.
                     1: two runs: |a-b| <= atol + rtol*|a|, NaN matches NaN.
                     2: bitwise equality */
  double atol, rtol;
} htam_compare_request;

typedef struct htam_compare_result {
  uint32_t struct_size;
  uint64_t mismatches;      /* mode 0: finite a outside tolerance or b not finite; 1, 2: unequal */
  int64_t first_mismatch;   /* -1 none */
  int64_t first_nonfinite;  /* mode 0: first a that is NaN/Inf where b is not the same; -1 none */
  int32_t a_all_zero;       /* every a == 0 */
  int32_t b_any_nonzero;    /* some b != 0 */
} htam_compare_result;

/* OPTIONAL (1.2). Compares two ranges of `count` elements of the same device. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_compare(
    htam_device* device, const htam_compare_request* request, htam_compare_result* out);
typedef htam_backend_error* (*htam_backend_buffer_compare_fn)(htam_device*,
                                                              const htam_compare_request*,
                                                              htam_compare_result*);

/* OPTIONAL (1.2, with fill and compare). Copies `bytes` between two buffers of one device. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_buffer_copy(htam_buffer* dst, uint64_t dst_offset,
                                                                 htam_buffer* src, uint64_t src_offset,
                                                                 uint64_t bytes);
typedef htam_backend_error* (*htam_backend_buffer_copy_fn)(htam_buffer*, uint64_t, htam_buffer*,
                                                           uint64_t, uint64_t);

/* ---- a profiler around a one-call process (API 1.3) ------------------------------------------
 * Counters that only a profiler watching the process from outside can read (Nsight Compute for
 * CUDA). The host knows no profiler by name; it asks the plugin for the command that wraps a
 * process making the candidate's one call, runs
 *     argv (from profile_command) + the one-call process's own argv
 * with its own wall limit, captures what it prints (stdout and stderr together), and hands that
 * back to profile_parse, which fills throughputs, occupancy and a bottleneck class.
 * Both or neither. A plugin without them offers no profile: the host notes
 * "profile unavailable: the <name> backend offers no profiler" and the result stays Ok. A plugin
 * with them whose profiler is missing here returns HTAM_ERR_UNAVAILABLE from profile_command, its
 * message saying why in words a person can act on (the host prefixes "profile unavailable: ").
 * Strings the plugin returns stay valid until the next call of the same entry point on the same
 * backend, or finalize. */

/* Bottleneck classes (the values of schema/htg.fbs `Bottleneck`). */
typedef enum htam_bottleneck {
  HTAM_BOTTLENECK_UNKNOWN = 0,
  HTAM_BOTTLENECK_MEMORY = 1,
  HTAM_BOTTLENECK_COMPUTE = 2,
  HTAM_BOTTLENECK_LATENCY = 3,
  HTAM_BOTTLENECK_LAUNCH = 4
} htam_bottleneck;

typedef struct htam_profile_command_request {
  uint32_t struct_size;
  /* The profiler binary the host was configured with; NULL or "" = the plugin finds its own. */
  const char* tool;
  /* ':'-separated directories the plugin searches for its profiler; NULL = its process's PATH
   * (a sandboxed worker's PATH is short: a daemon hands its own). */
  const char* search_path;
} htam_profile_command_request;

typedef struct htam_profile_command {
  uint32_t struct_size; /* set by the host */
  /* NULL-terminated: the profiler and its flags; the profiled program's argv goes after them. */
  const char* const* argv;
  /* NULL-terminated "key=value" backend options for the plugin instance inside the profiled
   * process, appended after the host's own (they win): e.g. no probe kernels at device open, so
   * that only the candidate's work is measured. May be NULL. */
  const char* const* child_options;
  /* Short name of the profiler for messages ("ncu"). */
  const char* tool_name;
} htam_profile_command;

typedef struct htam_profile_output {
  uint32_t struct_size;
  const char* text; /* what the profiler run printed (stdout and stderr), not NUL-terminated */
  size_t text_len;
  int32_t exit_code; /* of the profiler process; -1 unknown */
  int32_t signaled;  /* 1: the profiler was killed by a signal */
  /* Thresholds of the bottleneck classes; < 0 = the plugin's default. */
  double memory_pct;  /* DRAM throughput (% of peak) from which the run is memory-bound */
  double compute_pct; /* SM throughput (% of peak) from which it is compute-bound */
  double launch_us;   /* below both: launch-bound when the mean kernel is shorter than this */
} htam_profile_output;

typedef struct htam_profile_summary {
  uint32_t struct_size; /* set by the host; the host presets every number to -1 */
  /* Percent of peak (0..100), over the candidate's kernels (the plugin's own left out); -1 not
   * reported. */
  double dram_pct;
  double sm_pct;
  double occupancy_pct; /* achieved: active warps */
  int32_t kernels;      /* the candidate's kernels profiled */
  double total_us;      /* their total duration */
  int32_t bottleneck;   /* htam_bottleneck */
  const char* note;     /* one line for the diagnostics, e.g. "ncu: Memory-bound" */
} htam_profile_summary;

/* OPTIONAL (1.3, with profile_parse). The command prefix; HTAM_ERR_UNAVAILABLE when the profiler
 * is missing or not executable. */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_command(
    htam_backend* backend, const htam_profile_command_request* request, htam_profile_command* out);
typedef htam_backend_error* (*htam_backend_profile_command_fn)(htam_backend*,
                                                               const htam_profile_command_request*,
                                                               htam_profile_command*);

/* OPTIONAL (1.3, with profile_command). Reads the profiler's output; an error (class
 * HTAM_ERR_UNAVAILABLE) says why there is no profile (no kernel seen, the profiler's own error,
 * its exit code). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_profile_parse(htam_backend* backend,
                                                                   const htam_profile_output* output,
                                                                   htam_profile_summary* out);
typedef htam_backend_error* (*htam_backend_profile_parse_fn)(htam_backend*,
                                                             const htam_profile_output*,
                                                             htam_profile_summary*);

/* ---- device memory in use (API 1.4) -----------------------------------------------------------
 * OPTIONAL. Bytes of the device's memory in use (its total less what the driver reports free:
 * what other processes on the same device hold counts too). The evaluation runner reads it after
 * opening its device and after every job, and is replaced when candidates left more than
 * eval.runner_leak_mb allocated (memory allocated in htam_kernel and never freed outlives the
 * module and would reach the next candidate run by the same process). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_memory_used(htam_device* device,
                                                                        uint64_t* used_bytes);
typedef htam_backend_error* (*htam_backend_device_memory_used_fn)(htam_device*, uint64_t*);

/* Names, for loaders: every REQUIRED symbol, then every OPTIONAL one. */
#define HTAM_BACKEND_REQUIRED_SYMBOLS                                                           \
  "htam_backend_api_version", "htam_backend_initialize", "htam_backend_finalize",               \
      "htam_backend_describe", "htam_backend_compile", "htam_backend_artifact_info",            \
      "htam_backend_artifact_release", "htam_backend_device_open", "htam_backend_device_close", \
      "htam_backend_device_stream", "htam_backend_load", "htam_backend_module_release",         \
      "htam_backend_buffer_alloc", "htam_backend_buffer_free", "htam_backend_buffer_address",   \
      "htam_backend_copy_to_device", "htam_backend_copy_to_host", "htam_backend_memset",        \
      "htam_backend_run", "htam_backend_time"
#define HTAM_BACKEND_OPTIONAL_SYMBOLS \
  "htam_backend_profile", "htam_backend_buffer_export", "htam_backend_buffer_import", \
      "htam_backend_device_roofline", "htam_backend_buffer_fill", "htam_backend_buffer_compare", \
      "htam_backend_buffer_copy", "htam_backend_profile_command", "htam_backend_profile_parse", \
      "htam_backend_device_memory_used"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HTAM_BACKEND_H_ */
