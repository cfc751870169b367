// libFuzzer entry point for htamd's decoder (built with -DHTAM_FUZZ=ON and clang):
//   build-fuzz/tests/fuzz/htam_fuzz_decoder tests/fuzz/corpus/decoder -max_total_time=600
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/decoder_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  htam::fuzz::FuzzDecoderOnce(data, size);
  return 0;
}
