#!/bin/sh
# The loopback rehearsal again, with the C programs (proxy/) in place of
# helper.py and logd.py: Debian 12's squid-openssl 5.7 on 127.0.0.1:3128,
# backends on 127.0.0.2 and .3, fakeapi.py serving the grant ConfigMaps
# the helper watches, Squid as pid 1 of its own pid namespace and as user
# proxy from the start (the pod's shape), the audit records through a
# FIFO copied to stdout as the image's entrypoint would. Manual, as root;
# not a test tier (it needs the packages and a few seconds of DNS timeout).
# What it gave on 2026-11-28: access-c.log (Squid's lines) and
# audit-c.jsonl (the records), one record per decision; then, with
# fakeapi.py killed, "reason=stale" and the ready file gone after 10 s,
# and both back once it ran again.
#
#   sh docs/network-proxy-research/rehearsal-c.sh     (from the repo, after make)
#   then: sh docs/network-proxy-research/suite.sh in /tmp/sqp/pd
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
d=/tmp/sqp/pd
mkdir -p /tmp/sqp "$d"
cd /tmp/sqp
[ -x root/usr/sbin/squid ] || { apt-get download squid-openssl squid-common &&
	dpkg -x squid-openssl_*.deb root && dpkg -x squid-common_*.deb root; }
# libecap3 libltdl7 libnetfilter-conntrack3 libnfnetlink0 libmnl0 (apt-get
# download, dpkg -x into /tmp/sqp/libs) when the host lacks them; and the
# error pages of squid-langpack (errors/en).
libs=/tmp/sqp/libs/usr/lib/x86_64-linux-gnu
cd "$d"
cp "$top/bin/airlock-egress" "$here/fakeapi.py" "$here/backend.py" .
cp "$here/squid-c.conf" squid.conf
ln -sf airlock-egress airlock-egress-log
printf '127.0.0.2 allowed.test other.test\n127.0.0.3 rebind.test\n127.0.0.2 multi.test\n127.0.0.3 multi.test\n::ffff:127.0.0.3 mapped.test\n' > hosts
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=allowed.test -keyout be.key -out be.crt 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=airlock-egress-refused -keyout bump.key -out bump.crt 2>/dev/null
python3 - <<'PY'
import json
hosts = [{"host": h, "ports": p} for h, p in [("allowed.test", [8080, 8443]), ("rebind.test", [8443]),
    ("multi.test", [8443]), ("mapped.test", [8443]), ("nowhere.test", [8443]), ("other.test", [22])]]
json.dump([{"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "airlock-egress-0b8f-uid-a", "namespace": "airlock-system", "resourceVersion": "3"},
    "data": {"uid": "0b8f-uid-a", "namespace": "team-a", "name": "run-x7k2p", "podIP": "127.0.0.1",
             "hosts": json.dumps(hosts, separators=(',', ':'))}}], open('grants.json', 'w'))
PY
printf 'apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:18080\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: fake\n  context: {cluster: fake, user: u}\n' > kubeconfig
rm -f audit && mkfifo audit
chown -R proxy:proxy "$d"
python3 fakeapi.py 18080 "$d/grants.json" & python3 backend.py 127.0.0.2 & python3 backend.py 127.0.0.3 &
sleep 1
LD_LIBRARY_PATH=$libs exec unshare --pid --fork --mount-proc setpriv --reuid=proxy \
	--regid=proxy --clear-groups sh -c "cat $d/audit & exec /tmp/sqp/root/usr/sbin/squid -N -f $d/squid.conf"
