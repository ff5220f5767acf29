import sys, re, collections
# per trace: rank pids = comm *_perf sorted; time each rank last-ran CPU; pairing fractions
def analyze(path):
    ev=[]
    for line in open(path):
        m=re.match(r'\s*(\S+)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)',line)
        if not m: continue
        comm,pid,tid,cpu,t,e,tr=m.groups()
        ev.append((float(t),int(cpu),e,tr,comm,int(tid)))
    ranks=set()
    for line in open(path):
        m=re.match(r'\s*(\S+)\s+(\d+)/(\d+)\s',line)
        if m and m.group(1).endswith('_perf') and m.group(2)==m.group(3): ranks.add(int(m.group(2)))
    ranks=sorted(ranks)[:4]
    if len(ranks)<4: return None
    rk={p:i for i,p in enumerate(ranks)}
    last={}
    run=collections.Counter(); curr={}  # cpu -> (pid,start)
    pair=collections.Counter(); lastt=None
    mig=collections.Counter(); sw=collections.Counter(); other=collections.Counter()
    def conf():
        if len(last)<4: return None
        c0=tuple(sorted(r for r in range(4) if last[r]==0)); 
        if len(c0) in (0,4): return '4:0'
        if len(c0) in (1,3): return '3:1'
        a=c0 if 0 in c0 else tuple(r for r in range(4) if r not in c0)
        return '{%d%d}'%a
    t0=None
    for t,cpu,e,tr,comm,tid in ev:
        if e=='sched:sched_switch':
            m=re.search(r'prev_comm=(\S+) prev_pid=(\d+).*prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)',tr)
            pp,st,np_=int(m.group(2)),m.group(3),int(m.group(5))
            if np_ in rk or pp in rk:
                c=conf()
                if lastt is not None and c: pair[c]+=t-lastt
                lastt=t
            if pp in rk:
                sw[rk[pp],st]+=1
                if cpu in curr and curr[cpu][0]==pp: run[rk[pp]]+=t-curr[cpu][1]
            elif pp!=0 and cpu in curr and curr[cpu][0]==pp and len(last)==4:
                other[m.group(1)]+=t-curr[cpu][1]
            curr[cpu]=(np_,t)
            if np_ in rk: last[rk[np_]]=cpu
        elif e=='sched:sched_migrate_task':
            m=re.search(r'pid=(\d+).*orig_cpu=(\d+) dest_cpu=(\d+)',tr)
            p=int(m.group(1))
            if p in rk: mig[rk[p]]+=1
    tot=sum(pair.values()) or 1
    return {k:round(v/tot,2) for k,v in pair.items()}, dict(mig), {k:v for k,v in sw.items()}, {k:round(v*1e3,1) for k,v in other.most_common(4)}
for p in sys.argv[1:]:
    r=analyze(p)
    print(p, r)
