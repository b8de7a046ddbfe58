#!/usr/bin/env python3
"""Where the time of a sync 4k write goes: reads an ftrace text dump taken
while fio wrote 4k at queue depth 1 through a repl device in sync mode,
with the primary and the secondary repld on the same guest (loopback).

Each write is followed from fio's io_submit to its io_getevents returning,
through the hand-offs between the processes; prints the median and 90th
percentile of each step.  Events used: raw_syscalls sys_enter/sys_exit
(x86_64 numbers), block_rq_issue/block_rq_complete.

usage: syncpath.py TRACE FIO_PID PRIMARY_PID SECONDARY_PID PRIMARY_DEV SECONDARY_DEV
       (the devices as ftrace prints them: "254,0")
"""
import re
import statistics
import sys

NR_READ, NR_WRITE, NR_WRITEV, NR_IOCTL, NR_IO_GETEVENTS, NR_IO_SUBMIT = 0, 1, 20, 16, 208, 209
NR_READV, NR_SENDTO, NR_RECVFROM, NR_SENDMSG, NR_RECVMSG = 19, 44, 45, 46, 47
# repld reads a plain socket with readv(); OpenSSL reads and writes one with
# read() and write(), or recvmsg() and sendmsg() where the kernel holds the
# keys (kTLS)
RECV = (NR_READ, NR_READV, NR_RECVFROM, NR_RECVMSG)
SEND = (NR_WRITE, NR_WRITEV, NR_SENDTO, NR_SENDMSG)
LINE = re.compile(r'\s*(.+)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\w+): (.*)')
SYS = re.compile(r'NR (\d+)(?: = (-?\d+))?')


def events(path):
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            pid, t, kind, rest = int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
            nr = ret = None
            if kind in ('sys_enter', 'sys_exit'):
                s = SYS.match(rest)
                if not s:
                    continue
                nr = int(s.group(1))
                ret = int(s.group(2)) if s.group(2) is not None else None
            yield t, pid, kind, nr, ret, rest


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    path = sys.argv[1]
    fio, prim, sec = (int(a) for a in sys.argv[2:5])
    pdev, sdev = sys.argv[5] + ' ', sys.argv[6] + ' '

    def sysc(pid, kind, nr, ok=False):
        nrs = nr if isinstance(nr, tuple) else (nr,)
        return lambda e: e[1] == pid and e[2] == kind and e[3] in nrs and (not ok or (e[4] or 0) > 0)

    def blk(kind, dev):
        return lambda e: e[2] == kind and e[5].startswith(dev)

    steps = [
        ('local write issued', blk('block_rq_issue', pdev)),
        ('io_submit returns', sysc(fio, 'sys_exit', NR_IO_SUBMIT)),
        ('primary sends (writev)', sysc(prim, 'sys_enter', NR_WRITEV)),
        ('secondary has it (read)', sysc(sec, 'sys_exit', RECV, ok=True)),
        ('secondary io_submit', sysc(sec, 'sys_enter', NR_IO_SUBMIT)),
        ('secondary write issued', blk('block_rq_issue', sdev)),
        ('secondary write done', blk('block_rq_complete', sdev)),
        ('secondary sends ack', sysc(sec, 'sys_enter', SEND)),
        ('primary has ack (read)', sysc(prim, 'sys_exit', RECV, ok=True)),
        ('primary kicks (ioctl)', sysc(prim, 'sys_enter', NR_IOCTL)),
        ('fio has completion', sysc(fio, 'sys_exit', NR_IO_GETEVENTS)),
    ]
    start = sysc(fio, 'sys_enter', NR_IO_SUBMIT)
    ev = list(events(path))
    per = {name: [] for name, _ in steps}
    total = []
    i = 0
    while i < len(ev):
        if not start(ev[i]):
            i += 1
            continue
        t0 = prev = ev[i][0]
        j, got = i + 1, []
        for name, match in steps:
            while j < len(ev) and not match(ev[j]) and not start(ev[j]):
                j += 1
            if j == len(ev) or start(ev[j]):
                break
            got.append((name, (ev[j][0] - prev) * 1e6))
            prev = ev[j][0]
        if len(got) == len(steps):
            for name, d in got:
                per[name].append(d)
            total.append((prev - t0) * 1e6)
        i = j if j > i else i + 1
    if len(total) < 20:
        sys.exit(f'syncpath: only {len(total)} complete writes in the trace')

    def p90(v):
        return sorted(v)[int(0.9 * (len(v) - 1))]
    print(f'SYNCPATH writes followed: {len(total)}')
    print('SYNCPATH step (time since the previous step) | median us | p90 us')
    for name, _ in steps:
        print(f'SYNCPATH {name} | {statistics.median(per[name]):.0f} | {p90(per[name]):.0f}')
    print(f'SYNCPATH total, traced | {statistics.median(total):.0f} | {p90(total):.0f}')


if __name__ == '__main__':
    main()
