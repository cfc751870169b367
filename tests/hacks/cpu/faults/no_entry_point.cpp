// FAULT: compiles but defines no htam_kernel. CompileError naming the missing entry point.
#include <htam/kernel_abi.h>

int relu_kernel(const htam_tensor* in, htam_tensor* out) { return 0; }
