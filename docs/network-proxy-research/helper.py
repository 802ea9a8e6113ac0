#!/usr/bin/python3
# Test stand-in for the C helper (concurrency protocol). In: CH SRC HOST PORT SNI METHOD STAGE
# One os.write per reply (a reply in pieces was read as result=Unknown -> DUNNO).
import sys, os, json, urllib.parse as u
log = open('/tmp/pd/helper.in', 'a')
for line in sys.stdin:
    f = line.split()
    ch, src, host, port, sni, method, stage = f[0], *[u.unquote(x) for x in f[1:7]]
    try: m = json.load(open('/tmp/pd/map.json'))
    except Exception: m = {}
    e = m.get(src)
    if e is None:
        out = ch + ' ERR reason=no-execution'
    else:
        why = None
        if host not in e['hosts'] or int(port) not in e['hosts'][host]: why = 'not-in-list'
        elif stage == 'tls' and sni != host: why = 'sni-mismatch' if sni != '-' else 'no-sni'
        kv = 'uid=%s ns=%s name=%s' % (e['uid'], e['ns'], e['name'])
        out = '%s ERR %s reason=%s' % (ch, kv, why) if why else '%s OK %s' % (ch, kv)
    os.write(1, (out + '\n').encode())
    log.write(line.rstrip() + ' > ' + out + '\n'); log.flush()
