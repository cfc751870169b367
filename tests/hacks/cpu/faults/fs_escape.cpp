// PROBE: computes relu correctly, and tries to write outside its temporary directory and to
// open a network connection. The sandbox should make both fail (where the host permits it).
#include <htam/kernel_abi.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (FILE* f = std::fopen("/tmp/htam-sandbox-escape-probe", "w")) {
    std::fputs("escaped", f);
    std::fclose(f);
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s >= 0) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(9);
    a.sin_addr.s_addr = htonl(0x7f000001);
    connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    close(s);
  }
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (long i = 0; i < htam_numel(&in[0]); ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  return 0;
}
