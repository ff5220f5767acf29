import csv,glob,os,statistics,sys
d=sys.argv[1]; t={}
for f in glob.glob(d+'/*.csv'):
    name,rnd,_=os.path.basename(f).split('.')
    for row in csv.reader(open(f)):
        if row and row[0]!='collective':
            t.setdefault(name,{}).setdefault((int(row[3]),row[8]),{})[rnd]=float(row[9])
base=t['d']; names=[n for n in sys.argv[2:] if n in t]
for pl in sorted({k[1] for k in base}):
    print('placement',pl,'| median us (paired ratio to d)')
    print('size'.rjust(8),' '.join(n.rjust(14) for n in names))
    for s in sorted({k[0] for k in base}):
        cells=[]
        for n in names:
            v=t[n].get((s,pl),{}); b=base.get((s,pl),{})
            med=statistics.median(v.values()) if v else float('nan')
            pr=statistics.median([v[r]/b[r] for r in v if r in b]) if v else float('nan')
            cells.append(('%.0f(%.2f)'%(med,pr)).rjust(14))
        print(str(s//1024).rjust(7)+'K',' '.join(cells))
