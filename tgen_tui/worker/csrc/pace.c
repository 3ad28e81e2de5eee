// The timer pacer's inner loop in C (tgen_tui/worker/cpace.py loads it with ctypes):
// each frame of a built batch is released at its due time, one sendmsg(2) each, on a
// bound AF_PACKET socket. Python cannot do this per frame in less than ~20 us (the
// lookup, the counters and the ctypes call), so gaps of a drawn law shorter than that
// came out at ~20 us; here a frame costs the syscall (~2-3 us on a veth).
//
// Sleeps end `margin_ns` before a frame is due (clock_nanosleep, absolute, on
// CLOCK_MONOTONIC) and the last stretch spins. The loop returns when every frame is
// sent, at a send error (`*err` = errno; EAGAIN for a short write), or for the worker's
// turn (receive work and commands): once past `end_ns`, at the first gap of at least
// `min_gap_ns` before the next frame (so that the turn does not make it late), and in
// any case before a wake-up after `hard_end_ns`.
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int32_t tgen_pace_send(int32_t fd, const uint8_t *base, int64_t stride, const uint32_t *lens,
                       const int64_t *due_ns, const uint8_t *stamp, int32_t n,
                       int64_t margin_ns, int64_t end_ns, int64_t min_gap_ns,
                       int64_t hard_end_ns, void *cmsg, uint32_t cmsg_len,
                       int64_t *sent_ns, int64_t *wake_late_ns, int32_t *err)
{
    struct iovec iov;
    struct msghdr m;
    *err = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t now = mono_ns();
        wake_late_ns[i] = -1;
        if (due_ns[i] - now > margin_ns) {
            int64_t target = due_ns[i] - margin_ns;
            if (target > end_ns && (due_ns[i] - now >= min_gap_ns || target > hard_end_ns))
                return i;
            struct timespec ts = {.tv_sec = target / 1000000000LL,
                                  .tv_nsec = target % 1000000000LL};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
            now = mono_ns();
            wake_late_ns[i] = now - target;
        }
        while (now < due_ns[i])
            now = mono_ns();
        memset(&m, 0, sizeof(m));
        iov.iov_base = (void *)(base + (int64_t)i * stride);
        iov.iov_len = lens[i];
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        if (stamp && stamp[i]) {
            m.msg_control = cmsg;
            m.msg_controllen = cmsg_len;
        }
        sent_ns[i] = now;
        ssize_t r = sendmsg(fd, &m, MSG_DONTWAIT);
        if (r != (ssize_t)lens[i]) {
            *err = r < 0 ? errno : EAGAIN;
            return i;
        }
    }
    return n;
}
