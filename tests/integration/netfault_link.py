#!/usr/bin/env python3
"""A user-space Ethernet switch with lossy, slow links, for netfault.sh when
the kernel has no tc netem (CONFIG_NET_SCH_NETEM off, as in this project's
sandbox VMs).

    netfault_link.py STATS NS[:LOSS:DELAY_MS] ...

Run inside the switch namespace: for each node namespace NS it makes a TAP
device here, moves it into NS as eth0, and forwards frames between the TAP
devices (learning MAC addresses, flooding the rest). A frame that enters or
leaves the link of NS is dropped with probability LOSS (0..1) and held for
DELAY_MS, each way, like netem's "loss" and "delay" on both ends of that
link. On SIGTERM it writes "dropped <n> forwarded <m>" to STATS and exits;
the TAP devices go with its file descriptors.
"""
import fcntl
import heapq
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def main():
    stats = sys.argv[1]
    links = []  # (fd, loss, delay_s)
    for i, spec in enumerate(sys.argv[2:]):
        ns, loss, delay = (spec.split(":") + ["0", "0"])[:3]
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        name = "tap%d" % i
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
        subprocess.run(["ip", "link", "set", name, "netns", ns, "name", "eth0"], check=True)
        links.append((fd, float(loss), float(delay) / 1000.0))
    where = {}  # MAC -> link index
    pending = []  # heap of (due, seq, link index, frame)
    counts = {"dropped": 0, "forwarded": 0}
    seq = 0

    def stop(signo, frame):
        with open(stats, "w") as f:
            f.write("dropped %d forwarded %d\n" % (counts["dropped"], counts["forwarded"]))
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    fds = [fd for fd, _, _ in links]
    while True:
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else 1.0
        ready, _, _ = select.select(fds, [], [], timeout)
        for fd in ready:
            src = fds.index(fd)
            try:
                frame = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if len(frame) < 14:
                continue
            where[frame[6:12]] = src
            dst = where.get(frame[0:6])
            targets = [dst] if dst is not None and dst != src else [
                i for i in range(len(links)) if i != src]
            for t in targets:
                loss = 1 - (1 - links[src][1]) * (1 - links[t][1])
                if random.random() < loss:
                    counts["dropped"] += 1
                    continue
                due = time.monotonic() + links[src][2] + links[t][2]
                heapq.heappush(pending, (due, seq, t, frame))
                seq += 1
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, t, frame = heapq.heappop(pending)
            try:
                os.write(links[t][0], frame)
                counts["forwarded"] += 1
            except OSError:
                counts["dropped"] += 1  # the device's queue is full (or down)


if __name__ == "__main__":
    main()
