import json,re,sys
# exact-mode per-step timeline from a --trace file: for tp0 of each (stage, replica), each step's
# first compute-stream start, last compute/tp end, and its pipeline send.
d=json.load(open(sys.argv[1]))['traceEvents']
names={e['pid']:e['args']['name'] for e in d if e.get('name')=='process_name'}
want=sys.argv[2] if len(sys.argv)>2 else 'dp0'
bw=re.compile(r'(_dgrad|_wgrad|_bwd|\.re\.|send_gradient)')
for pid,n in sorted(names.items()):
  if not n.endswith('.tp0') or ('.'+want+'.') not in n+'.' and want not in n: continue
  steps={}
  sends={}
  for e in d:
    if e.get('pid')!=pid or e.get('ph')!='X': continue
    m=re.match(r'mb(\d+)\.c(\d+)\.',e['name'])
    if not m: continue
    key=(int(m.group(1)),int(m.group(2)),'B' if bw.search(e['name']) else 'F')
    if e['tid']==2: sends[key]=(e['ts'],e['ts']+e['dur']); continue
    if e['tid'] not in (0,1,4): continue
    s=steps.setdefault(key,[1e18,0,0])
    s[0]=min(s[0],e['ts']); s[1]=max(s[1],e['ts']+e['dur'])
    if e['tid']==1: s[2]+=e['dur']
  print(n)
  for key,(a,b,tp) in sorted(steps.items(),key=lambda kv:kv[1][0]):
    sd=sends.get(key)
    print(f"  mb{key[0]} c{key[1]} {key[2]}  start {a/1000:9.3f} end {b/1000:9.3f} len {(b-a)/1000:7.3f} tp {tp/1000:6.3f}" + (f"  send {sd[0]/1000:9.3f}-{sd[1]/1000:9.3f} ({(sd[1]-sd[0])/1000:.3f})" if sd else ""))
