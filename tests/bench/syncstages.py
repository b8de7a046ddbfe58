#!/usr/bin/env python3
"""Where the time of a sync write goes, stage by stage: reads an ftrace text
dump taken while one writer wrote (any size, any queue depth) through a
repl device in sync mode, with the module's tracepoints (dm_repl:*), repld's trace marks
(REPLD_TRACE_MARKS=1, tracemark.h) and the block layer's request events
enabled, the primary and the secondary repld on the same machine.

Each write is followed by its records' sequence numbers from its bio
entering the target to its completion; prints, for every stage, the median
and the 99th percentile in microseconds over the writes seen whole, then
the whole way, and the local write beside it.

usage: syncstages.py TRACE SECONDARY_DEV PRIMARY_DEV
       (the devices as ftrace prints them: "254,16")
"""
import re
import statistics
import sys

LINE = re.compile(r'\s*(.+)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\w+): (.*)')
KV = re.compile(r'(\w+)=(\d+)')
RQ = re.compile(r'(\d+,\d+) \S+ (?:\d+ )?\(\S*\) (\d+) \+ (\d+)')

# milestones of a write, in order; a stage is the time from one to the next
STAGES = [
    ('map', 'bio enters the target'),
    ('logged', 'its record reserved in the ring'),
    ('publish', 'record published to repld'),
    ('wake', 'repld woken (ring event)'),
    ('read', 'repld read it, queued to the peer'),
    ('sent', 'repld sent it (socket took the bytes)'),
    ('recv', 'secondary received it, queued to its disk'),
    ('issue', 'secondary disk write issued'),
    ('written', 'secondary disk write complete'),
    ('reaped', 'secondary saw the completion'),
    ('acksent', 'secondary sent the Ack'),
    ('ackread', 'primary read the Ack'),
    ('kack', 'target read the acknowledgment'),
    ('complete', 'bio completed to the writer'),
]


def events(path):
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield float(m.group(3)), m.group(4), m.group(5)


def parse(path, sec_dev, pri_dev):
    """Per-write milestone times, keyed by the write's first record.  At
    any queue depth and size: a write of several records reaches a
    milestone of the way there when its last record does (in the module's
    events and the daemons' marks, by sequence number), and on the
    secondary's disk when requests have covered all its sectors."""
    writes = {}         # seq -> {milestone: t}
    last = {}           # seq -> the sequence number of the write's last record
    span = {}           # seq -> [first sector, sectors, sectors issued, written]
    pending_map = None  # the last repl_map not yet logged: (t, sectors)
    order = []          # seqs in the order they were logged
    waiting = {}        # milestone -> seqs logged whose milestone is still to come
    local = []          # local write times

    def first(milestone, t, test):
        """t is the milestone of every waiting write that passes test."""
        for seq in list(waiting.get(milestone, [])):
            if test(seq):
                writes[seq][milestone] = t
                waiting[milestone].remove(seq)

    def covered(seq, at, n, i):
        """Count what a request of n sectors at sector at has of the write
        (the block layer merges and splits: by overlap)."""
        lo, size = span[seq][0], span[seq][1]
        span[seq][i] += max(0, min(at + n, lo + size) - max(at, lo))
        return span[seq][i] >= size

    rq_pri = {}
    for t, kind, rest in events(path):
        if kind == 'repl_map':
            kv = dict(KV.findall(rest))
            if kv.get('op') == '1':
                pending_map = (t, int(kv['nr']))
        elif kind == 'repl_logged':
            kv = dict(KV.findall(rest))
            seq = int(kv['seq'])
            writes[seq] = {'logged': t}
            last[seq] = seq + max(1, int(kv['nr'])) - 1
            span[seq] = [int(kv['sector']), 8, 0, 0]
            if pending_map is not None:
                writes[seq]['map'] = pending_map[0]
                span[seq][1] = pending_map[1]
                pending_map = None
            order.append(seq)
            for m, _ in STAGES[2:]:
                waiting.setdefault(m, []).append(seq)
        elif kind == 'repl_publish':
            prod = int(dict(KV.findall(rest))['prod'])
            first('publish', t, lambda s: last[s] < prod)
        elif kind == 'repl_ack':
            ack = int(dict(KV.findall(rest))['ack'])
            first('kack', t, lambda s: last[s] < ack)
        elif kind == 'repl_complete':
            seq = int(dict(KV.findall(rest))['seq'])
            first('complete', t, lambda s: s == seq)
        elif kind == 'tracing_mark_write':
            w = rest.split()
            if len(w) < 3 or w[0] != 'repld':
                continue
            step = w[2]
            n = int(w[3]) if len(w) > 3 else None
            if step == 'wake':
                first('wake', t, lambda s: 'publish' in writes[s])
            elif step in ('read', 'sent', 'recv'):
                if step == 'read':
                    # repld was awake already: no wake-up for it
                    first('wake', t, lambda s: s <= n <= last[s])
                first(step, t, lambda s: last[s] == n)
            elif step == 'reaped':
                first('reaped', t, lambda s: 'written' in writes[s])
            elif step == 'acksent':
                first('acksent', t, lambda s: last[s] < n)
            elif step == 'ack':
                first('ackread', t, lambda s: last[s] < n)
        elif kind in ('block_rq_issue', 'block_rq_complete'):
            m = RQ.search(rest)
            if not m:
                continue
            dev, at, n = m.group(1), int(m.group(2)), int(m.group(3))
            if dev == sec_dev:
                # the secondary writes the records' own sectors, a record
                # as soon as it has it: the write's first ones may be on
                # the disk before its last one came in
                if kind == 'block_rq_issue':
                    first('issue', t, lambda s: covered(s, at, n, 2))
                else:
                    first('written', t, lambda s: covered(s, at, n, 3))
            elif dev == pri_dev:
                if kind == 'block_rq_issue':
                    rq_pri[at] = t
                elif at in rq_pri:
                    local.append((t - rq_pri.pop(at)) * 1e6)
    return [writes[s] for s in order], local


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, sec_dev, pri_dev = sys.argv[1:]
    writes, local = parse(path, sec_dev, pri_dev)
    names = [m for m, _ in STAGES]
    whole = [w for w in writes if all(m in w for m in names)]
    if not whole:
        sys.exit('syncstages: no write seen whole in the trace (%d seen in part)' % len(writes))
    print('SYNCSTAGE %d writes followed whole (%d in the trace)' % (len(whole), len(writes)))
    print('SYNCSTAGE %-58s %9s %9s' % ('stage (to the end of it)', 'median us', 'p99 us'))
    for (a, _), (b, what) in zip(STAGES, STAGES[1:]):
        d = [(w[b] - w[a]) * 1e6 for w in whole]
        print('SYNCSTAGE %-58s %9.0f %9.0f' % ('%s: %s' % (b, what), statistics.median(d),
                                               pct(d, 99)))
    d = [(w['complete'] - w['map']) * 1e6 for w in whole]
    print('SYNCSTAGE %-58s %9.0f %9.0f' % ('the whole way: map to complete', statistics.median(d),
                                           pct(d, 99)))
    if local:
        print('SYNCSTAGE %-58s %9.0f %9.0f' % ('beside it, the local write (issue to complete)',
                                               statistics.median(local), pct(local, 99)))


if __name__ == '__main__':
    main()
