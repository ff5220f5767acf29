// rdma_probe — prints the RDMA devices libibverbs sees, one per line (what ibv_devices
// lists), and exits 0 if there is at least one, 1 if none (with the reason on stderr),
// 2 in a build without libibverbs. Used by rdma_run.py to decide run or SKIP.
#include <cerrno>
#include <cstdio>
#include <cstring>

#if HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

int main() {
#if HAVE_IBVERBS
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    std::fprintf(stderr, "ibv_get_device_list: %s\n", std::strerror(errno ? errno : ENODEV));
    return 1;
  }
  for (int i = 0; i < n; ++i) std::printf("%s\n", ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  if (n == 0) std::fprintf(stderr, "ibv_get_device_list found no device\n");
  return n > 0 ? 0 : 1;
#else
  std::fprintf(stderr, "built without libibverbs (-Dibverbs=disabled or not found)\n");
  return 2;
#endif
}
