/* netdelay: holds every packet of an NFQUEUE for a fixed time, then accepts it.
 *
 * Usage: netdelay --queue N --delay-ms D
 *
 * There is no netem on the test kernel, so the multinode case `loss_delay` delays packets
 * this way: inside a host namespace, `iptables -A INPUT -i eth0 -j NFQUEUE --queue-num N`
 * hands every packet arriving on the host to this program (queues are per network
 * namespace, so it must run in the same host), which gives each one back (NF_ACCEPT)
 * D ms after it arrived. The delay is constant, so arrival order is due order and a FIFO
 * is the whole schedule. Only the packet metadata is copied to user space, GSO packets
 * stay whole. Delaying on the receiver's INPUT (not on OUTPUT) keeps the sender's TCP
 * stack unaware of the hold, like a long wire.
 *
 * Prints "netdelay: queue N delay D ms ready" once bound, and on SIGTERM/SIGINT accepts
 * every packet still held, prints how many packets it delayed and exits 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sys/socket.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

#ifndef NETLINK_NO_ENOBUFS
#define NETLINK_NO_ENOBUFS 5
#endif
#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

struct held {
  uint32_t id;
  int64_t due_ns;
};

static struct held* fifo;
static size_t cap, head, count;
static int64_t delay_ns;
static uint64_t delayed, overflow;
static volatile sig_atomic_t stop;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static int push(uint32_t id, int64_t due) {
  if (count == cap) {
    size_t ncap = cap ? cap * 2 : 4096;
    struct held* n = malloc(ncap * sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < count; i++) n[i] = fifo[(head + i) % cap];
    free(fifo);
    fifo = n;
    cap = ncap;
    head = 0;
  }
  fifo[(head + count) % cap] = (struct held){id, due};
  count++;
  return 0;
}

static int on_packet(struct nfq_q_handle* qh, struct nfgenmsg* msg, struct nfq_data* nfa,
                     void* data) {
  (void)msg;
  (void)data;
  struct nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa);
  if (!ph) return 0;
  uint32_t id = ntohl(ph->packet_id);
  if (push(id, now_ns() + delay_ns) != 0) {
    overflow++;  // out of memory: let it through at once rather than lose it
    nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
  }
  return 0;
}

static void release(struct nfq_q_handle* qh, int64_t until) {
  while (count && fifo[head].due_ns <= until) {
    nfq_set_verdict(qh, fifo[head].id, NF_ACCEPT, 0, NULL);
    head = (head + 1) % cap;
    count--;
    delayed++;
  }
}

static void usage(void) {
  fprintf(stderr, "usage: netdelay --queue N --delay-ms D\n");
  exit(2);
}

int main(int argc, char** argv) {
  long queue = -1;
  double delay_ms = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--queue") && i + 1 < argc) {
      queue = strtol(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--delay-ms") && i + 1 < argc) {
      delay_ms = strtod(argv[++i], NULL);
    } else {
      usage();
    }
  }
  if (queue < 0 || queue > 65535 || delay_ms < 0) usage();
  delay_ns = (int64_t)(delay_ms * 1e6);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  // Signals are taken only inside ppoll, so a SIGTERM is never lost between the check of
  // `stop` and the wait.
  sigset_t block, waitmask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &waitmask);
  sigdelset(&waitmask, SIGTERM);
  sigdelset(&waitmask, SIGINT);

  struct nfq_handle* h = nfq_open();
  if (!h) {
    fprintf(stderr, "netdelay: nfq_open: %s\n", strerror(errno));
    return 1;
  }
  struct nfq_q_handle* qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
  if (!qh) {
    fprintf(stderr,
            "netdelay: binding queue %ld: %s (is NFQUEUE in the kernel, are we root, "
            "is the queue taken?)\n",
            queue, strerror(errno));
    nfq_close(h);
    return 1;
  }
  if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
    fprintf(stderr, "netdelay: nfq_set_mode: %s\n", strerror(errno));
    return 1;
  }
  nfq_set_queue_maxlen(qh, 1 << 16);
  nfq_set_queue_flags(qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);  // best effort (old kernels)
  int fd = nfq_fd(h);
  int big = 16 << 20, one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);

  printf("netdelay: queue %ld delay %g ms ready\n", queue, delay_ms);
  fflush(stdout);

  static char buf[1 << 16];
  while (!stop) {
    int64_t now = now_ns();
    release(qh, now);
    struct timespec ts, *tsp = NULL;
    if (count) {
      int64_t wait = fifo[head].due_ns - now;
      if (wait < 0) wait = 0;
      ts.tv_sec = wait / 1000000000;
      ts.tv_nsec = wait % 1000000000;
      tsp = &ts;
    }
    struct pollfd pfd = {fd, POLLIN, 0};
    int r = ppoll(&pfd, 1, tsp, &waitmask);
    if (r < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "netdelay: poll: %s\n", strerror(errno));
      break;
    }
    if (r == 0) continue;
    // Everything the kernel has queued up to now, without blocking.
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
          fprintf(stderr, "netdelay: recv: %s\n", strerror(errno));
        break;
      }
      nfq_handle_packet(h, buf, (int)n);
    }
  }
  release(qh, INT64_MAX);
  nfq_destroy_queue(qh);
  nfq_close(h);
  printf("netdelay: delayed %llu packets by %g ms (%llu let through at once)\n",
         (unsigned long long)delayed, delay_ms, (unsigned long long)overflow);
  fflush(stdout);
  free(fifo);
  return 0;
}
