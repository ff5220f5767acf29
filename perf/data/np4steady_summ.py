import sys,collections,statistics as st
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<8 or not f[0].isdigit(): continue
    r,rt,_,v,size,t1,t2,w=f
    if w!='0': print("WRONG",l)
    win='near' if float(rt)<300 else 'far'
    d[(size,v,win)].append((float(t1),float(t2)))
vs=sorted({k[1] for k in d}); 
for size in sorted({k[0] for k in d},key=int):
  for win in ('near','far'):
    row=[]
    for v in vs:
        x=d.get((size,v,win))
        if not x: continue
        a=[p[0] for p in x]; b=[p[1] for p in x]
        row.append("%s: %.1f/%.1f (n%d best %.1f)"%(v,st.median(a),st.median(b),len(a),min(a)))
    if row: print(size,win," | ".join(row))
